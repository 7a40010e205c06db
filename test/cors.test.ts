import { describe, expect, it } from "vitest";
import { App, get, post, type CorsConfig } from "../src/index.js";
import { describeBoth } from "./helpers/both.js";
import { captureLogs, requestLine } from "./helpers/logs.js";

const ORIGIN = "https://app.example";

function corsApp(cors?: CorsConfig | false): App {
  const app = new App({ logger: captureLogs().logger, cors });
  app.route(get("/books", () => [{ id: "b1" }]));
  app.route(post("/books", () => ({})));
  app.route(get("/boom", () => {
    throw new Error("boom");
  }));
  return app;
}

function preflight(app: App, path = "/books", headers: Record<string, string> = {}): Promise<Response> {
  return app.request(path, {
    method: "OPTIONS",
    headers: { origin: ORIGIN, "access-control-request-method": "POST", ...headers },
  });
}

const corsHeaders = (res: Response): Record<string, string> =>
  Object.fromEntries([...res.headers].filter(([name]) => name.startsWith("access-control-") || name === "vary"));

describe("default policy: any origin, no credentials", () => {
  const app = corsApp();

  it("answers a cross-origin request with Access-Control-Allow-Origin: * and no Vary", async () => {
    const res = await app.request("/books", { headers: { origin: ORIGIN } });
    expect(corsHeaders(res)).toEqual({ "access-control-allow-origin": "*" });
  });

  it("adds nothing to a same-origin request (no Origin header)", async () => {
    expect(corsHeaders(await app.request("/books"))).toEqual({});
  });

  it("answers a preflight with 204: methods, the requested headers echoed, max-age 600", async () => {
    const res = await preflight(app, "/books", { "access-control-request-headers": "content-type, authorization" });
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");
    expect(corsHeaders(res)).toEqual({
      "access-control-allow-origin": "*",
      "access-control-allow-methods": "GET, HEAD, PUT, PATCH, POST, DELETE",
      "access-control-allow-headers": "content-type, authorization",
      "access-control-max-age": "600",
      vary: "Access-Control-Request-Headers",
    });
  });

  it("keeps CORS headers on 404, 405 and 500 responses, so browsers can read the error", async () => {
    for (const [path, method, status] of [["/nope", "GET", 404], ["/books", "DELETE", 405], ["/boom", "GET", 500]] as const) {
      const res = await app.request(path, { method, headers: { origin: ORIGIN } });
      expect(res.status).toBe(status);
      expect(res.headers.get("access-control-allow-origin")).toBe("*");
    }
  });

  it("answers OPTIONS without a preflight request with a bare 204", async () => {
    const res = await app.request("/books", { method: "OPTIONS" });
    expect([res.status, corsHeaders(res)]).toEqual([204, {}]);
  });

  it("logs preflights like any request", async () => {
    const logs = captureLogs();
    const logged = new App({ logger: logs.logger });
    await preflight(logged);
    expect(logs.lines()).toEqual([expect.stringMatching(requestLine("INFO", "OPTIONS", "/books", 204))]);
  });
});

describe("a list of origins", () => {
  const app = corsApp({ origin: ["https://a.example", "https://b.example"], exposeHeaders: ["x-total-count"] });

  it("echoes an allowed origin with Vary: Origin and the exposed headers", async () => {
    const res = await app.request("/books", { headers: { origin: "https://b.example" } });
    expect(corsHeaders(res)).toEqual({
      "access-control-allow-origin": "https://b.example",
      "access-control-expose-headers": "x-total-count",
      vary: "Origin",
    });
  });

  it("gives a disallowed origin no CORS headers, but still Vary: Origin", async () => {
    const res = await app.request("/books", { headers: { origin: "https://evil.example" } });
    expect(res.status).toBe(200);
    expect(corsHeaders(res)).toEqual({ vary: "Origin" });
  });

  it("says Vary: Origin on same-origin responses too, so a shared cache keys on it", async () => {
    expect(corsHeaders(await app.request("/books"))).toEqual({ vary: "Origin" });
  });

  it("answers a disallowed preflight with 204 and no allow headers", async () => {
    const res = await preflight(app);
    expect([res.status, corsHeaders(res)]).toEqual([204, { vary: "Origin" }]);
  });

  it("answers an allowed preflight with Vary on both Origin and the requested headers", async () => {
    const res = await preflight(app, "/books", { origin: "https://a.example", "access-control-request-headers": "x-a" });
    expect(corsHeaders(res)).toMatchObject({
      "access-control-allow-origin": "https://a.example",
      "access-control-allow-headers": "x-a",
      vary: "Origin, Access-Control-Request-Headers",
    });
  });
});

describe("other policies", () => {
  it("one origin as a string", async () => {
    const app = corsApp({ origin: "https://a.example" });
    expect((await app.request("/books", { headers: { origin: "https://a.example" } })).headers.get("access-control-allow-origin")).toBe("https://a.example");
    expect((await app.request("/books", { headers: { origin: ORIGIN } })).headers.get("access-control-allow-origin")).toBeNull();
  });

  it("a predicate", async () => {
    const app = corsApp({ origin: (origin) => origin.endsWith(".example") });
    expect((await app.request("/books", { headers: { origin: ORIGIN } })).headers.get("access-control-allow-origin")).toBe(ORIGIN);
    expect((await app.request("/books", { headers: { origin: "https://x.test" } })).headers.get("access-control-allow-origin")).toBeNull();
  });

  it("credentials: the origin is echoed instead of *, with Allow-Credentials and Vary", async () => {
    const app = corsApp({ origin: [ORIGIN], credentials: true });
    const res = await app.request("/books", { headers: { origin: ORIGIN } });
    expect(corsHeaders(res)).toEqual({
      "access-control-allow-origin": ORIGIN,
      "access-control-allow-credentials": "true",
      vary: "Origin",
    });
    const pre = await preflight(app);
    expect(corsHeaders(pre)).toMatchObject({ "access-control-allow-origin": ORIGIN, "access-control-allow-credentials": "true" });
  });

  it.each([
    ["no origin list", {}, "no cors.origin (any origin)"],
    ['origin "*"', { origin: "*" }, 'cors.origin "*"'],
    ["a predicate that accepts everything", { origin: () => true }, "a cors.origin function that accepts any origin"],
    ["a deny-list predicate", { origin: (o: string) => o !== "https://evil.example" }, "a cors.origin function that accepts any origin"],
    ["a scheme-only predicate", { origin: (o: string) => o.startsWith("https://") }, "a cors.origin function that accepts any origin"],
  ] as const)("credentials with %s is refused when the App is created, saying what to set", (_, policy, what) => {
    expect(() => corsApp({ ...policy, credentials: true })).toThrow(
      `cors.credentials: true with ${what} would let every web site make requests with your users' credentials; ` +
        'set cors.origin to the allowed origins (e.g. ["https://app.example.com"]) or to a function that accepts only those, or drop cors.credentials',
    );
  });

  it("credentials with an allow-list predicate (even one that throws on odd input) is accepted", async () => {
    const app = corsApp({
      credentials: true,
      origin: (o) => {
        if (!o.startsWith("https://")) throw new Error("unexpected scheme");
        return o === ORIGIN;
      },
    });
    expect((await app.request("/books", { headers: { origin: ORIGIN } })).headers.get("access-control-allow-origin")).toBe(ORIGIN);
  });

  it.each([
    ["a list naming it", ["null", ORIGIN]],
    ["a predicate accepting it", (o: string) => o === "null" || o === ORIGIN],
  ] as const)("Origin: null is never reflected with credentials, even with %s", async (_, origin) => {
    const app = corsApp({ origin, credentials: true });
    const res = await app.request("/books", { headers: { origin: "null" } });
    expect(corsHeaders(res)).toEqual({ vary: "Origin" });
    const pre = await preflight(app, "/books", { origin: "null" });
    expect(corsHeaders(pre)).toEqual({ vary: "Origin" });
    // The same policy without credentials may allow it: nothing of the user's travels with it.
    const open = corsApp({ origin });
    expect((await open.request("/books", { headers: { origin: "null" } })).headers.get("access-control-allow-origin")).toBe("null");
  });

  it("fixed methods, allowed headers and max-age", async () => {
    const app = corsApp({ methods: ["GET", "POST"], allowHeaders: ["content-type"], maxAge: 60 });
    const res = await preflight(app, "/books", { "access-control-request-headers": "x-other" });
    expect(corsHeaders(res)).toEqual({
      "access-control-allow-origin": "*",
      "access-control-allow-methods": "GET, POST",
      "access-control-allow-headers": "content-type",
      "access-control-max-age": "60",
    });
  });

  it("cors: false turns CORS handling off: no headers, OPTIONS is 405", async () => {
    const app = corsApp(false);
    expect(corsHeaders(await app.request("/books", { headers: { origin: ORIGIN } }))).toEqual({});
    const res = await preflight(app);
    expect([res.status, res.headers.get("allow")]).toEqual([405, "GET, HEAD, POST"]);
  });
});

describeBoth(
  "CORS over both transports",
  (base) => {
    const app = new App({ ...base, cors: { origin: [ORIGIN], credentials: true } });
    app.route(get("/books", () => []));
    app.route(get("/vary", () => new Response("{}", { headers: { "content-type": "application/json" } })));
    return app;
  },
  (t) => {
    it("sends the same headers on a simple request", async () => {
      const res = await t().fetch("/books", { headers: { origin: ORIGIN } });
      expect(corsHeaders(res)).toEqual({
        "access-control-allow-origin": ORIGIN,
        "access-control-allow-credentials": "true",
        vary: "Origin",
      });
    });

    it("sends the same headers on a preflight", async () => {
      const res = await t().fetch("/books", {
        method: "OPTIONS",
        headers: { origin: ORIGIN, "access-control-request-method": "PUT", "access-control-request-headers": "x-token" },
      });
      expect(res.status).toBe(204);
      expect(corsHeaders(res)).toEqual({
        "access-control-allow-origin": ORIGIN,
        "access-control-allow-credentials": "true",
        "access-control-allow-methods": "GET, HEAD, PUT, PATCH, POST, DELETE",
        "access-control-allow-headers": "x-token",
        "access-control-max-age": "600",
        vary: "Origin, Access-Control-Request-Headers",
      });
    });

    it("adds only Vary to a request without Origin, and the CORS headers to one with two", async () => {
      expect(corsHeaders(await t().fetch("/books"))).toEqual({ vary: "Origin" });
      const twice = new Headers([["origin", ORIGIN], ["origin", ORIGIN]]);
      expect(corsHeaders(await t().fetch("/books", { headers: twice }))).toEqual({ vary: "Origin" });
    });

    it("adds CORS headers to a Response returned by a handler", async () => {
      const res = await t().fetch("/vary", { headers: { origin: ORIGIN } });
      expect(res.headers.get("access-control-allow-origin")).toBe(ORIGIN);
    });
  },
);
