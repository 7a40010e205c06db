import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll } from "vitest";
import { InMemoryRepository } from "../src/index.js";
import { createSQLRepository, openPostgres, openSQLite, type SQLDatabase } from "../src/sql/index.js";
import { startPostgres, type TestPostgres } from "./helpers/postgres.js";
import { describeRepositoryContract, ITEM_COLUMNS, type Item } from "./helpers/repository-contract.js";

const opened: SQLDatabase[] = [];
const dir = mkdtempSync(join(tmpdir(), "keelson-contract-"));
let pg: TestPostgres | undefined;
let files = 0;

beforeAll(async () => {
  pg = await startPostgres();
}, 120_000);

afterAll(async () => {
  for (const db of opened.splice(0)) await db.close();
  await pg?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function onTable(db: SQLDatabase) {
  opened.push(db);
  return createSQLRepository<Item>(db, { table: "items", columns: ITEM_COLUMNS });
}

describeRepositoryContract("InMemoryRepository", async () => new InMemoryRepository<Item>((i) => i.id));
describeRepositoryContract("SQLite (file, WAL)", async () => onTable(openSQLite({ file: join(dir, `contract-${++files}.db`) })));
describeRepositoryContract("SQLite (:memory:)", async () => onTable(openSQLite({ file: ":memory:" })));
describeRepositoryContract("PostgreSQL", async () => onTable(openPostgres({ url: await pg!.createDatabase() })));
