/**
 * The rate-limit store's circuit breaker, decided in-process: a store the test answers or fails by
 * hand and a clock that stands still, through `app.request()`. The same breaker against a paused
 * redis-server is in test/rate-limit-redis.test.ts.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { App, get, rateLimit, type RateLimitStore, type RateLimitTake } from "../src/index.js";
import { createPrometheus } from "../src/entries/metrics.js";

/** A store whose every take fails until `healthy` is set; counts what it was asked. */
function flakyStore(): RateLimitStore & { asked: number; healthy: boolean } {
  const store = {
    asked: 0,
    healthy: false,
    take(take: RateLimitTake) {
      store.asked++;
      if (!store.healthy) return Promise.reject(new Error("store down"));
      return Promise.resolve({ granted: take.want, remaining: take.limit - take.want, resetMs: 60_000, retryMs: 0 });
    },
  };
  return store;
}

afterEach(() => vi.restoreAllMocks());

describe("the store's circuit breaker", () => {
  it("opens after `failures` in a row, fails fast while open, probes once after resetMs, closes on an answer; each transition logged and in the metric", async () => {
    const logged = vi.spyOn(console, "error").mockImplementation(() => {});
    let now = 1_000_000;
    const store = flakyStore();
    const app = new App({ port: 0 });
    const prometheus = createPrometheus({ cluster: false });
    app.use(prometheus);
    app.group("/api", rateLimit({ name: "breaker-test", limit: 1000, windowMs: 86_400_000, batch: 1, store, clock: () => now, breaker: { failures: 3, resetMs: 5000 } }))
      .route(get("/hit", () => ({ ok: true })));
    const hit = () => app.request("/api/hit");
    const state = async () => /keelson_rate_limit_breaker_state\{limiter="breaker-test",state="(\w+)"\} 1/.exec(await prometheus.readExposition())?.[1];

    for (let i = 0; i < 3; i++) expect((await hit()).status).toBe(200);
    expect(store.asked).toBe(3);
    expect(await state()).toBe("open");
    expect(logged.mock.calls.map(([line]) => String(line)).filter((line) => line.includes("circuit open"))).toHaveLength(1);

    // Open: fail-open answers at once, the store is not asked.
    for (let i = 0; i < 10; i++) expect((await hit()).status).toBe(200);
    expect(store.asked).toBe(3);
    now += 4999;
    await hit();
    expect(store.asked).toBe(3);

    // Half-open: one probe; it fails, so open again for another resetMs.
    now += 1;
    await hit();
    expect(store.asked).toBe(4);
    expect(await state()).toBe("open");
    await hit();
    expect(store.asked).toBe(4);

    // The next probe is answered: closed, and the store is asked as usual.
    store.healthy = true;
    now += 5000;
    const probe = await hit();
    expect(probe.headers.get("ratelimit")).toMatch(/;r=\d+;/);
    expect(await state()).toBe("closed");
    expect(logged.mock.calls.map(([line]) => String(line)).filter((line) => line.includes("circuit closed"))).toHaveLength(1);
    const asked = store.asked;
    await hit();
    expect(store.asked).toBe(asked + 1);
  });

  it("with onStoreError \"reject\", an open circuit answers 503 at once", async () => {
    vi.spyOn(console, "error").mockImplementation(() => {});
    const store = flakyStore();
    const app = new App({ port: 0 });
    app.group("/", rateLimit({ limit: 1000, windowMs: 60_000, batch: 1, store, onStoreError: "reject", breaker: { failures: 1, resetMs: 60_000 } }))
      .route(get("/hit", () => ({ ok: true })));
    expect((await app.request("/hit")).status).toBe(503);
    expect((await app.request("/hit")).status).toBe(503);
    expect(store.asked).toBe(1);
  });

  it("breaker: false asks the store on every request", async () => {
    vi.spyOn(console, "error").mockImplementation(() => {});
    const store = flakyStore();
    const app = new App({ port: 0 });
    app.group("/", rateLimit({ limit: 1000, windowMs: 60_000, batch: 1, store, breaker: false })).route(get("/hit", () => ({ ok: true })));
    for (let i = 0; i < 10; i++) await app.request("/hit");
    expect(store.asked).toBe(10);
  });

  it.each([
    [{ failures: 0 }, /breaker.failures must be a positive integer, got 0/],
    [{ resetMs: 1.5 }, /breaker.resetMs must be a positive integer, got 1.5/],
    [{ resetMs: 2 ** 31 }, /breaker.resetMs must be at most 2147483647/],
    [true, /breaker must be false or \{ failures\?, resetMs\? \}, got true/],
  ])("refuses breaker %j at construction, naming the option", (breaker, message) => {
    expect(() => rateLimit({ limit: 1, windowMs: 1000, breaker: breaker as never })).toThrow(message);
  });
});
