import type { Sql } from "postgres";
import { randomBytes } from "node:crypto";
import type { ChannelEvent, ReplayPlan } from "./event.js";
import { parseEventId } from "./event.js";
import type { Logger } from "../logging/logger.js";
import { lazyImport } from "../lazy-package.js";
import { countLimitHit } from "../limit-hits.js";
import type { PublishLimits } from "./replay-log.js";
import { errorMessage } from "../errors.js";

/**
 * Fan-out across pods through PostgreSQL: every pod's broker (the supervisor's primary, or a
 * process without the supervisor) numbers, stores and announces each event through the database,
 * and hears every pod's events with LISTEN. PostgreSQL rather than Redis: keelson/sql already
 * speaks it, and one statement both numbers an event for replay and announces it (NOTIFY is sent
 * at commit, in commit order).
 */
export interface StreamStore {
  /**
   * Numbers the channel's next event, keeps the last `replayEvents` within `replayBytes` and
   * announces it to every pod (this one included). `replayTotalBytes` does not apply: the table
   * is on disk, not in the pod's memory.
   */
  append(channel: string, data: string, limits: PublishLimits): Promise<string>;
  /** How to serve a client resuming after `lastEventId` (see ReplayLog.plan). */
  plan(channel: string, lastEventId: string, maxBytes: number): Promise<ReplayPlan>;
  /** The stored events `after < seq <= to`, oldest first, at most `maxBytes` (at least one). */
  piece(channel: string, after: number, to: number, maxBytes: number): Promise<ChannelEvent[]>;
  /** Calls `listener` with every event of every pod, in each channel's order; resolves once listening. */
  listen(listener: (event: ChannelEvent) => void): Promise<void>;
  close(): Promise<void>;
}

const NOTIFY_CHANNEL = "keelson_streams";
// NOTIFY payloads are limited to 8000 bytes: a larger event is announced without its data, which listeners read from the table.
const INLINE_LIMIT = 7000;
const TABLE = "keelson_stream_events";
/** The LISTEN connection's application_name (pg_stat_activity): what an operator (or a test) finds it by. */
export const LISTEN_APPLICATION_NAME = "keelson-streams-listen";
const RELISTEN_FIRST_MS = 100;
const RELISTEN_MAX_MS = 5000;
// Channels whose last delivered seq is kept for catching up after a lost LISTEN (the replay log's default maxChannels).
const MAX_TRACKED = 10_000;
// What a row costs besides its data, counted against the byte bounds as the in-memory log counts it.
const ROW_COST = "(octet_length(data) + 64)";

const loadPostgres = lazyImport("postgres", async () => ((await import("postgres")) as unknown as { default: typeof import("postgres") }).default);

interface Announcement {
  c: string;
  s: number;
  d?: string;
}

/** The store on the PostgreSQL database at `url` (the optional `postgres` package is loaded now). */
export async function openPostgresStreamStore(url: string, log: Pick<Logger, "info" | "warn">): Promise<StreamStore> {
  const postgres = await loadPostgres("KEELSON_STREAMS_DATABASE_URL");
  // Statements; LISTEN has its own connection (below).
  const sql = postgres(url, { max: 2, connect_timeout: 10, onnotice: () => {} }) as unknown as Sql<Record<string, never>>;
  const epoch = await sql.begin(async (tx) => {
    await tx.unsafe("SELECT pg_advisory_xact_lock(hashtext('keelson:streams:migrate'))");
    await tx.unsafe(`CREATE TABLE IF NOT EXISTS ${TABLE} (channel TEXT NOT NULL, seq BIGINT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (channel, seq))`);
    // The ids' epoch belongs to the table: a new table (its events gone) makes earlier ids recognisably stale.
    await tx.unsafe("CREATE TABLE IF NOT EXISTS keelson_stream_epoch (epoch TEXT NOT NULL)");
    await tx.unsafe("INSERT INTO keelson_stream_epoch SELECT $1::text WHERE NOT EXISTS (SELECT 1 FROM keelson_stream_epoch)",
      [Date.now().toString(36) + randomBytes(2).toString("hex")]);
    const [row] = await tx.unsafe("SELECT epoch FROM keelson_stream_epoch LIMIT 1");
    return String((row as unknown as { epoch: string }).epoch);
  });

  const event = (channel: string, seq: number, data: string): ChannelEvent => ({ channel, id: `${epoch}-${seq}`, seq, data });
  // Announcements are handled one after another, in the order they came: one too large to carry
  // its data, or one after a gap, is read from the table first, and the next waits for it.
  let pending: Promise<void> = Promise.resolve();
  // The last seq delivered per channel (the most recently delivered last, at most MAX_TRACKED):
  // what tells a missed announcement (after a lost LISTEN) from the next one, and where a catch-up starts.
  const delivered = new Map<string, number>();
  let deliver: ((event: ChannelEvent) => void) | undefined;
  let closing = false;

  const select = (query: string, params: (string | number | string[] | number[])[]) =>
    sql.unsafe(query, params) as unknown as Promise<{ channel?: string; seq: string | number; data: string }[]>;
  const hand = (channel: string, seq: number, data: string) => {
    const last = delivered.get(channel) ?? 0;
    if (seq <= last) return;
    delivered.delete(channel);
    delivered.set(channel, seq);
    if (delivered.size > MAX_TRACKED) delivered.delete(delivered.keys().next().value!);
    deliver?.(event(channel, seq, data));
  };
  /** Queued after what came before: one announcement, with what this pod missed of its channel first (a gap in seq). */
  const announced = (payload: string) => {
    let announcement: Announcement;
    try {
      announcement = JSON.parse(payload) as Announcement;
    } catch {
      return;
    }
    const { c: channel, s: seq, d: data } = announcement;
    if (typeof channel !== "string" || !Number.isSafeInteger(seq)) return;
    pending = pending.then(async () => {
      const last = delivered.get(channel);
      if (seq <= (last ?? 0)) return;
      if (data !== undefined && (last === undefined || last === seq - 1)) return hand(channel, seq, data);
      const from = last === undefined ? seq - 1 : last;
      const found = await select(`SELECT seq, data FROM ${TABLE} WHERE channel = $1::text AND seq > $2::bigint AND seq <= $3::bigint ORDER BY seq`,
        [channel, from, seq]).catch(() => []);
      for (const row of found) hand(channel, Number(row.seq), row.data);
      if (data !== undefined) hand(channel, seq, data);
    }).catch(() => {});
  };
  /** After LISTEN is back: what was announced while it was lost, for every channel this pod delivered before. */
  const catchUp = () => {
    pending = pending.then(async () => {
      if (delivered.size === 0) return 0;
      const channels = [...delivered.keys()];
      const found = await select(
        `SELECT t.channel, t.seq, t.data FROM ${TABLE} t JOIN unnest($1::text[], $2::bigint[]) AS k(channel, seq) ON t.channel = k.channel AND t.seq > k.seq ORDER BY t.channel, t.seq`,
        [channels, channels.map((channel) => delivered.get(channel)!)],
      );
      for (const row of found) hand(row.channel!, Number(row.seq), row.data);
      return found.length;
    }).then((count) => {
      if (count > 0) log.warn("streams: delivered %d event(s) announced while LISTEN was lost, read from %s", count, TABLE);
    }, (error: unknown) => log.warn("streams: could not read the events announced while LISTEN was lost: %s", errorMessage(error)));
  };

  // LISTEN holds its own connection. When it is lost (the server restarted, the backend was
  // terminated, the network dropped), it is opened again, LISTEN again, until it works or the store closes.
  let lostAt: number | undefined;
  let retry: NodeJS.Timeout | undefined;
  const listener = postgres(url, {
    max: 1, idle_timeout: 0, max_lifetime: 0, fetch_types: false, connect_timeout: 10, onnotice: () => {},
    connection: { application_name: LISTEN_APPLICATION_NAME },
    onclose: () => {
      if (closing || deliver === undefined || lostAt !== undefined) return;
      lostAt = performance.now();
      log.warn("streams: the LISTEN connection to PostgreSQL was lost; listening again (events published meanwhile are read from %s)", TABLE);
      relisten(1);
    },
    // postgres.js hands a connection's notifications to this option (its own listen() does the same).
    onnotify: (_channel: string, payload: string) => announced(payload),
  } as Parameters<typeof postgres>[1]) as unknown as Sql<Record<string, never>>;
  const listenNow = () => listener.unsafe(`LISTEN ${NOTIFY_CHANNEL}`).then(() => {});
  const relisten = (attempt: number) => {
    retry = setTimeout(() => {
      retry = undefined;
      if (closing) return;
      listenNow().then(() => {
        log.info("streams: listening to PostgreSQL again after %dms", Math.round(performance.now() - (lostAt ?? 0)));
        lostAt = undefined;
        catchUp();
      }, (error: unknown) => {
        if (attempt === 1 || attempt % 10 === 0) {
          log.warn("streams: LISTEN failed (attempt %d): %s; trying again", attempt, errorMessage(error));
        }
        relisten(attempt + 1);
      });
    }, Math.min(RELISTEN_MAX_MS, RELISTEN_FIRST_MS * 2 ** (attempt - 1)));
    // Retrying never keeps a process alive on its own: it exits through its shutdown.
    retry.unref();
  };

  return {
    async append(channel, data, { replayEvents, replayBytes }) {
      return sql.begin(async (tx) => {
        // One publisher at a time per channel: numbers follow commit order, and so do the NOTIFYs.
        await tx.unsafe("SELECT pg_advisory_xact_lock(hashtext('keelson:stream:' || $1::text))", [channel]);
        const [row] = await tx.unsafe(
          `INSERT INTO ${TABLE} (channel, seq, data) SELECT $1::text, COALESCE(MAX(seq), 0) + 1, $2::text FROM ${TABLE} WHERE channel = $1::text RETURNING seq`,
          [channel, data],
        );
        const seq = Number((row as unknown as { seq: string | number }).seq);
        // At least the newest is kept: it carries the channel's count. Then the newest that fit in replayBytes.
        await tx.unsafe(`DELETE FROM ${TABLE} WHERE channel = $1::text AND seq <= $2::bigint`, [channel, seq - Math.max(1, replayEvents)]);
        const [trimmed] = await tx.unsafe(
          `WITH gone AS (DELETE FROM ${TABLE} WHERE channel = $1::text AND seq < COALESCE((SELECT min(seq) FROM (SELECT seq, sum(${ROW_COST}) OVER (ORDER BY seq DESC) AS run FROM ${TABLE} WHERE channel = $1::text) kept WHERE run <= $2::bigint), $3::bigint) RETURNING 1) SELECT count(*)::int AS n FROM gone`,
          [channel, replayBytes, seq],
        );
        if ((trimmed as unknown as { n: number }).n > 0) countLimitHit("stream_replay_channel_bytes");
        const announcement: Announcement = { c: channel, s: seq };
        if (Buffer.byteLength(data) + Buffer.byteLength(channel) < INLINE_LIMIT) announcement.d = data;
        await tx.unsafe("SELECT pg_notify($1::text, $2::text)", [NOTIFY_CHANNEL, JSON.stringify(announcement)]);
        return `${epoch}-${seq}`;
      });
    },
    async plan(channel, lastEventId, maxBytes) {
      const last = parseEventId(lastEventId);
      if (last === undefined || last.epoch !== epoch) {
        countLimitHit("stream_replay_unknown_id");
        return { missed: "unknown" };
      }
      const [row] = await sql.unsafe(
        `SELECT max(seq) AS newest, min(seq) AS oldest, (SELECT min(seq) FROM (SELECT seq, sum(${ROW_COST}) OVER (ORDER BY seq DESC) AS run FROM ${TABLE} WHERE channel = $1::text AND seq > $2::bigint) after WHERE run <= $3::bigint) AS fits FROM ${TABLE} WHERE channel = $1::text`,
        [channel, last.seq, maxBytes],
      ) as unknown as { newest: string | null; oldest: string | null; fits: string | null }[];
      const newest = Number(row?.newest ?? 0);
      // Ahead of the channel: not an id this store made for it.
      if (last.seq > newest) {
        countLimitHit("stream_replay_unknown_id");
        return { missed: "unknown" };
      }
      let after = Math.max(last.seq, Number(row?.oldest ?? newest + 1) - 1);
      const start = row?.fits === null || row?.fits === undefined ? newest + 1 : Number(row.fits);
      if (start - 1 > after) {
        countLimitHit("stream_replay_request_bytes");
        after = start - 1;
      }
      return { missed: after - last.seq, epoch, resume: last.seq, after, to: newest };
    },
    async piece(channel, after, to, maxBytes) {
      const rows = await sql.unsafe(
        `SELECT seq, data FROM (SELECT seq, data, ${ROW_COST} AS own, sum(${ROW_COST}) OVER (ORDER BY seq) AS run FROM ${TABLE} WHERE channel = $1::text AND seq > $2::bigint AND seq <= $3::bigint) piece WHERE run <= $4::bigint OR run = own ORDER BY seq`,
        [channel, after, to, maxBytes],
      ) as unknown as { seq: string | number; data: string }[];
      return rows.map((row) => event(channel, Number(row.seq), row.data));
    },
    async listen(listen) {
      deliver = listen;
      await listenNow();
    },
    async close() {
      closing = true;
      clearTimeout(retry);
      await Promise.all([sql.end({ timeout: 1 }), listener.end({ timeout: 1 })]);
    },
  };
}
