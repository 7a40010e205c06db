import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MemoryIdempotencyStore, type IdempotencyStore, type StoredResponse } from "../src/index.js";
import { createRedisIdempotencyStore, openRedis, type RedisConnection } from "../src/entries/redis.js";
import { createSQLIdempotencyStore, openSQLite, type SQLDatabase } from "../src/entries/sql.js";
import { usePostgres } from "./helpers/postgres.js";
import { startRedis, type TestRedis } from "./helpers/redis.js";

// The idempotency stores' contract, the same for each: one claim wins however many race (through
// two handles, as two machines), only the holder's token completes or releases, a lease and a time
// to live end. Real SQLite files, a throwaway PostgreSQL server and a real redis-server.
const T0 = 1_800_000_000_000;
const RESPONSE: StoredResponse = { status: 201, headers: [["content-type", "application/json"], ["location", "/orders/1"]], body: Buffer.from('{"id":1}').toString("base64") };

let next = 0;
const fresh = () => `key-${++next}-${Math.random().toString(36).slice(2)}`;
const begin = (store: IdempotencyStore, key: string, token: string, now = T0, leaseMs = 1000, fingerprint = "fp") =>
  store.begin({ key, fingerprint, token, leaseMs, now });

/** The contract on two stores that share their keys (two handles on one database, two connections). */
function contract(open: () => Promise<[IdempotencyStore, IdempotencyStore]>, usesItsOwnClock: boolean) {
  it("grants one of 20 racing claims; the rest see it running with its fingerprint", async () => {
    const [a, b] = await open();
    const key = fresh();
    const states = await Promise.all(Array.from({ length: 20 }, (_, i) => begin(i % 2 ? a : b, key, `t${i}`)));
    expect(states.filter((s) => s.state === "acquired")).toHaveLength(1);
    expect(states.filter((s) => s.state === "running" && s.fingerprint === "fp")).toHaveLength(19);
  });

  it("keeps the holder's response, and only the holder's; a stranger's release does nothing", async () => {
    const [a, b] = await open();
    const key = fresh();
    expect(await begin(a, key, "holder")).toEqual({ state: "acquired" });
    await b.release({ key, token: "stranger" });
    await b.complete({ key, token: "stranger", response: { ...RESPONSE, status: 500 }, ttlMs: 60_000, now: T0 });
    expect(await begin(b, key, "other")).toEqual({ state: "running", fingerprint: "fp" });
    await a.complete({ key, token: "holder", response: RESPONSE, ttlMs: 60_000, now: T0 });
    expect(await begin(b, key, "other", T0 + 1)).toEqual({ state: "done", fingerprint: "fp", response: RESPONSE });
    // A kept response is not released by its own token either.
    await a.release({ key, token: "holder" });
    expect((await begin(b, key, "other", T0 + 2)).state).toBe("done");
  });

  it("frees a released key for the next claim", async () => {
    const [a, b] = await open();
    const key = fresh();
    await begin(a, key, "first");
    await a.release({ key, token: "first" });
    expect(await begin(b, key, "second")).toEqual({ state: "acquired" });
  });

  it("keeps an omitted body's status and headers, and empty header lists", async () => {
    const [a, b] = await open();
    const key = fresh();
    await begin(a, key, "h");
    const omitted: StoredResponse = { status: 201, headers: [], body: "", omitted: true };
    await a.complete({ key, token: "h", response: omitted, ttlMs: 60_000, now: T0 });
    expect(await begin(b, key, "x", T0 + 1)).toEqual({ state: "done", fingerprint: "fp", response: omitted });
  });

  it("ends a lease that nobody completes, and the late holder's completion is then ignored", async () => {
    const [a, b] = await open();
    const key = fresh();
    await begin(a, key, "dead", T0, 300);
    if (usesItsOwnClock) await new Promise((resolve) => setTimeout(resolve, 400));
    expect(await begin(b, key, "alive", T0 + 300, 60_000)).toEqual({ state: "acquired" });
    await a.complete({ key, token: "dead", response: { ...RESPONSE, status: 202 }, ttlMs: 60_000, now: T0 + 301 });
    await b.complete({ key, token: "alive", response: RESPONSE, ttlMs: 60_000, now: T0 + 302 });
    expect(await begin(a, key, "x", T0 + 303)).toEqual({ state: "done", fingerprint: "fp", response: RESPONSE });
  });
}

describe("MemoryIdempotencyStore", () => {
  contract(async () => {
    const store = new MemoryIdempotencyStore();
    return [store, store];
  }, false);
});

describe("SQLite: two handles on one file", () => {
  const dir = mkdtempSync(join(tmpdir(), "keelson-idem-"));
  const opened: SQLDatabase[] = [];
  let files = 0;
  afterAll(async () => {
    for (const db of opened.splice(0)) await db.close();
    rmSync(dir, { recursive: true, force: true });
  });
  contract(async () => {
    const file = join(dir, `keys-${++files}.db`);
    const dbs = [openSQLite({ file }), openSQLite({ file })];
    opened.push(...dbs);
    return [createSQLIdempotencyStore(dbs[0]!), createSQLIdempotencyStore(dbs[1]!)];
  }, false);

  it("refuses a table name that is not a plain SQL name", () => {
    const db = openSQLite({ file: join(dir, "names.db") });
    opened.push(db);
    expect(() => createSQLIdempotencyStore(db, { table: "keys; DROP" })).toThrow(/createSQLIdempotencyStore: table must be a plain SQL name/);
  });
});

describe("PostgreSQL: two pools", () => {
  const pg = usePostgres();
  contract(async () => {
    const [a, b] = await pg.openDatabase(2, { max: 4 });
    return [createSQLIdempotencyStore(a!), createSQLIdempotencyStore(b!)];
  }, false);
});

describe("Redis: two connections", () => {
  let redis: TestRedis;
  const connections: RedisConnection[] = [];
  beforeAll(async () => void (redis = await startRedis()), 60_000);
  afterAll(async () => {
    for (const connection of connections.splice(0)) await connection.close();
    await redis.stop();
  });
  // Leases and times to live are Redis's own expiry: the lease test waits it out.
  contract(async () => {
    const [a, b] = [openRedis({ url: redis.url }), openRedis({ url: redis.url })];
    connections.push(a, b);
    return [createRedisIdempotencyStore(a), createRedisIdempotencyStore(b)];
  }, true);

  it("refuses a connection that is not one", () => {
    expect(() => createRedisIdempotencyStore({} as RedisConnection)).toThrow(/createRedisIdempotencyStore: pass the connection/);
  });
});
