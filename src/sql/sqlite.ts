import { mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { DatabaseSync, SQLInputValue, StatementSync } from "node:sqlite";
import { setTimeout as sleep } from "node:timers/promises";
import type { SQLDatabase, SQLExecutor, SQLRow, SQLValue } from "./database.js";
import { databaseBusy, isBusy } from "./errors.js";
import { MAX_TIMER_MS, checkNumber } from "../checks.js";

/** Options of `openSQLite()`. */
export interface SQLiteOptions {
  /** The database file (its folder is created), or `":memory:"` for a private in-memory database. */
  file: string;
  /**
   * How long a write waits for another process's write lock (default 5000 ms) before it fails with
   * a 503 `SERVICE_UNAVAILABLE` KError (`Retry-After: 1`). The wait does not block the event loop:
   * the statement is retried on timers, with backoff, until the lock is free or the time is up.
   */
  busyTimeoutMs?: number;
}

/** First pause before a busy statement is tried again, ms; it doubles up to MAX_RETRY_MS. */
const FIRST_RETRY_MS = 1;
/** The longest pause between two tries: how late, at most, a waiting write notices the lock is free. */
const MAX_RETRY_MS = 20;

/**
 * Runs `attempt` until it does not fail with SQLITE_BUSY, pausing on a timer between tries (the
 * handle's own busy timeout is 0, so a try never waits inside SQLite), for at most `timeoutMs`;
 * then fails with the 503 of `databaseBusy`. An aborted signal ends the wait with its reason.
 */
async function retryWhileBusy<R>(attempt: () => R, timeoutMs: number, signal: AbortSignal | undefined): Promise<R> {
  const deadline = performance.now() + timeoutMs;
  for (let pause = FIRST_RETRY_MS; ; pause = Math.min(pause * 2, MAX_RETRY_MS)) {
    try {
      return attempt();
    } catch (error) {
      if (!isBusy(error)) throw error;
      const left = deadline - performance.now();
      if (left <= 0) throw databaseBusy(error);
      // Ends with the signal's own reason, as the check before each try does.
      await sleep(Math.min(pause, left), undefined, { signal }).catch((abort: unknown) => Promise.reject(signal?.aborted ? signal.reason : abort));
    }
  }
}

/** Prepared statements kept per handle. */
const MAX_STATEMENTS = 200;

/**
 * The running migration of each database file in this process. While one handle's write
 * transaction is open, another handle on the same file in the same thread has no reason to try to
 * write: it would only find the lock taken, try after try, until the commit. Queries of every handle
 * on the file wait for it; so do queries of the handle itself, which would otherwise run inside the
 * open transaction.
 */
const migrations = new Map<string | symbol, Promise<unknown>>();

async function afterMigration(key: string | symbol): Promise<void> {
  for (let running = migrations.get(key); running; running = migrations.get(key)) await running.catch(() => {});
}

let sqlite: typeof import("node:sqlite") | undefined;

/**
 * node:sqlite, loaded on the first openSQLite() (PostgreSQL users never load it). Node 22 marks it
 * experimental and prints that warning once per process, in every worker: that one warning is
 * dropped (Node 24 no longer prints it); every other warning goes through.
 */
function loadSQLite(): typeof import("node:sqlite") {
  if (sqlite) return sqlite;
  const emitWarning = process.emitWarning;
  process.emitWarning = function filtered(this: NodeJS.Process, warning: string | Error, ...rest: unknown[]) {
    if (String(warning instanceof Error ? warning.message : warning).startsWith("SQLite is an experimental feature")) return;
    return Reflect.apply(emitWarning, this, [warning, ...rest]);
  } as typeof process.emitWarning;
  try {
    return (sqlite = process.getBuiltinModule("node:sqlite"));
  } finally {
    process.emitWarning = emitWarning;
  }
}

function toSQLite(value: SQLValue): SQLInputValue {
  return typeof value === "boolean" ? (value ? 1 : 0) : value;
}

/**
 * `PRAGMA journal_mode = WAL`, retried while another process holds the lock. Two processes opening a
 * new file at once can get SQLITE_BUSY here without the busy handler being called (SQLite does not
 * wait inside a journal-mode change, to avoid a deadlock); CI saw it with two services starting on one file.
 */
function switchToWAL(db: DatabaseSync, busyTimeoutMs: number): void {
  const deadline = Date.now() + busyTimeoutMs;
  for (;;) {
    try {
      db.exec("PRAGMA journal_mode = WAL");
      return;
    } catch (error) {
      if ((error as { errcode?: number }).errcode !== 5 || Date.now() >= deadline) throw error;
      // A synchronous 10 ms pause: the database is opened synchronously, at import time.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
    }
  }
}

/**
 * Opens a SQLite database through `node:sqlite` (no dependency): the embedded default. Every
 * worker of a cluster may open the same file: it is switched to WAL (readers never wait for the
 * writer) and a writer that finds the lock taken tries again on a timer, for up to the busy
 * timeout, without blocking the event loop; then it fails with a 503 KError and `Retry-After`.
 *
 * A statement runs synchronously on the worker's thread: an `AbortSignal` is checked before each
 * try, but a statement that has started runs to its end.
 *
 * @example
 * const db = openSQLite({ file: "data/app.db" });
 * const rows = await db.query("SELECT id FROM books WHERE year > ?", [2000]);
 */
export function openSQLite(options: SQLiteOptions): SQLDatabase {
  const memory = options.file === ":memory:";
  if (!memory) mkdirSync(dirname(options.file), { recursive: true });
  const db: DatabaseSync = new (loadSQLite().DatabaseSync)(options.file);
  // busy_timeout first: switching to WAL takes a lock that another starting worker may hold. That
  // switch happens once, synchronously, at open; afterwards SQLite must never wait inside a
  // statement (it would block the event loop), so the handle's own timeout drops to 0 and
  // retryWhileBusy waits on timers instead.
  const busyTimeoutMs = checkNumber(options.busyTimeoutMs ?? 5000, "busyTimeoutMs", { integer: true, min: 0, max: MAX_TIMER_MS });
  db.exec(`PRAGMA busy_timeout = ${busyTimeoutMs}`);
  if (!memory) switchToWAL(db, busyTimeoutMs);
  db.exec("PRAGMA busy_timeout = 0");
  // Durable at each checkpoint rather than each commit: the usual WAL setting (no corruption risk).
  db.exec("PRAGMA synchronous = NORMAL");
  const statements = new Map<string, StatementSync>();
  const key = memory ? Symbol("memory") : resolve(options.file);
  let closed = false;

  const run = <R extends SQLRow>(sql: string, params: readonly SQLValue[], signal: AbortSignal | undefined): R[] => {
    signal?.throwIfAborted();
    if (closed) throw new Error("the database is closed");
    let statement = statements.get(sql);
    if (!statement) {
      // Bounded: queries built with varying text must not grow the cache without end.
      if (statements.size >= MAX_STATEMENTS) statements.delete(statements.keys().next().value!);
      statement = db.prepare(sql);
      statements.set(sql, statement);
    }
    return statement.all(...params.map(toSQLite)) as R[];
  };

  const handle: SQLDatabase = {
    dialect: "sqlite",
    async query<R extends SQLRow = SQLRow>(sql: string, params: readonly SQLValue[] = [], signal?: AbortSignal) {
      await afterMigration(key);
      return retryWhileBusy(() => run<R>(sql, params, signal), busyTimeoutMs, signal);
    },
    async migrate<R>(work: (tx: SQLExecutor) => Promise<R>, signal?: AbortSignal): Promise<R> {
      // Queued behind the file's running migration, registered synchronously: two calls never both begin.
      const step = (migrations.get(key) ?? Promise.resolve()).catch(() => {}).then(async () => {
        signal?.throwIfAborted();
        // IMMEDIATE takes the write lock now (waiting up to the busy timeout): a deferred transaction
        // that reads first and writes later could fail with SQLITE_BUSY in the middle instead.
        await retryWhileBusy(() => run("BEGIN IMMEDIATE", [], undefined), busyTimeoutMs, signal);
        try {
          const result = await work({ query: async (sql, params = [], s) => run(sql, params, s) });
          // A COMMIT refused with SQLITE_BUSY leaves the transaction open: trying again is what SQLite asks for.
          await retryWhileBusy(() => run("COMMIT", [], undefined), busyTimeoutMs, undefined);
          return result;
        } catch (error) {
          run("ROLLBACK", [], undefined);
          throw error;
        }
      });
      migrations.set(key, step);
      try {
        return await step;
      } finally {
        if (migrations.get(key) === step) migrations.delete(key);
      }
    },
    async close() {
      if (closed) return;
      closed = true;
      statements.clear();
      db.close();
    },
  };
  return handle;
}
