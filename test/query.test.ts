/**
 * The query object holds data only: keys named like Object.prototype's members (`constructor`,
 * `toString`, `__proto__`, `hasOwnProperty`) are ordinary keys, through `ctx.query`, through a
 * validated (zod) query and through ctx.pagination().
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { App, get } from "../src/index.js";
import { captureLogs } from "./helpers/logs.js";

const HOSTILE = "?constructor=1&toString=2&__proto__=a&__proto__=b&hasOwnProperty=x&valueOf=3";

/** Own entries in order, as JSON text: an object literal with `__proto__` would set a prototype. */
const entries = (value: object): string => JSON.stringify(Object.entries(value));

describe("ctx.query without a schema", () => {
  const app = new App({ logger: captureLogs().logger });
  app.route(get("/raw", (ctx) => {
    const query = ctx.query;
    return {
      entries: Object.entries(query),
      prototype: Object.getPrototypeOf(query) === null ? "none" : "some",
      constructor: query.constructor ?? "missing",
      toString: query.toString ?? "missing",
      isArray: Array.isArray(query),
    };
  }));

  it("keeps constructor, toString, __proto__ and friends as plain string (or string[]) values", async () => {
    const body = (await (await app.request(`/raw${HOSTILE}`)).json()) as Record<string, unknown>;
    expect(JSON.stringify(body.entries)).toBe(
      entries(JSON.parse('{"constructor":"1","toString":"2","__proto__":["a","b"],"hasOwnProperty":"x","valueOf":"3"}')),
    );
    expect(body.prototype).toBe("none");
    expect(body.isArray).toBe(false);
  });

  it("reads a key that was not sent as missing, not as Object.prototype's member", async () => {
    const body = (await (await app.request("/raw?a=1")).json()) as Record<string, unknown>;
    expect(body).toMatchObject({ constructor: "missing", toString: "missing", prototype: "none" });
  });

  it("serialises back as the keys that were sent", async () => {
    app.route(get("/echo", (ctx) => ctx.query));
    const text = await (await app.request(`/echo${HOSTILE}`)).text();
    expect(entries(JSON.parse(text) as object)).toBe(
      entries(JSON.parse('{"constructor":"1","toString":"2","__proto__":["a","b"],"hasOwnProperty":"x","valueOf":"3"}')),
    );
  });
});

describe("a validated query", () => {
  const app = new App({ logger: captureLogs().logger });
  const Query = z.object({
    constructor: z.string().optional(),
    toString: z.number().int().optional(),
    valueOf: z.array(z.string()).optional(),
  });
  app.route(get("/v", { query: Query }, (ctx) => ({ entries: Object.entries(ctx.query) })));
  app.route(get("/loose", { query: z.looseObject({ q: z.string().optional() }) }, (ctx) => ({
    entries: Object.entries(ctx.query),
    polluted: Object.getPrototypeOf(ctx.query) !== Object.prototype && Object.getPrototypeOf(ctx.query) !== null,
  })));

  it("treats optional keys named like Object.prototype's members as missing when not sent", async () => {
    const res = await app.request("/v");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ entries: [] });
  });

  it("coerces and validates them like any other key", async () => {
    const res = await app.request("/v?constructor=c&toString=7&valueOf=x");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ entries: [["constructor", "c"], ["toString", 7], ["valueOf", ["x"]]] });
    const bad = await app.request("/v?toString=seven");
    expect(bad.status).toBe(422);
    expect(((await bad.json()) as { errors: { path: string }[] }).errors.map((e) => e.path)).toEqual(["query.toString"]);
  });

  it("passes __proto__ through a loose schema as data, never as the result's prototype", async () => {
    const res = await app.request("/loose?__proto__=a&__proto__=b&q=1");
    expect(res.status).toBe(200);
    const body = (await res.json()) as { entries: [string, unknown][]; polluted: boolean };
    expect(body.polluted).toBe(false);
    expect(body.entries).toContainEqual(["q", "1"]);
  });
});

describe("ctx.pagination() with hostile keys", () => {
  const app = new App({ logger: captureLogs().logger });
  app.route(get("/items", (ctx) => ctx.pagination()));
  app.route(get("/typed", { query: z.object({ page: z.number().int().optional(), limit: z.number().int().optional() }) }, (ctx) => ctx.pagination()));

  it.each(["/items", "/typed"])("%s reads page and limit next to constructor and __proto__", async (path) => {
    const res = await app.request(`${path}${HOSTILE}&page=3&limit=5`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ page: 3, limit: 5 });
    expect(await (await app.request(`${path}?__proto__=x&__proto__=y`)).json()).toEqual({ page: 1, limit: 20 });
  });
});

/** A zod schema whose JSON Schema conversions are counted. */
function counted() {
  const schema = z.object({ limit: z.number().int() });
  const converter = schema["~standard"].jsonSchema;
  let conversions = 0;
  const input = converter.input.bind(converter);
  Object.defineProperty(schema["~standard"], "jsonSchema", {
    value: { ...converter, input: (options: Parameters<typeof input>[0]) => (conversions++, input(options)) },
  });
  return { schema, conversions: () => conversions };
}

describe("the coercion plan of a validated query", () => {
  it("is built on the route's first request, once, not when the route is registered", async () => {
    const { schema, conversions } = counted();
    const app = new App({ logger: captureLogs().logger });
    app.route(get("/items", { query: schema }, (ctx) => ctx.query));
    expect(conversions()).toBe(0);
    expect(await (await app.request("/items?limit=10")).json()).toEqual({ limit: 10 });
    expect(await (await app.request("/items?limit=2")).json()).toEqual({ limit: 2 });
    expect(conversions()).toBe(1);
  });
});
