import type { JobStore } from "./define.js";
import type { SQLDatabase } from "../sql/database.js";

/** Options of `createSQLJobStore()`. */
export interface SQLJobStoreOptions {
  /** The claims table, created on first use. Default `keelson_job_claims`. */
  table?: string;
}

const TABLE_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * A JobStore in a SQL database several supervisors share (PostgreSQL across pods; SQLite when
 * the processes share one file): one row per claimed tick, keyed by `(job, scheduled_at)`. The
 * first `INSERT … ON CONFLICT` wins the tick; the same owner claiming again (its worker died
 * mid-run, the tick runs on another worker of the same supervisor) wins it again. Rows are
 * never deleted by keelson: one per tick, prune old ones yourself if a job ticks often.
 *
 * @example
 * const db = openPostgres({ url: process.env.DATABASE_URL! });
 * app.schedule({ name: "invoices", cron: "0 * * * *", store: createSQLJobStore(db), run: sendInvoices });
 */
export function createSQLJobStore(db: SQLDatabase, options: SQLJobStoreOptions = {}): JobStore {
  const table = options.table ?? "keelson_job_claims";
  if (!TABLE_NAME.test(table)) throw new Error(`table must be a lowercase SQL identifier, got ${JSON.stringify(table)}`);
  const [a, b, c] = db.dialect === "postgres" ? ["$1", "$2", "$3"] : ["?", "?", "?"];
  const claim = `INSERT INTO ${table} (job, scheduled_at, owner) VALUES (${a}, ${b}, ${c})
    ON CONFLICT (job, scheduled_at) DO UPDATE SET owner = excluded.owner WHERE ${table}.owner = excluded.owner
    RETURNING owner`;
  let created: Promise<unknown> | undefined;
  const create = () => db.migrate((tx) => tx.query(
    `CREATE TABLE IF NOT EXISTS ${table} (job TEXT NOT NULL, scheduled_at BIGINT NOT NULL, owner TEXT NOT NULL, PRIMARY KEY (job, scheduled_at))`,
  ));
  return {
    async claim(job, scheduledAt, owner, signal) {
      // A failed creation is retried at the next tick rather than remembered.
      created ??= create().catch((error: unknown) => {
        created = undefined;
        throw error;
      });
      await created;
      const rows = await db.query(claim, [job, scheduledAt.getTime(), owner], signal);
      return rows.length > 0;
    },
  };
}
