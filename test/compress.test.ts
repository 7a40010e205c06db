/**
 * compress(): negotiated from Accept-Encoding, decoded byte for byte, skipped where it must be,
 * through app.request() and through a real socket read raw with node:http (fetch would decode).
 */
import { request as httpRequest } from "node:http";
import { randomBytes } from "node:crypto";
import * as zlib from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { App, compress, get, json, noContent, sse, type KConfig } from "../src/index.js";
import { captureLogs } from "./helpers/logs.js";
import { listenOn, type Listening } from "./helpers/listen.js";

const HAS_ZSTD = typeof zlib.zstdDecompressSync === "function";
const ITEMS = Array.from({ length: 100 }, (_, i) => ({ id: i, title: `Book number ${i}`, author: `Author ${i % 7}`, year: 1900 + i }));
const LIST_TEXT = JSON.stringify(ITEMS);

interface Raw {
  status: number;
  headers: Record<string, string | undefined>;
  body: Buffer;
}

function decode(encoding: string | undefined, body: Buffer): Buffer {
  if (encoding === undefined) return body;
  if (encoding === "gzip") return zlib.gunzipSync(body);
  if (encoding === "br") return zlib.brotliDecompressSync(body);
  if (encoding === "zstd") return zlib.zstdDecompressSync(body);
  throw new Error(`unexpected content-encoding ${encoding}`);
}

function streamOf(chunks: number, size: number): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream({
    pull(controller) {
      if (sent === chunks) return controller.close();
      controller.enqueue(Buffer.from(`${String(sent).padStart(6, "0")} ${"stream line ".repeat(size / 12)}\n`));
      sent++;
    },
  });
}

function buildApp(base: KConfig): App {
  const app = new App({ ...base, cors: { origin: ["https://example.com"] } });
  app.use(compress());
  app.route(get("/list", () => ITEMS));
  app.route(get("/small", () => ({ ok: true })));
  app.route(get("/etag", () => json(ITEMS, 200, { etag: '"v1"' })));
  app.route(get("/vary", () => json(ITEMS, 200, { vary: "Accept-Language" })));
  app.route(get("/no-transform", () => json(ITEMS, 200, { "cache-control": "no-transform" })));
  app.route(get("/png", () => new Response(randomBytes(4096), { headers: { "content-type": "image/png" } })));
  app.route(get("/encoded", () => new Response(zlib.gzipSync(LIST_TEXT), { headers: { "content-type": "application/json", "content-encoding": "gzip" } })));
  app.route(get("/empty", () => noContent()));
  app.route(get("/not-modified", () => new Response(null, { status: 304, headers: { etag: '"v1"' } })));
  app.route(get("/stream", () => new Response(streamOf(64, 1200), { headers: { "content-type": "text/plain; charset=utf-8" } })));
  app.route(get("/events", { }, () => new Response(streamOf(8, 1200), { headers: { "content-type": "text/event-stream" } })));
  app.route(sse("/sse", (_ctx, stream) => {
    stream.send({ text: "x".repeat(4096) });
  }));
  return app;
}

type Send = (path: string, headers?: Record<string, string>, method?: string) => Promise<Raw>;

function inProcess(app: App): Send {
  return async (path, headers = {}, method = "GET") => {
    const res = await app.request(path, { method, headers });
    return { status: res.status, headers: Object.fromEntries(res.headers), body: Buffer.from(await res.arrayBuffer()) };
  };
}

function overSocket(server: Listening): Send {
  return (path, headers = {}, method = "GET") => new Promise((resolve, reject) => {
    const req = httpRequest(`${server.url}${path}`, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => resolve({
        status: res.statusCode!,
        headers: Object.fromEntries(Object.entries(res.headers).map(([name, value]) => [name, Array.isArray(value) ? value.join(", ") : value])),
        body: Buffer.concat(chunks),
      }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

for (const mode of ["in-process", "socket"] as const) {
  describe(`compress() [${mode}]`, () => {
    let server: Listening | undefined;
    let send: Send;
    beforeAll(async () => {
      const app = buildApp({ port: 0, logger: captureLogs().logger });
      if (mode === "socket") {
        server = await listenOn(app);
        send = overSocket(server);
      } else send = inProcess(app);
    });
    afterAll(async () => {
      await server?.stop();
    });

    it.each([
      ["gzip", "gzip"],
      ["br", "br"],
      ["gzip, deflate, br", "br"],
      ["gzip;q=1, br;q=0.5", "gzip"],
      ["br;q=0, *", HAS_ZSTD ? "zstd" : "gzip"],
      ["x-gzip", "gzip"],
      ["GZIP;Q=0.8", "gzip"],
      ...(HAS_ZSTD ? [["gzip, deflate, br, zstd", "zstd"], ["zstd;q=0.9, br", "br"]] : []),
    ])("Accept-Encoding %j → %s, decoded byte for byte", async (accept, expected) => {
      const res = await send("/list", { "accept-encoding": accept! });
      expect(res.status).toBe(200);
      expect(res.headers["content-encoding"]).toBe(expected);
      expect(res.headers.vary).toMatch(/accept-encoding/i);
      expect(Number(res.headers["content-length"])).toBe(res.body.length);
      expect(res.body.length).toBeLessThan(Buffer.byteLength(LIST_TEXT) / 2);
      expect(decode(expected, res.body).toString()).toBe(LIST_TEXT);
      expect(res.headers["content-type"]).toBe("application/json;charset=UTF-8");
    });

    it.each(["", "identity", "*;q=0", "deflate", "gzip;q=0, br;q=0, zstd;q=0", "gzip;q=2"])(
      "Accept-Encoding %j: unencoded, still Vary: Accept-Encoding",
      async (accept) => {
        const res = await send("/list", accept === "" ? {} : { "accept-encoding": accept });
        expect(res.headers["content-encoding"]).toBeUndefined();
        expect(res.headers.vary).toMatch(/accept-encoding/i);
        expect(res.body.toString()).toBe(LIST_TEXT);
      },
    );

    it("leaves a body under the threshold alone", async () => {
      const res = await send("/small", { "accept-encoding": "gzip" });
      expect(res.headers["content-encoding"]).toBeUndefined();
      expect(res.headers.vary ?? "").not.toMatch(/accept-encoding/i);
      expect(JSON.parse(res.body.toString())).toEqual({ ok: true });
    });

    it("keeps CORS's Vary and the handler's own beside Accept-Encoding", async () => {
      const cors = await send("/list", { "accept-encoding": "gzip", origin: "https://example.com" });
      expect(cors.headers.vary).toMatch(/\bOrigin\b/);
      expect(cors.headers.vary).toMatch(/Accept-Encoding/);
      const own = await send("/vary", { "accept-encoding": "gzip" });
      expect(own.headers.vary).toMatch(/Accept-Language/);
      expect(own.headers.vary).toMatch(/Accept-Encoding/);
    });

    it("weakens a strong ETag when it encodes", async () => {
      expect((await send("/etag", { "accept-encoding": "gzip" })).headers.etag).toBe('W/"v1"');
      expect((await send("/etag", {})).headers.etag).toBe('"v1"');
    });

    it.each([
      ["/no-transform", "Cache-Control: no-transform"],
      ["/png", "a type compressed already"],
      ["/encoded", "a body already encoded"],
    ])("skips %s (%s)", async (path) => {
      const res = await send(path, { "accept-encoding": "gzip, br" });
      expect(res.status).toBe(200);
      if (path === "/encoded") {
        expect(res.headers["content-encoding"]).toBe("gzip");
        expect(zlib.gunzipSync(res.body).toString()).toBe(LIST_TEXT);
      } else expect(res.headers["content-encoding"]).toBeUndefined();
    });

    it("skips HEAD, 204 and 304", async () => {
      const head = await send("/list", { "accept-encoding": "gzip" }, "HEAD");
      expect(head.headers["content-encoding"]).toBeUndefined();
      expect(head.body.length).toBe(0);
      for (const [path, status] of [["/empty", 204], ["/not-modified", 304]] as const) {
        const res = await send(path, { "accept-encoding": "gzip" });
        expect(res.status).toBe(status);
        expect(res.headers["content-encoding"]).toBeUndefined();
      }
    });

    it("skips a WebSocket upgrade request", async () => {
      if (mode === "socket") return; // node:http hands an upgrade to the 'upgrade' event, not to routes
      const res = await send("/list", { "accept-encoding": "gzip", upgrade: "websocket", connection: "upgrade" });
      expect(res.headers["content-encoding"]).toBeUndefined();
    });

    it("never encodes an event stream", async () => {
      const res = await send("/events", { "accept-encoding": "gzip, br" });
      expect(res.headers["content-type"]).toBe("text/event-stream");
      expect(res.headers["content-encoding"]).toBeUndefined();
      expect(res.body.toString()).toContain("000007 stream line");
    });

    it("encodes a streamed body as it comes, without Content-Length", async () => {
      const expected = Buffer.from(await new Response(streamOf(64, 1200)).arrayBuffer());
      for (const encoding of ["gzip", "br", ...(HAS_ZSTD ? ["zstd"] : [])]) {
        const res = await send("/stream", { "accept-encoding": encoding });
        expect(res.headers["content-encoding"]).toBe(encoding);
        expect(res.headers["content-length"]).toBeUndefined();
        expect(decode(encoding, res.body).equals(expected)).toBe(true);
      }
    });
  });
}

describe("compress() on an sse() route", () => {
  it("leaves the event stream unencoded", async () => {
    const app = buildApp({ port: 0, logger: captureLogs().logger });
    const res = await app.request("/sse", { headers: { "accept-encoding": "gzip" } });
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(res.headers.get("content-encoding")).toBeNull();
    const reader = res.body!.getReader();
    const first = await reader.read();
    expect(Buffer.from(first.value!).toString()).toMatch(/^(retry|id|data|:)/m);
    await reader.cancel();
    await app.close();
  });
});

describe("compress() per group and per route", () => {
  it("encodes only where it is used", async () => {
    const app = new App({ port: 0, logger: captureLogs().logger });
    app.group("/zipped", compress({ encodings: ["gzip"] })).route(get("/list", () => ITEMS));
    app.route(get("/plain", () => ITEMS));
    app.route(get("/route", () => ITEMS).use(compress({ encodings: ["br"], threshold: 0 })));
    const accept = { "accept-encoding": "gzip, br" };
    expect((await app.request("/zipped/list", { headers: accept })).headers.get("content-encoding")).toBe("gzip");
    expect((await app.request("/plain", { headers: accept })).headers.get("content-encoding")).toBeNull();
    const route = await app.request("/route", { headers: accept });
    expect(route.headers.get("content-encoding")).toBe("br");
    expect(zlib.brotliDecompressSync(Buffer.from(await route.arrayBuffer())).toString()).toBe(LIST_TEXT);
  });

  it("streams a large in-memory body above syncThreshold", async () => {
    const app = new App({ port: 0, logger: captureLogs().logger });
    app.use(compress({ syncThreshold: 0 }));
    app.route(get("/list", () => ITEMS));
    const res = await app.request("/list", { headers: { "accept-encoding": "gzip" } });
    expect(res.headers.get("content-encoding")).toBe("gzip");
    expect(res.headers.get("content-length")).toBeNull();
    expect(zlib.gunzipSync(Buffer.from(await res.arrayBuffer())).toString()).toBe(LIST_TEXT);
  });
});

describe("compress() back-pressure over a socket", () => {
  it("reads the handler's stream only as fast as the client takes it", async () => {
    let pulled = 0;
    const app = new App({ port: 0, logger: captureLogs().logger });
    app.use(compress());
    // Poorly compressible text, without end: only back-pressure stops the pulls.
    app.route(get("/endless", () => new Response(new ReadableStream({
      // Each pull a turn of the event loop later, so the test's own timers run however fast it is pulled.
      async pull(controller) {
        await new Promise((done) => setImmediate(done));
        pulled++;
        controller.enqueue(Buffer.from(randomBytes(48 * 1024).toString("base64")));
      },
    }, { highWaterMark: 1 }), { headers: { "content-type": "text/plain" } })));
    const server = await listenOn(app);
    try {
      const { paused, close } = await new Promise<{ paused: number; close: () => void }>((resolve, reject) => {
        const req = httpRequest(`${server.url}/endless`, { headers: { "accept-encoding": "gzip" } }, (res) => {
          expect(res.headers["content-encoding"]).toBe("gzip");
          res.once("data", () => {
            res.pause();
            resolve({ paused: pulled, close: () => req.destroy() });
          });
        });
        req.on("error", reject);
        req.end();
      });
      // Let time pass on purpose: without back-pressure the pulls would go on without bound.
      // Read through a function: the pulls happen in the stream's callbacks while this loop waits.
      const pulls = (): number => pulled;
      let last = -1;
      while (pulls() !== last && pulls() < 400) {
        last = pulls();
        await new Promise((done) => setTimeout(done, 500));
      }
      // 48 KiB of base64 per pull: 400 pulls would be ~26 MB queued for a client that reads nothing.
      expect(pulled).toBeGreaterThanOrEqual(paused);
      expect(pulled).toBeLessThan(400);
      close();
    } finally {
      await server.stop();
    }
  });
});

describe("compress() options", () => {
  it.each([
    [{ threshold: -1 }, "compress threshold"],
    [{ threshold: 1.5 }, "compress threshold"],
    [{ syncThreshold: Number.NaN }, "compress syncThreshold"],
    [{ gzipLevel: 0 }, "compress gzipLevel"],
    [{ gzipLevel: 10 }, "compress gzipLevel"],
    [{ brotliQuality: 12 }, "compress brotliQuality"],
    [{ zstdLevel: 20 }, "compress zstdLevel"],
    [{ encodings: [] }, "compress encodings"],
    [{ encodings: ["deflate"] }, "compress encodings"],
    [{ encodings: ["gzip", "gzip"] }, "compress encodings"],
    [{ encodings: "gzip" }, "compress encodings"],
  ])("refuses %j naming %s", (options, name) => {
    expect(() => compress(options as never)).toThrow(name);
  });
});
