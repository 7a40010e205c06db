/**
 * Every JSON response carries `X-Content-Type-Options: nosniff`, whatever produced it: json(),
 * created(), a plain value returned by a handler, an error, /health, the OpenAPI document.
 */
import { expect, it } from "vitest";
import { z } from "zod";
import { App, created, get, json, notFound, post } from "../src/index.js";
import { describeBoth } from "./helpers/both.js";

describeBoth(
  "X-Content-Type-Options on JSON responses",
  (base) => {
    const app = new App({ ...base, bodyLimit: 16 });
    app.route(get("/json", () => json({ a: 1 })));
    app.route(get("/json-extra", () => json({ a: 1 }, 202, { "x-extra": "1" })));
    app.route(post("/created", () => created({ id: 1 }, "/things/1")));
    app.route(get("/object", () => ({ a: 1 })));
    app.route(get("/async-object", async () => ({ a: 1 })));
    app.route(get("/array", () => [1, 2]));
    app.route(get("/number", () => 42));
    app.route(get("/query", (ctx) => ctx.query));
    app.route(get("/params/:id", (ctx) => ctx.params));
    app.route(get("/date", () => new Date(0)));
    app.route(get("/validated", { query: z.object({ n: z.number() }) }, (ctx) => ctx.query));
    app.route(get("/returned-error", () => notFound("no such thing")));
    app.route(get("/boom", () => {
      throw new Error("boom");
    }));
    return app;
  },
  (t) => {
    it.each([
      ["GET", "/json", 200],
      ["GET", "/json-extra", 202],
      ["POST", "/created", 201],
      ["GET", "/object", 200],
      ["GET", "/async-object", 200],
      ["GET", "/array", 200],
      ["GET", "/number", 200],
      ["GET", "/query?constructor=1", 200],
      ["GET", "/params/7", 200],
      ["GET", "/date", 200],
      ["GET", "/validated?n=x", 422],
      ["GET", "/boom", 500],
      ["GET", "/nope", 404],
      ["GET", "/returned-error", 404],
      ["DELETE", "/json", 405],
      ["GET", "/health", 200],
      ["GET", "/docs/openapi.json", 200],
    ] as const)("%s %s (%i)", async (method, path, status) => {
      const res = await t().fetch(path, { method, body: method === "POST" ? "{}" : undefined, headers: { "content-type": "application/json" } });
      expect(res.status).toBe(status);
      expect(res.headers.get("content-type")).toBe("application/json;charset=UTF-8");
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
      expect(await res.json()).toBeDefined();
    });

    it("keeps the bodies h3 produced before (plain values are still JSON)", async () => {
      expect(await (await t().fetch("/params/7")).json()).toEqual({ id: "7" });
      expect(await (await t().fetch("/date")).json()).toBe(new Date(0).toISOString());
      expect(await (await t().fetch("/number")).text()).toBe("42");
      expect((await t().fetch("/json-extra")).headers.get("x-extra")).toBe("1");
      // A returned Error is answered as if thrown (h3's rule), although a KError has toJSON().
      expect(await (await t().fetch("/returned-error")).json()).toEqual({ status_code: 404, code: "NOT_FOUND", message: "no such thing" });
    });

    it("a too-large body's 413", async () => {
      const res = await t().fetch("/created", { method: "POST", body: JSON.stringify({ padding: "x".repeat(64) }), headers: { "content-type": "application/json" } });
      expect(res.status).toBe(413);
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    });
  },
);
