// A foreign SQLite lock (issue 23, defect 7): another process holds `BEGIN IMMEDIATE` on the file.
// A write waiting for the lock must not block the event loop (GET /health answers at once, over a
// real socket), a lock released before the deadline lets the write through, and a lock still held
// at the deadline is a 503 with Retry-After and the KError body, not a 500.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { App, post } from "../src/index.js";
import { createDatabaseModule, createSQLJobStore, createSQLRateLimitStore, createSQLRepository, openSQLite, type SQLDatabase } from "../src/entries/sql.js";
import { spawnChild, type Child } from "../harness/child.js";
import { killAll, startService } from "./fixtures/lifecycle-harness.js";
import { captureLogs } from "./helpers/logs.js";

const ROOT = resolve(import.meta.dirname, "..");
const dir = mkdtempSync(join(tmpdir(), "keelson-sqlite-lock-"));
let files = 0;
const newFile = () => join(dir, `db-${++files}.db`);
const holders: Child[] = [];
const opened: SQLDatabase[] = [];

afterAll(async () => {
  killAll();
  for (const holder of holders) if (holder.alive()) await holder.stop();
  for (const db of opened) await db.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Starts the foreign process and resolves once it holds the write lock. */
async function holdLock(file: string, holdMs?: number): Promise<Child> {
  const holder = spawnChild([process.execPath, "test/fixtures/sqlite-lock-holder.ts", file, ...(holdMs === undefined ? [] : [String(holdMs)])], { cwd: ROOT });
  holders.push(holder);
  await holder.waitFor(/^locked$/m);
  return holder;
}

type Row = { id: string };

async function bookstore(busyTimeoutMs: number) {
  const file = newFile();
  const db = openSQLite({ file, busyTimeoutMs });
  opened.push(db);
  const rows = createSQLRepository<Row>(db, { table: "rows", columns: { id: "text" } });
  await rows.init();
  const app = new App({ port: 0, logger: captureLogs().logger });
  app.use(createDatabaseModule(db));
  app.route(post("/rows", {}, async () => rows.create(undefined, { id: crypto.randomUUID() })));
  return { file, db, app, rows };
}

const timed = async <T>(work: Promise<T>): Promise<{ value: T; ms: number }> => {
  const start = performance.now();
  const value = await work;
  return { value, ms: performance.now() - start };
};

describe("a foreign process holding the SQLite write lock", () => {
  it("GET /health answers at once while a POST waits, and the POST is a 503 with Retry-After at the deadline", async () => {
    const file = newFile();
    // The service in its own process: a blocked event loop there cannot slow this test's clock.
    const service = await startService({ SQLITE_FILE: file, BUSY_MS: "3000" }, "test/fixtures/sqlite-lock-app.ts");
    await holdLock(file);
    const url = `http://127.0.0.1:${service.port}`;
    const write = timed(fetch(`${url}/rows`, { method: "POST" }));
    await service.waitFor(/writing/);
    const health = await timed(fetch(`${url}/health`));
    expect(health.value.status).toBe(200);
    // Blocked, it would wait for the rest of the 3 s busy timeout.
    expect(health.ms).toBeLessThan(1000);
    const { value: response, ms } = await write;
    expect(ms).toBeGreaterThan(2500);
    expect(response.status).toBe(503);
    expect(response.headers.get("retry-after")).toBe("1");
    expect(response.headers.get("content-type")).toBe("application/json;charset=UTF-8");
    // A 5xx body carries the request id the response echoes (docs/errors.md).
    expect(await response.json()).toEqual({
      status_code: 503, code: "SERVICE_UNAVAILABLE", message: "the database is busy (locked by another writer): retry later",
      request_id: response.headers.get("x-request-id"),
    });
    expect(service.output()).not.toMatch(/\b500\b/);
  });

  it("a lock released before the deadline lets the waiting write through (in-process)", async () => {
    const { file, app, rows } = await bookstore(5000);
    await holdLock(file, 1500);
    const { value: response, ms } = await timed(app.request("/rows", { method: "POST" }));
    expect(response.status).toBe(200);
    // It waited for the release (generous: this process may have seen "locked" late).
    expect(ms).toBeGreaterThan(300);
    expect(await rows.count(undefined)).toBe(1);
  });

  it("a migration (BEGIN IMMEDIATE) and the SQL stores wait without blocking, then fail with the 503 KError", async () => {
    const file = newFile();
    const db = openSQLite({ file, busyTimeoutMs: 1000 });
    opened.push(db);
    await holdLock(file);
    let ticks = 0;
    const timer = setInterval(() => ticks++, 10);
    try {
      const migration = timed(db.migrate((tx) => tx.query("CREATE TABLE t (x INTEGER)")).catch((error: unknown) => error));
      const rateLimit = createSQLRateLimitStore(db).take({ key: "k", limit: 5, windowMs: 60_000, algorithm: "fixed", now: Date.now(), want: 1 }).catch((error: unknown) => error);
      const claim = createSQLJobStore(db).claim("job", new Date(0), "me", new AbortController().signal).catch((error: unknown) => error);
      const { value: error, ms } = await migration;
      expect(ms).toBeGreaterThan(900);
      // The timer kept running while the three writers waited (blocked, it would not tick at all).
      expect(ticks).toBeGreaterThan(20);
      for (const failure of [error, await rateLimit, await claim]) {
        expect(failure).toMatchObject({ name: "KError", statusCode: 503, code: "SERVICE_UNAVAILABLE", headers: { "retry-after": "1" } });
      }
    } finally {
      clearInterval(timer);
    }
  });
});
