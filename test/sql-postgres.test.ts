import { beforeAll, describe, expect, it } from "vitest";
import { App } from "../src/index.js";
import { createDatabaseModule, createSQLHealthChecker, createSQLRepository, openPostgres, type SQLDatabase } from "../src/entries/sql.js";
import { captureLogs } from "./helpers/logs.js";
import { usePostgres } from "./helpers/postgres.js";
import { delay } from "../harness/child.js";

const pg = usePostgres();
let admin: SQLDatabase;
const open = (url: string, max?: number) => pg.open(url, { max });
type Row = { id: string; writer: string };
const table = (db: SQLDatabase, seed?: Row[]) => createSQLRepository<Row>(db, { table: "rows", columns: { id: "text", writer: "text" }, seed });

/** Rows of pg_stat_activity running `pg_sleep` (other than the probe itself). */
async function sleepers(): Promise<{ pid: number; state: string }[]> {
  return admin.query("SELECT pid, state FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(%' AND pid <> pg_backend_pid() AND state = 'active'");
}

async function until<T>(probe: () => Promise<T>, ok: (value: T) => boolean, what: string): Promise<T> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const value = await probe();
    if (ok(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await delay(50);
  }
}

beforeAll(() => {
  admin = open(pg.url, 1);
});

describe("openPostgres", () => {
  it("cancels the running query on the server when the signal aborts", async () => {
    const db = open(await pg.createDatabase());
    const controller = new AbortController();
    const started = Date.now();
    const running = db.query("SELECT pg_sleep(30)", [], controller.signal).then(() => "finished", (e: unknown) => e);
    await until(sleepers, (rows) => rows.length === 1, "pg_sleep to run");
    controller.abort(new DOMException("client went away", "AbortError"));
    expect(await running).toMatchObject({ name: "AbortError", message: "client went away" });
    expect(Date.now() - started).toBeLessThan(15_000);
    // Cancelled on the server, not just abandoned by the client: the backend is idle again.
    await until(sleepers, (rows) => rows.length === 0, "the backend to stop sleeping");
    expect(await db.query("SELECT 1 AS one")).toEqual([{ one: 1 }]);
  });

  it("creates the schema and seeds once when 4 processes' pools start at once", async () => {
    const url = await pg.createDatabase();
    const seed = [{ id: "s1", writer: "seed" }];
    const repos = Array.from({ length: 4 }, () => table(open(url, 2), seed));
    await Promise.all(repos.map((r, i) => r.create(undefined, { id: `w${i}`, writer: `w${i}` })));
    expect((await repos[0]!.findAll(undefined, { page: 1, limit: 10 })).total).toBe(5);
    expect((await open(url).query("SELECT id FROM rows WHERE id = 's1'")).length).toBe(1);
  });

  it("reports DOWN within the health timeout when the server is unreachable, and UP when it answers", async () => {
    const up = createSQLHealthChecker(open(await pg.createDatabase()));
    await up.check(new AbortController().signal);
    // A port nothing listens on: the connection attempt fails or times out; either way DOWN, fast.
    const down = createSQLHealthChecker(openPostgres({ url: "postgres://keelson@127.0.0.1:1/none", connectTimeoutSeconds: 30 }), { timeoutMs: 300 });
    const started = Date.now();
    await expect(Promise.resolve(down.check(new AbortController().signal))).rejects.toBeDefined();
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("answers a duplicate id with 409 and closes its connections on shutdown", async () => {
    const url = await pg.createDatabase();
    const name = new URL(url).pathname.slice(1);
    const db = openPostgres({ url });
    const rows = table(db);
    const app = new App({ logger: captureLogs().logger });
    app.use(createDatabaseModule(db));
    const { post } = await import("../src/index.js");
    app.route(post("/rows", {}, async () => rows.create(undefined, { id: "same", writer: "app" })));
    expect(await (await app.request("/health")).json()).toMatchObject({ status: "UP", checks: { database: "UP" } });
    expect((await app.request("/rows", { method: "POST" })).status).toBe(200);
    const duplicate = await app.request("/rows", { method: "POST" });
    expect({ status: duplicate.status, body: await duplicate.json() }).toEqual({
      status: 409, body: { status_code: 409, code: "CONFLICT", message: "an entity with id same already exists" },
    });
    const count = async () => Number((await admin.query("SELECT count(*) AS n FROM pg_stat_activity WHERE datname = $1", [name]))[0]?.n);
    expect(await count()).toBeGreaterThan(0);
    expect((await app.close()).failedHooks).toEqual([]);
    await until(count, (n) => n === 0, "the pool's connections to close");
    await expect(db.query("SELECT 1")).rejects.toThrow("the database is closed");
  });
});
