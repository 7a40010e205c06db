// Every status the example's routes can answer is in its OpenAPI document: each route is driven
// into each status it can return (through app.request()), and every (operation, status) seen must
// be listed, with the KError body on every error status. The document stays valid.
import { compileErrors, validate } from "@readme/openapi-parser";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../examples/bookstore/app.js";
import { DEVELOPMENT_SECRET, signBookstoreToken } from "../examples/bookstore/auth.js";
import { buildOpenAPIDocument, type App, type OpenAPIDocument } from "../src/index.js";
import { openSQLite, type SQLDatabase } from "../src/entries/sql.js";
import { captureLogs } from "./helpers/logs.js";

type Operation = OpenAPIDocument["paths"][string]["get"] & object;

const JSON_TYPE = { "content-type": "application/json" };
const BOOK = JSON.stringify({ title: "Dune", author: "Frank Herbert" });
const LONG_ID = "x".repeat(65);
const PNG = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
/** A multipart body with one `cover` file. */
const coverForm = (type = "image/png", bytes: Uint8Array<ArrayBuffer> = PNG): FormData => {
  const form = new FormData();
  form.append("cover", new File([bytes], "cover.png", { type }));
  return form;
};
/** The bearer token alone: a FormData body sets its own multipart content type. */
const auth = (headers: Record<string, string>): Record<string, string> => ({ authorization: headers.authorization! });

let app: App;
let database: SQLDatabase;
let doc: OpenAPIDocument;
let writer: Record<string, string>;
let reader: Record<string, string>;
/** "get /api/books/{id}" → the statuses it answered. */
const seen = new Map<string, Set<number>>();

async function hit(method: string, template: string, url: string, init: RequestInit = {}): Promise<Response> {
  const response = await app.request(url, { method, ...init });
  await response.arrayBuffer();
  const key = `${method.toLowerCase()} ${template}`;
  seen.set(key, (seen.get(key) ?? new Set()).add(response.status));
  return response;
}

beforeAll(async () => {
  database = openSQLite({ file: ":memory:" });
  // At most one request in flight: a request held open makes every other one shed (503). Delay
  // limits out of reach: a loaded test machine must not shed the other cases.
  app = buildApp({ logger: captureLogs().logger, loadShedding: { maxInflight: 1, maxEventLoopDelay: 60_000 } }, database);
  doc = buildOpenAPIDocument(app.routes, app.config.docs);
  writer = { ...JSON_TYPE, authorization: `Bearer ${await signBookstoreToken(DEVELOPMENT_SECRET)}` };
  reader = { ...JSON_TYPE, authorization: `Bearer ${await signBookstoreToken(DEVELOPMENT_SECRET, { scopes: ["books:read"] })}` };
});

afterAll(async () => {
  await app.close();
});

describe("the example's document lists every status its routes answer", () => {
  it("drives each route into each status", async () => {
    const huge = JSON.stringify({ title: "x".repeat(app.config.bodyLimit), author: "A" });
    // Successes.
    expect((await hit("GET", "/hello", "/hello?name=Ada")).status).toBe(200);
    expect((await hit("GET", "/api/books", "/api/books?page=1&limit=2")).status).toBe(200);
    expect((await hit("GET", "/api/books/{id}", "/api/books/b1")).status).toBe(200);
    const made = await app.request("/api/books", { method: "POST", headers: writer, body: BOOK });
    seen.set("post /api/books", new Set([made.status]));
    const id = ((await made.json()) as { id: string }).id;
    expect((await hit("PUT", "/api/books/{id}", `/api/books/${id}`, { headers: writer, body: BOOK })).status).toBe(200);
    expect((await hit("DELETE", "/api/books/{id}", `/api/books/${id}`, { headers: writer })).status).toBe(204);
    expect((await hit("GET", "/health", "/health")).status).toBe(200);
    expect((await hit("PUT", "/api/books/{id}/cover", "/api/books/b1/cover", { headers: auth(writer), body: coverForm() })).status).toBe(204);
    expect((await hit("GET", "/api/books/{id}/cover", "/api/books/b1/cover")).status).toBe(200);
    // Covers: no such book or no cover (404), a file that is not an image (422), a malformed or
    // missing multipart body (400, 415), too big (413), no or a weak token (401, 403), a bad id (422).
    await hit("GET", "/api/books/{id}/cover", "/api/books/b2/cover");
    await hit("GET", "/api/books/{id}/cover", `/api/books/${LONG_ID}/cover`);
    const cover = "/api/books/{id}/cover";
    expect((await hit("PUT", cover, "/api/books/nope/cover", { headers: auth(writer), body: coverForm() })).status).toBe(404);
    expect((await hit("PUT", cover, `/api/books/${LONG_ID}/cover`, { headers: auth(writer), body: coverForm() })).status).toBe(422);
    expect((await hit("PUT", cover, "/api/books/b1/cover", { headers: auth(writer), body: coverForm("text/plain") })).status).toBe(422);
    expect((await hit("PUT", cover, "/api/books/b1/cover", { headers: { ...auth(writer), "content-type": "multipart/form-data" }, body: "x" })).status).toBe(400);
    expect((await hit("PUT", cover, "/api/books/b1/cover", { headers: writer, body: BOOK })).status).toBe(415);
    expect((await hit("PUT", cover, "/api/books/b1/cover", { headers: auth(writer), body: coverForm("image/png", new Uint8Array(3 * 1024 * 1024)) })).status).toBe(413);
    expect((await hit("PUT", cover, "/api/books/b1/cover", { body: coverForm() })).status).toBe(401);
    expect((await hit("PUT", cover, "/api/books/b1/cover", { headers: auth(reader), body: coverForm() })).status).toBe(403);
    // Not found.
    for (const method of ["GET", "DELETE"]) await hit(method, "/api/books/{id}", "/api/books/nope", { headers: writer });
    await hit("PUT", "/api/books/{id}", "/api/books/nope", { headers: writer, body: BOOK });
    // Validation: query, path, body.
    await hit("GET", "/hello", `/hello?name=${"n".repeat(101)}`);
    await hit("GET", "/api/books", "/api/books?page=two");
    for (const method of ["GET", "DELETE"]) await hit(method, "/api/books/{id}", `/api/books/${LONG_ID}`, { headers: writer });
    await hit("POST", "/api/books", "/api/books", { headers: writer, body: JSON.stringify({ title: "", author: "A" }) });
    await hit("PUT", "/api/books/{id}", "/api/books/b1", { headers: writer, body: JSON.stringify({ title: "T" }) });
    // Credentials: none (401), without the write scope (403).
    const writes: [string, string, string][] = [["POST", "/api/books", "/api/books"], ["PUT", "/api/books/{id}", "/api/books/b2"], ["DELETE", "/api/books/{id}", "/api/books/b2"]];
    for (const [method, template, url] of writes) {
      expect((await hit(method, template, url, { headers: JSON_TYPE, body: BOOK })).status).toBe(401);
      expect((await hit(method, template, url, { headers: reader, body: BOOK })).status).toBe(403);
      // Bodies: malformed (400), over the limit (413), not JSON (415) where the route has a body schema.
      // DELETE has none: a body that is not JSON is left for the handler (h3's readers), which ignores it and deletes.
      expect((await hit(method, template, url, { headers: writer, body: "{nope" })).status).toBe(400);
      expect((await hit(method, template, url, { headers: writer, body: huge })).status).toBe(413);
      const notJSON = await hit(method, template, url, { headers: { ...writer, "content-type": "text/plain" }, body: BOOK });
      expect(notJSON.status).toBe(method === "DELETE" ? 204 : 415);
    }
  });

  it("drives every route but /health into the 503 of load shedding while a request is in flight", async () => {
    let release!: () => void;
    const held = new ReadableStream<Uint8Array>({
      start(controller) {
        release = () => {
          controller.enqueue(new TextEncoder().encode(BOOK));
          controller.close();
        };
      },
    });
    const holding = app.request("/api/books", { method: "POST", headers: writer, body: held, duplex: "half" } as RequestInit);
    // The held request is in flight once its handler waits for the body.
    await new Promise((resolve) => setTimeout(resolve, 50));
    for (const [method, template, url] of [
      ["GET", "/hello", "/hello"], ["GET", "/api/books", "/api/books"], ["GET", "/api/books/{id}", "/api/books/b1"],
      ["POST", "/api/books", "/api/books"], ["PUT", "/api/books/{id}", "/api/books/b1"], ["DELETE", "/api/books/{id}", "/api/books/b1"],
      ["GET", "/api/books/{id}/cover", "/api/books/b1/cover"], ["PUT", "/api/books/{id}/cover", "/api/books/b1/cover"],
    ] as const) {
      expect((await hit(method, template, url, { headers: writer, body: method === "GET" ? undefined : BOOK })).status, `${method} ${url}`).toBe(503);
    }
    expect((await hit("GET", "/health", "/health")).status).toBe(200);
    release();
    expect((await holding).status).toBe(201);
  });

  it("drives reads into 500 and /health into 503 when the database is gone", async () => {
    await database.close();
    expect((await hit("GET", "/api/books", "/api/books")).status).toBe(500);
    expect((await hit("GET", "/api/books/{id}", "/api/books/b1")).status).toBe(500);
    expect((await hit("GET", "/api/books/{id}/cover", "/api/books/b1/cover")).status).toBe(500);
    expect((await hit("GET", "/health", "/health")).status).toBe(503);
  });

  it("lists every status seen, each error with the KError body, and the document is valid", async () => {
    const undocumented: string[] = [];
    const operations = new Map<string, Operation>();
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(item)) operations.set(`${method} ${path}`, operation);
    }
    expect([...seen.keys()].toSorted()).toEqual([...operations.keys()].toSorted());
    for (const [key, statuses] of seen) {
      for (const status of statuses) if (operations.get(key)?.responses[String(status)] === undefined) undocumented.push(`${key} ${status}`);
    }
    expect(undocumented).toEqual([]);
    const responses = doc.components.responses ?? {};
    for (const [key, operation] of operations) {
      if (key === "get /health") continue;
      for (const [status, response] of Object.entries(operation.responses)) {
        if (Number(status) < 400) continue;
        const resolved = "$ref" in response ? responses[String(response.$ref).split("/").pop()!] : response;
        expect(resolved?.content?.["application/json"]?.schema, `${key} ${status}`).toEqual({ $ref: "#/components/schemas/ErrorResponse" });
      }
    }
    // The 503 of load shedding names its Retry-After header.
    expect(operations.get("get /api/books")?.responses["503"]).toMatchObject({ headers: { "Retry-After": expect.any(Object) } });
    const result = await validate(structuredClone(doc) as never);
    expect(result.valid ? "valid" : compileErrors(result)).toBe("valid");
  });
});
