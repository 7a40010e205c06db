/**
 * h3's body readers inside keelson (docs/h3.md): `readBody`, `readValidatedBody`, `readRawBody`,
 * `readFormData`, `readMultipartFormData` and `proxyRequest` in keelson routes (with and without a
 * body schema) and on `app.httpEngine`, in-process and over a socket. Each expectation is h3's own
 * behaviour unless a comment names keelson's documented difference.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { proxyRequest, readBody, readFormData, readMultipartFormData, readRawBody, readValidatedBody } from "h3";
import { afterAll, beforeAll, expect, it } from "vitest";
import { z } from "zod";
import { App, idempotency, MemoryIdempotencyStore, post, put } from "../src/index.js";
import { describeBoth } from "./helpers/both.js";

const Book = z.object({ title: z.string() });

/** A real upstream for proxyRequest: answers with what it received. */
let upstream: Server;
let upstreamUrl = "";
beforeAll(async () => {
  upstream = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ method: req.method, type: req.headers["content-type"] ?? null, body: Buffer.concat(chunks).toString("utf8") }));
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => upstream.close(resolve));
});

const json = (value: unknown, extra: Record<string, string> = {}): RequestInit => ({
  method: "POST", headers: { "content-type": "application/json", ...extra }, body: JSON.stringify(value),
});

const once = () => idempotency({ store: new MemoryIdempotencyStore() });
const key = (k: string) => ({ "idempotency-key": k });

describeBoth("h3's body readers", (base) => {
  const app = new App({ ...base, bodyLimit: 1000 });
  app.route(post("/read-body", (ctx) => readBody(ctx.event)));
  app.route(post("/validated", async (ctx) => readValidatedBody(ctx.event, Book)));
  app.route(post("/schema-and-read-body", { body: Book }, async (ctx) => ({ keelson: ctx.body, h3: await readBody(ctx.event) })));
  app.route(post("/raw", (ctx) => readRawBody(ctx.event)));
  app.route(post("/form", async (ctx) => Object.fromEntries((await readFormData(ctx.event)).entries())));
  app.route(post("/multipart", async (ctx) => (await readMultipartFormData(ctx.event)).map((part) => ({
    name: part.name, filename: part.filename ?? null, data: new TextDecoder().decode(part.data),
  }))));
  app.route(post("/ctx-body", (ctx) => ({ body: ctx.body as unknown })));
  app.route(put("/proxy", (ctx) => proxyRequest(ctx.event, `${upstreamUrl}/echo`)));
  app.route(post("/proxy-schema", { body: Book }, (ctx) => proxyRequest(ctx.event, `${upstreamUrl}/echo`)));
  // idempotency() reads the body first (its fingerprint): the route's readers must still get it.
  app.route(post("/once/schema-and-read-body", { body: Book }, async (ctx) => ({ keelson: ctx.body, h3: await readBody(ctx.event) })).use(once()));
  app.route(post("/once/form", async (ctx) => Object.fromEntries((await readFormData(ctx.event)).entries())).use(once()));
  app.route(post("/once/small", { body: Book, bodyLimit: 20 }, (ctx) => ctx.body).use(once()));
  app.httpEngine.post("/engine/read-body", (event) => readBody(event));
  app.httpEngine.post("/engine/validated", (event) => readValidatedBody(event, Book));
  app.httpEngine.post("/engine/proxy", (event) => proxyRequest(event, `${upstreamUrl}/echo`));
  return app;
}, (target) => {
  it("readBody in a keelson post() reads the JSON body, as h3 does", async () => {
    const res = await target().fetch("/read-body", json({ title: "Dune" }));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ title: "Dune" });
  });

  it("readBody and ctx.body both see the body of a route with a body schema", async () => {
    const res = await target().fetch("/schema-and-read-body", json({ title: "Dune" }));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ keelson: { title: "Dune" }, h3: { title: "Dune" } });
  });

  it("readValidatedBody: 200 on valid input, 400 on invalid input (h3's status, keelson's error body)", async () => {
    const ok = await target().fetch("/validated", json({ title: "Dune" }));
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ title: "Dune" });
    const bad = await target().fetch("/validated", json({ title: 42 }));
    expect(bad.status).toBe(400);
    // keelson's documented difference: its KError body, never h3's message or data.
    const body = await bad.json();
    expect(body).toEqual({ code: "BAD_REQUEST", message: "Bad request", status_code: 400 });
  });

  it("readValidatedBody on app.httpEngine: the same 200 and 400", async () => {
    expect((await target().fetch("/engine/validated", json({ title: "Dune" }))).status).toBe(200);
    expect((await target().fetch("/engine/validated", json({ title: 42 }))).status).toBe(400);
    expect((await target().fetch("/engine/read-body", json({ a: 1 }))).status).toBe(200);
  });

  it("readRawBody and readBody read a text/plain body of a route without a body schema", async () => {
    const res = await target().fetch("/raw", { method: "POST", headers: { "content-type": "text/plain" }, body: "hello" });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("hello");
    const urlencoded = await target().fetch("/read-body", { method: "POST", body: new URLSearchParams({ a: "1" }) });
    expect(urlencoded.status).toBe(200);
    expect(await urlencoded.json()).toEqual({ a: "1" });
  });

  it("readFormData and readMultipartFormData read a multipart body in a keelson post()", async () => {
    const form = new FormData();
    form.append("title", "Dune");
    form.append("cover", new File(["png bytes"], "cover.png", { type: "image/png" }));
    const res = await target().fetch("/form", { method: "POST", body: form });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ title: "Dune", cover: {} });
    const parts = await target().fetch("/multipart", { method: "POST", body: form });
    expect(parts.status).toBe(200);
    expect(await parts.json()).toEqual([{ name: "title", filename: null, data: "Dune" }, { name: "cover", filename: "cover.png", data: "png bytes" }]);
  });

  it("ctx.body of a body that is not JSON is a 415 when the handler reads it", async () => {
    const res = await target().fetch("/ctx-body", { method: "POST", headers: { "content-type": "text/plain" }, body: "hello" });
    expect(res.status).toBe(415);
    expect((await res.json()).code).toBe("UNSUPPORTED_MEDIA_TYPE");
    expect((await target().fetch("/ctx-body", json({ a: 1 }))).status).toBe(200);
  });

  it("the route's bodyLimit holds for h3's readers: 413 by Content-Length and for a streamed body", async () => {
    const big = "x".repeat(2000);
    const declared = await target().fetch("/raw", { method: "POST", headers: { "content-type": "text/plain" }, body: big });
    expect(declared.status).toBe(413);
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(big));
        controller.close();
      },
    });
    const streamed = await target().fetch("/raw", { method: "POST", headers: { "content-type": "text/plain" }, body: stream, duplex: "half" } as RequestInit);
    expect(streamed.status).toBe(413);
  });

  it("proxyRequest forwards a POST's body to a real upstream, from a keelson route and from httpEngine", async () => {
    for (const [path, method] of [["/proxy", "PUT"], ["/engine/proxy", "POST"]] as const) {
      const res = await target().fetch(path, { ...json({ title: "Dune" }), method });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ method, type: "application/json", body: JSON.stringify({ title: "Dune" }) });
    }
    const text = await target().fetch("/proxy", { method: "PUT", headers: { "content-type": "text/plain" }, body: "plain words" });
    expect(await text.json()).toEqual({ method: "PUT", type: "text/plain", body: "plain words" });
  });

  it("proxyRequest forwards the body keelson validated (a route with a body schema)", async () => {
    const res = await target().fetch("/proxy-schema", json({ title: "Dune" }));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ method: "POST", type: "application/json", body: JSON.stringify({ title: "Dune" }) });
  });

  it("after idempotency() read the body: ctx.body, readBody and readFormData see it; a repeat replays; the route's bodyLimit still holds", async () => {
    const first = await target().fetch("/once/schema-and-read-body", json({ title: "Dune" }, key("k1")));
    expect(first.status).toBe(200);
    expect(await first.json()).toEqual({ keelson: { title: "Dune" }, h3: { title: "Dune" } });
    const form = await target().fetch("/once/form", { method: "POST", headers: key("k2"), body: new URLSearchParams({ a: "1" }) });
    expect(form.status).toBe(200);
    expect(await form.json()).toEqual({ a: "1" });
    const again = await target().fetch("/once/form", { method: "POST", headers: key("k2"), body: new URLSearchParams({ a: "1" }) });
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(await again.json()).toEqual({ a: "1" });
    // Streamed (no Content-Length): idempotency() reads it under its own 1 MiB; the route's 20 bytes still refuse it.
    const chunked = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(JSON.stringify({ title: "x".repeat(40) })));
        controller.close();
      },
    });
    const big = await target().fetch("/once/small", { method: "POST", headers: { "content-type": "application/json", ...key("k3") }, body: chunked, duplex: "half" } as RequestInit);
    expect(big.status).toBe(413);
  });
});
