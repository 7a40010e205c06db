import { KError } from "../errors.js";

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

/** SQLITE_BUSY, whatever its extended code (BUSY_RECOVERY, BUSY_SNAPSHOT, BUSY_TIMEOUT). */
export function isBusy(error: unknown): boolean {
  const errcode = (error as { errcode?: unknown } | null)?.errcode;
  return typeof errcode === "number" && (errcode & 0xff) === 5;
}

/**
 * The error of a write that waited its whole busy timeout for another process's lock: a 503 the
 * client may retry (with `Retry-After`), not a 500, since nothing is wrong with the request.
 */
export function databaseBusy(cause: unknown): KError {
  return new KError("SERVICE_UNAVAILABLE", 503, "the database is busy (locked by another writer): retry later", {
    cause, headers: { "retry-after": "1" },
  });
}
