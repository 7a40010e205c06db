// Request identity: the incoming X-Request-Id kept when well formed, replaced (never logged) when
// not, generated when absent, echoed, and carried by ctx.requestId, the request line, the 5xx error
// line, the 5xx body and the server span; in-process and over a real socket.
import * as http from "node:http";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { App, conflict, createError, forbidden, get, json, rateLimit, sse, websocket, type KConfig, type LogFormat } from "../src/index.js";
import { MAX_REQUEST_ID_LENGTH, generateRequestId, isValidRequestId, resolveRequestIdHeader } from "../src/http/request-id.js";
import { MODES, type Mode } from "./helpers/both.js";
import { captureLogs, type LogCapture } from "./helpers/logs.js";
import { listenOn, type Listening } from "./helpers/listen.js";

const GENERATED = /^[0-9a-f]{10}-\d+$/;

describe("isValidRequestId", () => {
  it.each([
    "0b9f2c1e-7d4a-4c61-9a53-3f1e2d4c5b6a", "01HZY3M8Q2V7K4N6P9R1T5W8XB", "4bf92f3577b34da6a3ce929d0e0e4736", "edge-1:7f3a.9_b",
    "a", "x".repeat(MAX_REQUEST_ID_LENGTH),
  ])("keeps %s", (id) => {
    expect(isValidRequestId(id)).toBe(true);
  });

  it.each([
    ["empty", ""], ["too long", "x".repeat(MAX_REQUEST_ID_LENGTH + 1)], ["a space", "a b"], ["a repeated header", "a, b"],
    ["a newline", "abc\nforged"], ["ESC", "a\x1b[2J"], ["a quote", 'a"b'], ["a backslash", "a\\b"], ["an equals sign", "a=b"],
    ["a slash", "a/b"], ["non-ASCII", "café"], ["U+2028", "a\u2028b"], ["DEL", "a\x7f"],
  ])("replaces one with %s", (_what, id) => {
    expect(isValidRequestId(id)).toBe(false);
  });
});

describe("generateRequestId", () => {
  it("is a per-process prefix and a counter: valid, unique, the same prefix within a process", () => {
    const ids = Array.from({ length: 10_000 }, () => generateRequestId());
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect(id).toMatch(GENERATED);
    expect(new Set(ids.map((id) => id.split("-")[0])).size).toBe(1);
    expect(ids.every(isValidRequestId)).toBe(true);
  });
});

describe("request id options", () => {
  it("lower-cases requestIdHeader and refuses a name that is not an HTTP token, naming it", () => {
    expect(resolveRequestIdHeader(undefined)).toBe("x-request-id");
    expect(new App({ requestIdHeader: "X-Correlation-ID" }).config.requestIdHeader).toBe("x-correlation-id");
    expect(() => new App({ requestIdHeader: "x request id" })).toThrow('requestIdHeader must be an HTTP header name such as "x-request-id", got "x request id"');
    expect(() => new App({ requestIdHeader: "" })).toThrow('requestIdHeader must be an HTTP header name such as "x-request-id", got ""');
    expect(() => new App({ requestIdHeader: 42 as unknown as string })).toThrow('requestIdHeader must be an HTTP header name such as "x-request-id", got 42');
  });

  it("refuses a trustRequestId that is not a boolean", () => {
    expect(() => new App({ trustRequestId: "no" as unknown as boolean })).toThrow('trustRequestId must be true or false, got "no"');
  });
});

interface Served {
  fetch(path: string, init?: RequestInit): Promise<Response>;
  logs: LogCapture;
}

const servers: Listening[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) await server.stop();
});

/** The app of these cases, reached in-process or over a real socket. */
async function serve(mode: Mode, format: LogFormat, config: KConfig = {}): Promise<Served> {
  const logs = captureLogs(format);
  const app = new App({ port: 0, logger: logs.logger, ...config });
  app.route(get("/id", (ctx) => ({ requestId: ctx.requestId })));
  app.route(get("/raw", () => new Response("plain text", { headers: { "content-type": "text/plain" } })));
  app.route(get("/fail", () => {
    throw new Error("database down");
  }));
  if (mode === "in-process") return { fetch: (path, init) => app.request(path, init), logs };
  const server = await listenOn(app);
  servers.push(server);
  // Only what the requests write: not the "listening on" line.
  logs.clear();
  return { fetch: server.fetch, logs };
}

for (const mode of MODES) {
  describe(`request ids [${mode}]`, () => {
    it("keeps a well-formed X-Request-Id: echoed, ctx.requestId, on the request line (text)", async () => {
      const { fetch, logs } = await serve(mode, "text");
      const res = await fetch("/id", { headers: { "x-request-id": "lb-7f3a:42.9_x" } });
      expect(res.headers.get("x-request-id")).toBe("lb-7f3a:42.9_x");
      expect(await res.json()).toEqual({ requestId: "lb-7f3a:42.9_x" });
      expect(logs.lines()).toEqual([expect.stringMatching(/^\[INFO\] \S+ \S+ GET \/id 200 \S+ request_id=lb-7f3a:42\.9_x$/)]);
    });

    it("generates one when none is sent, the same in the header, the body and the JSON request line", async () => {
      const { fetch, logs } = await serve(mode, "json");
      const res = await fetch("/id");
      const id = res.headers.get("x-request-id");
      expect(id).toMatch(GENERATED);
      expect(await res.json()).toEqual({ requestId: id });
      expect(logs.entries()).toEqual([expect.objectContaining({ path: "/id", status: 200, request_id: id })]);
      const next = await fetch("/id");
      expect(next.headers.get("x-request-id")).not.toBe(id);
    });

    it.each([
      ["too long", "x".repeat(MAX_REQUEST_ID_LENGTH + 1)],
      ["with a space", "abc def"],
      ["with a quote and an equals sign", 'a"=b'],
      ["with an escape sequence", "abc%1b[2J"],
    ])("replaces an id %s, and never writes it anywhere", async (_what, sent) => {
      for (const format of ["text", "json"] as const) {
        const { fetch, logs } = await serve(mode, format);
        const res = await fetch("/id", { headers: { "x-request-id": sent } });
        const id = res.headers.get("x-request-id");
        expect(id).toMatch(GENERATED);
        expect(await res.json()).toEqual({ requestId: id });
        const log = logs.lines().join("\n");
        expect(log).toContain(id);
        expect(log).not.toContain(sent);
      }
    });

    it("reads and echoes the header named by requestIdHeader, and only that one", async () => {
      const { fetch } = await serve(mode, "text", { requestIdHeader: "X-Correlation-Id" });
      const res = await fetch("/id", { headers: { "x-correlation-id": "corr-1", "x-request-id": "other-1" } });
      expect(res.headers.get("x-correlation-id")).toBe("corr-1");
      expect(res.headers.get("x-request-id")).toBeNull();
      expect(await res.json()).toEqual({ requestId: "corr-1" });
    });

    it("generates every id with trustRequestId: false", async () => {
      const { fetch } = await serve(mode, "text", { trustRequestId: false });
      const res = await fetch("/id", { headers: { "x-request-id": "client-chosen" } });
      expect(res.headers.get("x-request-id")).toMatch(GENERATED);
    });

    it("echoes it on a web Response a handler returns, on HEAD, and on a request h3 refused before routing", async () => {
      const { fetch, logs } = await serve(mode, "json");
      const raw = await fetch("/raw", { headers: { "x-request-id": "raw-1" } });
      expect([raw.headers.get("x-request-id"), await raw.text()]).toEqual(["raw-1", "plain text"]);
      const head = await fetch("/id", { method: "HEAD", headers: { "x-request-id": "head-1" } });
      expect([head.status, head.headers.get("x-request-id")]).toEqual([200, "head-1"]);
      const malformed = await fetch("/files/%E0%A4%A");
      expect(malformed.status).toBe(400);
      const id = malformed.headers.get("x-request-id");
      expect(id).toMatch(GENERATED);
      expect(logs.entries().map((e) => e.request_id)).toEqual(["raw-1", "head-1", id]);
    });

    it("puts the id on 404s and 405s too", async () => {
      const { fetch, logs } = await serve(mode, "json");
      const missing = await fetch("/nowhere", { headers: { "x-request-id": "r-404" } });
      const wrong = await fetch("/id", { method: "DELETE", headers: { "x-request-id": "r-405" } });
      expect([missing.status, missing.headers.get("x-request-id"), wrong.status, wrong.headers.get("x-request-id")]).toEqual([404, "r-404", 405, "r-405"]);
      // 4xx bodies stay as they were: request_id is for the failures a user reports.
      expect(await missing.json()).not.toHaveProperty("request_id");
      expect(logs.entries().map((e) => e.request_id)).toEqual(["r-404", "r-405"]);
    });

    it.each(["text", "json"] as const)("a 5xx: the id in the body, the error line and the request line (%s)", async (format) => {
      const { fetch, logs } = await serve(mode, format);
      const res = await fetch("/fail", { headers: { "x-request-id": "support-ticket-1" } });
      expect(res.status).toBe(500);
      expect(res.headers.get("x-request-id")).toBe("support-ticket-1");
      expect(await res.json()).toEqual({ status_code: 500, code: "INTERNAL_ERROR", message: "Internal server error", request_id: "support-ticket-1" });
      const lines = logs.lines();
      expect(lines).toHaveLength(2);
      if (format === "text") {
        expect(lines[0]).toMatch(/^\[ERROR\] \S+ \S+ GET \/fail failed: Error: database down\\n.* request_id=support-ticket-1$/);
        expect(lines[1]).toMatch(/^\[ERROR\] \S+ \S+ GET \/fail 500 \S+ request_id=support-ticket-1$/);
      } else {
        expect(logs.entries()).toEqual([
          expect.objectContaining({ level: "error", message: expect.stringMatching(/^GET \/fail failed: Error: database down\n/), request_id: "support-ticket-1" }),
          expect.objectContaining({ level: "error", path: "/fail", status: 500, request_id: "support-ticket-1" }),
        ]);
      }
    });
  });
}

/** Every value of the request-id header among raw headers: exactly one is expected. */
function idsOf(rawHeaders: readonly string[]): string[] {
  const ids: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]!.toLowerCase() === "x-request-id") ids.push(rawHeaders[i + 1]!);
  return ids;
}

/** A request over a real socket with node's client: status and every request-id value, duplicates included. */
function rawRequest(port: number, path: string, headers: Record<string, string>, method = "GET"): Promise<{ status: number; ids: string[] }> {
  return new Promise((resolve, reject) => {
    const request = http.request({ host: "127.0.0.1", port, path, method, headers, agent: false });
    request.on("response", (res) => {
      res.destroy();
      resolve({ status: res.statusCode!, ids: idsOf(res.rawHeaders) });
    });
    // An upgrade accepted (not expected here): still answered with what its head carried.
    request.on("upgrade", (res, socket) => {
      socket.destroy();
      resolve({ status: 101, ids: idsOf(res.rawHeaders) });
    });
    request.on("error", reject);
    request.end();
  });
}

const UPGRADE = { connection: "Upgrade", upgrade: "websocket", "sec-websocket-version": "13", "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==" };

/** Every kind of answer an App gives, each to be checked for exactly one echoed id. */
function everyAnswerApp(config: KConfig): App {
  const app = new App({ ...config, cors: { origin: "https://app.example" } });
  app.route(get("/ok", () => ({ ok: true })));
  app.route(get("/json-headers", () => json({ ok: true }, 200, { "cache-control": "max-age=60", "x-extra": "1" })));
  app.route(get("/web", () => new Response("made", { status: 201, headers: { "x-extra": "1", "cache-control": "no-cache" } })));
  app.route(get("/own-id", () => json({ ok: true }, 200, { "x-request-id": "from-handler" })));
  app.route(get("/web-409", () => new Response("taken", { status: 409, headers: { "x-extra": "1" } })));
  app.route(get("/json-422", () => json({ nope: true }, 422)));
  app.route(get("/conflict", () => {
    throw conflict("already there");
  }));
  app.route(get("/busy", () => {
    throw createError("SERVICE_UNAVAILABLE", "later");
  }));
  app.route(get("/limited", () => ({ ok: true })).use(rateLimit({ limit: 1, windowMs: 60_000 })));
  app.route(sse("/events", () => {}));
  app.route(websocket("/ws", () => {
    throw forbidden("not you");
  }));
  return app;
}

for (const mode of MODES) {
  describe(`the id on every response, once [${mode}]`, () => {
    let app: App;
    let server: Listening | undefined;
    beforeAll(async () => {
      app = everyAnswerApp({ port: 0, logger: captureLogs("json").logger });
      if (mode === "socket") server = await listenOn(app);
    });
    afterAll(async () => {
      await server?.stop();
      if (server === undefined) await app.close();
    });

    /** Status and the id values of the answer (over the socket, raw headers: a duplicate shows). */
    async function answer(path: string, id: string, init: { method?: string; headers?: Record<string, string> } = {}): Promise<{ status: number; ids: string[] }> {
      const headers = { ...init.headers, "x-request-id": id };
      if (server !== undefined) return rawRequest(server.port, path, headers, init.method);
      const res = await app.request(path, { method: init.method, headers });
      await res.body?.cancel();
      const value = res.headers.get("x-request-id");
      return { status: res.status, ids: value === null ? [] : value.split(", ") };
    }

    it.each([
      ["a 200", "/ok", {}, 200],
      ["json() with its own headers", "/json-headers", {}, 200],
      ["a web Response with its own headers", "/web", {}, 201],
      ["a web Response with a 4xx status", "/web-409", {}, 409],
      ["json() with a 4xx status", "/json-422", {}, 422],
      ["a thrown 4xx KError", "/conflict", {}, 409],
      ["a thrown 5xx KError", "/busy", {}, 503],
      ["a 404", "/nowhere", {}, 404],
      ["a 405", "/ok", { method: "DELETE" }, 405],
      ["a CORS request", "/ok", { headers: { origin: "https://app.example" } }, 200],
      ["a CORS preflight", "/ok", { method: "OPTIONS", headers: { origin: "https://app.example", "access-control-request-method": "GET" } }, 204],
      ["an event stream", "/events", { headers: { accept: "text/event-stream" } }, 200],
      ["a plain GET on a WebSocket route (426)", "/ws", {}, 426],
      ["a WebSocket upgrade the handler refuses", "/ws", { headers: UPGRADE }, 403],
    ] as const)("%s", async (_what, path, init, status) => {
      const id = `every-${status}-${path.slice(1)}`;
      expect(await answer(path, id, init)).toEqual({ status, ids: [id] });
    });

    it("a handler's own request-id header: one value, not two", async () => {
      // As with any header set before the response: node:http lets the response's own win, h3 its prepared one.
      expect(await answer("/own-id", "sent-1")).toEqual({ status: 200, ids: [mode === "socket" ? "from-handler" : "sent-1"] });
    });

    it("a rate-limited 429, and the request before it", async () => {
      expect(await answer("/limited", "limit-1")).toEqual({ status: 200, ids: ["limit-1"] });
      expect(await answer("/limited", "limit-2")).toEqual({ status: 429, ids: ["limit-2"] });
    });
  });
}
