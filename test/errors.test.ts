import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { HTTPError, type Middleware } from "h3";
import { describe, expect, it } from "vitest";
import {
  App, ERROR_CODES, KError, badRequest, conflict, createError, forbidden, get, internal, isKError, notFound, post,
  serviceUnavailable, tooManyRequests, unauthorized, validationError, type ErrorCode,
} from "../src/index.js";
import { describeBoth } from "./helpers/both.js";
import { captureLogs, requestLine } from "./helpers/logs.js";

const JSON_TYPE = "application/json;charset=UTF-8";

describe("KError and its factories", () => {
  it("carries code, status, message and cause, and serialises without the cause", () => {
    const cause = new Error("socket hang up");
    const error = new KError("PAYMENT_DECLINED", 402, "Card declined", { cause });
    expect(error).toBeInstanceOf(Error);
    expect([error.name, error.code, error.statusCode, error.message, error.cause]).toEqual([
      "KError", "PAYMENT_DECLINED", 402, "Card declined", cause,
    ]);
    expect(JSON.stringify(error)).toBe('{"status_code":402,"code":"PAYMENT_DECLINED","message":"Card declined"}');
    expect(isKError(error)).toBe(true);
    expect(isKError(new Error("x"))).toBe(false);
  });

  it.each([
    [badRequest, "BAD_REQUEST", 400],
    [unauthorized, "UNAUTHORIZED", 401],
    [forbidden, "FORBIDDEN", 403],
    [notFound, "NOT_FOUND", 404],
    [conflict, "CONFLICT", 409],
    [tooManyRequests, "TOO_MANY_REQUESTS", 429],
    [serviceUnavailable, "SERVICE_UNAVAILABLE", 503],
  ] as const)("%o builds %s (%i) with the catalogue message unless given one", (factory, code, status) => {
    const plain = factory();
    expect([plain.code, plain.statusCode, plain.message]).toEqual([code, status, ERROR_CODES[code].message]);
    expect(factory("custom").message).toBe("custom");
  });

  it("builds the spec's Internal KError from a message and the underlying cause", () => {
    const cause = new Error("ECONNREFUSED 10.0.0.7:5432");
    const error = internal("Could not load the catalogue", cause);
    expect([error.code, error.statusCode, error.message, error.cause]).toEqual([
      "INTERNAL_ERROR", 500, "Could not load the catalogue", cause,
    ]);
  });

  it("builds validation errors with their field list", () => {
    const error = validationError([{ path: "body.title", message: "Required" }]);
    expect(error.toJSON()).toEqual({
      status_code: 422, code: "VALIDATION_ERROR", message: "Validation failed",
      errors: [{ path: "body.title", message: "Required" }],
    });
  });

  it("createError() covers every catalogue code", () => {
    for (const [code, info] of Object.entries(ERROR_CODES)) {
      const error = createError(code as ErrorCode);
      expect([error.code, error.statusCode, error.message]).toEqual([code, info.status, info.message]);
    }
  });
});

/** Routes that fail every way a handler can. */
function buildFailingApp(base: ConstructorParameters<typeof App>[0]): App {
  const app = new App({ ...base, bodyLimit: 1024 });
  const leak = new Error("password=hunter2 at db.internal:5432");
  app.route(get("/kerror/:code", (ctx) => {
    throw createError(ctx.params.code as ErrorCode);
  }));
  app.route(get("/custom", () => {
    throw new KError("PAYMENT_DECLINED", 402, "Card declined");
  }));
  app.route(get("/busy", () => {
    throw new KError("BUSY", 503, "Try later", { headers: { "retry-after": "30" } });
  }));
  app.route(get("/throw-error", () => {
    throw leak;
  }));
  app.route(get("/reject", async () => {
    await Promise.resolve();
    throw leak;
  }));
  app.route(get("/reject-string", () => Promise.reject("rejected with a string")));
  app.route(get("/throw-object", () => {
    throw { secret: "hunter2" };
  }));
  app.route(get("/internal", () => {
    throw internal("Could not load the catalogue", leak);
  }));
  app.route(get("/foreign-status", () => {
    // A library error that carries a status is still an unexpected failure: never trust it.
    throw Object.assign(new Error("upstream said password=hunter2"), { status: 400 });
  }));
  app.route(get("/http-error/:status", (ctx) => {
    throw new HTTPError({ status: Number(ctx.params.status), message: `internal detail of ${ctx.event.url.href}` });
  }));
  app.route(post("/echo", (ctx) => ({ got: ctx.body })));
  return app;
}

describeBoth("error responses", buildFailingApp, (t) => {
  it.each(Object.entries(ERROR_CODES))("a thrown %s KError becomes its JSON body and status", async (code, info) => {
    const res = await t().fetch(`/kerror/${code}`);
    expect(res.status).toBe(info.status);
    expect(res.headers.get("content-type")).toBe(JSON_TYPE);
    // A 5xx body also names the request, by the id its response header carries.
    const id = info.status >= 500 ? { request_id: res.headers.get("x-request-id") } : {};
    expect(await res.json()).toEqual({ status_code: info.status, code, message: info.message, ...id });
    const level = info.status >= 500 ? "ERROR" : "WARN";
    expect(t().logs.lines().at(-1)).toMatch(requestLine(level, "GET", `/kerror/${code}`, info.status));
  });

  it("keeps an application's own code and status", async () => {
    const res = await t().fetch("/custom");
    expect([res.status, await res.json()]).toEqual([402, { status_code: 402, code: "PAYMENT_DECLINED", message: "Card declined" }]);
  });

  it("adds a KError's own headers to its response, never to its body", async () => {
    const res = await t().fetch("/busy");
    expect([res.status, res.headers.get("retry-after"), res.headers.get("content-type")]).toEqual([503, "30", JSON_TYPE]);
    expect(await res.json()).toEqual({ status_code: 503, code: "BUSY", message: "Try later", request_id: res.headers.get("x-request-id") });
  });

  it.each(["/throw-error", "/reject", "/reject-string", "/throw-object", "/foreign-status"])(
    "%s: recovered as a generic 500, the cause logged, never sent",
    async (path) => {
      const res = await t().fetch(`${path}?token=tok-123`);
      const body = await res.text();
      expect(res.status).toBe(500);
      const id = res.headers.get("x-request-id");
      expect(JSON.parse(body)).toEqual({ status_code: 500, code: "INTERNAL_ERROR", message: "Internal server error", request_id: id });
      expect(body).not.toMatch(/hunter2|string/);
      const lines = t().logs.lines();
      expect(lines).toHaveLength(2);
      expect(lines[0]).toMatch(new RegExp(String.raw`^\[ERROR\] .* GET ${path} failed: .* request_id=${id}$`));
      expect(lines[1]).toContain(` request_id=${id}`);
      expect(lines[1]).toMatch(requestLine("ERROR", "GET", path, 500));
      expect(lines.join("\n")).not.toContain("tok-123");
    },
  );

  it("logs the stack of a thrown Error on one line", async () => {
    await t().fetch("/reject");
    const [line] = t().logs.lines();
    expect(line).toMatch(/failed: Error: password=hunter2 at db\.internal:5432\\n {4}at .*errors\.test\.ts/);
    expect(line).not.toContain("\n");
  });

  it("logs a thrown non-Error by value", async () => {
    await t().fetch("/reject-string");
    expect(t().logs.lines()[0]).toMatch(/GET \/reject-string failed: rejected with a string request_id=\S+$/);
    await t().fetch("/throw-object");
    expect(t().logs.lines()[2]).toMatch(/GET \/throw-object failed: \{"secret":"hunter2"\} request_id=\S+$/);
  });

  it("sends internal()'s message and logs its cause's stack", async () => {
    const res = await t().fetch("/internal");
    expect(await res.json()).toEqual({
      status_code: 500, code: "INTERNAL_ERROR", message: "Could not load the catalogue", request_id: res.headers.get("x-request-id"),
    });
    expect(t().logs.lines()[0]).toMatch(/GET \/internal failed: Error: password=hunter2 at db\.internal:5432\\n {4}at /);
  });

  it("keeps the process serving after every kind of failure", async () => {
    for (const path of ["/throw-error", "/reject", "/reject-string", "/throw-object"]) await t().fetch(path);
    const res = await t().fetch("/custom");
    expect(res.status).toBe(402);
  });

  it.each([
    [400, "BAD_REQUEST", "Bad request"],
    [404, "NOT_FOUND", "Not found"],
    [418, "I_M_A_TEAPOT", "I'm a Teapot"],
    [502, "BAD_GATEWAY", "Bad Gateway"],
    [503, "SERVICE_UNAVAILABLE", "Service unavailable"],
  ])("an h3 HTTPError thrown on purpose keeps its status %i, with a safe message", async (status, code, message) => {
    const res = await t().fetch(`/http-error/${status}?token=tok-123`);
    const body = await res.text();
    const id = status >= 500 ? { request_id: res.headers.get("x-request-id") } : {};
    expect([res.status, JSON.parse(body)]).toEqual([status, { status_code: status, code, message, ...id }]);
    expect(body).not.toContain("internal detail");
    const log = t().logs.lines().join("\n");
    expect(log).not.toContain("tok-123");
    // A 5xx is logged with its message, the URL's query string cut out.
    if (status >= 500) expect(log).toMatch(/failed: HTTPError: internal detail of http:\/\/[^ ]+\/http-error\/5\d\d\?\[query\]/);
  });

  it("answers 404 and 405 as JSON without echoing the URL", async () => {
    const missing = await t().fetch("/missing/thing?token=tok-123");
    expect(await missing.text()).toBe('{"status_code":404,"code":"NOT_FOUND","message":"Not found"}');
    const wrong = await t().fetch("/custom?token=tok-123", { method: "DELETE" });
    expect(wrong.headers.get("allow")).toBe("GET, HEAD");
    expect(await wrong.text()).toBe('{"status_code":405,"code":"METHOD_NOT_ALLOWED","message":"Method not allowed"}');
    expect(t().logs.lines()).toEqual([
      expect.stringMatching(requestLine("WARN", "GET", "/missing/thing", 404)),
      expect.stringMatching(requestLine("WARN", "DELETE", "/custom", 405)),
    ]);
  });

  it("answers malformed JSON with 400 INVALID_JSON", async () => {
    for (const body of ["{", '{"a":}', "nul", "[1,2"]) {
      const res = await t().fetch("/echo", { method: "POST", headers: { "content-type": "application/json" }, body });
      expect([res.status, await res.json()]).toEqual([400, { status_code: 400, code: "INVALID_JSON", message: "Malformed JSON body" }]);
    }
  });

  it("answers a non-JSON content type with 415", async () => {
    for (const type of ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]) {
      const res = await t().fetch("/echo", { method: "POST", headers: { "content-type": type }, body: "a=1" });
      expect([res.status, (await res.json()).code]).toEqual([415, "UNSUPPORTED_MEDIA_TYPE"]);
    }
    const vendor = await t().fetch("/echo", { method: "POST", headers: { "content-type": "application/vnd.api+json" }, body: "{}" });
    expect(vendor.status).toBe(200);
  });

  it("answers a body over the configured limit with 413 and closes the connection", async () => {
    const res = await t().fetch("/echo", {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ a: "x".repeat(2000) }),
    });
    expect(res.status).toBe(413);
    expect(res.headers.get("connection")).toBe("close");
    expect((await res.json()).code).toBe("PAYLOAD_TOO_LARGE");
    const under = await t().fetch("/echo", {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ a: "x".repeat(900) }),
    });
    expect(under.status).toBe(200);
    expect(t().logs.lines()).toEqual([
      expect.stringMatching(requestLine("WARN", "POST", "/echo", 413)),
      expect.stringMatching(requestLine("INFO", "POST", "/echo", 200)),
    ]);
  });

  it("answers an empty body as undefined, not as an error", async () => {
    const res = await t().fetch("/echo", { method: "POST", headers: { "content-type": "application/json" } });
    expect(await res.json()).toEqual({});
  });
});

/** A JSON string body of exactly `size` bytes. */
const jsonBodyOf = (size: number): string => JSON.stringify("x".repeat(size - 2));

describe("body limit default", () => {
  it("is 1 MiB: one byte over is 413, exactly at the limit is read", async () => {
    const app = new App({ logger: captureLogs().logger });
    app.route(post("/echo", (ctx) => ({ size: JSON.stringify(ctx.body).length })));
    const at = await app.request("/echo", { method: "POST", headers: { "content-type": "application/json" }, body: jsonBodyOf(1024 * 1024) });
    expect(await at.json()).toEqual({ size: 1024 * 1024 });
    const over = await app.request("/echo", { method: "POST", headers: { "content-type": "application/json" }, body: jsonBodyOf(1024 * 1024 + 1) });
    expect(over.status).toBe(413);
  });
});

/** Global middleware: 401 without a token, an unexpected failure for the token "crash". */
const auth: Middleware = (event) => {
  if (!event.req.headers.has("authorization")) throw unauthorized();
  if (event.req.headers.get("authorization") === "crash") throw new Error("token store down");
};

describe("failures outside handlers", () => {
  it("recovers a throwing global middleware and maps its KError", async () => {
    const logs = captureLogs();
    const app = new App({ logger: logs.logger });
    app.use(auth);
    app.route(get("/me", () => ({ me: true })));
    expect(await (await app.request("/me")).json()).toEqual({ status_code: 401, code: "UNAUTHORIZED", message: "Unauthorized" });
    // A middleware KError on a path with no route is still that KError, not a 404.
    expect((await app.request("/nowhere")).status).toBe(401);
    const crash = await app.request("/me", { headers: { authorization: "crash" } });
    expect((await crash.json()).code).toBe("INTERNAL_ERROR");
    expect(logs.lines().join("\n")).toContain("GET /me failed: Error: token store down");
  });

  it("answers a malformed URL with 400 and still logs it", async () => {
    const logs = captureLogs();
    const app = new App({ logger: logs.logger });
    const metrics: unknown[][] = [];
    app.setMetricsCollector({ observeRequest: (...args) => void metrics.push(args) });
    const res = await app.request("/files/%E0%A4%A");
    expect([res.status, await res.json()]).toEqual([400, { status_code: 400, code: "BAD_REQUEST", message: "Bad request" }]);
    expect(logs.lines()).toEqual([expect.stringMatching(requestLine("WARN", "GET", "/files/%E0%A4%A", 400))]);
    expect(metrics).toEqual([["GET", "__unmatched__", 400, 0]]);
  });
});

/** The error-code catalogue table of docs/errors.md. */
function readCatalogueTable(): { source: string; rows: Map<string, { status: number; message: string }> } {
  const candidates = ["../docs/errors.md"].map((p) => fileURLToPath(new URL(p, import.meta.url)));
  const header = /^\|\s*code\s*\|\s*status\s*\|\s*message\s*\|\s*$/i;
  for (const source of candidates) {
    if (!existsSync(source)) continue;
    const lines = readFileSync(source, "utf8").split("\n");
    const start = lines.findIndex((line) => header.test(line.trim()));
    if (start < 0) continue;
    const rows = new Map<string, { status: number; message: string }>();
    for (const line of lines.slice(start + 2)) {
      if (!line.trim().startsWith("|")) break;
      const cells = line.trim().slice(1, -1).split("|").map((cell) => cell.trim().replace(/^`|`$/g, ""));
      const [code, status, message] = cells;
      if (code === undefined || status === undefined || message === undefined) throw new Error(`bad table row: ${line}`);
      rows.set(code, { status: Number(status), message });
    }
    return { source, rows };
  }
  throw new Error("no `| code | status | message |` table in docs/errors.md");
}

describe("ERROR_CODES and the docs/errors.md table", () => {
  it("lists every catalogue code with its status and message", () => {
    const { source, rows } = readCatalogueTable();
    for (const [code, info] of Object.entries(ERROR_CODES)) {
      expect(rows.get(code), `${source}: row for ${code}`).toEqual({ status: info.status, message: info.message });
    }
  });

  it("lists no code the catalogue does not have", () => {
    const { rows } = readCatalogueTable();
    expect([...rows.keys()].toSorted()).toEqual(Object.keys(ERROR_CODES).toSorted());
  });
});
