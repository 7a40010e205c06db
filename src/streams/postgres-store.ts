import type { Sql } from "postgres";
import { randomBytes } from "node:crypto";
import type { ChannelEvent, Replay } from "./event.js";
import { parseEventId } from "./event.js";

/**
 * Fan-out across pods through PostgreSQL: every pod's broker (the supervisor's primary, or a
 * process without the supervisor) numbers, stores and announces each event through the database,
 * and hears every pod's events with LISTEN. PostgreSQL rather than Redis: keelson/sql already
 * speaks it, and one statement both numbers an event for replay and announces it (NOTIFY is sent
 * at commit, in commit order).
 */
export interface StreamStore {
  /** Numbers the channel's next event, keeps the last `replayEvents` and announces it to every pod (this one included). */
  append(channel: string, data: string, replayEvents: number): Promise<string>;
  /** The stored events after `lastEventId` (see ReplayLog.since). */
  since(channel: string, lastEventId: string): Promise<Replay>;
  /** Calls `listener` with every event of every pod, in each channel's order; resolves once listening. */
  listen(listener: (event: ChannelEvent) => void): Promise<void>;
  close(): Promise<void>;
}

const NOTIFY_CHANNEL = "keelson_streams";
// NOTIFY payloads are limited to 8000 bytes: a larger event is announced without its data, which listeners read from the table.
const INLINE_LIMIT = 7000;
const TABLE = "keelson_stream_events";

interface Announcement {
  c: string;
  s: number;
  d?: string;
}

/** The store on the PostgreSQL database at `url` (the optional `postgres` package is loaded now). */
export async function openPostgresStreamStore(url: string): Promise<StreamStore> {
  let postgres: typeof import("postgres");
  try {
    ({ default: postgres } = (await import("postgres")) as unknown as { default: typeof import("postgres") });
  } catch (error) {
    throw new Error("KEELSON_STREAMS_DATABASE_URL needs the `postgres` package: npm install postgres", { cause: error });
  }
  // Two connections: one for statements, one held by LISTEN.
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
  // Announcements are handled one after another: one too large to carry its data is read first, and the next waits for it.
  let pending: Promise<void> = Promise.resolve();

  return {
    async append(channel, data, replayEvents) {
      return sql.begin(async (tx) => {
        // One publisher at a time per channel: numbers follow commit order, and so do the NOTIFYs.
        await tx.unsafe("SELECT pg_advisory_xact_lock(hashtext('keelson:stream:' || $1::text))", [channel]);
        const [row] = await tx.unsafe(
          `INSERT INTO ${TABLE} (channel, seq, data) SELECT $1::text, COALESCE(MAX(seq), 0) + 1, $2::text FROM ${TABLE} WHERE channel = $1::text RETURNING seq`,
          [channel, data],
        );
        const seq = Number((row as unknown as { seq: string | number }).seq);
        // At least the newest is kept: it carries the channel's count.
        await tx.unsafe(`DELETE FROM ${TABLE} WHERE channel = $1::text AND seq <= $2::bigint`, [channel, seq - Math.max(1, replayEvents)]);
        const announcement: Announcement = { c: channel, s: seq };
        if (Buffer.byteLength(data) + Buffer.byteLength(channel) < INLINE_LIMIT) announcement.d = data;
        await tx.unsafe("SELECT pg_notify($1::text, $2::text)", [NOTIFY_CHANNEL, JSON.stringify(announcement)]);
        return `${epoch}-${seq}`;
      });
    },
    async since(channel, lastEventId) {
      const last = parseEventId(lastEventId);
      const known = last !== undefined && last.epoch === epoch;
      const rows = await sql.unsafe(`SELECT seq, data FROM ${TABLE} WHERE channel = $1::text AND seq > $2::bigint ORDER BY seq`,
        [channel, known ? last.seq : 0]) as unknown as { seq: string | number; data: string }[];
      const events = rows.map((row) => event(channel, Number(row.seq), row.data));
      if (!known) return { events, missed: "unknown" };
      return { events, missed: events.length === 0 ? 0 : events[0]!.seq - last.seq - 1 };
    },
    async listen(listener) {
      await sql.listen(NOTIFY_CHANNEL, (payload) => {
        let announcement: Announcement;
        try {
          announcement = JSON.parse(payload) as Announcement;
        } catch {
          return;
        }
        const { c: channel, s: seq, d: data } = announcement;
        if (typeof channel !== "string" || !Number.isSafeInteger(seq)) return;
        const read = data !== undefined
          ? Promise.resolve(data)
          : sql.unsafe(`SELECT data FROM ${TABLE} WHERE channel = $1::text AND seq = $2::bigint`, [channel, seq])
            .then((rows) => (rows[0] as { data: string } | undefined)?.data, () => undefined);
        pending = pending.then(() => read).then((text) => {
          if (text !== undefined) listener(event(channel, seq, text));
        });
      });
    },
    close: () => sql.end({ timeout: 1 }),
  };
}
