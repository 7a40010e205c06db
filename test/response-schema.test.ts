// Response schemas decide what leaves: undeclared fields are never sent, and a value that breaks
// the declared schema is a 500 whose error line names the route, the status and the field.
// Every case through app.request() and over a real socket.
import type { StandardSchemaV1 } from "@standard-schema/spec";
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

it("in production: still only declared fields, a missing field is still a 500, other constraints are not re-checked", async () => {
  const logs = captureLogs("json");
  const app = build({ env: "production", logger: logs.logger });
  expect(await (await app.request("/users/u1")).json()).toEqual({ id: "u1", name: "Ada", tags: ["x"] });
  expect(await (await app.request("/too-long")).json()).toEqual({ id: "u1", name: "x".repeat(30) });
  expect((await app.request("/missing")).status).toBe(500);
  expect(JSON.stringify(logs.entries())).toContain("response of GET /missing (200) does not match its schema: \\\"id\\\" is required!");
});
