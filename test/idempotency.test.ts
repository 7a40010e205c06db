// idempotency() in-process: replays byte for byte, 409 while running, 422 on another payload, what
// is not kept (5xx, validation failures, oversize bodies), key limits, scopes, leases on an
// injected clock, the OpenAPI contract, metrics and the request log, registration refusals.
import { describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { apiKeyAuth } from "../src/entries/auth.js";
import { createPrometheus } from "../src/entries/metrics.js";
import type { IpcHandler, IpcRequestType } from "../src/cluster/ipc.js";
import { installIdempotency } from "../src/idempotency/primary.js";
import { idempotencyBegin, idempotencyComplete } from "../src/idempotency/ipc.js";
import { sse, websocket } from "../src/streams/routes.js";
import { captureLogs } from "./helpers/logs.js";
import {
  App, IdempotencyStoreFullError, MemoryIdempotencyStore, buildOpenAPIDocument, conflict, created, get, idempotency, json, post,
  type IdempotencyOptions, type IdempotencyStore, type MetricsCollector,
} from "../src/index.js";

const T0 = 1_800_000_000_000;

function setup(options: IdempotencyOptions = {}, handler?: (body: unknown) => unknown) {
  const clock = { now: T0 };
  const logs = captureLogs("json");
  const app = new App({ logger: logs.logger });
  const outcomes: string[] = [];
  app.setMetricsCollector({ observeRequest() {}, observeIdempotency: (_route, outcome) => void outcomes.push(outcome) } satisfies MetricsCollector);
  let runs = 0;
  const Book = z.object({ title: z.string().min(1) });
  app.route(post("/books", { body: Book }, (ctx) => {
    runs++;
    return handler ? handler(ctx.body) : created({ id: runs, title: ctx.body.title }, `/books/${runs}`);
  }).use(idempotency({ clock: () => clock.now, store: new MemoryIdempotencyStore(), ...options })));
  return { app, clock, logs, outcomes, runs: () => runs };
}

const send = (app: App, key: string | undefined, body: unknown, headers: Record<string, string> = {}) => app.request("/books", {
  method: "POST",
  headers: { "content-type": "application/json", ...(key === undefined ? {} : { "idempotency-key": key }), ...headers },
  body: JSON.stringify(body),
});

describe("idempotency", () => {
  it("replays the first response byte for byte, marked, without running the handler again", async () => {
    const { app, runs, outcomes, logs } = setup();
    const first = await send(app, "k-1", { title: "Dune" });
    const firstBody = Buffer.from(await first.arrayBuffer());
    expect(first.status).toBe(201);
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    const again = await send(app, "k-1", { title: "Dune" });
    expect(again.status).toBe(201);
    expect(Buffer.from(await again.arrayBuffer()).equals(firstBody)).toBe(true);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.headers.get("location")).toBe("/books/1");
    expect(again.headers.get("content-type")).toBe(first.headers.get("content-type"));
    expect(runs()).toBe(1);
    expect(outcomes).toEqual(["stored", "replayed"]);
    const lines = logs.entries().filter((entry) => entry.path === "/books");
    expect(lines.map((line) => line.idempotency)).toEqual(["stored", "replayed"]);
  });

  it("counts outcomes in keelson_idempotency_requests_total{route,outcome} of createPrometheus()", async () => {
    const app = new App({ logger: captureLogs().logger });
    const prometheus = createPrometheus();
    app.use(prometheus);
    app.route(post("/orders/:id", (ctx) => created({ id: ctx.params.id })).use(idempotency({ store: new MemoryIdempotencyStore() })));
    const order = (path: string, key: string, body: string) => app.request(path, { method: "POST", headers: { "idempotency-key": key, "content-type": "application/json" }, body });
    expect((await order("/orders/1", "a", "{}")).status).toBe(201);
    expect((await order("/orders/1", "a", "{}")).status).toBe(201);
    expect((await order("/orders/1", "a", "{\"x\":1}")).status).toBe(422);
    expect((await order("/orders/2", "bad key", "{}")).status).toBe(400);
    const text = await prometheus.readExposition();
    expect(text).toContain('keelson_idempotency_requests_total{route="/orders/:id",outcome="stored"} 1');
    expect(text).toContain('keelson_idempotency_requests_total{route="/orders/:id",outcome="replayed"} 1');
    expect(text).toContain('keelson_idempotency_requests_total{route="/orders/:id",outcome="mismatch"} 1');
    expect(text).toContain('keelson_idempotency_requests_total{route="/orders/:id",outcome="invalid"} 1');
  });

  it("accepts the draft's Structured Field form of the key as the same key", async () => {
    const { app, runs } = setup();
    await send(app, "abc", { title: "Dune" });
    const again = await send(app, '"abc"', { title: "Dune" });
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(runs()).toBe(1);
  });

  it("answers 422 IDEMPOTENCY_KEY_REUSED to the same key with another payload, and runs nothing", async () => {
    const { app, runs, outcomes } = setup();
    await send(app, "k-2", { title: "Dune" });
    const other = await send(app, "k-2", { title: "Emma" });
    expect(other.status).toBe(422);
    expect((await other.json()).code).toBe("IDEMPOTENCY_KEY_REUSED");
    expect(runs()).toBe(1);
    expect(outcomes).toEqual(["stored", "mismatch"]);
  });

  it("answers 409 IDEMPOTENCY_KEY_IN_USE with Retry-After while the first request runs, then replays", async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const { app, runs, outcomes } = setup({}, async (body) => (await gate, created(body)));
    const first = send(app, "k-3", { title: "Dune" });
    // The first request holds the key once its handler runs.
    await expect.poll(runs).toBe(1);
    const during = await send(app, "k-3", { title: "Dune" });
    expect(during.status).toBe(409);
    expect(during.headers.get("retry-after")).toBe("1");
    expect((await during.json()).code).toBe("IDEMPOTENCY_KEY_IN_USE");
    // Another payload while it runs is a mismatch, not a conflict.
    expect((await send(app, "k-3", { title: "Emma" })).status).toBe(422);
    release();
    expect((await first).status).toBe(201);
    expect((await send(app, "k-3", { title: "Dune" })).headers.get("idempotent-replayed")).toBe("true");
    expect(runs()).toBe(1);
    expect(outcomes).toEqual(["conflict", "mismatch", "stored", "replayed"]);
  });

  it("keeps nothing after a 5xx, thrown or returned: the retry runs", async () => {
    let fail: "throw" | "return" | undefined = "throw";
    const { app, runs, outcomes } = setup({}, (body) => {
      if (fail === "throw") throw new Error("database down");
      if (fail === "return") return json({ busy: true }, 503);
      return created(body);
    });
    expect((await send(app, "k-4", { title: "Dune" })).status).toBe(500);
    fail = "return";
    expect((await send(app, "k-4", { title: "Dune" })).status).toBe(503);
    fail = undefined;
    const ok = await send(app, "k-4", { title: "Dune" });
    expect(ok.status).toBe(201);
    expect(ok.headers.get("idempotent-replayed")).toBeNull();
    expect(runs()).toBe(3);
    expect(outcomes).toEqual(["released", "released", "stored"]);
  });

  it("keeps a 4xx the handler threw, and replays it", async () => {
    const app = new App({ logger: captureLogs().logger });
    let tries = 0;
    app.route(post("/pay", () => {
      tries++;
      throw conflict("already paid");
    }).use(idempotency({ store: new MemoryIdempotencyStore() })));
    const init = { method: "POST", headers: { "idempotency-key": "p-1" } };
    const first = await app.request("/pay", init);
    const second = await app.request("/pay", init);
    expect([first.status, second.status]).toEqual([409, 409]);
    expect(await second.text()).toBe(JSON.stringify({ status_code: 409, code: "CONFLICT", message: "already paid" }));
    expect(second.headers.get("idempotent-replayed")).toBe("true");
    expect(tries).toBe(1);
  });

  it("keeps nothing when validation refused the request: a corrected request may use the key", async () => {
    const { app, runs, outcomes } = setup();
    const bad = await send(app, "k-5", { title: "" });
    expect(bad.status).toBe(422);
    expect((await bad.json()).code).toBe("VALIDATION_ERROR");
    const malformed = await app.request("/books", { method: "POST", headers: { "idempotency-key": "k-5", "content-type": "application/json" }, body: "{" });
    expect(malformed.status).toBe(400);
    const good = await send(app, "k-5", { title: "Dune" });
    expect(good.status).toBe(201);
    expect(runs()).toBe(1);
    expect(outcomes).toEqual(["released", "released", "stored"]);
  });

  it("lets a request without a key run unguarded, unless required: then 400", async () => {
    const open = setup();
    expect((await send(open.app, undefined, { title: "Dune" })).status).toBe(201);
    expect((await send(open.app, undefined, { title: "Dune" })).status).toBe(201);
    expect(open.runs()).toBe(2);
    const strict = setup({ required: true });
    const refused = await send(strict.app, undefined, { title: "Dune" });
    expect(refused.status).toBe(400);
    expect((await refused.json()).code).toBe("IDEMPOTENCY_KEY_INVALID");
    expect(strict.runs()).toBe(0);
    expect(strict.outcomes).toEqual(["invalid"]);
  });

  it("refuses keys over maxKeyLength or with characters outside printable ASCII (400), and takes one at the limit", async () => {
    const { app, runs, outcomes } = setup({ maxKeyLength: 8 });
    expect((await send(app, "x".repeat(8), { title: "Dune" })).status).toBe(201);
    const long = await send(app, "x".repeat(9), { title: "Dune" });
    expect(long.status).toBe(400);
    expect((await long.json()).code).toBe("IDEMPOTENCY_KEY_INVALID");
    expect((await send(app, "a b", { title: "Dune" })).status).toBe(400);
    expect((await send(app, 'a\\b', { title: "Dune" })).status).toBe(400);
    expect((await send(app, '""', { title: "Dune" })).status).toBe(400);
    expect(runs()).toBe(1);
    expect(outcomes).toEqual(["stored", "invalid", "invalid", "invalid", "invalid"]);
    // The default limit is 255, as Stripe's.
    const plain = setup();
    expect((await send(plain.app, "k".repeat(255), { title: "Dune" })).status).toBe(201);
    expect((await send(plain.app, "k".repeat(256), { title: "Dune" })).status).toBe(400);
  });

  it("refuses a body over maxBodyBytes with 413 before anything runs", async () => {
    const { app, runs } = setup({ maxBodyBytes: 20 });
    expect((await send(app, "b-1", { title: "x".repeat(5) })).status).toBe(201);
    const big = await send(app, "b-2", { title: "x".repeat(20) });
    expect(big.status).toBe(413);
    expect(runs()).toBe(1);
  });

  it("keeps a response over maxResponseBytes without its body: the replay has status and headers only", async () => {
    const { app, runs, outcomes } = setup({ maxResponseBytes: 30 }, (body) => created({ ...(body as object), padding: "p".repeat(40) }, "/books/9"));
    expect((await send(app, "o-1", { title: "Dune" })).status).toBe(201);
    const again = await send(app, "o-1", { title: "Dune" });
    expect(again.status).toBe(201);
    expect(again.headers.get("location")).toBe("/books/9");
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(await again.text()).toBe("");
    expect(runs()).toBe(1);
    expect(outcomes).toEqual(["oversize", "replayed"]);
  });

  it("keeps two principals' keys apart: the same key runs once for each, and neither sees the other's response", async () => {
    const logs = captureLogs();
    const app = new App({ logger: logs.logger });
    const store = new MemoryIdempotencyStore();
    let runs = 0;
    app.group("/api", apiKeyAuth({ keys: { alice: "alice-key-0123456789", bob: "bob-key-0123456789ab" } }), idempotency({ store }))
      .route(post("/orders", (ctx) => created({ order: ++runs, by: ctx.auth?.subject })));
    const as = (apiKey: string) => app.request("/api/orders", { method: "POST", headers: { "x-api-key": apiKey, "idempotency-key": "same" } });
    const alice = await (await as("alice-key-0123456789")).json();
    const bob = await (await as("bob-key-0123456789ab")).json();
    expect(alice).toEqual({ order: 1, by: "alice" });
    expect(bob).toEqual({ order: 2, by: "bob" });
    expect(await (await as("alice-key-0123456789")).json()).toEqual(alice);
    expect(await (await as("bob-key-0123456789ab")).json()).toEqual(bob);
    expect(runs).toBe(2);
  });

  it("keeps routes apart: one key on two routes is two keys", async () => {
    const app = new App({ logger: captureLogs().logger });
    const store = new MemoryIdempotencyStore();
    app.use(idempotency({ store }));
    app.route(post("/a", () => ({ route: "a" }))).route(post("/b", () => ({ route: "b" }))).route(get("/c", () => ({ route: "c" })));
    const init = { method: "POST", headers: { "idempotency-key": "k" } };
    expect(await (await app.request("/a", init)).json()).toEqual({ route: "a" });
    expect(await (await app.request("/b", init)).json()).toEqual({ route: "b" });
    // GET passes through an App-wide idempotency(), key or not.
    expect((await app.request("/c", { headers: { "idempotency-key": "k" } })).headers.get("idempotent-replayed")).toBeNull();
  });

  it("tells requests to one route apart by path and query, whichever request came between", async () => {
    const app = new App({ logger: captureLogs().logger });
    let runs = 0;
    app.use(idempotency({ store: new MemoryIdempotencyStore() }));
    app.route(post("/items/:id", (ctx) => ({ id: ctx.params.id, run: ++runs })));
    const postTo = (path: string, key: string) => app.request(path, { method: "POST", headers: { "idempotency-key": key } });
    expect(await (await postTo("/items/1", "k")).json()).toEqual({ id: "1", run: 1 });
    expect(await (await postTo("/items/2", "j")).json()).toEqual({ id: "2", run: 2 });
    expect((await postTo("/items/2", "k")).status).toBe(422);
    expect((await postTo("/items/1?x=1", "k")).status).toBe(422);
    const again = await postTo("/items/1", "k");
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(await again.json()).toEqual({ id: "1", run: 1 });
    expect(runs).toBe(2);
  });

  it("frees a key whose request never finished once its lease ends, and ignores the late finisher", async () => {
    let hang = true;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const { app, clock, runs } = setup({ leaseMs: 5000 }, async (body) => {
      if (hang) await gate;
      return created({ ...(body as object), run: runs() });
    });
    const stuck = send(app, "l-1", { title: "Dune" });
    await expect.poll(runs).toBe(1);
    clock.now += 4999;
    expect((await send(app, "l-1", { title: "Dune" })).status).toBe(409);
    clock.now += 1;
    hang = false;
    const retry = await send(app, "l-1", { title: "Dune" });
    expect(retry.status).toBe(201);
    expect(await retry.json()).toEqual({ title: "Dune", run: 2 });
    // The first request finishes after losing its claim: the retry's response stays the kept one.
    release();
    expect((await stuck).status).toBe(201);
    expect(await (await send(app, "l-1", { title: "Dune" })).json()).toEqual({ title: "Dune", run: 2 });
  });

  it("keeps the claims of two middleware sharing a store and a name apart after a lease ends", async () => {
    const store = new MemoryIdempotencyStore();
    const clock = { now: T0 };
    const guard = () => idempotency({ store, name: "shared", leaseMs: 5000, clock: () => clock.now });
    const app = new App({ logger: captureLogs().logger });
    let failFirst!: () => void;
    const firstFails = new Promise<void>((resolve) => (failFirst = resolve));
    let finishSecond!: () => void;
    const secondFinishes = new Promise<void>((resolve) => (finishSecond = resolve));
    let started = 0;
    app.route(post("/a", async () => {
      started++;
      await firstFails;
      throw new Error("down");
    }).use(guard()));
    app.route(post("/b", async () => {
      started++;
      await secondFinishes;
      return created({ from: "b" });
    }).use(guard()));
    const order = (path: string) => app.request(path, { method: "POST", headers: { "idempotency-key": "s-1" } });
    const first = order("/a");
    await expect.poll(() => started).toBe(1);
    clock.now += 5000;
    const second = order("/b");
    await expect.poll(() => started).toBe(2);
    // The first request's 5xx releases its own claim only: the second still holds the key.
    failFirst();
    expect((await first).status).toBe(500);
    expect((await order("/b")).status).toBe(409);
    finishSecond();
    expect((await second).status).toBe(201);
    expect(started).toBe(2);
  });

  it("forgets a kept response after ttlMs", async () => {
    const { app, clock, runs } = setup({ ttlMs: 60_000 });
    await send(app, "t-1", { title: "Dune" });
    clock.now += 59_999;
    expect((await send(app, "t-1", { title: "Dune" })).headers.get("idempotent-replayed")).toBe("true");
    clock.now += 1;
    expect((await send(app, "t-1", { title: "Dune" })).headers.get("idempotent-replayed")).toBeNull();
    expect(runs()).toBe(2);
  });

  it("answers 503 and runs nothing when the store fails or is late", async () => {
    const failing: IdempotencyStore = {
      begin: () => Promise.reject(new Error("store down")),
      complete: () => Promise.resolve(),
      release: () => Promise.resolve(),
    };
    const late: IdempotencyStore = { ...failing, begin: () => new Promise(() => {}) };
    for (const store of [failing, late]) {
      const { app, runs, outcomes } = setup({ store, storeTimeoutMs: 50 });
      const answer = await send(app, "s-1", { title: "Dune" });
      expect(answer.status).toBe(503);
      expect(answer.headers.get("retry-after")).toBe("1");
      expect(runs()).toBe(0);
      expect(outcomes).toEqual(["store_error"]);
    }
  });

  it("logs a failing store through the App's logger, tagged with the request id, not on the console", async () => {
    const failing: IdempotencyStore = {
      begin: () => Promise.reject(new Error("store down")),
      complete: () => Promise.resolve(),
      release: () => Promise.resolve(),
    };
    const { app, logs } = setup({ store: failing });
    const consoleError = vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      const answer = await send(app, "s-1", { title: "Dune" }, { "x-request-id": "req-idem-1" });
      expect(answer.status).toBe(503);
      expect(consoleError).not.toHaveBeenCalled();
    } finally {
      consoleError.mockRestore();
    }
    const line = logs.entries().find((entry) => entry.message === "idempotency: store down (answering 503)");
    expect(line).toMatchObject({ level: "error", request_id: "req-idem-1" });
  });

  it("replays the headers the handler set on the event, not those middleware set before idempotency() ran", async () => {
    const app = new App({ logger: captureLogs().logger });
    let runs = 0;
    app.use((event, next) => {
      event.res.headers.set("x-before", String(runs));
      return next();
    });
    app.route(post("/staged", (ctx) => {
      runs++;
      ctx.event.res.headers.set("cache-control", "no-store");
      // A byte past ASCII: kept and replayed as the same byte.
      ctx.event.res.headers.set("x-note", "caf\u00e9 \u00ff");
      ctx.event.res.headers.set("x-before", "handler");
      return created({ run: runs });
    }).use(idempotency({ store: new MemoryIdempotencyStore() })));
    const order = () => app.request("/staged", { method: "POST", headers: { "idempotency-key": "h-1" } });
    const first = await order();
    expect(first.headers.get("cache-control")).toBe("no-store");
    const again = await order();
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.headers.get("cache-control")).toBe("no-store");
    expect(again.headers.get("x-note")).toBe("caf\u00e9 \u00ff");
    expect(again.headers.get("x-note")).toBe(first.headers.get("x-note"));
    // The middleware before it ran again for the replay: its value is the fresh one.
    expect(again.headers.get("x-before")).toBe("1");
    expect(await again.json()).toEqual({ run: 1 });
    expect(runs).toBe(1);
  });

  it("keeps headers middleware set before it out of the kept response: the replay gets fresh ones", async () => {
    const app = new App({ logger: captureLogs().logger });
    let requests = 0;
    app.use((event, next) => {
      event.res.headers.set("x-seen", String(++requests));
      return next();
    });
    app.route(post("/fresh", () => created({ ok: true })).use(idempotency({ store: new MemoryIdempotencyStore() })));
    const order = () => app.request("/fresh", { method: "POST", headers: { "idempotency-key": "h-2" } });
    expect((await order()).headers.get("x-seen")).toBe("1");
    const again = await order();
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.headers.get("x-seen")).toBe("2");
  });

  it("refuses a store that is full with 503 rather than dropping kept responses", async () => {
    const store = new MemoryIdempotencyStore({ maxBytes: 600 });
    const { app, runs } = setup({ store });
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await send(app, `f-${i}`, { title: "Dune" })).status);
    expect(statuses).toContain(503);
    expect(statuses[0]).toBe(201);
    expect(store.bytes).toBeLessThanOrEqual(600);
    // What was kept is still replayed.
    expect((await send(app, "f-0", { title: "Dune" })).headers.get("idempotent-replayed")).toBe("true");
    expect(runs()).toBe(statuses.filter((s) => s === 201).length);
  });

  it("gives expired records' room back before refusing a new key, between sweeps", () => {
    const store = new MemoryIdempotencyStore({ maxBytes: 300 });
    const begin = (key: string, now: number) => store.beginNow({ key, fingerprint: "f", token: `t-${key}`, leaseMs: 1000, now });
    expect(begin("a", T0)).toEqual({ state: "acquired" });
    expect(begin("b", T0)).toEqual({ state: "acquired" });
    expect(() => begin("c", T0 + 10)).toThrow(IdempotencyStoreFullError);
    expect(store.size).toBe(2);
    // Both leases ended 1 s later, well before the minute's sweep: the claim still gets room.
    expect(begin("c", T0 + 1000)).toEqual({ state: "acquired" });
    expect(store.size).toBe(1);
    expect(store.bytes).toBeLessThanOrEqual(300);
  });

  it("is refused on a GET route, an event stream and a WebSocket at registration", () => {
    const app = new App({ logger: captureLogs().logger });
    expect(() => app.route(get("/x", () => ({})).use(idempotency()))).toThrow(/GET \/x: idempotencyMiddleware: a GET route/);
    expect(() => app.route(sse("/events", () => {}).use(idempotency()))).toThrow(/GET \/events: .*event streams and WebSockets/);
    expect(() => app.route(websocket("/socket", () => ({})).use(idempotency()))).toThrow(/GET \/socket: /);
    expect(() => app.route(post("/y", () => ({})).use(idempotency({ methods: ["PATCH"] })))).toThrow(/POST \/y: .*guards PATCH/);
  });

  it.each([
    [{ ttlMs: 0 }, /idempotency: ttlMs must be/],
    [{ leaseMs: Number.NaN }, /idempotency: leaseMs must be/],
    [{ maxKeyLength: 0 }, /idempotency: maxKeyLength must be/],
    [{ maxResponseBytes: -1 }, /idempotency: maxResponseBytes must be/],
    [{ maxBodyBytes: 1.5 }, /idempotency: maxBodyBytes must be/],
    [{ storeTimeoutMs: 0 }, /idempotency: storeTimeoutMs must be/],
    [{ methods: ["GET"] }, /idempotency: methods must be/],
    [{ required: "yes" }, /idempotency: required must be a boolean/],
    [{ store: {} }, /idempotency: store must be an IdempotencyStore/],
    [{ scope: "user" }, /idempotency: scope must be a function/],
    [{ name: "" }, /idempotency: name must be a non-empty string/],
  ])("refuses %o at construction", (options, message) => {
    expect(() => idempotency(options as IdempotencyOptions)).toThrow(message);
  });

  it("lists the header parameter and the 400/409/422 responses in the OpenAPI document, on guarded methods only", () => {
    const app = new App({ logger: captureLogs().logger });
    app.group("/api", idempotency({ required: true }))
      .route(post("/orders", () => created({})))
      .route(get("/orders", () => []));
    const document = buildOpenAPIDocument(app.routes, app.config.docs) as { paths: Record<string, Record<string, { parameters?: unknown[]; responses: Record<string, unknown> }>> };
    const write = document.paths["/api/orders"]!.post!;
    expect(write.parameters).toContainEqual(expect.objectContaining({ name: "Idempotency-Key", in: "header", required: true }));
    expect(Object.keys(write.responses)).toEqual(expect.arrayContaining(["400", "409", "422"]));
    const read = document.paths["/api/orders"]!.get!;
    expect(read.parameters ?? []).not.toContainEqual(expect.objectContaining({ name: "Idempotency-Key" }));
    expect(Object.keys(read.responses)).not.toContain("409");
  });
});

/** The primary's side on a host that records its handlers and lets the test fork and end workers. */
function host() {
  const handlers = new Map<string, IpcHandler<unknown, unknown>>();
  const workers: ((worker: { pid: number; exited: Promise<unknown> }) => void)[] = [];
  const fake = {
    handle: <P, R>(type: IpcRequestType<P, R>, handler: IpcHandler<P, R>) => void handlers.set(type.name, handler as IpcHandler<unknown, unknown>),
    onWorker: (listener: (worker: never) => void) => (workers.push(listener as never), () => {}),
  };
  const store = installIdempotency(fake as never);
  const call = <P, R>(type: IpcRequestType<P, R>, payload: P) => handlers.get(type.name)!(payload) as R;
  return { store, call, fork: (pid: number) => { let exit!: () => void; const exited = new Promise<void>((r) => (exit = r)); for (const w of workers) w({ pid, exited }); return exit; } };
}

describe("the primary's idempotency store", () => {
  it("grants one claim per key, and frees a dead worker's claims at once", async () => {
    const { call, fork } = host();
    const exit = fork(4242);
    const claim = (token: string) => call(idempotencyBegin, { key: "k", fingerprint: "f", token, leaseMs: 60_000, now: T0 });
    expect(claim("4242:a")).toEqual({ state: "acquired" });
    expect(claim("777:b")).toEqual({ state: "running", fingerprint: "f" });
    exit();
    await new Promise((resolve) => setImmediate(resolve));
    expect(claim("777:b")).toEqual({ state: "acquired" });
    call(idempotencyComplete, { key: "k", token: "777:b", response: { status: 201, headers: [], body: "" }, ttlMs: 1000, now: T0 });
    expect(claim("777:c")).toEqual({ state: "done", fingerprint: "f", response: { status: 201, headers: [], body: "" } });
  });

  it("refuses malformed requests", () => {
    const { call } = host();
    expect(() => call(idempotencyBegin, { key: "", fingerprint: "f", token: "t", leaseMs: 1, now: T0 })).toThrow(/malformed idempotency:begin/);
    expect(() => call(idempotencyComplete, { key: "k", token: "t", response: { status: 99, headers: [], body: "" }, ttlMs: 1000, now: T0 })).toThrow(/malformed idempotency:complete/);
  });
});
