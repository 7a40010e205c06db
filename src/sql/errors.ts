/** SQLite's extended result codes for a UNIQUE or PRIMARY KEY constraint, PostgreSQL's SQLSTATE. */
const SQLITE_CONSTRAINT_PRIMARYKEY = 1555;
const SQLITE_CONSTRAINT_UNIQUE = 2067;
const PG_UNIQUE_VIOLATION = "23505";

/** True for a duplicate-key error of either engine (node:sqlite's `errcode`, postgres' `code`). */
export function isUniqueViolation(error: unknown): boolean {
  if (typeof error !== "object" || error === null) return false;
  const { errcode, code } = error as { errcode?: unknown; code?: unknown };
  return errcode === SQLITE_CONSTRAINT_UNIQUE || errcode === SQLITE_CONSTRAINT_PRIMARYKEY || code === PG_UNIQUE_VIOLATION;
}
