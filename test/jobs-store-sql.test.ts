// createSQLJobStore against real databases: the JobStore contract on a SQLite file shared by two
// handles and on a throwaway PostgreSQL server through two pools (two pods), and the pruning of rows.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createSQLJobStore, openSQLite, type SQLDatabase } from "../src/entries/sql.js";
import { describeJobStoreContract } from "./helpers/job-store.js";
import { usePostgres } from "./helpers/postgres.js";

const never = new AbortController().signal;
const opened: SQLDatabase[] = [];
const dir = mkdtempSync(join(tmpdir(), "keelson-job-store-"));
let files = 0;
const pg = usePostgres();

afterAll(async () => {
  for (const db of opened.splice(0)) await db.close();
  rmSync(dir, { recursive: true, force: true });
});

const sqlite = () => {
  const file = join(dir, `jobs-${++files}.db`);
  const dbs = [openSQLite({ file }), openSQLite({ file })];
  opened.push(...dbs);
  return dbs;
};
const postgres = () => pg.openDatabase(2, { max: 2 });

describeJobStoreContract("SQLite, two handles on one file", async () => {
  const [a, b] = sqlite();
  return [createSQLJobStore(a!, { leaseMs: 1000 }), createSQLJobStore(b!, { leaseMs: 1000 })];
});

describeJobStoreContract("PostgreSQL, two pools", async () => {
  const [a, b] = await postgres();
  return [createSQLJobStore(a!, { leaseMs: 1000 }), createSQLJobStore(b!, { leaseMs: 1000 })];
});

describe("createSQLJobStore", () => {
  it("refuses bad options with their name and value", () => {
    const [db] = sqlite();
    expect(() => createSQLJobStore(db!, { table: "Bad Name" })).toThrow(/table must be a lowercase SQL identifier, got "Bad Name"/);
    expect(() => createSQLJobStore(db!, { leaseMs: 500 })).toThrow(/leaseMs must be a whole number of milliseconds, at least 1000; got 500/);
    expect(() => createSQLJobStore(db!, { retainMs: 1.5 })).toThrow(/retainMs must be .* got 1.5/);
    expect(createSQLJobStore(db!).leaseMs).toBe(20_000);
  });

  for (const [engine, open] of [["SQLite", async () => sqlite()[0]!], ["PostgreSQL", async () => (await postgres())[0]!]] as const) {
    it(`${engine}: a finish prunes rows older than retainMs (finished, or unfinished with a lease run out), never a live lease`, async () => {
      const db = await open();
      const store = createSQLJobStore(db, { leaseMs: 1000, retainMs: 60_000 });
      const old = Date.now() - 120_000;
      for (const [i, at] of [old, old + 1000, old + 2000].entries()) expect(await store.claim("old", new Date(at), `pod-${i}`, never)).toBe(true);
      expect(await store.claim("new", new Date(), "pod-0", never)).toBe(true);
      // Every lease runs out; pod-3 takes the third tick over (a live lease again).
      await new Promise((resolve) => setTimeout(resolve, 1100));
      expect(await store.claim("old", new Date(old + 2000), "pod-3", never)).toBe(true);
      // The first finish of the process prunes.
      expect(await store.finish("old", new Date(old), "pod-0", never)).toBe(true);
      const rows = await db.query<{ job: string; scheduled_at: string | number }>("SELECT job, scheduled_at FROM keelson_job_leases ORDER BY scheduled_at");
      expect(rows.map((row) => [row.job, Number(row.scheduled_at) - old])).toEqual([["old", 2000], ["new", expect.any(Number)]]);
    });
  }
});
