import { openSQLite, type SQLDatabase } from "keelson/sql";

/** Where the notes live (relative to the working directory) when `NOTES_DB` is not set. */
export const DEFAULT_DB_FILE = "data/notes.db";

/**
 * The service's database: one SQLite file (`NOTES_DB`, default `data/notes.db`) shared by every
 * worker of the machine, so a note written through one worker reads back through any other.
 * Several machines (pods) need one server instead: `openPostgres({ url })` from `keelson/sql`.
 */
export function openDatabase(env: NodeJS.ProcessEnv = process.env): SQLDatabase {
  return openSQLite({ file: env.NOTES_DB || DEFAULT_DB_FILE });
}
