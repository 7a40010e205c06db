/**
 * What travels through a stream channel: an event published to a channel, with the id that
 * orders it there. The id is `<epoch>-<seq>`: `seq` counts the channel's events from 1, `epoch`
 * names the replay log that numbered them (a new one after the log's process restarts), so an
 * id from before a restart is recognised as such instead of being taken for a position.
 */
export interface ChannelEvent {
  readonly channel: string;
  /** `<epoch>-<seq>`, sent as the SSE `id:` and in a WebSocket message's `id`. */
  readonly id: string;
  readonly seq: number;
  /** The published value as JSON text: serialised once, by the publisher. */
  readonly data: string;
}

/**
 * What a subscriber resuming after `Last-Event-ID` could not be given: `missed` events fell out of
 * the replay buffer or past the replay's byte bound (a number), or `"unknown"` when the id cannot
 * be placed in the channel (unreadable, from another replay log, or ahead of the channel) and
 * nothing tells how many.
 */
export type Missed = number | "unknown";

/**
 * How a resume is served, decided once from the client's id: `"unknown"` gets no backlog at all;
 * otherwise the events `after < seq <= to` are read in bounded pieces (`Broker.piece`), and the client's
 * own position `resume` is where its subscription starts, replay or not.
 */
export type ReplayPlan =
  | { missed: "unknown" }
  | { missed: number; epoch: string; resume: number; after: number; to: number };

/** `{ epoch, seq }` of an id this log format made, else undefined. */
export function parseEventId(id: string | null | undefined): { epoch: string; seq: number } | undefined {
  if (typeof id !== "string") return undefined;
  const match = /^([0-9a-z]{1,16})-(\d{1,15})$/.exec(id);
  return match === null ? undefined : { epoch: match[1]!, seq: Number(match[2]) };
}

/** A channel name: 1 to 200 characters, no control characters (it appears in logs and IPC). */
export function checkChannel(channel: unknown): string {
  // eslint-disable-next-line no-control-regex
  if (typeof channel !== "string" || channel.length === 0 || channel.length > 200 || /[\u0000-\u001f\u007f]/.test(channel)) {
    throw new TypeError(`invalid stream channel ${JSON.stringify(channel)}: expected 1 to 200 characters, no control characters`);
  }
  return channel;
}
