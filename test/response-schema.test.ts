// Response schemas decide what leaves: undeclared fields are never sent, and a value that breaks
// the declared schema is a 500 whose error line names the route, the status and the field.
// Every case through app.request() and over a real socket.
import type { StandardSchemaV1 } from "@standard-schema/spec";
import { HTTPResponse } from "h3";
import { expect, it } from "vitest";
import { z } from "zod";
import { App, created, del, get, json, newPage, noContent, notFound, pageOf, post, type KConfig } from "../src/index.js";
import { describeBoth } from "./helpers/both.js";
import { captureLogs } from "./helpers/logs.js";

const User = z.object({ id: z.string(), name: z.string().max(20), tags: z.array(z.string()).optional() }).meta({ id: "User" });
const ROW = { id: "u1", name: "Ada", tags: ["x"], password_hash: "$2b$secret", internal: { note: "n" } };

/** A Standard Schema without JSON Schema: what is sent is its validated value. */
const validatorOnly: StandardSchemaV1<unknown, { id: string }> = {
  "~standard": {
    version: 1, vendor: "test",
    validate: (value) => {
      const id = (value as { id?: unknown }).id;
      return typeof id === "string" ? { value: { id } } : { issues: [{ message: "id: expected a string", path: ["id"] }] };
    },
  },
};

/** An asynchronous schema (validation returns a promise), with zod's JSON Schema. */
const asyncUser: StandardSchemaV1 = {
  "~standard": { ...User["~standard"], validate: async (value: unknown) => User["~standard"].validate(value) },
};

function build(config: KConfig): App {
  const app = new App({ serviceName: "shapes", ...config });
  return app.route(get("/users/:id", { responses: { 200: User } }, () => ROW))
    .route(post("/users", { responses: { 201: { schema: User, description: "Created" } } }, () => created(ROW, "/users/u1")))
    .route(get("/json", { responses: { 202: User } }, () => json(ROW, 202, { "x-extra": "1" })))
    .route(get("/page", { responses: { 200: pageOf(User) } }, () => ({ ...newPage([ROW, { ...ROW, id: "u2" }], 2, 1, 20), cursor: "hidden" })))
    .route(get("/free", () => ROW))
    .route(get("/undeclared-status", { responses: { 200: User } }, () => json(ROW, 203)))
    .route(get("/missing", { responses: { 200: User } }, () => ({ name: "Ada" })))
    .route(get("/too-long", { responses: { 200: User } }, () => ({ id: "u1", name: "x".repeat(30) })))
    .route(get("/bad-item", { responses: { 200: pageOf(User) } }, () => newPage([ROW, { id: 7, name: "Bob" }], 2, 1, 20)))
    .route(get("/validator-only", { responses: { 200: validatorOnly } }, () => ({ id: "v", secret: "s" })))
    .route(get("/validator-only-bad", { responses: { 200: validatorOnly } }, () => ({ secret: "s" })))
    .route(get("/async", { responses: { 200: asyncUser } }, async () => ROW))
    .route(get("/error-status", { responses: { 200: User, 404: User } }, () => {
      throw notFound("no such user");
    }))
    .route(del("/users/:id", { responses: { 204: User } }, () => noContent()));
}

describeBoth("response schemas", build, (target) => {
  it("sends only the declared fields of a plain value, created() and json() (headers and status kept)", async () => {
    const { fetch } = target();
    const one = await fetch("/users/u1");
    expect([one.status, await one.json()]).toEqual([200, { id: "u1", name: "Ada", tags: ["x"] }]);
    expect(one.headers.get("content-type")).toMatch(/^application\/json/);
    const made = await fetch("/users", { method: "POST" });
    expect([made.status, made.headers.get("location"), await made.json()]).toEqual([201, "/users/u1", { id: "u1", name: "Ada", tags: ["x"] }]);
    const withHeaders = await fetch("/json");
    expect([withHeaders.status, withHeaders.headers.get("x-extra"), await withHeaders.json()]).toEqual([202, "1", { id: "u1", name: "Ada", tags: ["x"] }]);
  });

  it("shapes every item of a page, and the envelope itself", async () => {
    const page = await target().fetch("/page");
    expect(await page.json()).toEqual({
      data: [{ id: "u1", name: "Ada", tags: ["x"] }, { id: "u2", name: "Ada", tags: ["x"] }], total: 2, page: 1, limit: 20, total_pages: 1,
    });
  });

  it("leaves routes without a response schema, and statuses without one, as they were", async () => {
    const { fetch } = target();
    expect(await (await fetch("/free")).json()).toEqual(ROW);
    expect(await (await fetch("/undeclared-status")).json()).toEqual(ROW);
    const gone = await fetch("/users/u1", { method: "DELETE" });
    expect([gone.status, await gone.text()]).toEqual([204, ""]);
  });

  it("keeps keelson's error body on error statuses, whatever schema they declare", async () => {
    const response = await target().fetch("/error-status");
    expect([response.status, await response.json()]).toEqual([404, { status_code: 404, code: "NOT_FOUND", message: "no such user" }]);
  });

  it("answers 500 to a value missing a required field, and logs the route, status and field", async () => {
    const { fetch, logs } = target();
    const response = await fetch("/missing");
    // The 5xx body carries the request id (docs/errors.md), the one the response echoes.
    const requestId = response.headers.get("x-request-id");
    expect([response.status, await response.json()]).toEqual([500, { status_code: 500, code: "INTERNAL_ERROR", message: "Internal server error", request_id: requestId }]);
    const line = logs.lines().find((l) => l.includes("does not match its schema"));
    expect(line).toMatch(/response of GET \/missing \(200\) does not match its schema: id: /);
  });

  it("checks every constraint of the schema in development (the field's path in the error line)", async () => {
    const { fetch, logs } = target();
    expect((await fetch("/too-long")).status).toBe(500);
    expect(logs.lines().join("\n")).toMatch(/response of GET \/too-long \(200\) does not match its schema: name: /);
    logs.clear();
    expect((await fetch("/bad-item")).status).toBe(500);
    expect(logs.lines().join("\n")).toMatch(/response of GET \/bad-item \(200\) does not match its schema: data\.1\.id: /);
  });

  it("sends the validated value of a schema without JSON Schema, and refuses what it refuses", async () => {
    const { fetch, logs } = target();
    expect(await (await fetch("/validator-only")).json()).toEqual({ id: "v" });
    expect((await fetch("/validator-only-bad")).status).toBe(500);
    expect(logs.lines().join("\n")).toMatch(/response of GET \/validator-only-bad \(200\) does not match its schema: id: id: expected a string/);
  });

  it("shapes through an asynchronous schema", async () => {
    expect(await (await target().fetch("/async")).json()).toEqual({ id: "u1", name: "Ada", tags: ["x"] });
  });
});

/**
 * A row whose toJSON() counts its calls: JSON.stringify and the compiled serializer each call it
 * once per write, so the count is how many times the response body was written.
 */
function countedRow(): { row: typeof ROW & { toJSON(): typeof ROW }; writes: () => number } {
  let writes = 0;
  return { row: { ...ROW, toJSON: () => (writes++, ROW) }, writes: () => writes };
}

/** Routes whose value counts its writes; `last` is the count of the latest request's value. */
function countingRoutes(app: App): { last: () => number } {
  let latest = countedRow();
  const fresh = () => (latest = countedRow()).row;
  app.route(get("/counted/plain", { responses: { 200: User } }, () => fresh()))
    .route(get("/counted/async", { responses: { 200: User } }, async () => fresh()))
    .route(post("/counted/created", { responses: { 201: User } }, () => created(fresh(), "/users/u1")))
    .route(get("/counted/json", { responses: { 202: User } }, async () => json(fresh(), 202, { "x-extra": "1" })))
    .route(get("/counted/unshaped", () => fresh()))
    .route(get("/counted/unshaped-json", () => created(fresh())))
    .route(get("/counted/undeclared-status", { responses: { 200: User } }, () => json(fresh(), 203)));
  return { last: () => latest.writes() };
}

/** Each counted route: path, method, the status and body that must arrive. */
const COUNTED: readonly { path: string; method: string; status: number; body: unknown }[] = [
  { path: "/counted/plain", method: "GET", status: 200, body: { id: "u1", name: "Ada", tags: ["x"] } },
  { path: "/counted/async", method: "GET", status: 200, body: { id: "u1", name: "Ada", tags: ["x"] } },
  { path: "/counted/created", method: "POST", status: 201, body: { id: "u1", name: "Ada", tags: ["x"] } },
  { path: "/counted/json", method: "GET", status: 202, body: { id: "u1", name: "Ada", tags: ["x"] } },
  { path: "/counted/unshaped", method: "GET", status: 200, body: ROW },
  { path: "/counted/unshaped-json", method: "GET", status: 201, body: ROW },
  { path: "/counted/undeclared-status", method: "GET", status: 203, body: ROW },
];

for (const env of ["development", "production"] as const) {
  let counter: { last: () => number } | undefined;
  const buildCounting = (config: KConfig) => {
    const app = new App({ serviceName: "shapes", ...config, env });
    counter = countingRoutes(app);
    // An h3 middleware's json() reaches h3 without a route's handling: its body is written when h3 reads it.
    app.use((event) => (event.url.pathname === "/from-middleware" ? json({ from: "middleware" }, 203, { "x-extra": "m" }) : undefined));
    return app.route(get("/bigint", () => json({ n: 1n })))
      .route(get("/bigint-shaped", { responses: { 200: User } }, () => json({ n: 1n }, 203)));
  };
  describeBoth(`response bodies are written once (${env})`, buildCounting, (target) => {
    it("runs one serialization per response: the schema's where the status has one, else JSON.stringify", async () => {
      for (const { path, method, status, body } of COUNTED) {
        const response = await target().fetch(path, { method });
        expect([path, response.status, await response.json()]).toEqual([path, status, body]);
        expect([path, counter!.last()]).toEqual([path, 1]);
      }
      const made = await target().fetch("/counted/created", { method: "POST" });
      expect([made.headers.get("location"), made.headers.get("content-type")]).toEqual(["/users/u1", "application/json;charset=UTF-8"]);
      expect((await target().fetch("/counted/json")).headers.get("x-extra")).toBe("1");
    });

    it("sends json() returned by an h3 middleware (status, headers and body)", async () => {
      const response = await target().fetch("/from-middleware");
      expect([response.status, response.headers.get("x-extra"), response.headers.get("content-type"), await response.json()])
        .toEqual([203, "m", "application/json;charset=UTF-8", { from: "middleware" }]);
    });

    it("answers 500 to a value JSON.stringify cannot write, with the error line and the echoed request id", async () => {
      const { fetch, logs } = target();
      for (const path of ["/bigint", "/bigint-shaped"]) {
        const response = await fetch(path);
        const requestId = response.headers.get("x-request-id");
        expect(requestId).toBeTruthy();
        expect([response.status, await response.json()]).toEqual([500, { status_code: 500, code: "INTERNAL_ERROR", message: "Internal server error", request_id: requestId }]);
        expect(logs.lines().join("\n")).toContain(`GET ${path} failed: TypeError`);
        logs.clear();
      }
    });
  });
}

it("json() and created() are h3 HTTPResponses whose body is the value's JSON text", () => {
  const made = created({ id: "u1" }, "/users/u1");
  expect(made).toBeInstanceOf(HTTPResponse);
  expect([made.status, made.statusText, made.body, made.headers.get("location"), made.headers.get("content-type")])
    .toEqual([201, undefined, '{"id":"u1"}', "/users/u1", "application/json;charset=UTF-8"]);
  const { row, writes } = countedRow();
  const plain = json(row);
  expect([plain.status, plain.body, plain.body, writes()]).toEqual([200, JSON.stringify(ROW), JSON.stringify(ROW), 1]);
  expect(() => plain.headers.set("x-a", "1")).toThrow(/shared and frozen/);
});

it("in production: still only declared fields, a missing field is still a 500, other constraints are not re-checked", async () => {
  const logs = captureLogs("json");
  const app = build({ env: "production", logger: logs.logger });
  expect(await (await app.request("/users/u1")).json()).toEqual({ id: "u1", name: "Ada", tags: ["x"] });
  expect(await (await app.request("/too-long")).json()).toEqual({ id: "u1", name: "x".repeat(30) });
  expect((await app.request("/missing")).status).toBe(500);
  expect(JSON.stringify(logs.entries())).toContain("response of GET /missing (200) does not match its schema: \\\"id\\\" is required!");
});
