import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { RateLimitTake } from "../src/index.js";
import { createSQLRateLimitStore, openPostgres, type SQLDatabase } from "../src/sql/index.js";
import { freePort, killAllChildren, spawnChild } from "../harness/child.js";
import { hitMany } from "./helpers/hits.js";
import { startPostgres, type TestPostgres } from "./helpers/postgres.js";

// The SQL rate-limit store against real databases: a SQLite file shared by two real processes,
// and a throwaway PostgreSQL server reached through two separate connection pools (two "machines").
const ROOT = fileURLToPath(new URL("..", import.meta.url));
const MINUTE = 60_000;
const T0 = 29_000_000 * MINUTE;

afterEach(killAllChildren);

const take = (over: Partial<RateLimitTake> = {}): RateLimitTake => ({
  key: "api:203.0.113.7", limit: 100, windowMs: MINUTE, algorithm: "fixed", now: T0 + 1000, want: 3, ...over,
});

describe("SQLite: one file, two processes", () => {
  it("two services on one file serve exactly the limit between them; the rest get 429", async () => {
    const dir = mkdtempSync(join(tmpdir(), "keelson-rate-"));
    try {
      const env = { NODE_ENV: "production", RATE_LIMIT: "50", RATE_LIMIT_SQLITE: join(dir, "limits.db") };
      const ports = [await freePort(), await freePort()];
      const services = ports.map((port) => spawnChild([process.execPath, "--import", "tsx", "test/fixtures/rate-limit-app.ts"],
        { cwd: ROOT, env: { ...env, PORT: String(port) } }));
      await Promise.all(services.map((service) => service.waitFor(/listening on/, { timeoutMs: 30_000 })));
      const hits = await hitMany(ports, 300, 6);
      const served = hits.filter((h) => h.status === 200);
      expect(new Set(served.map((h) => (JSON.parse(h.body) as { pid: number }).pid)).size).toBe(2);
      expect(served).toHaveLength(50);
      expect(hits.filter((h) => h.status === 429 && Number(h.retryAfter) >= 1)).toHaveLength(250);
      await Promise.all(services.map((service) => service.stop()));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});

describe("PostgreSQL", () => {
  let pg: TestPostgres;
  const opened: SQLDatabase[] = [];
  beforeAll(async () => {
    pg = await startPostgres();
  }, 120_000);
  afterAll(async () => {
    for (const db of opened.splice(0)) await db.close();
    await pg?.stop();
  });
  const machines = async () => {
    const url = await pg.createDatabase();
    const dbs = [openPostgres({ url, max: 4 }), openPostgres({ url, max: 4 })];
    opened.push(...dbs);
    return dbs.map((db) => createSQLRateLimitStore(db));
  };

  it("concurrent leases from two pools never grant more than the limit, and shrink near the end", async () => {
    const stores = await machines();
    const grants = await Promise.all(Array.from({ length: 120 }, (_, i) => stores[i % 2]!.take(take())));
    expect(grants.reduce((sum, g) => sum + g.granted, 0)).toBe(100);
    expect(grants.every((g) => g.granted <= 3)).toBe(true);
    const refused = await stores[0]!.take(take());
    expect(refused).toEqual({ granted: 0, remaining: 0, resetMs: 59_000, retryMs: 59_000 });
    // Another key, and the next window, start afresh.
    expect((await stores[1]!.take(take({ key: "api:198.51.100.1" }))).granted).toBe(3);
    expect((await stores[1]!.take(take({ now: T0 + MINUTE }))).granted).toBe(3);
  });

  it("sliding: the previous window's count weighs in by how much of it still overlaps", async () => {
    const [store] = await machines();
    const sliding = (now: number, want: number) => store!.take(take({ algorithm: "sliding", limit: 10, now, want }));
    expect((await sliding(T0 + 5000, 10)).granted).toBe(2);
    let spent = 2;
    while (spent < 10) spent += (await sliding(T0 + 5000, 10)).granted;
    expect((await sliding(T0 + 5000, 10)).granted).toBe(0);
    // 30 s into the next window half of the previous 10 still count: 5 left, in shrinking leases.
    let granted = 0;
    for (let g = -1; g !== 0; granted += g) g = (await sliding(T0 + MINUTE + 30_000, 10)).granted;
    expect(granted).toBe(5);
    expect((await sliding(T0 + MINUTE + 30_000, 1)).retryMs).toBe(6000);
  });
});
