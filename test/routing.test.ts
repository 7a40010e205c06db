import type { H3Event, Middleware } from "h3";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  App, Group, del, get, post, unauthorized, type Controller, type Module, type Router,
} from "../src/index.js";
import { joinPath } from "../src/http/path.js";
import { describeBoth } from "./helpers/both.js";
import { captureLogs, requestLine } from "./helpers/logs.js";

/** A middleware that records its name, before and after the rest of the chain. */
function tracing(name: string, calls: string[]): Middleware {
  return async (_event: H3Event, next: () => unknown) => {
    calls.push(`${name}:before`);
    const result = await next();
    calls.push(`${name}:after`);
    return result;
  };
}

/** 401 unless the request carries `Bearer ok`. */
const requireToken: Middleware = (event) => {
  if (event.req.headers.get("authorization") !== "Bearer ok") throw unauthorized("missing or bad token");
};

/** Sets a header once the rest of the chain has run. */
const stamp: Middleware = async (event, next) => {
  const result = await next();
  event.res.headers.set("x-stamped", "1");
  return result;
};

const noop: Middleware = () => undefined;

/** An App middleware (`app.use(fn)`) that does nothing. */
const appWide: Middleware = function appWide() {};

describe("joinPath", () => {
  it.each([
    ["", "/books", "/books"],
    ["/api", "books", "/api/books"],
    ["api/", "/books/", "/api/books"],
    ["//api//v1/", "//x", "/api/v1/x"],
    ["/", "/", "/"],
    ["", "", "/"],
  ])("joinPath(%j, %j) is %j", (prefix, path, expected) => {
    expect(joinPath(prefix, path)).toBe(expected);
  });
});

/** What every App in development registers itself, in this order: GET /health, then the docs routes. */
const BUILTIN_ROUTES = ["GET /health", "GET /docs/openapi.json", "GET /docs", "GET /docs/scalar.js"];
const routeKeys = (app: App) => app.routes.map((r) => `${r.method} ${r.path}`);

describe("groups", () => {
  it("nest their prefixes and record the full path of each route", async () => {
    const app = new App({ logger: captureLogs().logger });
    const api = app.group("/api");
    const v1 = api.group("v1/");
    expect(v1).toBeInstanceOf(Group);
    expect(v1.prefix).toBe("/api/v1");
    v1.route(get("/books", () => ({ at: "v1" })));
    api.route(get("/status", () => ({ at: "api" })));
    expect(await (await app.request("/api/v1/books")).json()).toEqual({ at: "v1" });
    expect(await (await app.request("/api/status")).json()).toEqual({ at: "api" });
    expect((await app.request("/books")).status).toBe(404);
    expect(routeKeys(app)).toEqual([...BUILTIN_ROUTES, "GET /api/v1/books", "GET /api/status"]);
  });

  it("run app, outer group, inner group, then route middleware, in that order", async () => {
    const calls: string[] = [];
    const app = new App({ logger: captureLogs().logger });
    app.use(tracing("app", calls));
    const outer = app.group("/a", tracing("outer", calls));
    const inner = outer.group("/b", tracing("inner-1", calls), tracing("inner-2", calls));
    inner.route(
      get("/c", { middleware: [tracing("option", calls)] }, () => {
        calls.push("handler");
        return { ok: true };
      }).use(tracing("chained", calls)),
    );
    expect((await app.request("/a/b/c")).status).toBe(200);
    expect(calls).toEqual([
      "app:before", "outer:before", "inner-1:before", "inner-2:before", "option:before", "chained:before",
      "handler",
      "chained:after", "option:after", "inner-2:after", "inner-1:after", "outer:after", "app:after",
    ]);
  });

  it("apply group middleware only to the group's routes", async () => {
    const calls: string[] = [];
    const app = new App({ logger: captureLogs().logger });
    app.group("/admin", tracing("admin", calls)).route(get("/x", () => ({})));
    app.route(get("/public", () => ({})));
    await app.request("/public");
    expect(calls).toEqual([]);
    await app.request("/admin/x");
    expect(calls).toEqual(["admin:before", "admin:after"]);
  });

  it("let middleware short-circuit with a KError before the handler runs", async () => {
    let ran = false;
    const logs = captureLogs();
    const app = new App({ logger: logs.logger });
    app.group("/private", requireToken).route(get("/data", () => {
      ran = true;
      return { secret: 42 };
    }));
    const denied = await app.request("/private/data");
    expect([denied.status, await denied.json()]).toEqual([401, { status_code: 401, code: "UNAUTHORIZED", message: "missing or bad token" }]);
    expect(ran).toBe(false);
    const allowed = await app.request("/private/data", { headers: { authorization: "Bearer ok" } });
    expect(await allowed.json()).toEqual({ secret: 42 });
    expect(logs.lines()).toEqual([
      expect.stringMatching(requestLine("WARN", "GET", "/private/data", 401)),
      expect.stringMatching(requestLine("INFO", "GET", "/private/data", 200)),
    ]);
  });

  it("let middleware change the response after next()", async () => {
    const app = new App({ logger: captureLogs().logger });
    app.group("/s", stamp).route(get("/x", () => ({ ok: 1 })));
    const res = await app.request("/s/x");
    expect(res.headers.get("x-stamped")).toBe("1");
  });
});

describe("controllers and modules", () => {
  const books: Controller = {
    routes: () => [get("/books", () => [{ id: "b1" }]), del("/books/:id", () => undefined)],
  };

  it("registerController registers every route of a controller, on the app or a group", async () => {
    const app = new App({ logger: captureLogs().logger });
    app.registerController(books);
    app.group("/v2").registerController(books);
    expect(routeKeys(app)).toEqual([
      ...BUILTIN_ROUTES, "GET /books", "DELETE /books/:id", "GET /v2/books", "DELETE /v2/books/:id",
    ]);
    expect((await app.request("/v2/books/b1", { method: "DELETE" })).status).toBe(204);
  });

  it("use(module) hands the module the App", async () => {
    const app = new App({ logger: captureLogs().logger });
    let received: Router | undefined;
    const module: Module = {
      register(router) {
        received = router;
        router.route(get("/from-module", () => ({ ok: true })));
      },
    };
    app.use(module);
    expect(received).toBe(app);
    expect((await app.request("/from-module")).status).toBe(200);
  });

  it("a module installed on a group gets the group: its prefix and middleware, and the App via router.app", async () => {
    const calls: string[] = [];
    const app = new App({ logger: captureLogs().logger });
    const module: Module = {
      name: "catalogue",
      register(router) {
        expect(router).toBeInstanceOf(Group);
        expect(router.app).toBe(app);
        router.registerController(books);
        router.group("/inner").route(get("/deep", () => ({ deep: true })));
        router.app.registerHealthChecker({ name: "catalogue", check: () => undefined });
      },
    };
    app.group("/api", tracing("api", calls)).use(module);
    expect((await app.request("/api/books")).status).toBe(200);
    expect(await (await app.request("/api/inner/deep")).json()).toEqual({ deep: true });
    expect(calls).toEqual(["api:before", "api:after", "api:before", "api:after"]);
    expect((await (await app.request("/health")).json()).checks).toEqual({ catalogue: "UP" });
  });

  it("a module whose register throws synchronously fails startup with its name", async () => {
    const app = new App({ logger: captureLogs().logger });
    app.use({ name: "cache", register: () => {
      throw new Error("REDIS_URL is not set");
    } });
    await expect(app.request("/health")).rejects.toThrow("module cache failed to register: REDIS_URL is not set");
  });

  it("names a failing module by its class, or (unnamed) for a nameless object literal", async () => {
    class SearchModule implements Module {
      register(): void {
        throw new Error("index missing");
      }
    }
    const byClass = new App({ logger: captureLogs().logger }).use(new SearchModule());
    await expect(byClass.request("/health")).rejects.toThrow("module SearchModule failed to register: index missing");
    const anonymous = new App({ logger: captureLogs().logger }).use({ register: () => Promise.reject(new Error("boom")) });
    await expect(anonymous.request("/health")).rejects.toThrow("module (unnamed) failed to register: boom");
  });

  it("use(middleware) adds global h3 middleware that also sees unmatched paths", async () => {
    const seen: string[] = [];
    const app = new App({ logger: captureLogs().logger });
    app.use((event) => void seen.push(event.url.pathname));
    await app.request("/health");
    await app.request("/nowhere");
    expect(seen).toEqual(["/health", "/nowhere"]);
  });
});

describe("routes added directly on httpEngine", () => {
  it("are logged and measured with their route template", async () => {
    const logs = captureLogs();
    const app = new App({ logger: logs.logger });
    const observed: unknown[][] = [];
    app.setMetricsCollector({ observeRequest: (method, route, status) => void observed.push([method, route, status]) });
    app.httpEngine.get("/raw/:id", (event) => ({ raw: event.context.params?.id }));
    app.httpEngine.post("/raw-fail", () => {
      throw new Error("raw failure");
    });
    expect(await (await app.request("/raw/7")).json()).toEqual({ raw: "7" });
    const failed = await app.request("/raw-fail", { method: "POST" });
    expect([failed.status, (await failed.json()).code]).toEqual([500, "INTERNAL_ERROR"]);
    expect(observed).toEqual([["GET", "/raw/:id", 200], ["POST", "/raw-fail", 500]]);
    const lines = logs.lines();
    expect(lines[0]).toMatch(requestLine("INFO", "GET", "/raw/7", 200));
    expect(lines.at(-1)).toMatch(requestLine("ERROR", "POST", "/raw-fail", 500));
    // Not keelson routes: they are not in app.routes (nor in the OpenAPI document).
    expect(routeKeys(app)).toEqual(BUILTIN_ROUTES);
    // Nor in the index behind 405: another method on a path only they serve is a plain 404.
    expect((await app.request("/raw/7", { method: "DELETE" })).status).toBe(404);
  });
});

describeBoth(
  "path parameters and methods",
  (base) => {
    const app = new App(base);
    app.route(get("/files/:name", (ctx) => ({ name: ctx.params.name })));
    app.route(get("/users/:user/posts/:post", (ctx) => ctx.params));
    app.route(post("/only-post", () => ({})));
    app.route(get("/typed/:n", { params: z.object({ n: z.coerce.number().int() }) }, (ctx) => ({ n: ctx.params.n, type: typeof ctx.params.n })));
    app.route(get("/own/:name", (ctx) => {
      (ctx.params as Record<string, string>).name = "changed";
      return { mine: ctx.params.name, router: ctx.event.context.params?.name };
    }));
    return app;
  },
  (t) => {
    it.each([
      ["a%20b", "a b"],
      ["caf%C3%A9", "café"],
      ["100%25", "100%"],
      ["a+b", "a+b"],
      ["a%2Fb", "a%2Fb"],
      ["a%2fb", "a%2fb"],
      ["a%5Cb", "a%5Cb"],
      ["a%252Fb", "a%252Fb"],
    ])("decodes %s to %j (encoded separators stay encoded)", async (raw, decoded) => {
      const res = await t().fetch(`/files/${raw}`);
      expect(await res.json()).toEqual({ name: decoded });
    });

    it("hands the handler its own copy of the params, with or without anything to decode", async () => {
      expect(await (await t().fetch("/own/plain")).json()).toEqual({ mine: "changed", router: "plain" });
      expect(await (await t().fetch("/own/a%20b")).json()).toEqual({ mine: "changed", router: "a%20b" });
    });

    it("decodes every parameter of a path", async () => {
      const res = await t().fetch("/users/j%C3%BCrgen/posts/hello%20world");
      expect(await res.json()).toEqual({ user: "jürgen", post: "hello world" });
    });

    it("logs the path as requested (still encoded), without the query", async () => {
      await t().fetch("/files/a%20b?sig=abc");
      expect(t().logs.lines()).toEqual([expect.stringMatching(requestLine("INFO", "GET", "/files/a%20b", 200))]);
    });

    it("validates and coerces params with a schema", async () => {
      expect(await (await t().fetch("/typed/42")).json()).toEqual({ n: 42, type: "number" });
      const bad = await t().fetch("/typed/abc");
      expect(bad.status).toBe(422);
      expect((await bad.json()).errors[0].path).toBe("params.n");
    });

    it("matches with or without a trailing slash", async () => {
      expect((await t().fetch("/files/x/")).status).toBe(200);
    });

    it("answers HEAD for a GET route, /health included, and 405 for a POST-only route", async () => {
      for (const path of ["/files/x", "/health"]) {
        const res = await t().fetch(path, { method: "HEAD" });
        expect([res.status, await res.text()]).toEqual([200, ""]);
      }
      const head = await t().fetch("/only-post", { method: "HEAD" });
      expect([head.status, head.headers.get("allow")]).toEqual([405, "POST"]);
      expect(t().logs.lines()).toEqual([
        expect.stringMatching(requestLine("INFO", "HEAD", "/files/x", 200)),
        expect.stringMatching(requestLine("INFO", "HEAD", "/health", 200)),
        expect.stringMatching(requestLine("WARN", "HEAD", "/only-post", 405)),
      ]);
    });

    it("answers a wrong method with 405 listing the allowed ones", async () => {
      const res = await t().fetch("/files/x", { method: "DELETE" });
      expect([res.status, res.headers.get("allow")]).toEqual([405, "GET, HEAD"]);
      const onPost = await t().fetch("/only-post");
      expect([onPost.status, onPost.headers.get("allow")]).toEqual([405, "POST"]);
    });
  },
);

describe("route declarations", () => {
  const Book = z.object({ id: z.string() });

  it("take options and chained metadata", () => {
    const route = get("/books/:id", { params: z.object({ id: z.string() }), summary: "from options", tags: ["a"] }, (ctx) => ({ id: ctx.params.id }))
      .tag("b", "c")
      .describe("Get a book", "Longer text")
      .use(noop)
      .secured()
      .deprecated()
      .operationId("getBook")
      .response(200, Book, "The book")
      .response(404, undefined, "No such book");
    expect(route.method).toBe("GET");
    expect(route.path).toBe("/books/:id");
    expect(route.options).toMatchObject({
      summary: "Get a book", description: "Longer text", tags: ["a", "b", "c"], security: ["bearer"],
      deprecated: true, operationId: "getBook", middleware: [noop],
      responses: { 200: { schema: Book, description: "The book" }, 404: { schema: undefined, description: "No such book" } },
    });
    expect(route.options.params).toBeDefined();
    expect(route.options.hidden).toBeUndefined();
    expect(route.hide().options.hidden).toBe(true);
    expect(get("/x", () => null).secured("apiKey", "oauth").options.security).toEqual(["apiKey", "oauth"]);
  });

  it("do not share option arrays between routes declared from one options object", () => {
    const options = { tags: ["shared"] };
    const a = get("/a", options, () => null).tag("only-a");
    const b = get("/b", options, () => null);
    expect([a.options.tags, b.options.tags, options.tags]).toEqual([["shared", "only-a"], ["shared"], ["shared"]]);
  });

  it("are listed in app.routes with their declaration and the middleware they run (groups' first, then their own)", () => {
    const app = new App({ logger: captureLogs().logger });
    const route = post("/books", () => null);
    app.group("/api").route(route);
    const [outer, inner, own] = [1, 2, 3].map((n): Middleware => function marker() {
      return n > 3 ? null : undefined;
    });
    const guarded = get("/secret", () => null).use(own!);
    app.group("/v1", outer!).group("/x", inner!).route(guarded);
    expect(app.routes.slice(BUILTIN_ROUTES.length)).toEqual([
      { method: "POST", path: "/api/books", route, middleware: [], appMiddleware: [] },
      { method: "GET", path: "/v1/x/secret", route: guarded, middleware: [outer!, inner!, own!], appMiddleware: [] },
    ]);
    // App middleware (app.use(fn)) is one list shared by every route, later additions included.
    app.use(appWide);
    expect(app.routes.map((r) => r.appMiddleware)).toEqual(app.routes.map(() => [appWide]));
  });

  it("include GET /health and the docs routes (hidden from the document), which move with the config", () => {
    expect(routeKeys(new App({ logger: captureLogs().logger }))).toEqual(BUILTIN_ROUTES);
    const app = new App({ logger: captureLogs().logger, disableHealth: true, docs: { path: "/ref" } });
    expect(routeKeys(app)).toEqual(["GET /ref/openapi.json", "GET /ref", "GET /ref/scalar.js"]);
    expect(app.routes.every(({ route }) => route.options.hidden)).toBe(true);
    expect(routeKeys(new App({ logger: captureLogs().logger, env: "production" }))).toEqual(["GET /health"]);
  });
});
