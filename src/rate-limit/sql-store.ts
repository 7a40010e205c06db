import { capacityOf, leaseSize, retryMsOf, windowOf, type RateLimitGrant, type RateLimitTake } from "./window.js";
import type { RateLimitStore } from "./window.js";
import { createTableOnce, type SQLDatabase } from "../sql/database.js";

/** Options of `createSQLRateLimitStore()`. */
export interface SQLRateLimitStoreOptions {
  /** The table of counts (default `keelson_rate_limits`), created on first use. */
  table?: string;
}

const TABLE = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;
const CLEANUP_EVERY_MS = 60_000;

/**
 * A rate-limit store on a keelson/sql database, for limits shared by several machines (or
 * several supervisors): one row per key and window, updated by one atomic
 * `INSERT … ON CONFLICT DO UPDATE … RETURNING`, which grants at most what is left. Each process
 * leases batches (the limiter's `batch`), so the database sees one statement per lease, not per
 * request. Rows of windows that no longer count are deleted about once a minute.
 *
 * @example
 * const db = openPostgres({ url: process.env.DATABASE_URL! });
 * app.group("/api", rateLimit({ limit: 100, windowMs: 60_000, store: createSQLRateLimitStore(db) }));
 */
export function createSQLRateLimitStore(db: SQLDatabase, options: SQLRateLimitStoreOptions = {}): RateLimitStore {
  const table = options.table ?? "keelson_rate_limits";
  if (!TABLE.test(table)) throw new TypeError(`createSQLRateLimitStore: table must be a plain SQL name, got ${JSON.stringify(table)}`);
  const pg = db.dialect === "postgres";
  const p = (n: number, type: "int" | "bigint" | "text") => (pg ? `$${n}::${type}` : `CAST(? AS ${type === "text" ? "TEXT" : "INTEGER"})`);
  const [least, greatest] = pg ? ["LEAST", "GREATEST"] : ["MIN", "MAX"];
  // Every SET expression reads the row as it was, so `granted` and `used` agree.
  const grant = (want: string, cap: string) => `${greatest}(0, ${least}(${want}, ${cap} - ${table}.used, ${greatest}(1, (${cap} - ${table}.used) / 4)))`;
  const upsert = pg
    ? `INSERT INTO ${table} (bucket, win, used, granted, expires_at) VALUES ($1::text, $2::bigint, $3::int, $3::int, $4::bigint)
       ON CONFLICT (bucket, win) DO UPDATE SET granted = ${grant(p(5, "int"), p(6, "int"))}, used = ${table}.used + ${grant(p(5, "int"), p(6, "int"))}
       RETURNING used, granted`
    : `INSERT INTO ${table} (bucket, win, used, granted, expires_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (bucket, win) DO UPDATE SET granted = ${grant(p(0, "int"), p(0, "int"))}, used = ${table}.used + ${grant(p(0, "int"), p(0, "int"))}
       RETURNING used, granted`;
  const previousOf = pg ? `SELECT used FROM ${table} WHERE bucket = $1::text AND win = $2::bigint` : `SELECT used FROM ${table} WHERE bucket = ? AND win = ?`;
  let cleanupAt = 0;
  const prepare = createTableOnce(db, `CREATE TABLE IF NOT EXISTS ${table} (bucket TEXT NOT NULL, win BIGINT NOT NULL,
    used INTEGER NOT NULL, granted INTEGER NOT NULL, expires_at BIGINT NOT NULL, PRIMARY KEY (bucket, win))`);

  return {
    async take(take: RateLimitTake): Promise<RateLimitGrant> {
      await prepare();
      const win = windowOf(take.now, take.windowMs);
      const previous = take.algorithm === "sliding" ? Number((await db.query<{ used: number }>(previousOf, [take.key, win - 1]))[0]?.used ?? 0) : 0;
      const cap = capacityOf(take, previous);
      const first = leaseSize(cap, take.want);
      const expires = (win + 2) * take.windowMs;
      const params = pg
        ? [take.key, win, first, expires, take.want, cap]
        : [take.key, win, first, first, expires, take.want, cap, cap, take.want, cap, cap];
      const [row] = await db.query<{ used: number; granted: number }>(upsert, params);
      const used = Number(row?.used ?? cap);
      const granted = Number(row?.granted ?? 0);
      if (take.now >= cleanupAt) {
        cleanupAt = take.now + CLEANUP_EVERY_MS;
        void db.query(`DELETE FROM ${table} WHERE expires_at < ${pg ? "$1::bigint" : "?"}`, [take.now]).catch(() => {});
      }
      return {
        granted,
        remaining: Math.max(0, cap - used),
        resetMs: take.windowMs - (take.now % take.windowMs),
        retryMs: granted > 0 ? 0 : retryMsOf(take, used, previous),
      };
    },
  };
}
