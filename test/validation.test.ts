import { request as httpRequest } from "node:http";
import { connect } from "node:net";
import { setTimeout as delay } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { App, del, get, post, put, type KConfig } from "../src/index.js";
import { MAX_JSON_DEPTH, exceedsDepth } from "../src/http/body.js";
import { MAX_FIELD_ERRORS } from "../src/http/validate.js";
import { describeBoth } from "./helpers/both.js";
import { captureLogs } from "./helpers/logs.js";
import { listenOn, type Listening } from "./helpers/listen.js";

const JSON_HEADERS = { "content-type": "application/json" };

const Author = z.object({ name: z.string().min(1), born: z.number().int().optional() }).meta({ id: "VAuthor" });
const Book = z.object({ title: z.string().min(1), author: Author, tags: z.array(z.string()).max(3).optional() });
const Query = z.object({
  limit: z.number().int().max(100).optional(),
  ratio: z.number().optional(),
  flag: z.boolean().optional(),
  ids: z.array(z.number().int()).optional(),
  words: z.array(z.string()).optional(),
  name: z.string().optional(),
  maybe: z.union([z.number(), z.boolean()]).optional(),
  nothing: z.number().nullable().optional(),
});
// The same object with an id: Standard JSON Schema returns it as `$ref` + `$defs`.
const QueryWithId = Query.meta({ id: "VQuery" });
// A username is free when no other request holds it: a validator that must await.
const taken = new Set(["root"]);
const Signup = z.object({
  user: z.string().refine(async (name) => {
    await new Promise((resolve) => setTimeout(resolve, 5));
    return !taken.has(name);
  }, "already taken"),
});

function buildApp(base: KConfig): App {
  const app = new App(base);
  app.route(post("/books", { body: Book }, (ctx) => ({ received: ctx.body })));
  app.route(post("/echo", (ctx) => ({ received: ctx.body ?? null })));
  app.route(post("/optional", { body: Book.optional() }, (ctx) => ({ empty: ctx.body === undefined })));
  app.route(get("/search", { query: Query }, (ctx) => ctx.query));
  app.route(get("/search-id", { query: QueryWithId }, (ctx) => ctx.query));
  app.route(get("/items/:id/:slot", { params: z.object({ id: z.number().int().positive(), slot: z.enum(["a", "b"]) }) }, (ctx) => ctx.params));
  app.route(post("/signup", { body: Signup }, (ctx) => ctx.body));
  app.route(post("/shelves/:user", { params: Signup, body: Book }, (ctx) => ({ user: ctx.params.user, title: ctx.body.title })));
  app.route(put("/deep", { body: z.array(z.unknown()) }, (ctx) => ({ length: ctx.body.length })));
  app.route(put("/strings", { body: z.array(z.string()) }, (ctx) => ({ length: ctx.body.length })));
  app.route(del("/things/:id", (ctx) => ({ deleted: ctx.params.id })));
  return app;
}

describeBoth("validation", buildApp, (t) => {
  const send = async (path: string, init?: RequestInit) => {
    const res = await t().fetch(path, init);
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const postJSON = (path: string, body: string, headers: Record<string, string> = JSON_HEADERS) =>
    send(path, { method: "POST", headers, body });

  it("hands the handler the parsed body when it matches", async () => {
    const book = { title: "Dune", author: { name: "Frank Herbert", born: 1920 }, tags: ["sf"] };
    expect(await postJSON("/books", JSON.stringify(book))).toEqual({ status: 200, body: { received: book } });
  });

  it("answers malformed JSON with 400 INVALID_JSON, before any schema runs", async () => {
    for (const raw of ["{", '{"title":}', "undefined", "{'a':1}", "[1,]", "\u00a0{}"]) {
      const res = await postJSON("/books", raw);
      expect(res).toEqual({ status: 400, body: { status_code: 400, code: "INVALID_JSON", message: "Malformed JSON body" } });
    }
  });

  it("answers a schema violation with 422 naming each failing field by part and path", async () => {
    const res = await postJSON("/books", JSON.stringify({ title: "", author: { born: 1.5 }, tags: ["a", "b", "c", "d"] }));
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ status_code: 422, code: "VALIDATION_ERROR", message: "Validation failed" });
    const errors = res.body.errors as { path: string; message: string }[];
    expect(errors.map((e) => e.path).toSorted()).toEqual(["body.author.born", "body.author.name", "body.tags", "body.title"]);
    for (const error of errors) expect(error.message).toEqual(expect.any(String));
  });

  it("reports a missing or wrongly typed body as the whole `body`", async () => {
    const empty = await send("/books", { method: "POST", headers: JSON_HEADERS });
    expect(empty.status).toBe(422);
    expect(empty.body.errors).toEqual([{ path: "body", message: expect.stringContaining("expected object") }]);
    const array = await postJSON("/books", "[]");
    expect(array.body.errors).toEqual([{ path: "body", message: expect.stringContaining("expected object") }]);
  });

  it("lets an optional body schema accept no body at all", async () => {
    expect(await send("/optional", { method: "POST" })).toEqual({ status: 200, body: { empty: true } });
    expect((await postJSON("/optional", JSON.stringify({ title: "x" }))).status).toBe(422);
  });

  it("answers bodies that are not JSON with 415, whatever the schema", async () => {
    for (const type of ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/xml", "text/json"]) {
      const res = await postJSON("/books", '{"title":"x"}', { "content-type": type });
      expect([res.status, res.body.code]).toEqual([415, "UNSUPPORTED_MEDIA_TYPE"]);
    }
  });

  it("takes JSON media types with parameters and +json suffixes, and bodies with no Content-Type", async () => {
    const book = { title: "x", author: { name: "y" } };
    for (const type of ["application/json; charset=utf-8", "APPLICATION/JSON", "application/problem+json", "application/vnd.api+json"]) {
      expect((await postJSON("/books", JSON.stringify(book), { "content-type": type })).status).toBe(200);
    }
    const untyped = await t().fetch("/books", { method: "POST", body: new TextEncoder().encode(JSON.stringify(book)) });
    expect(untyped.status).toBe(200);
  });

  it("coerces query strings to the schema's numbers, booleans and arrays", async () => {
    const res = await send("/search?limit=10&ratio=-0.5e1&flag=false&ids=1&ids=2&words=solo&name=42&maybe=true&nothing=");
    expect(res).toEqual({
      status: 200,
      body: { limit: 10, ratio: -5, flag: false, ids: [1, 2], words: ["solo"], name: "42", maybe: true, nothing: null },
    });
  });

  it("coerces the same way when the query schema has an id (a $ref root)", async () => {
    expect(await send("/search-id?limit=7&flag=true&ids=3")).toEqual({ status: 200, body: { limit: 7, flag: true, ids: [3] } });
  });

  it("keeps values that do not parse as strings, so the 422 names them", async () => {
    for (const [query, path] of [["limit=ten", "query.limit"], ["limit=0x10", "query.limit"], ["limit=", "query.limit"], ["limit=1.5", "query.limit"], ["limit=101", "query.limit"], ["flag=yes", "query.flag"], ["flag=1", "query.flag"], ["ids=1&ids=x", "query.ids.1"]] as const) {
      const res = await send(`/search?${query}`);
      expect(res.status, query).toBe(422);
      expect((res.body.errors as { path: string }[]).map((e) => e.path), query).toEqual([path]);
    }
  });

  it("uses the last value of a repeated key for a scalar", async () => {
    expect((await send("/search?limit=1&limit=2")).body).toEqual({ limit: 2 });
  });

  it("validates and coerces path parameters", async () => {
    expect(await send("/items/12/b")).toEqual({ status: 200, body: { id: 12, slot: "b" } });
    const bad = await send("/items/-3/c");
    expect(bad.status).toBe(422);
    expect((bad.body.errors as { path: string }[]).map((e) => e.path).toSorted()).toEqual(["params.id", "params.slot"]);
    expect((await send("/items/%E0%A4%A/a")).status).toBe(400);
  });

  it("awaits async schemas, both ways", async () => {
    expect(await postJSON("/signup", JSON.stringify({ user: "ada" }))).toEqual({ status: 200, body: { user: "ada" } });
    expect(await postJSON("/signup", JSON.stringify({ user: "root" }))).toMatchObject({
      status: 422, body: { errors: [{ path: "body.user", message: "already taken" }] },
    });
  });

  it("awaits an async params schema together with the body: whichever fails first answers, no rejection is left unhandled", async () => {
    const book = JSON.stringify({ title: "Emma", author: { name: "Jane" } });
    expect(await postJSON("/shelves/ada", book)).toEqual({ status: 200, body: { user: "ada", title: "Emma" } });
    expect(await postJSON("/shelves/root", book)).toMatchObject({ status: 422, body: { errors: [{ path: "params.user" }] } });
    expect(await postJSON("/shelves/ada", "{}")).toMatchObject({ status: 422, body: { errors: [{ path: "body.title" }, { path: "body.author" }] } });
    // The body fails at once, the params 5 ms later: the later rejection is observed, not unhandled
    // (vitest fails the run on an unhandled rejection).
    expect((await postJSON("/shelves/root", book, { "content-type": "text/plain" })).status).toBe(415);
    expect((await postJSON("/shelves/root", "{oops")).status).toBe(400);
    await new Promise((resolve) => setTimeout(resolve, 20));
  });

  it("rejects 100k levels of [[[…]]] with a 4xx, with and without a schema", async () => {
    const deep = "[".repeat(100_000) + "]".repeat(100_000);
    for (const [method, path] of [["POST", "/echo"], ["PUT", "/deep"], ["POST", "/books"]] as const) {
      const res = await send(path, { method, headers: JSON_HEADERS, body: deep });
      expect(res, path).toEqual({ status: 400, body: { status_code: 400, code: "INVALID_JSON", message: `JSON body is nested deeper than ${MAX_JSON_DEPTH} levels` } });
    }
    const objects = '{"a":'.repeat(50_000) + "1" + "}".repeat(50_000);
    expect((await postJSON("/echo", objects)).status).toBe(400);
    // The service is unharmed.
    expect((await postJSON("/echo", "[[1]]")).body).toEqual({ received: [[1]] });
  });

  it(`accepts nesting up to ${MAX_JSON_DEPTH} levels and counts no brackets inside strings`, async () => {
    const atLimit = "[".repeat(MAX_JSON_DEPTH) + "]".repeat(MAX_JSON_DEPTH);
    expect((await send("/deep", { method: "PUT", headers: JSON_HEADERS, body: atLimit })).status).toBe(200);
    const oneMore = "[".repeat(MAX_JSON_DEPTH + 1) + "]".repeat(MAX_JSON_DEPTH + 1);
    expect((await send("/deep", { method: "PUT", headers: JSON_HEADERS, body: oneMore })).status).toBe(400);
    const inString = JSON.stringify(["[".repeat(1000), '\\"[[[', "{".repeat(1000)]);
    expect(await send("/deep", { method: "PUT", headers: JSON_HEADERS, body: inString })).toEqual({ status: 200, body: { length: 3 } });
  });

  it(`lists at most ${MAX_FIELD_ERRORS} failing fields`, async () => {
    const many = await send("/strings", { method: "PUT", headers: JSON_HEADERS, body: JSON.stringify(Array.from({ length: 5000 }, () => 1)) });
    expect(many.status).toBe(422);
    const errors = many.body.errors as { path: string }[];
    expect(errors.length).toBe(MAX_FIELD_ERRORS);
    expect(errors[0]!.path).toBe("body.0");
  });

  it("answers a body over the default 1 MiB limit with 413 by Content-Length", async () => {
    const res = await postJSON("/echo", JSON.stringify("x".repeat(1024 * 1024)));
    expect([res.status, res.body.code]).toEqual([413, "PAYLOAD_TOO_LARGE"]);
  });

  it("reads no body for a DELETE that sends none", async () => {
    expect(await send("/things/7", { method: "DELETE" })).toEqual({ status: 200, body: { deleted: "7" } });
  });
});

/** Sends a chunked body (no Content-Length) over a raw socket; resolves with status and body. */
function sendChunked(url: string, chunks: number, chunkSize: number): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: "POST", headers: { "content-type": "application/json", "transfer-encoding": "chunked" } }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    // Set by the response event, read by the write loop: the server may answer mid-upload.
    const state = { answered: false, sent: 0 };
    req.on("response", () => (state.answered = true));
    // After an early answer the server closes: the write side may then see EPIPE/ECONNRESET.
    req.on("error", (error) => (state.answered ? undefined : reject(error)));
    const chunk = `"${"x".repeat(chunkSize - 2)}"`;
    const pump = () => {
      for (; state.sent < chunks; state.sent++) {
        if (state.answered) return;
        if (!req.write(chunk)) {
          state.sent++;
          return void req.once("drain", pump);
        }
      }
      if (!state.answered) req.end();
    };
    pump();
  });
}

describe("chunked, oversized and split bodies (real socket)", () => {
  let server: Listening;
  beforeAll(async () => {
    const app = new App({ port: 0, logger: captureLogs().logger, bodyLimit: 256 * 1024 });
    app.route(post("/echo", (ctx) => ({ length: JSON.stringify(ctx.body).length })));
    app.route(post("/echo-value", (ctx) => ctx.body as object));
    server = await listenOn(app);
  });
  afterAll(async () => {
    await server.stop();
  });

  it("answers 413 without reading the whole stream, and the server keeps serving", async () => {
    const res = await sendChunked(`${server.url}/echo`, 4096, 16 * 1024);
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body)).toMatchObject({ code: "PAYLOAD_TOO_LARGE" });
    const ok = await server.fetch("/echo", { method: "POST", headers: JSON_HEADERS, body: JSON.stringify("y".repeat(1000)) });
    expect(await ok.json()).toEqual({ length: 1002 });
  });

  it("reads a chunked body under the limit", async () => {
    const res = await sendChunked(`${server.url}/echo`, 1, 100);
    expect(res).toEqual({ status: 200, body: JSON.stringify({ length: 100 }) });
  });

  it("joins a body that arrives in several reads, in order", async () => {
    const value = { parts: ["first", "second", "third"], n: 3 };
    const text = JSON.stringify(value);
    const cuts = [0, 7, 19, text.length];
    const socket = connect(server.port, "127.0.0.1");
    await new Promise<void>((resolve) => socket.once("connect", resolve));
    let answer = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => (answer += chunk));
    socket.write(`POST /echo-value HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${text.length}\r\nConnection: close\r\n\r\n`);
    // Each piece is its own read on the server: the socket's writes are apart in time.
    for (let i = 0; i + 1 < cuts.length; i++) {
      await delay(30);
      socket.write(text.slice(cuts[i], cuts[i + 1]));
    }
    await new Promise<void>((resolve) => socket.once("close", () => resolve()));
    expect(answer).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4))).toEqual(value);
  });
});

/** Sends a head announcing `declared` body bytes, then only `partial`, then closes: a client that gave up mid-body. */
function sendTruncated(port: number, declared: number, partial: string, mode: "half-close" | "destroy"): Promise<void> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1", () => {
      socket.write(`POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${declared}\r\n\r\n${partial}`);
      // Give the server time to start reading the body before the client goes away.
      setTimeout(() => (mode === "half-close" ? socket.end() : socket.destroy()), 50);
    });
    socket.on("data", () => {});
    socket.on("error", () => {});
    socket.on("close", () => resolve());
  });
}

describe("a client that closes mid-body (real socket)", () => {
  it.each(["half-close", "destroy"] as const)("%s: a 400 warn line, no ERROR line and no 5xx observation", async (mode) => {
    const logs = captureLogs("json");
    const statuses: number[] = [];
    const app = new App({ port: 0, logger: logs.logger });
    app.setMetricsCollector({ observeRequest: (_method, _route, status) => void statuses.push(status) });
    app.route(post("/echo", (ctx) => ctx.body));
    const server = await listenOn(app);
    try {
      await sendTruncated(server.port, 100, '{"title":"Du', mode);
      const deadline = Date.now() + 5000;
      while (statuses.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(statuses).toEqual([400]);
      const entries = logs.entries();
      expect(entries.filter((entry) => entry.level === "error")).toEqual([]);
      expect(entries.find((entry) => entry.path === "/echo")).toMatchObject({ level: "warn", method: "POST", status: 400 });
      const ok = await server.fetch("/echo", { method: "POST", headers: JSON_HEADERS, body: "[1]" });
      expect(await ok.json()).toEqual([1]);
    } finally {
      await server.stop();
    }
  });
});

describe("invalid path parameters (real socket)", () => {
  it("are answered with a 422 before the body has arrived, and the connection stays usable", async () => {
    const app = new App({ port: 0, logger: captureLogs("json").logger });
    app.route(post("/items/:id", { params: z.object({ id: z.number().int().positive() }), body: z.object({ n: z.number() }) }, (ctx) => ctx.params));
    const server = await listenOn(app);
    const socket = connect(server.port, "127.0.0.1");
    try {
      // Content-Length promises 13 bytes; only 1 is sent until the answer is in.
      socket.write("POST /items/-3 HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{");
      const head = await new Promise<string>((resolve, reject) => {
        let data = "";
        socket.on("data", (chunk: Buffer) => {
          data += chunk.toString("latin1");
          if (data.includes("\r\n\r\n")) resolve(data);
        });
        socket.on("error", reject);
        setTimeout(() => reject(new Error(`no answer before the body was complete; got ${JSON.stringify(data)}`)), 5000);
      });
      expect(head).toMatch(/^HTTP\/1\.1 422 /);
      const ok = await server.fetch("/items/7", { method: "POST", headers: JSON_HEADERS, body: '{"n":1}' });
      expect(await ok.json()).toEqual({ id: 7 });
    } finally {
      socket.destroy();
      await server.stop();
    }
  });
});

describe("exceedsDepth", () => {
  it.each([
    ["[]", 1, false],
    ["[[]]", 1, true],
    ['{"a":[{"b":1}]}', 3, false],
    ['{"a":[{"b":1}]}', 2, true],
    ['"[[[[[["', 1, false],
    ['["\\"[[[["]', 1, false],
    ['[1,[2],[3]]', 2, false],
  ])("%s with max %i → %s", (text, max, expected) => {
    // Padded: bodies no longer than `max` are never scanned.
    expect(exceedsDepth(text + " ".repeat(max), max)).toBe(expected);
  });
});
