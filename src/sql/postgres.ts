import type { Sql, TransactionSql } from "postgres";
import type { SQLDatabase, SQLExecutor, SQLRow, SQLValue } from "./database.js";
import { MAX_TIMER_MS, checkOptionalNumber } from "../checks.js";
import { lazyImport } from "../lazy-package.js";

/** Options of `openPostgres()`. */
export interface PostgresOptions {
  /** A connection URL, e.g. `postgres://user:password@db:5432/app` (libpq's URL form). */
  url: string;
  /** Connections in this process's pool (default 10): the server's limit is shared by every worker and pod. */
  max?: number;
  /** Seconds to wait for a connection before a query fails (default 10). */
  connectTimeoutSeconds?: number;
}

/** Every migrate() of every process takes this advisory lock (pg_advisory_xact_lock's key). */
const MIGRATION_LOCK = "keelson:migrate";

type Driver = Sql<Record<string, never>>;

// The package's ESM build has a default export; its types describe it as `export =`.
const loadPostgres = lazyImport("postgres", async () => ((await import("postgres")) as unknown as { default: typeof import("postgres") }).default);

async function loadDriver(options: PostgresOptions): Promise<Driver> {
  const postgres = await loadPostgres("openPostgres()");
  return postgres(options.url, {
    max: options.max ?? 10,
    connect_timeout: options.connectTimeoutSeconds ?? 10,
    // Notices ("relation already exists, skipping") are not errors; the default prints them.
    onnotice: () => {},
  }) as Driver;
}

/** Runs one statement; an abort cancels it on the server (a CancelRequest) and rejects with the signal's reason. */
async function run<R extends SQLRow>(sql: Driver | TransactionSql<Record<string, never>>, text: string, params: readonly SQLValue[], signal: AbortSignal | undefined): Promise<R[]> {
  signal?.throwIfAborted();
  const pending = sql.unsafe(text, params as never[]);
  const cancel = () => pending.cancel();
  signal?.addEventListener("abort", cancel, { once: true });
  try {
    return [...(await pending)] as unknown as R[];
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    throw error;
  } finally {
    signal?.removeEventListener("abort", cancel);
  }
}

/**
 * Opens a PostgreSQL connection pool through the `postgres` package (an optional peer
 * dependency, loaded on first use: SQLite users never load it). Connections open lazily; an
 * aborted `AbortSignal` cancels the running query on the server.
 *
 * @example
 * const db = openPostgres({ url: process.env.DATABASE_URL! });
 * app.use(createDatabaseModule(db));
 */
export function openPostgres(options: PostgresOptions): SQLDatabase {
  checkOptionalNumber(options.max, "max", { integer: true, min: 1 });
  checkOptionalNumber(options.connectTimeoutSeconds, "connectTimeoutSeconds", { above: 0, max: MAX_TIMER_MS / 1000 });
  const driver = loadDriver(options);
  // Reported by the first query; not an unhandled rejection meanwhile.
  driver.catch(() => {});
  let closed = false;
  const open = async () => {
    if (closed) throw new Error("the database is closed");
    return driver;
  };
  return {
    dialect: "postgres",
    async query<R extends SQLRow = SQLRow>(text: string, params: readonly SQLValue[] = [], signal?: AbortSignal) {
      return run<R>(await open(), text, params, signal);
    },
    async migrate<R>(work: (tx: SQLExecutor) => Promise<R>, signal?: AbortSignal): Promise<R> {
      const sql = await open();
      signal?.throwIfAborted();
      const result = await sql.begin(async (tx) => {
        await run(tx, "SELECT pg_advisory_xact_lock(hashtext($1))", [MIGRATION_LOCK], signal);
        return [await work({ query: (text, params = [], s) => run(tx, text, params, s) })];
      });
      return result[0] as R;
    },
    async close() {
      if (closed) return;
      closed = true;
      // Running queries get 5 s to finish; the shutdown budget bounds the hook anyway.
      await (await driver.catch(() => undefined))?.end({ timeout: 5 });
    },
  };
}
