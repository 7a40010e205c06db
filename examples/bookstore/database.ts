import { openPostgres, openSQLite, type SQLDatabase } from "../../src/entries/sql.js";

/** Where the catalogue lives when `DATABASE_URL` is not set (relative to the working directory). */
export const DEFAULT_DB_FILE = "data/bookstore.db";

/**
 * The bookstore's database: PostgreSQL when `DATABASE_URL` is set (several pods), otherwise one
 * SQLite file (`BOOKSTORE_DB`, default `data/bookstore.db`) shared by every worker of the machine.
 */
export function openBookstoreDatabase(env: NodeJS.ProcessEnv = process.env): SQLDatabase {
  if (env.DATABASE_URL) return openPostgres({ url: env.DATABASE_URL });
  return openSQLite({ file: env.BOOKSTORE_DB || DEFAULT_DB_FILE });
}
