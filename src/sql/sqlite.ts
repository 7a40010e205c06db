import { mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { DatabaseSync, SQLInputValue, StatementSync } from "node:sqlite";
import type { SQLDatabase, SQLExecutor, SQLRow, SQLValue } from "./database.js";

/** Options of `openSQLite()`. */
export interface SQLiteOptions {
  /** The database file (its folder is created), or `":memory:"` for a private in-memory database. */
  file: string;
  /**
   * How long a write waits for another process's write lock before failing with SQLITE_BUSY
   * (default 5000 ms). node:sqlite is synchronous: the waiting worker's event loop is blocked
   * meanwhile, so keep write transactions short.
   */
  busyTimeoutMs?: number;
}

/** Prepared statements kept per handle. */
const MAX_STATEMENTS = 200;

/**
 * The running migration of each database file in this process. While one handle's write
 * transaction is open, another handle on the same file in the same thread must not even try to
 * write: its busy wait would block the very thread that has to commit (a deadlock until the busy
 * timeout). Queries of every handle on the file wait for it; so do queries of the handle itself,
 * which would otherwise run inside the open transaction.
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
 * writer) and writers queue on the busy timeout instead of failing.
 *
 * Queries run synchronously on the worker's thread: an `AbortSignal` is checked before each
 * statement, but a statement that has started runs to its end.
 *
 * @example
 * const db = openSQLite({ file: "data/app.db" });
 * const rows = await db.query("SELECT id FROM books WHERE year > ?", [2000]);
 */
export function openSQLite(options: SQLiteOptions): SQLDatabase {
  const memory = options.file === ":memory:";
  if (!memory) mkdirSync(dirname(options.file), { recursive: true });
  const db: DatabaseSync = new (loadSQLite().DatabaseSync)(options.file);
  // busy_timeout first: switching to WAL takes a lock that another starting worker may hold.
  const busyTimeoutMs = Math.max(0, Math.trunc(options.busyTimeoutMs ?? 5000));
  db.exec(`PRAGMA busy_timeout = ${busyTimeoutMs}`);
  if (!memory) switchToWAL(db, busyTimeoutMs);
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
      return run<R>(sql, params, signal);
    },
    async migrate<R>(work: (tx: SQLExecutor) => Promise<R>, signal?: AbortSignal): Promise<R> {
      // Queued behind the file's running migration, registered synchronously: two calls never both begin.
      const step = (migrations.get(key) ?? Promise.resolve()).catch(() => {}).then(async () => {
        signal?.throwIfAborted();
        // IMMEDIATE takes the write lock now (waiting on the busy timeout): a deferred transaction
        // that reads first and writes later could fail with SQLITE_BUSY instead of waiting.
        run("BEGIN IMMEDIATE", [], undefined);
        try {
          const result = await work({ query: async (sql, params = [], s) => run(sql, params, s) });
          run("COMMIT", [], undefined);
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
