// The Redis rate-limit store against a real redis-server (Debian's, started on a free port): the
// same store contract as the SQL stores, two real services sharing one limit, and the limiter's
// store timeout and onStoreError rules with Redis paused (SIGSTOP) and gone.
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { App, get, rateLimit } from "../src/index.js";
import { createRedisRateLimitStore, openRedis, defineRedisScript, type RedisConnection } from "../src/entries/redis.js";
import { freePort, killAllChildren } from "../harness/child.js";
import { expectTwoServicesShareTheLimit, rateLimitStoreContract, take } from "./helpers/rate-limit-contract.js";
import { startRedis, type TestRedis } from "./helpers/redis.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

let redis: TestRedis;
const opened: RedisConnection[] = [];
let prefixes = 0;
const connect = () => {
  const connection = openRedis({ url: redis.url });
  opened.push(connection);
  return connection;
};

beforeAll(async () => {
  redis = await startRedis();
}, 60_000);
afterEach(killAllChildren);
afterAll(async () => {
  for (const connection of opened.splice(0)) await connection.close();
  await redis?.stop();
});

describe("Redis: the store contract, two connections", () => {
  rateLimitStoreContract(async () => {
    const prefix = `test${++prefixes}:`;
    return [createRedisRateLimitStore(connect(), { prefix }), createRedisRateLimitStore(connect(), { prefix })];
  });
});

describe("createRedisRateLimitStore / openRedis", () => {
  it("refuses bad options with their name and value", () => {
    expect(() => openRedis({ url: "http://localhost:6379" })).toThrow(/openRedis: url must be a redis:\/\/ or rediss:\/\/ URL, got "http:\/\/localhost:6379"/);
    expect(() => openRedis({ url: "redis://x", connectTimeoutMs: 0 })).toThrow(/connectTimeoutMs must be a positive integer, got 0/);
    expect(() => createRedisRateLimitStore({} as RedisConnection)).toThrow(/pass the connection openRedis\(\) returns/);
    expect(() => createRedisRateLimitStore(connect(), { prefix: 3 as unknown as string })).toThrow(/prefix must be a string, got 3/);
  });

  it("one EVALSHA per lease; a server that forgot the script (SCRIPT FLUSH, a restart) gets it again with EVAL", async () => {
    const connection = connect();
    const store = createRedisRateLimitStore(connection, { prefix: `test${++prefixes}:` });
    expect((await store.take(take())).granted).toBe(3);
    await connection.command(["SCRIPT", "FLUSH"]);
    expect((await store.take(take())).granted).toBe(3);
    const echo = defineRedisScript("return ARGV[1]");
    expect(await connection.run(echo, [], ["hello"])).toBe("hello");
    // The counter expires when its window no longer counts (two windows after its start): no sweeping.
    const keys = (await connection.command(["KEYS", `test${prefixes}:*`])) as string[];
    expect(keys).toEqual([`test${prefixes}:{api:203.0.113.7}:29000000`]);
    const ttl = Number(await connection.command(["PTTL", keys[0]!]));
    expect(ttl).toBeGreaterThan(110_000);
    expect(ttl).toBeLessThanOrEqual(119_000);
  });

  it("two services on one Redis serve exactly the limit between them; the rest get 429", async () => {
    await expectTwoServicesShareTheLimit(ROOT, { RATE_LIMIT_REDIS: `${redis.url}/1` });
  }, 90_000);
});

/** An App whose limiter (5 a minute, a lease per request) waits 300 ms for `store`. */
function limited(onStoreError: "allow" | "reject", store = createRedisRateLimitStore(connect(), { prefix: `test${++prefixes}:` })): App {
  const app = new App({ port: 0 });
  app.group("/", rateLimit({ limit: 5, windowMs: 60_000, batch: 1, storeTimeoutMs: 300, onStoreError, store })).route(get("/hit", () => ({ ok: true })));
  return app;
}

describe("Redis paused or gone: the limiter's storeTimeoutMs and onStoreError", () => {

  it("a hung server (SIGSTOP): answered within the store timeout, served with allow, 503 with reject; served again once it is back", async () => {
    const allow = limited("allow");
    const reject = limited("reject");
    expect((await allow.request("/hit")).status).toBe(200);
    expect((await reject.request("/hit")).status).toBe(200);
    redis.server.kill("SIGSTOP");
    try {
      const started = performance.now();
      const [open, closed] = await Promise.all([allow.request("/hit"), reject.request("/hit")]);
      const took = performance.now() - started;
      expect(open.status).toBe(200);
      expect(closed.status).toBe(503);
      expect(closed.headers.get("retry-after")).toBe("1");
      expect(await closed.json()).toMatchObject({ code: "SERVICE_UNAVAILABLE" });
      expect(took).toBeGreaterThanOrEqual(290);
      expect(took).toBeLessThan(5000);
    } finally {
      redis.server.kill("SIGCONT");
    }
    const after = await reject.request("/hit");
    expect(after.status).toBe(200);
    expect(after.headers.get("ratelimit")).toMatch(/;r=\d+;/);
  });

  it("a hung server behind the circuit breaker: after `failures` timeouts requests no longer wait storeTimeoutMs; a probe closes it once the server is back", async () => {
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      const app = new App({ port: 0 });
      const store = createRedisRateLimitStore(connect(), { prefix: `test${++prefixes}:` });
      app.group("/", rateLimit({ limit: 1000, windowMs: 60_000, batch: 1, storeTimeoutMs: 300, store, breaker: { failures: 3, resetMs: 1000 } }))
        .route(get("/hit", () => ({ ok: true })));
      expect((await app.request("/hit")).headers.get("ratelimit")).toMatch(/;r=\d+;/);
      redis.server.kill("SIGSTOP");
      try {
        for (let i = 0; i < 3; i++) expect((await app.request("/hit")).status).toBe(200);
        const started = performance.now();
        for (let i = 0; i < 20; i++) expect((await app.request("/hit")).status).toBe(200);
        // Without the breaker each of these waits the 300 ms timeout: 6 s.
        expect(performance.now() - started).toBeLessThan(1500);
      } finally {
        redis.server.kill("SIGCONT");
      }
      const logged = (what: string) => errors.mock.calls.some(([line]) => String(line).includes(what));
      expect(logged("circuit open")).toBe(true);
      // Back: once the reset has passed a probe gets an answer, the circuit closes, the store counts again.
      const deadline = performance.now() + 10_000;
      while (!logged("circuit closed") && performance.now() < deadline) {
        await app.request("/hit");
        // Letting the reset time pass on purpose between requests.
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(logged("circuit closed")).toBe(true);
      const answered = await app.request("/hit");
      expect(answered.headers.get("ratelimit")).toMatch(/;r=\d+;/);
    } finally {
      errors.mockRestore();
    }
  });

  it("no server at all: commands fail at once (no offline queue), so the limiter decides at once", async () => {
    const gone = openRedis({ url: `redis://127.0.0.1:${await freePort()}`, connectTimeoutMs: 1000 });
    opened.push(gone);
    const store = createRedisRateLimitStore(gone);
    await expect(store.take(take())).rejects.toThrow();
    const [open, closed] = [limited("allow", store), limited("reject", store)];
    expect((await open.request("/hit")).status).toBe(200);
    expect((await closed.request("/hit")).status).toBe(503);
  });
});
