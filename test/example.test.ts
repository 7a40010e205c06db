import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import { buildApp } from "../examples/bookstore/app.js";
import { DEVELOPMENT_SECRET, signBookstoreToken } from "../examples/bookstore/auth.js";
import { openBookstoreDatabase } from "../examples/bookstore/database.js";
import type { App } from "../src/index.js";
import { openSQLite } from "../src/entries/sql.js";
import { captureLogs, requestLine } from "./helpers/logs.js";

const JSON_HEADERS = { "content-type": "application/json" };
/** The write routes' bearer token, as `make token` prints it; set before the tests run. */
const WRITE: Record<string, string> = { ...JSON_HEADERS };
beforeAll(async () => {
  WRITE.authorization = `Bearer ${await signBookstoreToken(DEVELOPMENT_SECRET)}`;
});

describe("the bookstore example (in-process)", () => {
  let app: App;
  let logs: ReturnType<typeof captureLogs>;

  beforeEach(() => {
    logs = captureLogs();
    app = buildApp({ logger: logs.logger });
  });

  const call = async (path: string, init?: RequestInit) => {
    const res = await app.request(path, init);
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text === "" ? undefined : JSON.parse(text) };
  };

  it("lists the seeded books in a page envelope", async () => {
    const res = await call("/api/books");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ total: 3, page: 1, limit: 20, total_pages: 1 });
    expect(res.body.data.map((b: { id: string }) => b.id)).toEqual(["b1", "b2", "b3"]);
    expect(res.headers.get("x-api-version")).toBe("1");
  });

  it("documents page and limit as starting at 1 (not at -2^53+1, zod's int() range)", async () => {
    const doc = (await call("/docs/openapi.json")).body as {
      paths: Record<string, { get: { parameters: { name: string; schema: Record<string, unknown> }[] } }>;
    };
    const params = Object.fromEntries(doc.paths["/api/books"]!.get.parameters.map((p) => [p.name, p.schema]));
    expect(params.page).toMatchObject({ type: "integer", minimum: 1 });
    expect(params.limit).toMatchObject({ type: "integer", minimum: 1, maximum: 100 });
  });

  it("pages with page and limit, clamping out-of-range numbers", async () => {
    expect(await call("/api/books?page=2&limit=2")).toMatchObject({
      status: 200, body: { data: [{ id: "b3" }], total: 3, page: 2, limit: 2, total_pages: 2 },
    });
    expect((await call("/api/books?limit=500")).body).toMatchObject({ limit: 100, total_pages: 1 });
    expect((await call("/api/books?page=0&limit=-3")).body).toMatchObject({ page: 1, limit: 20 });
    expect((await call("/api/books?page=9")).body).toMatchObject({ data: [], page: 9, total: 3 });
  });

  it("gets one book, and 404s an unknown id with a JSON error", async () => {
    expect(await call("/api/books/b2")).toMatchObject({
      status: 200, body: { id: "b2", title: "Designing Data-Intensive Applications", author: "Martin Kleppmann", year: 2017 },
    });
    expect(await call("/api/books/b999")).toEqual({
      status: 404, headers: expect.anything(), body: { status_code: 404, code: "NOT_FOUND", message: "no book with id b999" },
    });
  });

  it("creates a book (201 with Location) that can then be read", async () => {
    const res = await call("/api/books", { method: "POST", headers: WRITE, body: JSON.stringify({ title: "Dune", author: "Frank Herbert", year: 1965 }) });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ id: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/), title: "Dune", author: "Frank Herbert", year: 1965 });
    expect(res.headers.get("location")).toBe(`/api/books/${res.body.id}`);
    expect((await call(`/api/books/${res.body.id}`)).body).toEqual(res.body);
    expect((await call("/api/books")).body.total).toBe(4);
  });

  it("creates a book once per Idempotency-Key: a retry gets the first 201 byte for byte, another book with the key a 422", async () => {
    const once = { ...WRITE, "idempotency-key": "4f1c2b7e-0d55-4c1e-9a63-2f3b8a1d9e10" };
    const dune = JSON.stringify({ title: "Dune", author: "Frank Herbert", year: 1965 });
    const first = await app.request("/api/books", { method: "POST", headers: once, body: dune });
    const firstBody = await first.text();
    const retry = await app.request("/api/books", { method: "POST", headers: once, body: dune });
    expect([first.status, retry.status]).toEqual([201, 201]);
    expect(await retry.text()).toBe(firstBody);
    expect(retry.headers.get("location")).toBe(first.headers.get("location"));
    expect([first.headers.get("idempotent-replayed"), retry.headers.get("idempotent-replayed")]).toEqual([null, "true"]);
    const other = await call("/api/books", { method: "POST", headers: once, body: JSON.stringify({ title: "Dune Messiah", author: "Frank Herbert" }) });
    expect(other).toMatchObject({ status: 422, body: { code: "IDEMPOTENCY_KEY_REUSED" } });
    expect((await call("/api/books")).body.total).toBe(4);
    expect(logs.lines().some((line) => /POST \/api\/books 201/.test(line) && /idempotency=replayed/.test(line))).toBe(true);
  });

  it("rejects an invalid book with 422 and the failing fields", async () => {
    const res = await call("/api/books", { method: "POST", headers: WRITE, body: JSON.stringify({ title: "", year: "1965" }) });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ status_code: 422, code: "VALIDATION_ERROR", message: "Validation failed" });
    expect(res.body.errors.map((e: { path: string }) => e.path).toSorted()).toEqual(["body.author", "body.title", "body.year"]);
    expect((await call("/api/books")).body.total).toBe(3);
  });

  it("rejects malformed JSON and a non-JSON body", async () => {
    expect((await call("/api/books", { method: "POST", headers: WRITE, body: "{title:" })).body.code).toBe("INVALID_JSON");
    expect((await call("/api/books", { method: "POST", headers: { ...WRITE, "content-type": "text/plain" }, body: "Dune" })).status).toBe(415);
  });

  it("replaces a book, and 404s a replace of an unknown id", async () => {
    const book = { title: "Release It! (2nd ed.)", author: "Michael Nygard", year: 2018 };
    expect(await call("/api/books/b3", { method: "PUT", headers: WRITE, body: JSON.stringify(book) })).toMatchObject({
      status: 200, body: { id: "b3", ...book },
    });
    expect((await call("/api/books/b3")).body).toEqual({ id: "b3", ...book });
    expect((await call("/api/books/nope", { method: "PUT", headers: WRITE, body: JSON.stringify(book) })).status).toBe(404);
  });

  it("deletes a book with 204, then 404s it", async () => {
    expect(await call("/api/books/b1", { method: "DELETE", headers: WRITE })).toMatchObject({ status: 204, body: undefined });
    expect((await call("/api/books/b1")).status).toBe(404);
    expect((await call("/api/books/b1", { method: "DELETE", headers: WRITE })).status).toBe(404);
  });

  it("guards the write routes with a bearer token carrying books:write; reads stay public", async () => {
    const book = JSON.stringify({ title: "Dune", author: "Frank Herbert" });
    const anonymous = await call("/api/books", { method: "POST", headers: JSON_HEADERS, body: book });
    expect(anonymous).toMatchObject({ status: 401, body: { code: "UNAUTHORIZED", message: "a bearer token is required" } });
    expect(anonymous.headers.get("www-authenticate")).toBe('Bearer realm="api"');
    const reader = `Bearer ${await signBookstoreToken(DEVELOPMENT_SECRET, { scopes: ["books:read"] })}`;
    const forbidden = await call("/api/books/b1", { method: "DELETE", headers: { authorization: reader } });
    expect(forbidden).toMatchObject({ status: 403, body: { code: "FORBIDDEN", message: "missing scope: books:write" } });
    const forged = `Bearer ${await signBookstoreToken("not-the-bookstore-key-but-32-bytes-long")}`;
    expect((await call("/api/books/b1", { method: "PUT", headers: { ...JSON_HEADERS, authorization: forged }, body: book })).status).toBe(401);
    expect((await call("/api/books/b1")).status).toBe(200);
    const doc = (await call("/docs/openapi.json")).body as {
      paths: Record<string, Record<string, { security?: unknown; responses: Record<string, unknown> }>>;
      components: { securitySchemes: Record<string, unknown> };
    };
    for (const [path, method] of [["/api/books", "post"], ["/api/books/{id}", "put"], ["/api/books/{id}", "delete"]] as const) {
      expect(doc.paths[path]![method]!.security, `${method} ${path}`).toEqual([{ bearer: ["books:write"] }]);
      expect(Object.keys(doc.paths[path]![method]!.responses)).toEqual(expect.arrayContaining(["401", "403"]));
    }
    expect(doc.paths["/api/books"]!.get!.security).toEqual([]);
    expect(doc.components.securitySchemes).toEqual({ bearer: { type: "http", scheme: "bearer", bearerFormat: "JWT" } });
  });

  it("stores a book's cover (multipart, one image up to 2 MiB) and serves the same bytes back", async () => {
    const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, ...new Uint8Array(5000).fill(9)]);
    const upload = (bytes: Uint8Array<ArrayBuffer>, type: string, headers: Record<string, string> = { authorization: WRITE.authorization! }, path = "/api/books/b2/cover") => {
      const form = new FormData();
      form.append("cover", new File([bytes], "cover", { type }));
      return app.request(path, { method: "PUT", body: form, headers });
    };
    expect((await app.request("/api/books/b2/cover")).status).toBe(404);
    expect((await upload(png, "image/png", {})).status).toBe(401);
    expect((await upload(png, "image/png")).status).toBe(204);
    const cover = await app.request("/api/books/b2/cover");
    expect([cover.status, cover.headers.get("content-type")]).toEqual([200, "image/png"]);
    expect(new Uint8Array(await cover.arrayBuffer())).toEqual(png);
    // Replaced by a second upload.
    expect((await upload(new Uint8Array([0xff, 0xd8, 0xff]), "image/jpeg")).status).toBe(204);
    expect((await app.request("/api/books/b2/cover")).headers.get("content-type")).toBe("image/jpeg");
    // Not an image, too large for the schema, too large to read at all, no such book.
    expect(await (await upload(png, "text/plain")).json()).toMatchObject({ code: "VALIDATION_ERROR", errors: [{ path: "body.cover" }] });
    expect((await upload(new Uint8Array(2 * 1024 * 1024 + 1), "image/png")).status).toBe(422);
    expect(await (await upload(new Uint8Array(3 * 1024 * 1024), "image/png")).json()).toMatchObject({ status_code: 413, code: "PAYLOAD_TOO_LARGE" });
    expect((await upload(png, "image/png", undefined, "/api/books/nope/cover")).status).toBe(404);
    // A deleted book takes its cover with it.
    expect((await app.request("/api/books/b2", { method: "DELETE", headers: WRITE })).status).toBe(204);
    expect((await app.request("/api/books/b2/cover")).status).toBe(404);
    const doc = (await call("/docs/openapi.json")).body as { paths: Record<string, { put: { requestBody: { content: Record<string, unknown> } } }> };
    expect(Object.keys(doc.paths["/api/books/{id}/cover"]!.put.requestBody.content)).toContain("multipart/form-data");
  });

  it("answers a wrong method with 405", async () => {
    const res = await call("/api/books", { method: "PATCH" });
    expect([res.status, res.headers.get("allow")]).toEqual([405, "GET, HEAD, POST"]);
  });

  it("reports health UP when the database answers, DOWN (503) once it is closed", async () => {
    const database = openSQLite({ file: ":memory:" });
    app = buildApp({ logger: logs.logger }, database);
    expect(await call("/health")).toMatchObject({
      status: 200, body: { status: "UP", service: "bookstore", checks: { database: "UP" } },
    });
    await database.close();
    expect(await call("/health")).toMatchObject({
      status: 503, body: { status: "DOWN", checks: { database: "DOWN: the database is closed" } },
    });
  });

  it("greets in the Accept-Language", async () => {
    expect((await call("/hello?name=Ana", { headers: { "accept-language": "fr-FR, fr;q=0.9" } })).body).toEqual({ message: "Bonjour, Ana !", lang: "fr" });
    expect((await call("/hello", { headers: { "accept-language": "de" } })).body).toEqual({ message: "Hallo, world!", lang: "de" });
    expect((await call("/hello")).body).toEqual({ message: "Hello, world!", lang: "en" });
  });

  it("logs one line per request", async () => {
    await call("/api/books?page=1");
    await call("/api/books/zzz");
    expect(logs.lines()).toEqual([
      expect.stringMatching(requestLine("INFO", "GET", "/api/books", 200)),
      expect.stringMatching(requestLine("WARN", "GET", "/api/books/zzz", 404)),
    ]);
  });

  it("keeps a separate in-memory catalogue per app unless given a database", async () => {
    await call("/api/books/b1", { method: "DELETE", headers: WRITE });
    const other = buildApp({ logger: captureLogs().logger });
    expect((await other.request("/api/books/b1")).status).toBe(200);
  });

  it("shares the catalogue of one SQLite file (BOOKSTORE_DB) between apps, seeded once", async () => {
    const dir = mkdtempSync(join(tmpdir(), "keelson-bookstore-"));
    try {
      const env = { BOOKSTORE_DB: join(dir, "data", "books.db") };
      const [one, two] = [buildApp({ logger: captureLogs().logger }, openBookstoreDatabase(env)), buildApp({ logger: captureLogs().logger }, openBookstoreDatabase(env))];
      const res = await one.request("/api/books", { method: "POST", headers: WRITE, body: JSON.stringify({ title: "Dune", author: "Frank Herbert" }) });
      const { id } = (await res.json()) as { id: string };
      expect(await (await two.request(`/api/books/${id}`)).json()).toEqual({ id, title: "Dune", author: "Frank Herbert" });
      expect(((await (await two.request("/api/books")).json()) as { total: number }).total).toBe(4);
      await Promise.all([one.close(), two.close()]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
