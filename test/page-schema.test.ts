// pageQuery and pageOf: a list route's page/limit parameters and its Page envelope in one word
// each, validated and clamped like ctx.pagination(), documented, and not tied to a schema library.
import type { StandardSchemaV1 } from "@standard-schema/spec";
import { describe, expect, expectTypeOf, it } from "vitest";
import { z } from "zod";
import { App, InMemoryRepository, buildOpenAPIDocument, get, newPage, pageOf, pageQuery, type OpenAPIDocument, type Page, type PageQuery } from "../src/index.js";
import { captureLogs } from "./helpers/logs.js";

const Book = z.object({ id: z.string(), title: z.string() }).meta({ id: "Book" });
type Book = z.infer<typeof Book>;
const books = new InMemoryRepository<Book, string>((book) => book.id, Array.from({ length: 45 }, (_, i) => ({ id: `b${i + 1}`, title: `T${i + 1}` })));

function build(): App {
  return new App({ logger: captureLogs().logger })
    .route(get("/books", { query: pageQuery, responses: { 200: pageOf(Book) } }, (ctx) => {
      expectTypeOf(ctx.query).toEqualTypeOf<PageQuery>();
      return books.findAll(undefined, ctx.query);
    }))
    .route(get("/echo", { query: pageQuery }, (ctx) => ({ query: ctx.query, pagination: ctx.pagination() })))
    .route(get("/named", { responses: { 200: pageOf(Book, { id: "Shelf" }) } }, () => newPage([], 0, 1, 20)))
    .route(get("/inline", { responses: { 200: pageOf(z.object({ n: z.number() })) } }, () => newPage([{ n: 1 }], 1, 1, 20)));
}

const query = async (app: App, search: string) => {
  const response = await app.request(`/echo${search}`);
  return [response.status, await response.json()] as const;
};

describe("pageQuery", () => {
  const app = build();

  it("defaults to page 1, limit 20, and drops other keys", async () => {
    expect(await query(app, "")).toEqual([200, { query: { page: 1, limit: 20 }, pagination: { page: 1, limit: 20 } }]);
    expect(await query(app, "?page=3&limit=50&sort=title")).toEqual([200, { query: { page: 3, limit: 50 }, pagination: { page: 3, limit: 50 } }]);
    expect(await query(app, "?page=&limit=")).toEqual([200, { query: { page: 1, limit: 20 }, pagination: { page: 1, limit: 20 } }]);
  });

  it("clamps as ctx.pagination() does: page below 1 → 1, limit below 1 → 20, above 100 → 100", async () => {
    expect((await query(app, "?page=0&limit=0"))[1].query).toEqual({ page: 1, limit: 20 });
    expect((await query(app, "?page=-4&limit=-1"))[1].query).toEqual({ page: 1, limit: 20 });
    expect((await query(app, "?limit=500"))[1].query).toEqual({ page: 1, limit: 100 });
  });

  it("answers 422 to a value that is not an integer, naming the parameter", async () => {
    for (const search of ["?page=two", "?limit=2.5", "?limit=ten"]) {
      const [status, body] = await query(app, search);
      expect([search, status, body.code]).toEqual([search, 422, "VALIDATION_ERROR"]);
      expect(body.errors[0].path).toMatch(/^query\.(page|limit)$/);
    }
  });

  it("pages a repository's findAll into the envelope pageOf documents (and shapes)", async () => {
    const response = await app.request("/books?page=3&limit=20");
    const page = (await response.json()) as Page<Book>;
    expect([page.data.length, page.total, page.page, page.limit, page.total_pages]).toEqual([5, 45, 3, 20, 3]);
    expect(page.data[0]).toEqual({ id: "b41", title: "T41" });
  });

  it("validates without JSON Schema conversion too, as a plain Standard Schema", async () => {
    const validate = pageQuery["~standard"].validate;
    expect(await validate({ page: "2", limit: 10 })).toEqual({ value: { page: 2, limit: 10 } });
    expect(await validate("nope")).toMatchObject({ issues: [{ message: "Expected an object" }] });
    expect(() => pageQuery["~standard"].jsonSchema.input({ target: "draft-04" })).toThrow('no JSON Schema for target "draft-04"');
  });
});

describe("pageOf and pageQuery in the document", () => {
  const doc: OpenAPIDocument = (() => {
    const app = build();
    return buildOpenAPIDocument(app.routes, app.config.docs);
  })();

  it("documents page and limit with their defaults and bounds", () => {
    expect(doc.paths["/books"]!.get!.parameters).toEqual([
      { name: "page", in: "query", required: false, description: expect.stringContaining("1-based"), schema: { type: "integer", minimum: 1, default: 1 } },
      { name: "limit", in: "query", required: false, description: expect.stringContaining("Page size"), schema: { type: "integer", minimum: 1, maximum: 100, default: 20 } },
    ]);
  });

  it("names the envelope after its item (BookPage), or as told, or keeps it inline", () => {
    const schemaOf = (path: string) => (doc.paths[path]!.get!.responses["200"] as unknown as { content: { "application/json": { schema: unknown } } }).content["application/json"].schema;
    expect(schemaOf("/books")).toEqual({ $ref: "#/components/schemas/BookPage" });
    expect(schemaOf("/named")).toEqual({ $ref: "#/components/schemas/Shelf" });
    expect(doc.components.schemas.BookPage).toMatchObject({
      type: "object",
      properties: { data: { type: "array", items: { $ref: "#/components/schemas/Book" } }, total: { type: "integer" }, total_pages: { type: "integer" } },
      required: ["data", "total", "page", "limit", "total_pages"],
    });
    expect(schemaOf("/inline")).toMatchObject({ type: "object", properties: { data: { items: { type: "object", properties: { n: { type: "number" } } } } } });
  });

  it("refuses an id that cannot be a component name, and an item without JSON Schema has no envelope schema", () => {
    expect(() => pageOf(Book, { id: "Book Page" })).toThrow('pageOf: options.id must match [A-Za-z0-9._-]+, got "Book Page"');
    const bare: StandardSchemaV1 = { "~standard": { version: 1, vendor: "x", validate: (value) => ({ value }) } };
    expect(() => pageOf(bare)["~standard"].jsonSchema.output({ target: "draft-2020-12" })).toThrow("the item schema has no JSON Schema");
  });
});
