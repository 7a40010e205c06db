import { randomBytes } from "node:crypto";
import type { ChannelEvent, Replay } from "./event.js";
import { parseEventId } from "./event.js";

/** Limits of a replay log; see docs/streams.md "Limits". */
export interface ReplayLimits {
  /** Events kept per channel for clients resuming with Last-Event-ID. */
  replayEvents: number;
  /** Channels kept; the channel published to least recently is forgotten beyond it. */
  maxChannels: number;
}

export const DEFAULT_REPLAY_EVENTS = 1000;
export const DEFAULT_MAX_CHANNELS = 10_000;
/** The largest replay buffer a channel may ask for. */
export const MAX_REPLAY_EVENTS = 100_000;

interface Channel {
  seq: number;
  /** A ring of the last `size` events. */
  ring: (ChannelEvent | undefined)[];
  size: number;
}

/**
 * The numbering and the replay buffers of every channel: one per pod (in the supervisor's
 * primary) or one per process without the supervisor. Bounded: `replayEvents` per channel and
 * `maxChannels` channels, so its memory is at most their product times the largest message.
 */
export class ReplayLog {
  /** Distinguishes this log's ids from those of an earlier one (before a restart). */
  readonly epoch: string;
  readonly #channels = new Map<string, Channel>();
  readonly #limits: ReplayLimits;

  constructor(limits: Partial<ReplayLimits> = {}, epoch = newEpoch()) {
    this.#limits = { replayEvents: limits.replayEvents ?? DEFAULT_REPLAY_EVENTS, maxChannels: limits.maxChannels ?? DEFAULT_MAX_CHANNELS };
    this.epoch = epoch;
  }

  /** Numbers `data` as the channel's next event and keeps it for replay; `replayEvents` overrides the log's size for this channel. */
  append(channel: string, data: string, replayEvents = this.#limits.replayEvents): ChannelEvent {
    let state = this.#channels.get(channel);
    if (state === undefined) {
      state = { seq: 0, ring: [], size: replayEvents };
      if (this.#channels.size >= this.#limits.maxChannels) {
        // Map order is insertion order and a publish re-inserts: the first key is the least recent.
        const oldest = this.#channels.keys().next().value;
        if (oldest !== undefined) this.#channels.delete(oldest);
      }
    } else this.#channels.delete(channel);
    this.#channels.set(channel, state);
    if (state.size !== replayEvents) resize(state, replayEvents);
    const seq = ++state.seq;
    const event: ChannelEvent = { channel, id: `${this.epoch}-${seq}`, seq, data };
    if (state.size > 0) state.ring[seq % state.size] = event;
    return event;
  }

  /**
   * The events of `channel` after `lastEventId`, oldest first. An id this log did not make (an
   * earlier epoch) gets every buffered event and `missed: "unknown"`; one older than the buffer
   * gets every buffered event and the count that fell out.
   */
  since(channel: string, lastEventId: string): Replay {
    const state = this.#channels.get(channel);
    const last = parseEventId(lastEventId);
    const newest = state?.seq ?? 0;
    const oldest = state === undefined ? 1 : Math.max(1, newest - state.size + 1);
    if (last === undefined || last.epoch !== this.epoch) return { events: this.#range(state, oldest, newest), missed: "unknown" };
    if (last.seq >= newest) return { events: [], missed: 0 };
    const from = Math.max(last.seq + 1, oldest);
    return { events: this.#range(state, from, newest), missed: from - last.seq - 1 };
  }

  /** The id of the newest event of `channel`, or undefined before its first. */
  lastId(channel: string): string | undefined {
    const seq = this.#channels.get(channel)?.seq;
    return seq === undefined ? undefined : `${this.epoch}-${seq}`;
  }

  #range(state: Channel | undefined, from: number, to: number): ChannelEvent[] {
    const events: ChannelEvent[] = [];
    if (state === undefined || state.size === 0) return events;
    for (let seq = from; seq <= to; seq++) {
      const event = state.ring[seq % state.size];
      if (event?.seq === seq) events.push(event);
    }
    return events;
  }
}

function resize(state: Channel, size: number): void {
  const kept = state.ring.filter((event): event is ChannelEvent => event !== undefined).toSorted((a, b) => a.seq - b.seq).slice(-size);
  state.ring = [];
  state.size = size;
  if (size > 0) for (const event of kept) state.ring[event.seq % size] = event;
}

function newEpoch(): string {
  // Time first: a later log's epoch differs from an earlier one's even if the random part repeats.
  return Date.now().toString(36) + randomBytes(2).toString("hex");
}
