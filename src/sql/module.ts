import type { Module } from "../group.js";
import type { HealthChecker } from "../integrations.js";
import type { SQLDatabase } from "./database.js";
import { MS_ABOVE_0, checkNumber } from "../checks.js";

/** Options of `defineSQLHealthChecker()`. */
export interface SQLHealthCheckerOptions {
  /** The key in `/health`'s `checks` (default `"database"`). */
  name?: string;
  /** The probe's own limit (default 1000 ms), on top of the App's health timeout. */
  timeoutMs?: number;
}

/**
 * A health checker that runs `SELECT 1`: DOWN when the database does not answer within the
 * timeout (in PostgreSQL the query is cancelled on the server) or is closed.
 *
 * @example
 * app.registerHealthChecker(defineSQLHealthChecker(db, { timeoutMs: 500 }));
 */
export function defineSQLHealthChecker(db: SQLDatabase, options: SQLHealthCheckerOptions = {}): HealthChecker {
  const timeoutMs = checkNumber(options.timeoutMs ?? 1000, "timeoutMs", MS_ABOVE_0);
  return {
    name: options.name ?? "database",
    async check(signal) {
      await db.query("SELECT 1", [], AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]));
    },
  };
}

/**
 * Wires a database into an App: its health checker on `/health` and a shutdown hook that closes
 * it. Install it before the modules that use the database: hooks run in registration order, so
 * the connection closes after their own hooks.
 *
 * @example
 * const db = openSQLite({ file: "data/app.db" });
 * app.use(defineDatabaseModule(db));
 */
export function defineDatabaseModule(db: SQLDatabase, options: SQLHealthCheckerOptions = {}): Module {
  return {
    name: `database (${db.dialect})`,
    register(router) {
      router.app.registerHealthChecker(defineSQLHealthChecker(db, options));
      router.app.onShutdown(() => db.close(), `${options.name ?? "database"}: close`);
    },
  };
}
