import { createServer } from "node:net";
import { H3, HTTPResponse } from "h3";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  App, LogFormatJSON, LogFormatText, created, del, get, json, noContent, noopTracer, post, put, patch,
  type Module,
} from "../src/index.js";
import { describeBoth } from "./helpers/both.js";
import { listenOn } from "./helpers/listen.js";
import { captureLogs, requestLine } from "./helpers/logs.js";

afterEach(() => {
  vi.unstubAllEnvs();
});

describe("new App(config): defaults", () => {
  it("applies every KConfig default", () => {
    vi.stubEnv("PORT", undefined);
    vi.stubEnv("NODE_ENV", "test");
    const app = new App();
    expect(app.config).toEqual({
      serviceName: "keelson-service",
      version: "1.0.0",
      port: 3000,
      portEnv: "PORT",
      host: undefined,
      env: "development",
      disableHealth: false,
      docs: { path: "/docs", title: "keelson-service", version: "1.0.0" },
      bodyLimit: 1024 * 1024,
      healthTimeout: 500,
      shutdownTimeout: 10_000,
      shutdownDelay: 0,
      requestIdHeader: "x-request-id",
      trustRequestId: true,
    });
  });

  it("takes the port from PORT first (the operator's), else the config's, else 3000", () => {
    vi.stubEnv("PORT", "4321");
    expect(new App().config.port).toBe(4321);
    expect(new App({ port: 5555 }).config.port).toBe(4321);
    expect(new App({ port: 0 }).config.port).toBe(4321);
    vi.stubEnv("PORT", "");
    expect(new App().config.port).toBe(3000);
    expect(new App({ port: 5555 }).config.port).toBe(5555);
    vi.stubEnv("PORT", undefined);
    expect(new App({ port: 0 }).config.port).toBe(0);
    // A second App beside the service: its own variable, or none.
    vi.stubEnv("PORT", "4321");
    vi.stubEnv("ADMIN_PORT", "9100");
    expect(new App({ port: 0, portEnv: "ADMIN_PORT" }).config.port).toBe(9100);
    expect(new App({ port: 0, portEnv: false }).config.port).toBe(0);
    vi.stubEnv("ADMIN_PORT", "");
    expect(new App({ port: 5555, portEnv: "ADMIN_PORT" }).config.port).toBe(5555);
  });

  it("refuses a PORT that is not a port when the App is made, naming the variable", () => {
    vi.stubEnv("PORT", "http");
    expect(() => new App({ logger: captureLogs().logger })).toThrow('PORT must be an integer from 0 to 65535, got "http"');
    // PORT wins over the code's port, so it is read (and refused) with an explicit port too; an App
    // whose port ignores the environment does not read it.
    expect(() => new App({ port: 0, logger: captureLogs().logger })).toThrow('PORT must be an integer from 0 to 65535, got "http"');
    expect(new App({ port: 0, portEnv: false, logger: captureLogs().logger }).config.port).toBe(0);
    vi.stubEnv("ADMIN_PORT", "x1");
    expect(() => new App({ port: 0, portEnv: "ADMIN_PORT" })).toThrow('ADMIN_PORT must be an integer from 0 to 65535, got "x1"');
    expect(() => new App({ portEnv: "" })).toThrow('portEnv must be an environment variable name (such as "ADMIN_PORT") or false, got ""');
    expect(() => new App({ portEnv: true as unknown as false })).toThrow("portEnv must be an environment variable name");
  });

  it("takes env from NODE_ENV only when it is one of the three values", () => {
    vi.stubEnv("NODE_ENV", "production");
    expect(new App().config.env).toBe("production");
    vi.stubEnv("NODE_ENV", "staging");
    expect(new App().config.env).toBe("staging");
    vi.stubEnv("NODE_ENV", "test");
    expect(new App().config.env).toBe("development");
    expect(new App({ env: "production" }).config.env).toBe("production");
  });

  it("normalises docs.path and keeps the other docs settings", () => {
    const app = new App({ docs: { path: "api-docs/", title: "T", version: "2.1.0" } });
    expect(app.config.docs).toEqual({ path: "/api-docs", title: "T", version: "2.1.0" });
    // The health report's version follows docs.version unless version is set.
    expect(app.config.version).toBe("2.1.0");
    expect(new App({ version: "9.9.9", docs: { version: "2.1.0" } }).config.version).toBe("9.9.9");
  });

  it("builds a text logger with debug on in development and a JSON one in production", () => {
    const dev = new App({ env: "development" }).logger;
    expect([dev.format, dev.debugEnabled]).toEqual([LogFormatText, true]);
    const prod = new App({ env: "production" }).logger;
    expect([prod.format, prod.debugEnabled]).toEqual([LogFormatJSON, false]);
    const mine = captureLogs().logger;
    expect(new App({ logger: mine }).logger).toBe(mine);
  });

  it("exposes the h3 instance, a no-op tracer and no port before listen", () => {
    const app = new App();
    expect(app.httpEngine).toBeInstanceOf(H3);
    expect(app.tracer).toBe(noopTracer);
    expect(app.port).toBeUndefined();
    expect(app.app).toBe(app);
  });
});

describe("construction order", () => {
  it("logs and applies CORS outside panic recovery: a panic's 500 has CORS headers and a log line", async () => {
    const logs = captureLogs();
    const app = new App({ logger: logs.logger });
    app.route(get("/panic", () => {
      throw new TypeError("x is undefined");
    }));
    const res = await app.request("/panic", { headers: { origin: "https://app.example" } });
    expect(res.status).toBe(500);
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
    expect(await res.json()).toEqual({ status_code: 500, code: "INTERNAL_ERROR", message: "Internal server error", request_id: res.headers.get("x-request-id") });
    expect(logs.lines().at(-1)).toMatch(requestLine("ERROR", "GET", "/panic", 500));
  });

  it("registers GET /health unless disableHealth, and then the app may supply its own", async () => {
    expect((await new App().request("/health")).status).toBe(200);
    const app = new App({ disableHealth: true });
    expect((await app.request("/health")).status).toBe(404);
    app.route(get("/health", () => ({ mine: true })));
    expect(await (await app.request("/health")).json()).toEqual({ mine: true });
  });
});

describeBoth(
  "routes and results",
  (base) => {
    const app = new App(base);
    app.route(get("/books/:id", (ctx) => ({ id: ctx.params.id, query: ctx.query })));
    app.route(post("/books", (ctx) => created({ id: "b9", ...(ctx.body as object) }, "/books/b9")));
    app.route(post("/tagged", (ctx) => {
      ctx.event.res.headers.set("x-tag", "t1");
      return created({ tagged: true });
    }));
    app.route(put("/books/:id", (ctx) => ({ replaced: ctx.params.id, body: ctx.body })));
    app.route(patch("/books/:id", (ctx) => json({ patched: ctx.params.id }, 202, { "x-patched": "yes" })));
    app.route(del("/books/:id", () => undefined));
    app.route(post("/explicit-204", () => noContent()));
    app.route(get("/response", () => new Response("plain", { status: 203, headers: { "content-type": "text/plain" } })));
    app.route(get("/async", async () => ({ later: true })));
    app.route(get("/string-throw", () => {
      throw "a plain string";
    }));
    return app;
  },
  (t) => {
    it("returns a handler's value as JSON 200", async () => {
      const res = await t().fetch("/books/b1?x=1&tag=a&tag=b");
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("application/json;charset=UTF-8");
      expect(await res.json()).toEqual({ id: "b1", query: { x: "1", tag: ["a", "b"] } });
      expect(t().logs.lines()).toEqual([expect.stringMatching(requestLine("INFO", "GET", "/books/b1", 200))]);
    });

    it("awaits async handlers", async () => {
      expect(await (await t().fetch("/async")).json()).toEqual({ later: true });
    });

    it("sends created() as 201 with Location", async () => {
      const res = await t().fetch("/books", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ title: "Dune" }),
      });
      expect(res.status).toBe(201);
      expect(res.headers.get("location")).toBe("/books/b9");
      expect(await res.json()).toEqual({ id: "b9", title: "Dune" });
      expect(t().logs.lines()).toEqual([expect.stringMatching(requestLine("INFO", "POST", "/books", 201))]);
    });

    it("reads the JSON body of PUT", async () => {
      const res = await t().fetch("/books/b2", {
        method: "PUT",
        headers: { "content-type": "application/json; charset=utf-8" },
        body: JSON.stringify({ title: "Emma" }),
      });
      expect(await res.json()).toEqual({ replaced: "b2", body: { title: "Emma" } });
    });

    it("sends json(value, status, headers) as given", async () => {
      const res = await t().fetch("/books/b3", { method: "PATCH" });
      expect(res.status).toBe(202);
      expect(res.headers.get("x-patched")).toBe("yes");
      expect(await res.json()).toEqual({ patched: "b3" });
    });

    it("shares one frozen Headers between plain json()/created() responses; extra headers get their own", () => {
      const a = created({ id: 1 });
      expect(a.headers).toBe(json({ id: 2 }).headers);
      expect(a.headers.get("content-type")).toBe("application/json;charset=UTF-8");
      expect(() => a.headers.set("x-one", "1")).toThrow(/shared and frozen/);
      expect(() => a.headers.append("x-one", "1")).toThrow(/shared and frozen/);
      expect(() => a.headers.delete("content-type")).toThrow(/shared and frozen/);
      // entries() gives what a Headers gives: fresh pairs, an iterator with the helpers, each walk anew.
      const expected = [["content-type", "application/json;charset=UTF-8"], ["x-content-type-options", "nosniff"]];
      const walked = [...a.headers.entries()];
      expect(walked).toEqual(expected);
      walked[0]![1] = "changed";
      expect(Array.from(a.headers.entries())).toEqual(expected);
      expect(typeof Reflect.get(a.headers.entries(), "toArray")).toBe("function");
      expect(Array.from(a.headers)).toEqual(expected);
      const b = created({ id: 3 }, "/books/3");
      b.headers.set("x-two", "2");
      expect([b.headers.get("location"), b.headers.get("x-two"), b.headers.get("content-type")]).toEqual(["/books/3", "2", "application/json;charset=UTF-8"]);
    });

    it("adds headers set on ctx.event.res.headers to a created() response", async () => {
      const res = await t().fetch("/tagged", { method: "POST" });
      expect([res.status, res.headers.get("x-tag"), res.headers.get("content-type")]).toEqual([201, "t1", "application/json;charset=UTF-8"]);
      expect(await res.json()).toEqual({ tagged: true });
    });

    it("answers 204 with no body for undefined and for noContent()", async () => {
      for (const [method, path] of [["DELETE", "/books/b1"], ["POST", "/explicit-204"]] as const) {
        const res = await t().fetch(path, { method });
        expect(res.status).toBe(204);
        expect(await res.text()).toBe("");
      }
      expect(t().logs.lines()).toEqual([
        expect.stringMatching(requestLine("INFO", "DELETE", "/books/b1", 204)),
        expect.stringMatching(requestLine("INFO", "POST", "/explicit-204", 204)),
      ]);
    });

    it("passes a returned Response through untouched", async () => {
      const res = await t().fetch("/response");
      expect(res.status).toBe(203);
      expect(await res.text()).toBe("plain");
    });

    it("answers HEAD on a GET route with the status and no body", async () => {
      const res = await t().fetch("/books/b1", { method: "HEAD" });
      expect(res.status).toBe(200);
      expect(await res.text()).toBe("");
      expect(t().logs.lines()).toEqual([expect.stringMatching(requestLine("INFO", "HEAD", "/books/b1", 200))]);
    });

    it("answers an unknown path with 404 JSON, logged at warn without the query string", async () => {
      const res = await t().fetch("/nope?token=s3cret");
      expect(res.status).toBe(404);
      expect(res.headers.get("content-type")).toBe("application/json;charset=UTF-8");
      expect(await res.json()).toEqual({ status_code: 404, code: "NOT_FOUND", message: "Not found" });
      expect(t().logs.lines()).toEqual([expect.stringMatching(requestLine("WARN", "GET", "/nope", 404))]);
    });

    it("answers a known path with the wrong method with 405 and Allow", async () => {
      const res = await t().fetch("/books/b1", { method: "POST" });
      expect(res.status).toBe(405);
      expect(res.headers.get("allow")).toBe("GET, HEAD, PUT, PATCH, DELETE");
      expect(await res.json()).toEqual({ status_code: 405, code: "METHOD_NOT_ALLOWED", message: "Method not allowed" });
      expect(t().logs.lines()).toEqual([expect.stringMatching(requestLine("WARN", "POST", "/books/b1", 405))]);
    });

    it("recovers a thrown string as 500 and keeps serving", async () => {
      const res = await t().fetch("/string-throw");
      expect(res.status).toBe(500);
      const id = res.headers.get("x-request-id");
      expect(await res.json()).toEqual({ status_code: 500, code: "INTERNAL_ERROR", message: "Internal server error", request_id: id });
      const lines = t().logs.lines();
      expect(lines[0]).toMatch(new RegExp(String.raw`^\[ERROR\] .* GET /string-throw failed: a plain string request_id=${id}$`));
      expect(lines[1]).toMatch(requestLine("ERROR", "GET", "/string-throw", 500));
      expect((await t().fetch("/async")).status).toBe(200);
    });

    it("answers malformed JSON with 400 and a wrong content type with 415", async () => {
      const bad = await t().fetch("/books", { method: "POST", headers: { "content-type": "application/json" }, body: "{" });
      expect([bad.status, (await bad.json()).code]).toEqual([400, "INVALID_JSON"]);
      const form = await t().fetch("/books", { method: "POST", headers: { "content-type": "text/csv" }, body: "a,b" });
      expect([form.status, (await form.json()).code]).toEqual([415, "UNSUPPORTED_MEDIA_TYPE"]);
      expect(t().logs.lines()).toEqual([
        expect.stringMatching(requestLine("WARN", "POST", "/books", 400)),
        expect.stringMatching(requestLine("WARN", "POST", "/books", 415)),
      ]);
    });
  },
);

describe("request log lines", () => {
  it("text: [LEVEL] <UTC date> <time> <method> <path> <status> <duration>", async () => {
    vi.useFakeTimers({ now: new Date("2026-11-22T05:30:33.123Z"), toFake: ["Date"] });
    try {
      const logs = captureLogs("text");
      const app = new App({ logger: logs.logger });
      app.route(get("/ok", () => ({})));
      await app.request("/ok?secret=1");
      await app.request("/nope");
      const lines = logs.lines();
      expect(lines[0]).toMatch(/^\[INFO\] 2026-11-22 05:30:33 GET \/ok 200 \d+\.\d{1,2}m?s request_id=[0-9a-f]{10}-\d+$/);
      expect(lines[1]).toMatch(/^\[WARN\] 2026-11-22 05:30:33 GET \/nope 404 \d+\.\d{1,2}m?s request_id=[0-9a-f]{10}-\d+$/);
    } finally {
      vi.useRealTimers();
    }
  });

  it("JSON: level, ISO time, method, path, integer status, duration with unit", async () => {
    const logs = captureLogs("json");
    const app = new App({ logger: logs.logger });
    app.route(post("/books", () => created({})));
    app.route(get("/boom", () => Promise.reject(new Error("x"))));
    await app.request("/books?page=2", { method: "POST" });
    await app.request("/nope");
    await app.request("/boom");
    const requests = logs.lines().filter((line) => line.includes('"method"'));
    expect(requests).toHaveLength(3);
    for (const line of requests) {
      expect(line).toMatch(/^\{"level":"(info|warn|error)","time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z","method":"[A-Z]+","path":"[^"?]+","status":\d{3},"duration":"\d+\.\d{1,2}m?s","request_id":"[0-9a-f]{10}-\d+"\}$/);
    }
    expect(requests.map((line) => JSON.parse(line) as Record<string, unknown>)).toEqual([
      expect.objectContaining({ level: "info", method: "POST", path: "/books", status: 201 }),
      expect.objectContaining({ level: "warn", method: "GET", path: "/nope", status: 404 }),
      expect.objectContaining({ level: "error", method: "GET", path: "/boom", status: 500 }),
    ]);
  });

  it("gives handlers a request logger on the App's output; their lines come before the request line", async () => {
    const logs = captureLogs();
    const app = new App({ logger: logs.logger });
    app.route(get("/work", (ctx) => {
      expect(ctx.logger).toBe(ctx.logger);
      ctx.logger.info("working on %s", ctx.params);
      return {};
    }));
    const res = await app.request("/work");
    const lines = logs.lines();
    expect(lines[0]).toMatch(new RegExp(String.raw`^\[INFO\] .* working on \{\} request_id=${res.headers.get("x-request-id")}$`));
    expect(lines[1]).toMatch(requestLine("INFO", "GET", "/work", 200));
  });
});

describe("request()", () => {
  it("works without listen() and takes a Request, a path or a URL", async () => {
    const app = new App({ logger: captureLogs().logger });
    app.route(get("/x", (ctx) => ({ host: ctx.event.url.host })));
    expect((await app.request("/x")).status).toBe(200);
    expect((await app.request(new URL("http://svc.local/x"))).status).toBe(200);
    expect(await (await app.request(new Request("http://svc.local/x"))).json()).toEqual({ host: "svc.local" });
  });

  it("waits for async module registration first", async () => {
    const app = new App({ logger: captureLogs().logger });
    const slow: Module = {
      name: "slow",
      async register(router) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        router.route(get("/late", () => ({ registered: "late" })));
      },
    };
    app.use(slow);
    expect(await (await app.request("/late")).json()).toEqual({ registered: "late" });
  });

  it("rejects, as listen() does, when a module failed to register", async () => {
    const app = new App({ port: 0, logger: captureLogs().logger });
    app.use({ name: "db", register: () => Promise.reject(new Error("no DATABASE_URL")) });
    await expect(app.request("/health")).rejects.toThrow("module db failed to register: no DATABASE_URL");
    await expect(app.listen()).rejects.toThrow("module db failed to register: no DATABASE_URL");
    expect(app.port).toBeUndefined();
  });
});

describe("fetch()", () => {
  it("is a bound web handler: another h3 app can mount it and every request is still logged and measured", async () => {
    const logs = captureLogs();
    const app = new App({ logger: logs.logger });
    const observed: unknown[][] = [];
    app.setMetricsCollector({ observeRequest: (method, route, status) => void observed.push([method, route, status]) });
    app.route(get("/books/:id", (ctx) => ({ id: ctx.params.id })));
    const { fetch } = app;
    expect(await (await fetch(new Request("http://svc.local/books/7"))).json()).toEqual({ id: "7" });
    const parent = new H3().mount("/api", app);
    expect(await (await parent.request("/api/books/8")).json()).toEqual({ id: "8" });
    expect((await parent.request("/api/nowhere")).status).toBe(404);
    // h3 hands a mounted app the parent's context: a path the inner app does not know keeps the
    // parent's matched route (the mount point) as its label.
    expect(observed).toEqual([["GET", "/books/:id", 200], ["GET", "/books/:id", 200], ["GET", "/api/**", 404]]);
    expect(logs.lines()).toEqual([
      expect.stringMatching(requestLine("INFO", "GET", "/books/7", 200)),
      expect.stringMatching(requestLine("INFO", "GET", "/books/8", 200)),
      expect.stringMatching(requestLine("WARN", "GET", "/nowhere", 404)),
    ]);
  });

  it("still answers when the metrics collector or the tracer throws, and says so on stderr", async () => {
    const app = new App({ logger: captureLogs().logger });
    app.setMetricsCollector({ observeRequest: () => { throw new Error("collector broke"); } });
    app.route(get("/ok", () => ({ ok: true })));
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      const res = await app.request("/ok");
      expect([res.status, await res.json()]).toEqual([200, { ok: true }]);
      expect(errors).toHaveBeenCalledWith("keelson: recording the request failed:", expect.objectContaining({ message: "collector broke" }));
    } finally {
      errors.mockRestore();
    }
  });
});

describe("listen() and close()", () => {
  it("takes routes until the server starts, including from an async module, and refuses them after", async () => {
    const app = new App({ port: 0, logger: captureLogs().logger });
    app.use({ name: "late", register: async (router) => { await new Promise((resolve) => setTimeout(resolve, 10)); router.route(get("/late", () => ({ late: true }))); } });
    const server = await listenOn(app);
    try {
      expect(await (await server.fetch("/late")).json()).toEqual({ late: true });
      expect(() => app.route(get("/too-late", () => ({})))).toThrow("cannot add GET /too-late: the server has started (add routes before listen())");
      expect(() => app.group("/v2").route(get("/x", () => ({})))).toThrow("cannot add GET /v2/x: the server has started");
      expect((await server.fetch("/too-late")).status).toBe(404);
    } finally {
      await server.stop();
    }
  });

  it("serves on port 0, reports the bound port, and resolves listen() after close()", async () => {
    const logs = captureLogs();
    const app = new App({ port: 0, logger: logs.logger, serviceName: "svc" });
    app.route(get("/ping", () => ({ pong: true })));
    const server = await listenOn(app);
    expect(server.port).toBeGreaterThan(0);
    expect(app.port).toBe(server.port);
    const res = await server.fetch("/ping");
    expect(await res.json()).toEqual({ pong: true });
    const report = await server.stop();
    expect(report).toMatchObject({ clean: true, reason: "close()", failedHooks: [], abandonedRequests: 0 });
    const lines = logs.lines();
    expect(lines[0]).toMatch(/^\[INFO\] .* svc listening on http:\/\/.*:\d+\/? \(development\)$/);
    expect(lines).toContainEqual(expect.stringMatching(requestLine("INFO", "GET", "/ping", 200)));
    await expect(fetch(server.url + "/ping")).rejects.toThrow();
  });

  it("calls listen() once however often it is called", async () => {
    const app = new App({ port: 0, logger: captureLogs().logger });
    const first = app.listen();
    expect(app.listen()).toBe(first);
    const server = await listenOn(app);
    await server.stop();
    await first;
  });

  it("rejects with a clear message when the port is taken, without switching ports", async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, resolve));
    const port = (blocker.address() as { port: number }).port;
    try {
      const app = new App({ port, logger: captureLogs().logger });
      await expect(app.listen()).rejects.toThrow(`port ${port} is already in use (EADDRINUSE)`);
      expect(app.port).toBeUndefined();
    } finally {
      await new Promise((resolve) => blocker.close(resolve));
    }
  });

  it("runs shutdown hooks in order once, and close() is idempotent", async () => {
    const app = new App({ port: 0, logger: captureLogs().logger });
    const calls: string[] = [];
    app.onShutdown(() => void calls.push("first"));
    app.onShutdown(async (signal) => {
      expect(signal).toBeInstanceOf(AbortSignal);
      expect(signal.aborted).toBe(false);
      calls.push("second");
    });
    const server = await listenOn(app);
    const [a, b] = await Promise.all([app.close(), server.stop()]);
    expect(a).toBe(b);
    expect(calls).toEqual(["first", "second"]);
  });

  it("a handler can return an h3 HTTPResponse with its own status", async () => {
    const app = new App({ logger: captureLogs().logger });
    app.route(get("/teapot", () => new HTTPResponse("short and stout", { status: 418 })));
    const res = await app.request("/teapot");
    expect([res.status, await res.text()]).toEqual([418, "short and stout"]);
  });
});
