import { createTableOnce, type SQLDatabase } from "../sql/database.js";
import { responseOf, responseText, stateOf } from "./shared-store.js";
import type { IdempotencyBegin, IdempotencyComplete, IdempotencyRelease, IdempotencyState, IdempotencyStore } from "./store.js";

/** Options of `createSQLIdempotencyStore()`. */
export interface SQLIdempotencyStoreOptions {
  /** The table of keys (default `keelson_idempotency`), created on first use. */
  table?: string;
}

const TABLE = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;
const CLEANUP_EVERY_MS = 60_000;
/** A claim that expired between the upsert and the read is tried again, this many times at most. */
const ATTEMPTS = 3;

/**
 * An idempotency store on a keelson/sql database (PostgreSQL, or a SQLite file shared by the
 * processes of one machine), for keys shared by several pods: one row per key. A claim is one
 * `INSERT … ON CONFLICT DO UPDATE … WHERE expired … RETURNING`, so however many requests race,
 * one gets the row; `complete` and `release` act only on the row their token still holds. Rows
 * whose lease or time to live ended are deleted about once a minute.
 *
 * @example
 * const db = openPostgres({ url: process.env.DATABASE_URL! });
 * app.route(post("/orders", create).use(idempotency({ store: createSQLIdempotencyStore(db) })));
 */
export function createSQLIdempotencyStore(db: SQLDatabase, options: SQLIdempotencyStoreOptions = {}): IdempotencyStore {
  const table = options.table ?? "keelson_idempotency";
  if (!TABLE.test(table)) throw new TypeError(`createSQLIdempotencyStore: table must be a plain SQL name, got ${JSON.stringify(table)}`);
  if (typeof db?.query !== "function") throw new TypeError("createSQLIdempotencyStore: pass a database from openSQLite() or openPostgres()");
  const pg = db.dialect === "postgres";
  // Placeholders in the order the parameters are passed: `$n` on PostgreSQL, `?` on SQLite.
  const ps = (sql: string) => (pg ? sql : sql.replace(/\$\d+(::\w+)?/g, "?"));
  const claim = ps(`INSERT INTO ${table} (k, token, fingerprint, response, expires_at) VALUES ($1::text, $2::text, $3::text, NULL, $4::bigint)
    ON CONFLICT (k) DO UPDATE SET token = excluded.token, fingerprint = excluded.fingerprint, response = NULL, expires_at = excluded.expires_at
    WHERE ${table}.expires_at <= $5::bigint RETURNING token`);
  const read = ps(`SELECT token, fingerprint, response, expires_at FROM ${table} WHERE k = $1::text`);
  const complete = ps(`UPDATE ${table} SET response = $1::text, expires_at = $2::bigint WHERE k = $3::text AND token = $4::text AND response IS NULL`);
  const release = ps(`DELETE FROM ${table} WHERE k = $1::text AND token = $2::text AND response IS NULL`);
  const cleanup = ps(`DELETE FROM ${table} WHERE expires_at <= $1::bigint`);
  let cleanupAt = 0;
  const prepare = createTableOnce(db, `CREATE TABLE IF NOT EXISTS ${table} (k TEXT PRIMARY KEY, token TEXT NOT NULL,
    fingerprint TEXT NOT NULL, response TEXT, expires_at BIGINT NOT NULL)`);

  return {
    async begin(begin: IdempotencyBegin): Promise<IdempotencyState> {
      await prepare();
      if (begin.now >= cleanupAt) {
        cleanupAt = begin.now + CLEANUP_EVERY_MS;
        void db.query(cleanup, [begin.now]).catch(() => {});
      }
      for (let attempt = 1; ; attempt++) {
        const won = await db.query<{ token: string }>(claim, [begin.key, begin.token, begin.fingerprint, begin.now + begin.leaseMs, begin.now]);
        if (won[0]?.token === begin.token) return { state: "acquired" };
        const [row] = await db.query<{ token: string; fingerprint: string; response: string | null; expires_at: number | string }>(read, [begin.key]);
        // Gone or expired since the upsert looked: claim again.
        if (row !== undefined && (Number(row.expires_at) > begin.now || attempt === ATTEMPTS)) {
          return stateOf({ token: row.token, fingerprint: row.fingerprint, response: row.response === null ? undefined : responseOf(row.response) });
        }
        if (attempt === ATTEMPTS) throw new Error("the idempotency key changed hands too often to be claimed");
      }
    },
    async complete(done: IdempotencyComplete): Promise<void> {
      await prepare();
      await db.query(complete, [responseText(done.response), done.now + done.ttlMs, done.key, done.token]);
    },
    async release(freed: IdempotencyRelease): Promise<void> {
      await prepare();
      await db.query(release, [freed.key, freed.token]);
    },
  };
}
