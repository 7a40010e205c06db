import { compileErrors, validate } from "@readme/openapi-parser";
import { beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { buildApp as buildBookstore } from "../examples/bookstore/app.js";
import { App, buildOpenAPIDocument, get, post, type KConfig, type OpenAPIDocument } from "../src/index.js";
import { SchemaCollector } from "../src/docs/components.js";
import { parseServer } from "../src/docs/openapi.js";
import { deriveOperationId, toOpenAPIPath } from "../src/docs/operation.js";
import { KITCHEN_DOCS, buildKitchenSinkApp } from "./fixtures/docs-kitchen-sink.js";
import { captureLogs } from "./helpers/logs.js";

type Json = Record<string, unknown>;

const quiet = (config: KConfig = {}): KConfig => ({ logger: captureLogs().logger, ...config });

/** The document an App serves, as a user builds it. */
const documentOf = (app: App): OpenAPIDocument => buildOpenAPIDocument(app.routes, app.config.docs);

/** Runs @readme/openapi-parser's validator; fails with its own readable report. */
async function expectValid(document: OpenAPIDocument): Promise<void> {
  const result = await validate(structuredClone(document) as never);
  expect(result.valid ? "valid" : compileErrors(result)).toBe("valid");
}

/** Every `$ref` in the document, with whether it points at something that exists. */
function danglingRefs(document: OpenAPIDocument): string[] {
  const out: string[] = [];
  const resolve = (ref: string) => ref.slice(2).split("/").reduce<unknown>((node, key) => (node as Json | undefined)?.[key], document);
  const walk = (node: unknown) => {
    if (Array.isArray(node)) node.forEach(walk);
    else if (node && typeof node === "object") {
      const ref = (node as Json).$ref;
      if (typeof ref === "string" && (!ref.startsWith("#/") || resolve(ref) === undefined)) out.push(ref);
      Object.values(node).forEach(walk);
    }
  };
  walk(document);
  return out;
}

function operation(document: OpenAPIDocument, method: string, path: string): Json {
  const op = (document.paths[path] as Record<string, Json> | undefined)?.[method];
  if (!op) throw new Error(`no ${method} ${path} in the document: ${Object.keys(document.paths).join(", ")}`);
  return op;
}

describe("the kitchen-sink document", () => {
  let doc: OpenAPIDocument;
  beforeAll(() => {
    doc = documentOf(buildKitchenSinkApp(quiet()));
  });

  it("passes @readme/openapi-parser's validation, with every $ref resolving", async () => {
    await expectValid(doc);
    expect(danglingRefs(doc)).toEqual([]);
    expect(doc.openapi).toBe("3.1.0");
  });

  it("carries every DocsConfig field in info, servers and tags", () => {
    expect(doc.info).toEqual({
      title: "Kitchen Sink API",
      version: "2.3.4",
      description: "Every **schema feature** keelson documents.",
      contact: { name: "API team", url: "https://example.com/team", email: "api@example.com" },
      license: { name: "Apache-2.0", url: "https://www.apache.org/licenses/LICENSE-2.0" },
    });
    expect(doc.servers).toEqual([
      { url: "https://api.example.com", description: "production" },
      { url: "https://staging.example.com/v2", description: "staging - EU" },
      { url: "http://localhost:3000" },
    ]);
    // Configured tags first, in order; then tags routes use that the config does not name.
    expect(doc.tags).toEqual([
      { name: "books", description: "The catalogue" }, { name: "admin" }, { name: "health" }, { name: "search" },
    ]);
    expect(Object.keys(doc)).toEqual(["openapi", "info", "servers", "tags", "paths", "components"]);
  });

  it("turns :params into {params}, documenting every one, with the schema's type where it has one", () => {
    const op = operation(doc, "get", "/api/libraries/{libraryId}/books/{bookId}");
    expect(op.parameters).toEqual([
      { name: "libraryId", in: "path", required: true, schema: { type: "string" } },
      {
        name: "bookId", in: "path", required: true, description: "Numeric book id",
        schema: { type: "integer", exclusiveMinimum: 0, maximum: Number.MAX_SAFE_INTEGER },
      },
    ]);
    expect(op).toMatchObject({ summary: "Get a book of a library", description: "The library id is not validated: any string.", tags: ["books"] });
  });

  it("turns a query schema into query parameters: required, defaults, arrays, enums, descriptions, deprecation", () => {
    const op = operation(doc, "get", "/api/books");
    expect(op.parameters).toEqual([
      { name: "q", in: "query", required: true, description: "Full-text query", schema: { type: "string", minLength: 1 } },
      { name: "limit", in: "query", required: false, schema: { type: "integer", default: 20, minimum: 1, maximum: 100 } },
      { name: "tags", in: "query", required: false, schema: { type: "array", items: { type: "string" } } },
      { name: "sort", in: "query", required: false, schema: { type: "string", enum: ["title", "year"] } },
      { name: "legacy", in: "query", required: false, deprecated: true, description: "Use q", schema: { type: "string" } },
    ]);
    expect(op.tags).toEqual(["books", "search"]);
  });

  it("documents bodies as requestBody, required unless the schema accepts no body", () => {
    const create = operation(doc, "post", "/api/books").requestBody as Json;
    expect(create.required).toBe(true);
    const schema = (create.content as Json)["application/json"] as { schema: Json };
    expect(schema.schema).toMatchObject({
      type: "object",
      properties: { author: { $ref: "#/components/schemas/AuthorInput" }, coAuthors: { items: { $ref: "#/components/schemas/AuthorInput" } } },
      required: ["title", "author"],
    });
    expect((operation(doc, "patch", "/api/books/{id}").requestBody as Json).required).toBe(false);
    expect(operation(doc, "get", "/api/books").requestBody).toBeUndefined();
  });

  it("documents declared responses: schema, description, status phrase, bodiless statuses", () => {
    const create = operation(doc, "post", "/api/books").responses as Json;
    expect(create["201"]).toEqual({ description: "Stored", content: { "application/json": { schema: { $ref: "#/components/schemas/Book" } } } });
    expect(create["409"]).toEqual({ $ref: "#/components/responses/Conflict" });
    const remove = operation(doc, "delete", "/api/books/{id}").responses as Json;
    expect(remove["204"]).toEqual({ description: "Gone" });
    expect(remove["418"]).toEqual({
      description: "I'm a Teapot",
      content: { "application/json": { schema: { $ref: "#/components/schemas/ErrorResponse" }, example: { status_code: 418, code: "I_M_A_TEAPOT", message: "I'm a Teapot" } } },
    });
    const read = operation(doc, "get", "/api/libraries/{libraryId}/books/{bookId}").responses as Json;
    expect(read["200"]).toEqual({ description: "OK", content: { "application/json": { schema: { $ref: "#/components/schemas/Book" } } } });
    expect(read["404"]).toMatchObject({ description: "No such book here", content: { "application/json": { schema: { $ref: "#/components/schemas/ErrorResponse" } } } });
    const list = operation(doc, "get", "/api/books").responses as Json;
    expect(list["200"]).toEqual({ description: "OK", content: { "application/json": { schema: { type: "array", items: { $ref: "#/components/schemas/Book" } } } } });
  });

  it("adds the errors keelson itself answers, each a $ref to one shared response and error schema", () => {
    const codes = (method: string, path: string) => Object.keys(operation(doc, method, path).responses as Json);
    expect(codes("get", "/api/libraries/{libraryId}/books/{bookId}")).toEqual(["200", "404", "422", "500"]);
    expect(codes("post", "/api/books")).toEqual(["201", "400", "401", "409", "413", "415", "422", "500"]);
    expect(codes("get", "/api/weird")).toEqual(["200", "500"]);
    const responses = doc.components.responses!;
    expect(Object.keys(responses)).toEqual(["BadRequest", "Unauthorized", "NotFound", "Conflict", "PayloadTooLarge", "UnsupportedMediaType", "ValidationError", "InternalError"]);
    for (const [name, response] of Object.entries(responses)) {
      expect(response.content?.["application/json"]?.schema, name).toEqual({ $ref: "#/components/schemas/ErrorResponse" });
    }
    expect(responses.ValidationError!.content!["application/json"]!.example).toMatchObject({ status_code: 422, code: "VALIDATION_ERROR", errors: [expect.any(Object)] });
    expect(doc.components.schemas.ErrorResponse).toMatchObject({ required: ["status_code", "code", "message"], properties: { errors: { items: { $ref: "#/components/schemas/FieldError" } } } });
  });

  it("lifts schemas with an id into components.schemas; input and output sides of one id get two names", () => {
    const schemas = doc.components.schemas;
    expect(Object.keys(schemas)).toEqual(expect.arrayContaining(["Book", "Author", "AuthorInput", "Category", "Weird_name_1"]));
    expect(schemas.Author).toMatchObject({ additionalProperties: false, description: "Someone who writes" });
    expect(schemas.AuthorInput).not.toHaveProperty("additionalProperties");
    // Output side: defaults are always present.
    expect(schemas.Book).toMatchObject({ required: ["id", "title", "author", "coAuthors", "status"], properties: { publishedAt: {} } });
    expect(schemas.Category).toMatchObject({ properties: { children: { items: { $ref: "#/components/schemas/Category" } } } });
    for (const schema of Object.values(schemas)) {
      expect(schema).not.toHaveProperty("$schema");
      expect(schema).not.toHaveProperty("$defs");
      expect(schema).not.toHaveProperty("id");
    }
  });

  it("lifts a recursive schema without an id under a name derived from the operation", () => {
    const op = operation(doc, "put", "/api/threads/{id}");
    expect((op.requestBody as { content: Record<string, Json> }).content["application/json"]).toEqual({ schema: { $ref: "#/components/schemas/putApiThreadsByIdBody" } });
    expect(doc.components.schemas.putApiThreadsByIdBody).toMatchObject({ properties: { replies: { items: { $ref: "#/components/schemas/putApiThreadsByIdBody" } } } });
    expect(doc.components.schemas.putApiThreadsByIdResponse200).toMatchObject({ additionalProperties: false });
  });

  it("renames a user schema whose id collides with keelson's ErrorResponse", () => {
    const bad = (operation(doc, "put", "/api/threads/{id}").responses as Json)["400"];
    expect(bad).toEqual({ description: "Bad Request", content: { "application/json": { schema: { $ref: "#/components/schemas/ErrorResponse2" } } } });
    expect(doc.components.schemas.ErrorResponse2).toMatchObject({ properties: { reason: { type: "string" } } });
    expect(doc.components.schemas.ErrorResponse).toMatchObject({ description: "The body of every error response." });
  });

  it("documents types JSON cannot carry as any value instead of failing", () => {
    const numbers = operation(doc, "get", "/api/numbers").responses as Json;
    expect(numbers["200"]).toEqual({ description: "OK", content: { "application/json": { schema: {} } } });
  });

  it("carries security, declared schemes and defaults for undeclared ones", () => {
    expect(operation(doc, "post", "/api/books").security).toEqual([{ bearer: [] }]);
    expect(operation(doc, "patch", "/api/books/{id}")).toMatchObject({ security: [{ apiKey: [] }, { oauth: [] }], deprecated: true });
    expect(doc.components.securitySchemes).toEqual({
      apiKey: KITCHEN_DOCS.securitySchemes!.apiKey,
      bearer: { type: "http", scheme: "bearer" },
      oauth: { type: "http", scheme: "bearer", description: "Not declared in docs.securitySchemes: documented as a bearer token" },
    });
    expect(operation(doc, "get", "/api/books")).not.toHaveProperty("security");
  });

  it("derives unique operationIds; explicit ones are kept, a repeated one gets a suffix", () => {
    const ids = Object.values(doc.paths).flatMap((item) => Object.values(item).map((op) => op.operationId));
    expect(new Set(ids).size).toBe(ids.length);
    expect(operation(doc, "get", "/api/libraries/{libraryId}/books/{bookId}").operationId).toBe("getApiLibrariesByLibraryIdBooksByBookId");
    expect(operation(doc, "patch", "/api/books/{id}").operationId).toBe("updateBook");
    expect(operation(doc, "delete", "/api/books/{id}").operationId).toBe("updateBook2");
    expect(operation(doc, "get", "/api/a-b").operationId).toBe("getApiAB");
    expect(operation(doc, "get", "/api/a_b").operationId).toBe("getApiAB2");
    expect(operation(doc, "get", "/api").operationId).toBe("getApi");
  });

  it("includes GET /health and leaves out hidden routes, the docs routes and the CORS preflight", () => {
    expect(operation(doc, "get", "/health")).toMatchObject({
      operationId: "getHealth", tags: ["health"],
      responses: { 200: { content: { "application/json": { schema: { $ref: "#/components/schemas/HealthReport" } } } }, 503: expect.any(Object) },
    });
    expect(Object.keys(doc.paths)).not.toEqual(expect.arrayContaining(["/api/secret"]));
    for (const path of Object.keys(doc.paths)) expect(path).not.toMatch(/^\/docs|\*\*/);
    expect(Object.values(doc.paths).flatMap((item) => Object.keys(item))).not.toContain("options");
  });

  it("leaves out routes added directly on httpEngine (they answer, but are not keelson routes)", async () => {
    const app = buildKitchenSinkApp(quiet());
    expect((await app.request("/raw/1")).status).toBe(200);
    expect((await app.request("/any", { method: "DELETE" })).status).toBe(200);
    expect(Object.keys(doc.paths)).not.toEqual(expect.arrayContaining(["/raw/{x}"]));
    expect(Object.keys(doc.paths)).not.toEqual(expect.arrayContaining(["/any"]));
    expect(JSON.stringify(doc)).not.toContain("/raw");
  });

  it("documents rou3 wildcards as path parameters", () => {
    expect(operation(doc, "get", "/files/{path}").parameters).toEqual([{ name: "path", in: "path", required: true, schema: { type: "string" } }]);
    expect(operation(doc, "get", "/star/{0}").operationId).toBe("getStarByAny");
  });

  it("keeps registration order of paths", () => {
    expect(Object.keys(doc.paths).slice(0, 3)).toEqual(["/health", "/api/libraries/{libraryId}/books/{bookId}", "/api/books"]);
  });
});

describe("documents of other apps", () => {
  it("the example bookstore: valid, every route documented with schemas", async () => {
    const doc = documentOf(buildBookstore(quiet()));
    await expectValid(doc);
    expect(danglingRefs(doc)).toEqual([]);
    const summaries = Object.values(doc.paths).flatMap((item) => Object.values(item).map((op) => op.summary));
    expect(summaries).toEqual(["Health check", "List books", "Add a book", "Get one book", "Replace a book", "Delete a book", "Upload a book's cover", "Get a book's cover", "A translated greeting"]);
    for (const item of Object.values(doc.paths)) {
      for (const op of Object.values(item)) {
        const success = Object.entries(op.responses).filter(([status]) => Number(status) < 300);
        expect(success.length, op.operationId).toBeGreaterThan(0);
        for (const [status, response] of success) {
          if (status !== "204") expect((response as { content?: unknown }).content, `${op.operationId} ${status}`).toBeDefined();
        }
      }
    }
    expect(Object.keys(doc.components.schemas)).toEqual(expect.arrayContaining(["Book", "NewBook", "BookPage", "Greeting"]));
  });

  it("an empty app: defaults for title and version, no optional sections, still valid", async () => {
    const doc = documentOf(new App(quiet({ serviceName: "bare" })));
    expect(doc.info).toEqual({ title: "bare", version: "1.0.0" });
    expect(doc).not.toHaveProperty("servers");
    expect(doc.tags).toEqual([{ name: "health" }]);
    expect(Object.keys(doc.paths)).toEqual(["/health"]);
    expect(doc.components).toEqual({ schemas: expect.objectContaining({ ErrorResponse: expect.any(Object), HealthReport: expect.any(Object) }) });
    await expectValid(doc);
  });

  it("without health: no /health operation and no HealthReport schema", async () => {
    const doc = documentOf(new App(quiet({ disableHealth: true })));
    expect(doc.paths).toEqual({});
    expect(doc.components.schemas).not.toHaveProperty("HealthReport");
    await expectValid(doc);
  });

  it("a schema library without Standard JSON Schema: validation still works, the document says nothing wrong", async () => {
    // A hand-written Standard Schema (v1 only, no `jsonSchema`): accepts objects with a string `name`.
    const named = {
      "~standard": {
        version: 1 as const,
        vendor: "hand",
        validate: (value: unknown) => (typeof (value as { name?: unknown })?.name === "string"
          ? { value: value as { name: string } }
          : { issues: [{ message: "name required", path: ["name"] }] }),
      },
    };
    const app = new App(quiet());
    app.route(post("/people/:id", { body: named, params: named, query: named }, (ctx) => ctx.body));
    const doc = documentOf(app);
    const op = operation(doc, "post", "/people/{id}");
    expect(op.parameters).toEqual([{ name: "id", in: "path", required: true, schema: { type: "string" } }]);
    expect(op.requestBody).toEqual({ required: true, content: { "application/json": { schema: {} } } });
    await expectValid(doc);
  });
});

describe("schema ids across documents", () => {
  const Author = z.object({ name: z.string() }).meta({ id: "Writer" });
  const Authors = z.array(Author).meta({ id: "Writers" });

  it("one name when both sides are identical; the id's array gets an Input twin when its items differ", () => {
    const collector = new SchemaCollector();
    const same = z.string().meta({ id: "Name" });
    collector.add(same, "input", "a");
    collector.add(same, "output", "b");
    collector.add(Authors, "input", "c");
    collector.add(Authors, "output", "d");
    const schemas = collector.finalize();
    expect(Object.keys(schemas).toSorted()).toEqual(["Name", "Writer", "WriterInput", "Writers", "WritersInput"]);
    expect(schemas.Writers).toEqual({ type: "array", items: { $ref: "#/components/schemas/Writer" } });
    expect(schemas.WritersInput).toEqual({ type: "array", items: { $ref: "#/components/schemas/WriterInput" } });
  });

  it("two unrelated schemas that share an id get numbered names", () => {
    const collector = new SchemaCollector({ Taken: { type: "null" } });
    const one = collector.add(z.object({ a: z.string() }).meta({ id: "Taken" }), "output", "x");
    const two = collector.add(z.object({ b: z.string() }).meta({ id: "Taken" }), "output", "y");
    const schemas = collector.finalize();
    expect([one, two]).toEqual([{ $ref: "#/components/schemas/Taken2" }, { $ref: "#/components/schemas/Taken3" }]);
    expect(schemas.Taken).toEqual({ type: "null" });
  });

  it("embeds schemas without ids inline", () => {
    const collector = new SchemaCollector();
    expect(collector.add(z.object({ n: z.number() }), "input", "x")).toEqual({ type: "object", properties: { n: { type: "number" } }, required: ["n"] });
    expect(collector.finalize()).toEqual({});
  });
});

describe("deriveOperationId", () => {
  it.each([
    ["GET", "/books/:id", "getBooksById"],
    ["GET", "/", "getRoot"],
    ["DELETE", "/books/:id", "deleteBooksById"],
    ["POST", "/api/v1/user-profiles", "postApiV1UserProfiles"],
    ["GET", "/users/:userId/posts/:post_id", "getUsersByUserIdPostsByPostId"],
    ["GET", "/files/:name.:ext", "getFilesByNameByExt"],
    ["GET", "/files/**:path", "getFilesByPath"],
    ["GET", "/files/**", "getFilesByRest"],
    ["GET", "/x/*", "getXByAny"],
  ])("%s %s → %s", (method, path, id) => {
    expect(deriveOperationId(method, path)).toBe(id);
  });
});

describe("toOpenAPIPath", () => {
  it.each([
    ["/books/:id", "/books/{id}", ["id"]],
    ["/a/:x/b/:y", "/a/{x}/b/{y}", ["x", "y"]],
    ["/files/:name.:ext", "/files/{name}.{ext}", ["name", "ext"]],
    ["/opt/:id?", "/opt/{id}", ["id"]],
    ["/rest/**:path", "/rest/{path}", ["path"]],
    ["/all/**", "/all/{_}", ["_"]],
    ["/one/*", "/one/{0}", ["0"]],
    ["/", "/", []],
  ])("%s → %s", (path, expected, params) => {
    expect(toOpenAPIPath(path)).toEqual({ path: expected, params });
  });
});

describe("parseServer", () => {
  it.each([
    ["https://api.example.com - production", { url: "https://api.example.com", description: "production" }],
    ["  http://localhost:3000   -   local dev  ", { url: "http://localhost:3000", description: "local dev" }],
    ["https://x.example.com - a - b", { url: "https://x.example.com", description: "a - b" }],
    ["https://no-description.example.com", { url: "https://no-description.example.com" }],
    ["https://empty.example.com - ", { url: "https://empty.example.com" }],
    ["/relative - same host", { url: "/relative", description: "same host" }],
  ])("%j", (entry, expected) => {
    expect(parseServer(entry)).toEqual(expected);
  });
});

describe("the docs routes", () => {
  it("GET {docs.path}/openapi.json serves the document as JSON, rebuilt when routes are added", async () => {
    const app = buildKitchenSinkApp(quiet());
    const res = await app.request("/docs/openapi.json");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json;charset=UTF-8");
    expect(res.headers.get("cache-control")).toBe("no-cache");
    const served = (await res.json()) as OpenAPIDocument;
    expect(served).toEqual(JSON.parse(JSON.stringify(documentOf(app))));
    app.route(get("/late", () => "late").describe("Added after the first request"));
    const again = (await (await app.request("/docs/openapi.json")).json()) as OpenAPIDocument;
    expect(again.paths["/late"]?.get?.summary).toBe("Added after the first request");
  });

  it("are not registered in production: all three are 404, and the document can still be built", async () => {
    const app = buildKitchenSinkApp(quiet({ env: "production" }));
    for (const path of ["/docs", "/docs/openapi.json", "/docs/scalar.js"]) expect((await app.request(path)).status, path).toBe(404);
    await expectValid(documentOf(app));
  });

  it("are registered in development and staging", async () => {
    for (const env of ["development", "staging"] as const) {
      const app = new App(quiet({ env }));
      expect((await app.request("/docs/openapi.json")).status, env).toBe(200);
      expect((await app.request("/docs")).status, env).toBe(200);
    }
  });

  it("move together with docs.path, and stay out of the document", async () => {
    const app = buildKitchenSinkApp(quiet({ docs: { path: "/reference/api/" } }));
    for (const path of ["/docs", "/docs/openapi.json", "/docs/scalar.js"]) expect((await app.request(path)).status, path).toBe(404);
    const page = await app.request("/reference/api");
    expect([page.status, page.headers.get("content-type")]).toEqual([200, "text/html;charset=UTF-8"]);
    expect(await page.text()).toContain("/reference/api/openapi.json");
    const doc = (await (await app.request("/reference/api/openapi.json")).json()) as OpenAPIDocument;
    expect(Object.keys(doc.paths).filter((p) => p.startsWith("/reference"))).toEqual([]);
    expect((await app.request("/reference/api/scalar.js", { method: "HEAD" })).status).toBe(200);
  });

  it("work at the root path too", async () => {
    const app = new App(quiet({ docs: { path: "/" } }));
    expect((await app.request("/")).status).toBe(200);
    expect((await app.request("/openapi.json")).status).toBe(200);
    expect(documentOf(app).paths).not.toHaveProperty("/");
  });
});
