import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll } from "vitest";
import { InMemoryRepository } from "../src/index.js";
import { createSQLRepository, openSQLite, type SQLDatabase } from "../src/entries/sql.js";
import { usePostgres } from "./helpers/postgres.js";
import { describeRepositoryContract, ITEM_COLUMNS, type Item } from "./helpers/repository-contract.js";

const opened: SQLDatabase[] = [];
const dir = mkdtempSync(join(tmpdir(), "keelson-contract-"));
const pg = usePostgres();
let files = 0;

afterAll(async () => {
  for (const db of opened.splice(0)) await db.close();
  rmSync(dir, { recursive: true, force: true });
});

const onTable = (db: SQLDatabase) => createSQLRepository<Item>(db, { table: "items", columns: ITEM_COLUMNS });
const sqlite = (file: string) => {
  const db = openSQLite({ file });
  opened.push(db);
  return db;
};

describeRepositoryContract("InMemoryRepository", async () => new InMemoryRepository<Item>((i) => i.id));
describeRepositoryContract("SQLite (file, WAL)", async () => onTable(sqlite(join(dir, `contract-${++files}.db`))));
describeRepositoryContract("SQLite (:memory:)", async () => onTable(sqlite(":memory:")));
describeRepositoryContract("PostgreSQL", async () => onTable((await pg.openDatabase())[0]!));
