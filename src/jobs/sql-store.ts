import type { JobLeases, JobStore } from "./define.js";
import type { SQLDatabase, SQLValue } from "../sql/database.js";

/** Options of `defineSQLJobStore()`. */
export interface SQLJobStoreOptions {
  /** The leases table, created on first use. Default `keelson_job_leases`. */
  table?: string;
  /**
   * How long a claim or a renewal holds a tick, ms (default 20000, at least 1000). A run renews
   * every quarter of it and is aborted after three quarters without a renewal; a tick whose
   * runner died is taken over at most this long after its last renewal.
   */
  leaseMs?: number;
  /** How long rows of ticks are kept, ms (default 24 h): a tick is never claimed again within it. */
  retainMs?: number;
}

const TABLE_NAME = /^[a-z_][a-z0-9_]{0,62}$/;
const DEFAULT_LEASE_MS = 20_000;
const DEFAULT_RETAIN_MS = 24 * 3_600_000;
/** Old rows are deleted by at most one finish per this long, per process. */
const PRUNE_EVERY_MS = 10 * 60_000;
/** Expired ticks handed out by one `unfinished()`. */
const EXPIRED_BATCH = 10;

/** The database's clock in epoch ms: every pod compares lease expiries on one clock, whatever its own says. */
const NOW = {
  postgres: "(extract(epoch from clock_timestamp()) * 1000)::bigint",
  sqlite: "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
};

/**
 * One statement written with `:name` slots, for either engine: PostgreSQL gets `$1…` (a name
 * used twice is one parameter), SQLite gets `?` in order of appearance.
 */
function statement(dialect: SQLDatabase["dialect"], text: string): { text: string; params(values: Record<string, SQLValue>): SQLValue[] } {
  const order: string[] = [];
  const compiled = text.replaceAll(/:([a-z]+)/g, (_, name: string) => {
    if (dialect === "sqlite") return order.push(name), "?";
    const index = order.includes(name) ? order.indexOf(name) : order.push(name) - 1;
    return `$${index + 1}`;
  }).replaceAll("NOW()", NOW[dialect]);
  return { text: compiled, params: (values) => order.map((name) => values[name] ?? null) };
}

function positiveWhole(value: number | undefined, fallback: number, minimum: number, what: string): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < minimum) throw new TypeError(`defineSQLJobStore: ${what} must be a whole number of milliseconds, at least ${minimum}; got ${String(value)}`);
  return value;
}

/**
 * A JobStore in a SQL database several supervisors share (PostgreSQL across pods; SQLite when
 * the processes share one file): one row per tick, keyed by `(job, scheduled_at)`, with its
 * owner, its lease's expiry and when it finished, all on the database's clock. A claim is one
 * `INSERT … ON CONFLICT DO UPDATE … WHERE` (wins a new tick, or one whose lease ran out
 * unfinished); renewals and the finish are `UPDATE`s guarded by the owner. Rows older than
 * `retainMs` are deleted (finished ones, and unfinished ones whose lease ran out).
 *
 * @example
 * const db = openPostgres({ url: process.env.DATABASE_URL! });
 * app.schedule({ name: "invoices", cron: "0 * * * *", store: defineSQLJobStore(db), run: sendInvoices });
 */
export function defineSQLJobStore(db: SQLDatabase, options: SQLJobStoreOptions = {}): JobStore {
  const table = options.table ?? "keelson_job_leases";
  if (!TABLE_NAME.test(table)) throw new TypeError(`defineSQLJobStore: table must be a lowercase SQL identifier, got ${JSON.stringify(table)}`);
  const leaseMs = positiveWhole(options.leaseMs, DEFAULT_LEASE_MS, 1000, "leaseMs");
  const retainMs = positiveWhole(options.retainMs, DEFAULT_RETAIN_MS, 60_000, "retainMs");
  const sql = (text: string) => statement(db.dialect, text);
  const claim = sql(`INSERT INTO ${table} (job, scheduled_at, owner, expires_at, finished_at) VALUES (:job, :at, :owner, NOW() + :lease, NULL)
    ON CONFLICT (job, scheduled_at) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
    WHERE ${table}.finished_at IS NULL AND ${table}.expires_at <= NOW()
    RETURNING owner`);
  const renew = sql(`UPDATE ${table} SET expires_at = NOW() + :lease
    WHERE job = :job AND scheduled_at = :at AND owner = :owner AND finished_at IS NULL RETURNING owner`);
  const finish = sql(`UPDATE ${table} SET finished_at = NOW()
    WHERE job = :job AND scheduled_at = :at AND owner = :owner AND finished_at IS NULL RETURNING owner`);
  const unfinished = sql(`SELECT scheduled_at, expires_at - NOW() AS remaining FROM ${table}
    WHERE job = :job AND finished_at IS NULL ORDER BY scheduled_at`);
  const prune = sql(`DELETE FROM ${table} WHERE scheduled_at < :before AND (finished_at IS NOT NULL OR expires_at < NOW())`);
  let created: Promise<unknown> | undefined;
  let pruneAt = 0;
  const ready = () => (created ??= db.migrate(async (tx) => {
    await tx.query(`CREATE TABLE IF NOT EXISTS ${table} (job TEXT NOT NULL, scheduled_at BIGINT NOT NULL, owner TEXT NOT NULL,
      expires_at BIGINT NOT NULL, finished_at BIGINT, PRIMARY KEY (job, scheduled_at))`);
    await tx.query(`CREATE INDEX IF NOT EXISTS ${table}_unfinished ON ${table} (job, scheduled_at) WHERE finished_at IS NULL`);
  }).catch((error: unknown) => {
    // A failed creation is retried at the next tick rather than remembered.
    created = undefined;
    throw error;
  }));
  const run = async (stmt: ReturnType<typeof sql>, values: Record<string, SQLValue>, signal: AbortSignal) => {
    await ready();
    return db.query(stmt.text, stmt.params(values), signal);
  };
  return {
    leaseMs,
    async claim(job, scheduledAt, owner, signal) {
      return (await run(claim, { job, at: scheduledAt.getTime(), owner, lease: leaseMs }, signal)).length > 0;
    },
    async renew(job, scheduledAt, owner, signal) {
      return (await run(renew, { job, at: scheduledAt.getTime(), owner, lease: leaseMs }, signal)).length > 0;
    },
    async finish(job, scheduledAt, owner, signal) {
      const done = (await run(finish, { job, at: scheduledAt.getTime(), owner }, signal)).length > 0;
      if (Date.now() >= pruneAt) {
        pruneAt = Date.now() + PRUNE_EVERY_MS;
        await run(prune, { before: Date.now() - retainMs }, signal).catch(() => (pruneAt = 0));
      }
      return done;
    },
    async unfinished(job, signal): Promise<JobLeases> {
      const rows = await run(unfinished, { job }, signal);
      const expired: Date[] = [];
      let nextExpiryMs: number | undefined;
      for (const row of rows) {
        const remaining = Number(row.remaining);
        if (remaining <= 0) {
          if (expired.length < EXPIRED_BATCH) expired.push(new Date(Number(row.scheduled_at)));
        } else if (nextExpiryMs === undefined || remaining < nextExpiryMs) {
          nextExpiryMs = remaining;
        }
      }
      return nextExpiryMs === undefined ? { expired } : { expired, nextExpiryMs };
    },
  };
}
