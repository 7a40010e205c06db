import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { App } from "../src/index.js";
import { createDatabaseModule, createSQLHealthChecker, createSQLRepository, openSQLite, type SQLDatabase } from "../src/entries/sql.js";
import { spawnChild } from "../harness/child.js";
import { captureLogs } from "./helpers/logs.js";

const ROOT = resolve(import.meta.dirname, "..");
const dir = mkdtempSync(join(tmpdir(), "keelson-sqlite-"));
let files = 0;
const newFile = () => join(dir, `db-${++files}`, "test.db");
const opened: SQLDatabase[] = [];
const open = (file: string) => {
  const db = openSQLite({ file });
  opened.push(db);
  return db;
};
type Row = { id: string; writer: string };
const table = (db: SQLDatabase, seed?: Row[]) => createSQLRepository<Row>(db, { table: "rows", columns: { id: "text", writer: "text" }, seed });

afterAll(async () => {
  for (const db of opened) await db.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("openSQLite", () => {
  it("creates the file's folder and switches it to WAL; SQLite itself never waits for a lock (keelson retries on timers)", async () => {
    const db = open(newFile());
    expect(await db.query("PRAGMA journal_mode")).toEqual([{ journal_mode: "wal" }]);
    expect(await db.query("PRAGMA busy_timeout")).toEqual([{ timeout: 0 }]);
  });

  it("leaves process.emitWarning as it found it (only node:sqlite's experimental warning is dropped, on Node 22)", () => {
    const before = process.emitWarning;
    open(":memory:");
    expect(process.emitWarning).toBe(before);
  });

  it("shares one file between handles: a write through one is read through the other", async () => {
    const file = newFile();
    const [a, b] = [table(open(file)), table(open(file))];
    await a.create(undefined, { id: "x", writer: "a" });
    expect(await b.findById(undefined, "x")).toEqual({ id: "x", writer: "a" });
  });

  it("seeds only the call that creates the table: a deleted seed row stays deleted", async () => {
    const file = newFile();
    const seed = [{ id: "s1", writer: "seed" }, { id: "s2", writer: "seed" }];
    const first = table(open(file), seed);
    expect(await first.count(undefined)).toBe(2);
    await first.delete(undefined, "s1");
    const second = table(open(file), seed);
    await second.init();
    expect((await second.findAll(undefined, { page: 1, limit: 10 })).data.map((r) => r.id)).toEqual(["s2"]);
  });

  it("lets two handles of one process create the same file's table at once (no self-deadlock on the write lock)", async () => {
    const file = newFile();
    const seed = [{ id: "s1", writer: "seed" }];
    const started = Date.now();
    const [a, b] = [table(open(file), seed), table(open(file), seed)];
    await Promise.all([a.create(undefined, { id: "a", writer: "a" }), b.create(undefined, { id: "b", writer: "b" })]);
    expect((await a.findAll(undefined, { page: 1, limit: 10 })).data.map((r) => r.id).toSorted()).toEqual(["a", "b", "s1"]);
    // Far below the 5 s busy timeout a blocked thread would have waited for.
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it("rolls back a failed migration and lets other queries wait for a running one", async () => {
    const db = open(newFile());
    await expect(db.migrate(async (tx) => {
      await tx.query("CREATE TABLE t (x INTEGER)");
      throw new Error("half-way");
    })).rejects.toThrow("half-way");
    expect(await db.query("SELECT name FROM sqlite_master WHERE name = 't'")).toEqual([]);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let entered!: () => void;
    const inside = new Promise<void>((r) => (entered = r));
    const migrating = db.migrate(async (tx) => {
      await tx.query("CREATE TABLE t (x INTEGER)");
      entered();
      await gate;
      await tx.query("INSERT INTO t VALUES (1)");
    });
    await inside;
    // Issued mid-migration: it must see the committed row, not run inside the open transaction.
    const reading = db.query("SELECT count(*) AS n FROM t");
    release();
    await migrating;
    expect(await reading).toEqual([{ n: 1 }]);
  });

  it("loses no write when 4 processes create the table and insert into the same file at once", async () => {
    const file = newFile();
    const writers = ["w1", "w2", "w3", "w4"].map((tag) => spawnChild([process.execPath, "--import", "tsx", "test/fixtures/sqlite-writer.ts", file, tag, "60"], { cwd: ROOT }));
    for (const writer of writers) expect({ exit: (await writer.exited).code, output: writer.output() }).toEqual({ exit: 0, output: "done\n" });
    const rows = (await table(open(file)).findAll(undefined, { page: 1, limit: 100 })).total;
    expect(rows).toBe(241);
    const ids = (await open(file).query<{ id: string }>("SELECT id FROM rows")).map((r) => r.id);
    expect(new Set(ids).size).toBe(241);
    expect(ids.filter((id) => id === "seed")).toHaveLength(1);
  }, 60_000);

  it("never loads the postgres driver for a SQLite user (postgres is an optional peer dependency)", async () => {
    expect(await runWithoutPostgres()).toBe("sqlite: 1 row\n");
    // The control: openPostgres() does resolve it, and says what to install when it cannot.
    expect(await runWithoutPostgres("pg")).toBe("sqlite: 1 row\npostgres: openPostgres() needs the `postgres` package: npm install postgres (the postgres package was loaded)\n");
  });

  it("rejects table and column names that are not plain identifiers", () => {
    const db = open(":memory:");
    expect(() => createSQLRepository(db, { table: 'x"; DROP TABLE y; --', columns: { id: "text" } })).toThrow(/invalid SQL identifier/);
    expect(() => createSQLRepository<{ id: string; "a b": string }>(db, { table: "x", columns: { id: "text", "a b": "text" } })).toThrow(/invalid SQL identifier/);
  });
});

/** Runs the fixture that opens SQLite (and, with "pg", PostgreSQL) and prints what it loaded. */
async function runWithoutPostgres(...args: string[]): Promise<string> {
  const child = spawnChild([process.execPath, "--import", "tsx", "test/fixtures/sql-without-postgres.ts", ...args], { cwd: ROOT });
  expect((await child.exited).code, child.output()).toBe(0);
  return child.output();
}

describe("createDatabaseModule on SQLite", () => {
  it("answers /health UP, a duplicate id is a 409 response, and shutdown closes the database", async () => {
    const db = openSQLite({ file: newFile() });
    const rows = table(db);
    const app = new App({ logger: captureLogs().logger, port: 0 });
    app.use(createDatabaseModule(db));
    app.route((await import("../src/index.js")).post("/rows", {}, async () => rows.create(undefined, { id: "same", writer: "app" })));
    expect(await (await app.request("/health")).json()).toMatchObject({ status: "UP", checks: { database: "UP" } });
    expect((await app.request("/rows", { method: "POST" })).status).toBe(200);
    const duplicate = await app.request("/rows", { method: "POST" });
    expect({ status: duplicate.status, body: await duplicate.json() }).toEqual({
      status: 409, body: { status_code: 409, code: "CONFLICT", message: "an entity with id same already exists" },
    });
    const report = await app.close();
    expect(report.failedHooks).toEqual([]);
    await expect(db.query("SELECT 1")).rejects.toThrow("the database is closed");
    await expect(Promise.resolve(createSQLHealthChecker(db).check(new AbortController().signal))).rejects.toThrow("closed");
  });
});
