/** A value bound to a `?` (SQLite) or `$1` (PostgreSQL) placeholder. */
export type SQLValue = string | number | bigint | boolean | null | Uint8Array;

/** One result row, keyed by column name. */
export type SQLRow = Record<string, unknown>;

/** Runs statements; what `migrate()` hands its callback (bound to the migration's transaction). */
export interface SQLExecutor {
  /**
   * Runs one statement in the engine's own SQL and resolves its rows (`[]` for a statement that
   * returns none). Placeholders are `?` in SQLite and `$1, $2…` in PostgreSQL.
   */
  query<R extends SQLRow = SQLRow>(sql: string, params?: readonly SQLValue[], signal?: AbortSignal): Promise<R[]>;
}

/**
 * A database handle shared by the repositories of one process: what `openSQLite()` and
 * `openPostgres()` return. Close it from a shutdown hook (`createDatabaseModule()` does).
 */
export interface SQLDatabase extends SQLExecutor {
  readonly dialect: "sqlite" | "postgres";
  /**
   * Runs schema work in one transaction, one process at a time across every process sharing the
   * database (SQLite: `BEGIN IMMEDIATE`; PostgreSQL: a transaction-scoped advisory lock), so N
   * workers starting at once each see the schema either absent or complete.
   */
  migrate<R>(work: (tx: SQLExecutor) => Promise<R>, signal?: AbortSignal): Promise<R>;
  /** Closes the connection(s); queries after it reject. Resolves once everything is released. */
  close(): Promise<void>;
}

/**
 * `CREATE TABLE IF NOT EXISTS …` run in a migration at the first call, then never again; a failure
 * (the database was down) is tried again at the next call. What a store's first use awaits.
 */
export function createTableOnce(db: SQLDatabase, ddl: string): () => Promise<unknown> {
  let ready: Promise<unknown> | undefined;
  return () => (ready ??= db.migrate((tx) => tx.query(ddl)).catch((error: unknown) => {
    ready = undefined;
    throw error;
  }));
}
