import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, describe, it } from "vitest";
import { createSQLRateLimitStore, openSQLite, type SQLDatabase } from "../src/entries/sql.js";
import { killAllChildren } from "../harness/child.js";
import { usePostgres } from "./helpers/postgres.js";
import { expectTwoServicesShareTheLimit, rateLimitStoreContract } from "./helpers/rate-limit-contract.js";

// The SQL rate-limit store against real databases: a SQLite file shared by two real processes,
// and a throwaway PostgreSQL server reached through two separate connection pools (two "machines").
const ROOT = fileURLToPath(new URL("..", import.meta.url));

afterEach(killAllChildren);

describe("SQLite: one file, two processes", () => {
  it("two services on one file serve exactly the limit between them; the rest get 429", async () => {
    const dir = mkdtempSync(join(tmpdir(), "keelson-rate-"));
    try {
      await expectTwoServicesShareTheLimit(ROOT, { RATE_LIMIT_SQLITE: join(dir, "limits.db") });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});

describe("SQLite: the store contract, two handles on one file", () => {
  const dir = mkdtempSync(join(tmpdir(), "keelson-rate-"));
  const opened: SQLDatabase[] = [];
  let files = 0;
  afterAll(async () => {
    for (const db of opened.splice(0)) await db.close();
    rmSync(dir, { recursive: true, force: true });
  });
  rateLimitStoreContract(async () => {
    const file = join(dir, `limits-${++files}.db`);
    const dbs = [openSQLite({ file }), openSQLite({ file })];
    opened.push(...dbs);
    return dbs.map((db) => createSQLRateLimitStore(db));
  });
});

describe("PostgreSQL: the store contract, two pools", () => {
  const pg = usePostgres();
  rateLimitStoreContract(async () => (await pg.openDatabase(2, { max: 4 })).map((db) => createSQLRateLimitStore(db)));
});
