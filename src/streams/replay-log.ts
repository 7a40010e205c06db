import { randomBytes } from "node:crypto";
import { countLimitHit } from "../limit-hits.js";
import type { ChannelEvent, ReplayPlan } from "./event.js";
import { parseEventId } from "./event.js";

/** Limits of a replay log; see docs/streams.md "Limits". */
export interface ReplayLimits {
  /** Events kept per channel for clients resuming with Last-Event-ID. */
  replayEvents: number;
  /** Bytes of event data kept per channel; the oldest events go first beyond it. */
  replayBytes: number;
  /** Bytes of event data kept for all channels together; the least recently published channel loses its oldest events first. */
  replayTotalBytes: number;
  /** Channels kept; the channel published to least recently is forgotten beyond it. */
  maxChannels: number;
}

/** What each publish carries of its process's settings (under the supervisor, to the primary's log). */
export type PublishLimits = Pick<ReplayLimits, "replayEvents" | "replayBytes" | "replayTotalBytes">;

export const DEFAULT_REPLAY_EVENTS = 1000;
export const DEFAULT_REPLAY_BYTES = 4 * 1024 * 1024;
export const DEFAULT_REPLAY_TOTAL_BYTES = 64 * 1024 * 1024;
export const DEFAULT_MAX_CHANNELS = 10_000;
/** The largest replay buffer a channel may ask for. */
export const MAX_REPLAY_EVENTS = 100_000;
/** The largest byte bound a worker may ask the primary for (a channel's, the whole buffer's, a replay's). */
export const MAX_REPLAY_BYTES = 1024 * 1024 * 1024;
/** What an event costs besides its data (its object, id and the channel's reference), counted against the byte bounds. */
const EVENT_OVERHEAD = 64;

interface Channel {
  seq: number;
  /** The seq this channel's numbering started after: ids at or below it (and above 0) belong to a channel forgotten earlier. */
  base: number;
  /** The buffered events, oldest first from `head`, consecutive seqs. */
  events: ChannelEvent[];
  head: number;
  bytes: number;
  maxEvents: number;
  maxBytes: number;
}

const cost = (event: ChannelEvent) => event.data.length + EVENT_OVERHEAD;

/**
 * The numbering and the replay buffers of every channel: one per pod (in the supervisor's
 * primary) or one per process without the supervisor. Bounded in events and bytes per channel,
 * in bytes for all channels together, and in channels.
 */
export class ReplayLog {
  /** Distinguishes this log's ids from those of an earlier one (before a restart). */
  readonly epoch: string;
  readonly #channels = new Map<string, Channel>();
  readonly #limits: ReplayLimits;
  #bytes = 0;
  /** The highest seq of any channel forgotten so far: a channel created again numbers after it. */
  #forgotten = 0;

  constructor(limits: Partial<ReplayLimits> = {}, epoch = newEpoch()) {
    this.#limits = {
      replayEvents: limits.replayEvents ?? DEFAULT_REPLAY_EVENTS,
      replayBytes: limits.replayBytes ?? DEFAULT_REPLAY_BYTES,
      replayTotalBytes: limits.replayTotalBytes ?? DEFAULT_REPLAY_TOTAL_BYTES,
      maxChannels: limits.maxChannels ?? DEFAULT_MAX_CHANNELS,
    };
    this.epoch = epoch;
  }

  /** Bytes buffered now, all channels together (as counted against `replayTotalBytes`). */
  get bytes(): number {
    return this.#bytes;
  }

  /**
   * Numbers `data` as the channel's next event and keeps it for replay. `limits` overrides the
   * log's for this channel (`replayEvents`, `replayBytes`) and for the whole log (`replayTotalBytes`):
   * under the supervisor each publish carries its worker's settings.
   */
  append(channel: string, data: string, limits: Partial<Pick<ReplayLimits, "replayEvents" | "replayBytes" | "replayTotalBytes">> = {}): ChannelEvent {
    if (limits.replayTotalBytes !== undefined) this.#limits.replayTotalBytes = limits.replayTotalBytes;
    let state = this.#channels.get(channel);
    if (state === undefined) {
      state = { seq: this.#forgotten, base: this.#forgotten, events: [], head: 0, bytes: 0, maxEvents: 0, maxBytes: 0 };
      if (this.#channels.size >= this.#limits.maxChannels) {
        // Map order is insertion order and a publish re-inserts: the first key is the least recent.
        const oldest = this.#channels.keys().next().value;
        if (oldest !== undefined) this.#forget(oldest);
      }
    } else this.#channels.delete(channel);
    this.#channels.set(channel, state);
    state.maxEvents = limits.replayEvents ?? this.#limits.replayEvents;
    state.maxBytes = limits.replayBytes ?? this.#limits.replayBytes;
    const seq = ++state.seq;
    const event: ChannelEvent = { channel, id: `${this.epoch}-${seq}`, seq, data };
    if (state.maxEvents > 0) {
      state.events.push(event);
      state.bytes += cost(event);
      this.#bytes += cost(event);
    }
    while (state.events.length - state.head > state.maxEvents) this.#evictOldest(state, "events");
    // The newest event stays even alone over the channel's bound: a client resuming just before it gets it.
    while (state.bytes > state.maxBytes && state.events.length - state.head > 1) this.#evictOldest(state, "bytes");
    this.#trimTotal(state);
    return event;
  }

  /**
   * How to serve a client resuming after `lastEventId` with at most `maxBytes` of backlog: an id
   * this log cannot place (unreadable, another epoch, ahead of the channel, or of a channel
   * forgotten since) gets `missed: "unknown"` and nothing; otherwise the newest buffered events
   * after it that fit in `maxBytes`, and the count of those left out.
   */
  plan(channel: string, lastEventId: string, maxBytes: number): ReplayPlan {
    const state = this.#channels.get(channel);
    const last = parseEventId(lastEventId);
    const newest = state?.seq ?? 0;
    if (last === undefined || last.epoch !== this.epoch || last.seq > newest || (state !== undefined && state.base > 0 && last.seq <= state.base)) {
      countLimitHit("stream_replay_unknown_id");
      return { missed: "unknown" };
    }
    let after = last.seq;
    if (state !== undefined && last.seq < newest) {
      const oldest = state.events.length > state.head ? state.events[state.head]!.seq : newest + 1;
      after = Math.max(after, oldest - 1);
      // Walk back from the newest while the backlog fits.
      let bytes = 0;
      let index = state.events.length - 1;
      while (index >= state.head && state.events[index]!.seq > after && bytes + cost(state.events[index]!) <= maxBytes) {
        bytes += cost(state.events[index]!);
        index--;
      }
      if (index >= state.head && state.events[index]!.seq > after) {
        countLimitHit("stream_replay_request_bytes");
        after = state.events[index]!.seq;
      }
    }
    return { missed: after - last.seq, epoch: this.epoch, resume: last.seq, after, to: newest };
  }

  /** The buffered events `after < seq <= to` of `channel`, oldest first, at most `maxBytes` (at least one). */
  piece(channel: string, after: number, to: number, maxBytes: number): ChannelEvent[] {
    const state = this.#channels.get(channel);
    const events: ChannelEvent[] = [];
    if (state === undefined || state.events.length === state.head) return events;
    const oldest = state.events[state.head]!.seq;
    let bytes = 0;
    for (let index = state.head + Math.max(0, after + 1 - oldest); index < state.events.length; index++) {
      const event = state.events[index]!;
      if (event.seq > to || (events.length > 0 && bytes + cost(event) > maxBytes)) break;
      bytes += cost(event);
      events.push(event);
    }
    return events;
  }

  /** The id of the newest event of `channel`, or undefined before its first. */
  lastId(channel: string): string | undefined {
    const seq = this.#channels.get(channel)?.seq;
    return seq === undefined ? undefined : `${this.epoch}-${seq}`;
  }

  #evictOldest(state: Channel, limit: "events" | "bytes" | "total"): void {
    const event = state.events[state.head]!;
    state.events[state.head++] = undefined as unknown as ChannelEvent;
    state.bytes -= cost(event);
    this.#bytes -= cost(event);
    if (state.head === state.events.length) {
      state.events = [];
      state.head = 0;
    } else if (state.head >= 1024 && state.head * 2 >= state.events.length) {
      state.events = state.events.slice(state.head);
      state.head = 0;
    }
    // Events leaving the buffer by count is its ordinary turnover; by bytes, a limit reached.
    if (limit !== "events") countLimitHit(limit === "bytes" ? "stream_replay_channel_bytes" : "stream_replay_total_bytes");
  }

  /** Over the whole log's bound: the oldest events of the least recently published channels go first, `current`'s last. */
  #trimTotal(current: Channel): void {
    if (this.#bytes <= this.#limits.replayTotalBytes) return;
    for (const state of this.#channels.values()) {
      const keep = state === current ? 1 : 0;
      while (this.#bytes > this.#limits.replayTotalBytes && state.events.length - state.head > keep) this.#evictOldest(state, "total");
      if (this.#bytes <= this.#limits.replayTotalBytes) return;
    }
  }

  #forget(channel: string): void {
    const state = this.#channels.get(channel)!;
    this.#channels.delete(channel);
    this.#bytes -= state.bytes;
    this.#forgotten = Math.max(this.#forgotten, state.seq);
  }
}

function newEpoch(): string {
  // Time first: a later log's epoch differs from an earlier one's even if the random part repeats.
  return Date.now().toString(36) + randomBytes(2).toString("hex");
}
