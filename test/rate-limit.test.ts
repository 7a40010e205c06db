// Rate limits in-process: headers on every limited response, 429s, fixed and sliding windows on an
// injected clock, keys and proxies, misuse, store failures, and how few store calls the leases make.
import { describe, expect, it } from "vitest";
import type { IpcHandler, IpcRequestType } from "../src/cluster/ipc.js";
import { installRateLimits } from "../src/rate-limit/primary.js";
import { captureLogs } from "./helpers/logs.js";
import { App, MemoryRateLimitStore, get, rateLimit, type RateLimitOptions, type RateLimitStore, type RateLimitTake } from "../src/index.js";

const MINUTE = 60_000;
/** A window start far from the epoch, like a real clock; tests move `clock.now` by hand. */
const T0 = 29_000_000 * MINUTE;

function setup(options: Partial<RateLimitOptions> & { at?: number } = {}) {
  const clock = { now: options.at ?? T0 };
  const app = new App({ logger: captureLogs().logger });
  app.use(rateLimit({ limit: 5, windowMs: MINUTE, clock: () => clock.now, ...options }));
  app.route(get("/items", () => ({ ok: true })));
  return { app, clock };
}

/** A store that counts its calls (to check the batching), over the real in-memory store. */
function countingStore(inner: RateLimitStore = new MemoryRateLimitStore()): RateLimitStore & { calls: RateLimitTake[] } {
  const calls: RateLimitTake[] = [];
  return { calls, take: (take) => (calls.push(take), inner.take(take)) };
}

const as = (key: string) => ({ headers: { "x-api-key": key } });
const from = (forwarded: string) => ({ headers: { "x-forwarded-for": forwarded } });
const make = (options: object) => () => rateLimit({ limit: 10, windowMs: 1000, ...options } as RateLimitOptions);

async function statuses(app: App, n: number, init?: RequestInit): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await app.request("/items", init)).status);
  return out;
}

describe("rateLimit", () => {
  it("sends RateLimit-Policy and RateLimit on 2xx, then 429 RATE_LIMITED with Retry-After", async () => {
    const { app } = setup({ at: T0 + 15_000 });
    const first = await app.request("/items");
    expect(first.status).toBe(200);
    expect(first.headers.get("ratelimit-policy")).toBe('"5-in-1min";q=5;w=60');
    expect(first.headers.get("ratelimit")).toBe('"5-in-1min";r=4;t=45');
    expect(first.headers.get("retry-after")).toBeNull();
    expect(await statuses(app, 4)).toEqual([200, 200, 200, 200]);
    const limited = await app.request("/items");
    expect(limited.status).toBe(429);
    expect(limited.headers.get("retry-after")).toBe("45");
    expect(limited.headers.get("ratelimit")).toBe('"5-in-1min";r=0;t=45');
    expect(limited.headers.get("ratelimit-policy")).toBe('"5-in-1min";q=5;w=60');
    expect(limited.headers.get("content-type")).toBe("application/json;charset=UTF-8");
    expect(await limited.json()).toEqual({ status_code: 429, code: "RATE_LIMITED", message: "Rate limit exceeded: retry after the time in Retry-After" });
  });

  it("never limits /health unless asked, even as global middleware", async () => {
    const { app } = setup({ limit: 1 });
    expect(await statuses(app, 2)).toEqual([200, 429]);
    for (let i = 0; i < 3; i++) {
      const health = await app.request("/health");
      expect(health.status).toBe(200);
      expect(health.headers.get("ratelimit")).toBeNull();
    }
    const strict = setup({ limit: 1, limitHealth: true }).app;
    expect((await strict.request("/health")).status).toBe(200);
    expect((await strict.request("/health")).status).toBe(429);
  });

  it("fixed windows reset at the window's end, aligned to the clock", async () => {
    const { app, clock } = setup({ at: T0 + 59_000 });
    expect(await statuses(app, 6)).toEqual([200, 200, 200, 200, 200, 429]);
    clock.now = T0 + MINUTE;
    expect(await statuses(app, 6)).toEqual([200, 200, 200, 200, 200, 429]);
  });

  it("sliding windows weigh the previous window by how much of it still overlaps", async () => {
    const { app, clock } = setup({ limit: 10, algorithm: "sliding", name: "slide" });
    expect((await statuses(app, 11)).filter((s) => s === 200)).toHaveLength(10);
    // Half-way into the next window, half the previous window's 10 still count: 5 left.
    clock.now = T0 + MINUTE + 30_000;
    expect(await statuses(app, 5)).toEqual([200, 200, 200, 200, 200]);
    const limited = await app.request("/items");
    expect(limited.status).toBe(429);
    // One more unit once the previous window weighs 4 or less: at 36 s into the window.
    expect(limited.headers.get("retry-after")).toBe("6");
    clock.now = T0 + MINUTE + 36_000;
    expect(await statuses(app, 2)).toEqual([200, 429]);
    // The fixed algorithm would have allowed all 10 again at once.
    const fixed = setup({ limit: 10 });
    await statuses(fixed.app, 10);
    fixed.clock.now = T0 + MINUTE + 30_000;
    expect((await statuses(fixed.app, 11)).filter((s) => s === 200)).toHaveLength(10);
  });

  it("counts by the key function, each key on its own", async () => {
    const { app } = setup({ limit: 2, key: (event) => event.req.headers.get("x-api-key") ?? "anonymous" });
    expect(await statuses(app, 3, as("a"))).toEqual([200, 200, 429]);
    expect(await statuses(app, 3, as("b"))).toEqual([200, 200, 429]);
  });

  it("with trusted proxies, keys by the entry they appended, not by what the client forged", async () => {
    const { app } = setup({ limit: 2, trustedProxies: 1 });
    expect((await app.request("/items", from("198.51.100.1, 203.0.113.7"))).status).toBe(200);
    // A client rotating the left part is still the same client to the proxy.
    expect((await app.request("/items", from("10.0.0.9, 203.0.113.7"))).status).toBe(200);
    expect((await app.request("/items", from("203.0.113.7"))).status).toBe(429);
    expect((await app.request("/items", from("198.51.100.1, 203.0.113.8"))).status).toBe(200);
  });

  it("refuses misuse when the middleware is made", () => {
    expect(make({ limit: 0 })).toThrow("rateLimit: limit must be a positive integer, got 0");
    expect(make({ limit: 2.5 })).toThrow("limit must be a positive integer");
    expect(make({ windowMs: -1 })).toThrow("windowMs must be a positive integer, got -1");
    expect(make({ algorithm: "token-bucket" })).toThrow('algorithm must be "fixed" or "sliding", got "token-bucket"');
    expect(make({ name: 'a"b' })).toThrow("rateLimit: name must be 1–64 letters");
    expect(make({ key: "ip" })).toThrow("key must be a function");
    expect(make({ key: () => "k", trustedProxies: 1 })).toThrow("trustedProxies applies to the default key only");
    expect(make({ trustedProxies: -1 })).toThrow("trustedProxies must be 0 or more");
    expect(make({ batch: 0 })).toThrow("batch must be a positive integer");
    expect(make({ store: {} })).toThrow("store must have a take(request) method");
    expect(make({ onStoreError: "deny" })).toThrow('onStoreError must be "allow" or "reject"');
    expect(() => rateLimit(undefined as unknown as RateLimitOptions)).toThrow("pass an options object");
  });

  it("leases batches: 1,000 requests for one key cost a few dozen store calls, not 1,000, and exactly the limit is served", async () => {
    const store = countingStore();
    const { app } = setup({ limit: 100, store });
    const all = await statuses(app, 1000);
    expect(all.filter((s) => s === 200)).toHaveLength(100);
    expect(all.filter((s) => s === 429)).toHaveLength(900);
    // 100 units in shrinking leases (10, …, 1) plus the one refusal; refusals after it are answered locally.
    expect(store.calls.length).toBeLessThanOrEqual(30);
    const unbatched = countingStore();
    await statuses(setup({ limit: 100, store: unbatched, batch: 1 }).app, 1000);
    expect(unbatched.calls).toHaveLength(101);
  });

  it("concurrent first requests for a key wait for one lease instead of each asking", async () => {
    const store = countingStore();
    const { app } = setup({ limit: 100, store });
    const all = await Promise.all(Array.from({ length: 10 }, () => app.request("/items")));
    expect(all.map((r) => r.status)).toEqual(Array(10).fill(200));
    expect(store.calls).toHaveLength(1);
  });

  it("a failing or silent store fails open by default and closed with onStoreError: 'reject'", async () => {
    const broken: RateLimitStore = { take: () => Promise.reject(new Error("connection refused")) };
    const silent: RateLimitStore = { take: () => new Promise(() => {}) };
    const errors: unknown[] = [];
    const original = console.error;
    console.error = (...args: unknown[]) => void errors.push(args.join(" "));
    try {
      const open = await setup({ store: broken }).app.request("/items");
      expect(open.status).toBe(200);
      expect(open.headers.get("ratelimit-policy")).toBe('"5-in-1min";q=5;w=60');
      expect(open.headers.get("ratelimit")).toBeNull();
      expect((await setup({ store: silent, storeTimeoutMs: 20 }).app.request("/items")).status).toBe(200);
      const closed = await setup({ store: broken, onStoreError: "reject" }).app.request("/items");
      expect(closed.status).toBe(503);
      expect(await closed.json()).toMatchObject({ code: "SERVICE_UNAVAILABLE", message: "rate limiting is unavailable: retry later" });
    } finally {
      console.error = original;
    }
    expect(errors.join("\n")).toContain("keelson: rate limit 5-in-1min: connection refused (allowing requests)");
    expect(errors.join("\n")).toContain("did not answer within 20ms");
    expect(errors.join("\n")).not.toContain("at ");
  });

  it("units a slow store grants after the store timeout are spent by later requests, not lost", async () => {
    let late: ((grant: { granted: number; remaining: number; resetMs: number; retryMs: number }) => void) | undefined;
    const slow = countingStore({ take: () => new Promise((resolve) => (late = resolve)) });
    const original = console.error;
    console.error = () => {};
    try {
      const { app } = setup({ store: slow, storeTimeoutMs: 20, batch: 3 });
      // Served without a count (fail open), then the store answers: 3 units, spent by the next 3 requests.
      expect((await app.request("/items")).status).toBe(200);
      late?.({ granted: 3, remaining: 2, resetMs: MINUTE, retryMs: 0 });
      await new Promise((resolve) => setImmediate(resolve));
      slow.take = () => Promise.resolve({ granted: 0, remaining: 0, resetMs: MINUTE, retryMs: MINUTE });
      expect(await statuses(app, 4)).toEqual([200, 200, 200, 429]);
    } finally {
      console.error = original;
    }
  });

  it("the primary's handler grants from one count for every worker and refuses malformed requests", async () => {
    let serve: IpcHandler<RateLimitTake, unknown> | undefined;
    installRateLimits({ handle: <P, R>(type: IpcRequestType<P, R>, handler: IpcHandler<P, R>) => {
      expect(type.name).toBe("ratelimit:take");
      serve = handler as unknown as IpcHandler<RateLimitTake, unknown>;
    } });
    const take: RateLimitTake = { key: "api:1", limit: 100, windowMs: MINUTE, algorithm: "fixed", now: T0, want: 1_000_000 };
    // A worker asking for more than a quarter of what is left gets the quarter.
    expect(await serve!(take)).toEqual({ granted: 25, remaining: 75, resetMs: MINUTE, retryMs: 0 });
    expect(await serve!({ ...take, want: 10 })).toEqual({ granted: 10, remaining: 65, resetMs: MINUTE, retryMs: 0 });
    for (const bad of [{ ...take, limit: 0 }, { ...take, key: 7 }, { ...take, algorithm: "token" }, { ...take, now: Number.NaN }, null]) {
      expect(() => serve!(bad as RateLimitTake)).toThrow("malformed ratelimit:take request");
    }
  });
});
