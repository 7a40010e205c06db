/**
 * Handlers get their types from the route's schemas. The `expectTypeOf` assertions and the
 * `@ts-expect-error` lines are checked by the compiler (`make typecheck`, part of `make test`):
 * a wrong inference fails the build, not just this file. The requests check that the values
 * the handler receives at run time are the ones the types promise.
 */
import { describe, expect, expectTypeOf, it } from "vitest";
import { z } from "zod";
import { App, del, get, patch, post, put, type RawQuery } from "../src/index.js";
import { captureLogs } from "./helpers/logs.js";

const Book = z.object({ title: z.string(), year: z.number().int().optional(), tags: z.array(z.string()).default([]) });
const Query = z.object({ limit: z.number().int().default(20), sort: z.enum(["title", "year"]).optional() });

describe("handler types inferred from schemas", () => {
  const app = new App({ logger: captureLogs().logger });

  it("types path parameters from the path when there is no params schema", async () => {
    app.route(get("/shelves/:shelf/books/:bookId", (ctx) => {
      expectTypeOf(ctx.params).toEqualTypeOf<{ shelf: string; bookId: string }>();
      // @ts-expect-error: not a parameter of this path
      void ctx.params.id;
      return ctx.params;
    }));
    const res = await app.request("/shelves/s%201/books/b2");
    expect(await res.json()).toEqual({ shelf: "s 1", bookId: "b2" });
  });

  it("types params, query and body with the schemas' output types", async () => {
    app.route(put("/books/:id", { params: z.object({ id: z.coerce.number() }), query: Query, body: Book }, (ctx) => {
      expectTypeOf(ctx.params).toEqualTypeOf<{ id: number }>();
      expectTypeOf(ctx.query).toEqualTypeOf<{ limit: number; sort?: "title" | "year" | undefined }>();
      expectTypeOf(ctx.body).toEqualTypeOf<{ title: string; year?: number | undefined; tags: string[] }>();
      const typeOnly = () => {
        // @ts-expect-error: a number has no toUpperCase
        ctx.params.id.toUpperCase();
      };
      void typeOnly;
      return { id: ctx.params.id, limit: ctx.query.limit, tags: ctx.body.tags, kinds: [typeof ctx.params.id, typeof ctx.query.limit] };
    }));
    const res = await app.request("/books/7?limit=5", { method: "PUT", headers: { "content-type": "application/json" }, body: '{"title":"x"}' });
    expect(await res.json()).toEqual({ id: 7, limit: 5, tags: [], kinds: ["number", "number"] });
  });

  it("leaves what has no schema as the raw shapes", async () => {
    app.route(post("/raw/:id", (ctx) => {
      expectTypeOf(ctx.params).toEqualTypeOf<{ id: string }>();
      expectTypeOf(ctx.query).toEqualTypeOf<RawQuery>();
      expectTypeOf(ctx.body).toEqualTypeOf<unknown>();
      return { query: ctx.query, body: ctx.body ?? null };
    }));
    app.route(patch("/partial/:id", { body: Book.partial() }, (ctx) => {
      // A body schema alone: params still come from the path, the query stays raw.
      expectTypeOf(ctx.params).toEqualTypeOf<{ id: string }>();
      expectTypeOf(ctx.query).toEqualTypeOf<RawQuery>();
      expectTypeOf(ctx.body.title).toEqualTypeOf<string | undefined>();
      return ctx.body;
    }));
    const res = await app.request("/raw/1?a=1&a=2&b=x", { method: "POST" });
    expect(await res.json()).toEqual({ query: { a: ["1", "2"], b: "x" }, body: null });
  });

  it("types async schemas by their output, and a transform by what it returns", async () => {
    const Slug = z.string().transform((s) => s.split("-"));
    app.route(del("/slugs/:slug", { params: z.object({ slug: Slug }) }, (ctx) => {
      expectTypeOf(ctx.params.slug).toEqualTypeOf<string[]>();
      return { parts: ctx.params.slug };
    }));
    const res = await app.request("/slugs/a-b-c", { method: "DELETE" });
    expect(await res.json()).toEqual({ parts: ["a", "b", "c"] });
  });

  it("rejects a handler that uses a field the schema does not have (and it is absent at run time)", async () => {
    app.route(get("/q", { query: Query }, (ctx) => {
      // @ts-expect-error: `page` is not in the query schema
      const page: unknown = ctx.query.page;
      return { query: ctx.query, page: page ?? null };
    }));
    const res = await app.request("/q?page=2&limit=3");
    expect(await res.json()).toEqual({ query: { limit: 3 }, page: null });
  });
});
