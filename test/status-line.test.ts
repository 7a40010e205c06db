// The raw status line over a real socket: node writes whatever reason phrase it is given.
import { createServer, type IncomingMessage, type Server } from "node:http";
import { connect, type AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { App, get, json } from "../src/index.js";
import { removePendingHeader, setPendingHeader, StandardReasonResponse, writeHeadWithLength } from "../src/http/status-line.js";
import { listenOn, type Listening } from "./helpers/listen.js";
import { captureLogs } from "./helpers/logs.js";

/** Sends `GET path` on a fresh connection and resolves with the first line of the answer. */
function statusLine(port: number, path: string, method = "GET"): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = "";
    const socket = connect(port, "127.0.0.1", () => socket.write(`${method} ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`));
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => {
      text += chunk;
      const end = text.indexOf("\r\n");
      if (end === -1) return;
      socket.destroy();
      resolve(text.slice(0, end));
    });
    socket.on("error", reject);
  });
}

describe("status lines (real socket)", () => {
  let server: Listening;
  beforeAll(async () => {
    const app = new App({ port: 0, logger: captureLogs().logger });
    app.route(get("/ok", () => ({ ok: true })));
    app.route(get("/created", () => json({ id: 1 }, 201)));
    app.route(get("/custom", () => new Response("x", { status: 299, statusText: "Fine Really" })));
    app.route(get("/boom", () => {
      throw new Error("internal detail");
    }));
    server = await listenOn(app);
  });
  afterAll(() => server.stop());

  it.each([
    ["/ok", "GET", "HTTP/1.1 200 OK"],
    ["/created", "GET", "HTTP/1.1 201 Created"],
    ["/missing", "GET", "HTTP/1.1 404 Not Found"],
    ["/ok", "DELETE", "HTTP/1.1 405 Method Not Allowed"],
    ["/boom", "GET", "HTTP/1.1 500 Internal Server Error"],
    ["/ok", "HEAD", "HTTP/1.1 200 OK"],
    ["/docs/scalar.js", "GET", "HTTP/1.1 200 OK"],
  ])("%s (%s) carries the standard reason phrase", async (path, method, line) => {
    expect(await statusLine(server.port, path, method)).toBe(line);
  });

  it("keeps a reason phrase the handler chose", async () => {
    expect(await statusLine(server.port, "/custom")).toBe("HTTP/1.1 299 Fine Really");
  });
});

// The header bag: headers keelson sets before the response exists (CORS, rate limits) are merged into
// the array writeHead gets, not set with setHeader; every way a head can be written must still carry them.
describe("headers set before the head (real socket)", () => {
  let server: Server;
  let base: string;
  const seen: unknown[] = [];
  beforeAll(async () => {
    server = createServer({ ServerResponse: StandardReasonResponse }, (req: IncomingMessage, res) => {
      setPendingHeader(res, "X-A", "1");
      setPendingHeader(res, "x-a", "2");
      setPendingHeader(res, "x-b", "b");
      removePendingHeader(res, "X-B");
      try {
        setPendingHeader(res, "x-bad", "line\nbreak");
      } catch (error) {
        seen.push((error as NodeJS.ErrnoException).code);
      }
      try {
        setPendingHeader(res, "bad name", "x");
      } catch (error) {
        seen.push((error as NodeJS.ErrnoException).code);
      }
      if (req.url === "/array") res.writeHead(200, "", ["x-a", "own", "content-type", "text/plain"]).end("array");
      else if (req.url === "/array-mixed") res.writeHead(200, "", ["content-type", "text/plain", "X-a", "own"]).end("mixed");
      else if (req.url === "/object") res.writeHead(200, { "X-A": "own", "x-c": "c" }).end("object");
      else if (req.url === "/two-args") res.writeHead(201, ["x-c", "c"]).end("two");
      else if (req.url === "/with-length") {
        writeHeadWithLength(res as StandardReasonResponse, 201, ["content-type", "text/plain"], "6");
        res.end("length");
      } else if (req.url === "/with-length-shadowed") {
        setPendingHeader(res, "content-length", "99");
        writeHeadWithLength(res as StandardReasonResponse, 200, ["X-a", "own", "content-type", "text/plain"], "8");
        res.end("shadowed");
      }
      else res.end("implicit");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it("the response's own header of the same name wins (flat array, as srvx passes)", async () => {
    const res = await fetch(`${base}/array`);
    expect([res.status, res.headers.get("x-a"), res.headers.get("x-b"), await res.text()]).toEqual([200, "own", null, "array"]);
  });

  it("the response's own header wins in a flat array whatever its case, once", async () => {
    const res = await fetch(`${base}/array-mixed`);
    expect([res.status, res.headers.get("x-a"), await res.text()]).toEqual([200, "own", "mixed"]);
  });

  it("the response's own header wins over an object too, in any case", async () => {
    const res = await fetch(`${base}/object`);
    expect([res.headers.get("x-a"), res.headers.get("x-c")]).toEqual(["own", "c"]);
  });

  it("writeHead(status, headers) and node's implicit head carry the bag, the last value set", async () => {
    const two = await fetch(`${base}/two-args`);
    expect([two.status, two.headers.get("x-a"), two.headers.get("x-c")]).toEqual([201, "2", "c"]);
    const implicit = await fetch(`${base}/implicit`);
    expect([implicit.status, implicit.headers.get("x-a"), implicit.headers.get("x-b")]).toEqual([200, "2", null]);
  });

  it("a head written with its length (keelson's JSON answers) carries the bag, the response's own names winning", async () => {
    const kept = await fetch(`${base}/with-length`);
    expect([kept.status, kept.statusText, kept.headers.get("x-a"), kept.headers.get("content-length"), await kept.text()]).toEqual([201, "Created", "2", "6", "length"]);
    const shadowed = await fetch(`${base}/with-length-shadowed`);
    expect([shadowed.status, shadowed.headers.get("x-a"), shadowed.headers.get("content-length"), await shadowed.text()]).toEqual([200, "own", "8", "shadowed"]);
  });

  it("refuses a bad name or value where it is set, as setHeader does", () => {
    expect(seen.length).toBeGreaterThan(0);
    expect(new Set(seen)).toEqual(new Set(["ERR_INVALID_CHAR", "ERR_INVALID_HTTP_TOKEN"]));
  });

  it("through an App: CORS on answers, errors and a Response with its own Vary", async () => {
    const app = new App({ port: 0, logger: captureLogs().logger, cors: { origin: ["https://app.example.com"] } });
    app.route(get("/ok", () => ({ ok: true })));
    app.route(get("/own-vary", () => new Response("x", { headers: { vary: "Accept" } })));
    app.route(get("/boom", () => {
      throw new Error("internal detail");
    }));
    const listening = await listenOn(app);
    try {
      const headers = { origin: "https://app.example.com" };
      for (const [path, status, vary] of [["/ok", 200, "Origin"], ["/missing", 404, "Origin"], ["/boom", 500, "Origin"], ["/own-vary", 200, "Accept"]] as const) {
        const res = await listening.fetch(path, { headers });
        await res.arrayBuffer();
        expect([path, res.status, res.headers.get("access-control-allow-origin"), res.headers.get("vary")]).toEqual([path, status, "https://app.example.com", vary]);
      }
      const other = await listening.fetch("/ok", { headers: { origin: "https://evil.example" } });
      expect([other.headers.get("access-control-allow-origin"), other.headers.get("vary")]).toEqual([null, "Origin"]);
    } finally {
      await listening.stop();
    }
  });
});

// srvx writes a body it holds whole as writeHead, write(body), end(): that first write ends the
// response at once (one socket write); anything else keeps node's own write.
describe("a whole body written once (real socket)", () => {
  let server: Server;
  let base: string;
  const ends: Record<string, { endedAfterWrite: boolean; finishes: number; endCallback: boolean }> = {};
  beforeAll(async () => {
    server = createServer({ ServerResponse: StandardReasonResponse }, (req: IncomingMessage, res) => {
      const path = req.url ?? "";
      const record = { endedAfterWrite: false, finishes: 0, endCallback: false };
      ends[path] = record;
      res.on("finish", () => record.finishes++);
      if (path === "/whole") {
        res.writeHead(200, "", ["content-type", "text/plain", "content-length", "5"]);
        expect(res.write("hello")).toBe(true);
        record.endedAfterWrite = res.writableEnded;
        res.end(() => (record.endCallback = true));
      } else if (path === "/parts") {
        res.writeHead(200, "", ["content-type", "text/plain", "content-length", "5"]);
        res.write("hel");
        record.endedAfterWrite = res.writableEnded;
        res.write("lo");
        res.end();
      } else if (path === "/non-ascii") {
        // 5 UTF-8 bytes in 4 characters: not taken for the whole body.
        res.writeHead(200, "", ["content-type", "text/plain", "content-length", "5"]);
        res.write("héll");
        record.endedAfterWrite = res.writableEnded;
        res.end();
      } else if (path === "/bytes") {
        res.writeHead(200, "", ["content-type", "text/plain", "content-length", "5"]);
        res.write(Buffer.from("bytes"));
        record.endedAfterWrite = res.writableEnded;
        res.end();
      } else {
        // No content-length: a body streamed in parts.
        res.writeHead(200, "", ["content-type", "text/plain"]);
        res.write("chunk");
        record.endedAfterWrite = res.writableEnded;
        setTimeout(() => res.end("ed"), 5);
      }
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it("ends the response at the write; the end() after it is node's no-op on a finished response", async () => {
    const res = await fetch(`${base}/whole`);
    expect([res.status, res.headers.get("content-length"), await res.text()]).toEqual([200, "5", "hello"]);
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(ends["/whole"]).toEqual({ endedAfterWrite: true, finishes: 1, endCallback: true });
  });

  it("leaves a part of the body, a non-ASCII string, bytes and a body without length to node's write", async () => {
    for (const [path, body] of [["/parts", "hello"], ["/non-ascii", "héll"], ["/bytes", "bytes"], ["/streamed", "chunked"]] as const) {
      const res = await fetch(`${base}${path}`);
      expect([path, res.status, await res.text()]).toEqual([path, 200, body]);
      expect([path, ends[path]?.endedAfterWrite, ends[path]?.finishes]).toEqual([path, false, 1]);
    }
  });
});
