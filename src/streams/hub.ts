import { checkOptionalNumber } from "../checks.js";
import type { PrimaryChannel } from "../cluster/ipc.js";
import { getPrimaryChannel } from "../cluster/worker-link.js";
import { countLimitHit } from "../limit-hits.js";
import { newLogger, type Logger } from "../logging/logger.js";
import { checkChannel, parseEventId, type ChannelEvent, type Missed } from "./event.js";
import { REPLAY_PIECE_BYTES, streamsEvent, streamsInterest, streamsPiece, streamsPublish, streamsReplay } from "./ipc.js";
import { coalesced, memoryBroker, storeBroker, streamsDatabaseUrl, type Broker } from "./broker.js";
import {
  DEFAULT_MAX_CHANNELS, DEFAULT_REPLAY_BYTES, DEFAULT_REPLAY_EVENTS, DEFAULT_REPLAY_TOTAL_BYTES, MAX_REPLAY_BYTES, MAX_REPLAY_EVENTS, ReplayLog,
} from "./replay-log.js";

/** Where a subscription delivers: a stream or a WebSocket of this process. */
export interface ChannelSink {
  deliver(event: ChannelEvent): void;
  /** Called before the replayed events when some could not be replayed (and again if more fall out during a long replay). */
  missed(channel: string, missed: Missed): void;
  /**
   * Resolves when the sink can take more (its client has read what waits): a replay's next piece
   * is fetched only then. Without it, pieces follow one another as they arrive.
   */
  ready?(): Promise<void>;
}

/** Settings of the process's streams (`configureStreams`); see docs/streams.md "Limits". */
export interface StreamsOptions {
  /** Events kept per channel for clients resuming with Last-Event-ID. Default 1000. */
  replayEvents?: number;
  /** Bytes of JSON kept per channel for replay; its oldest events go first beyond it. Default 4 MiB. */
  replayBytes?: number;
  /** Bytes of JSON kept for replay, all channels together; the least recently published lose their oldest events first. Default 64 MiB. */
  replayTotalBytes?: number;
  /** The most one resuming client is replayed, in bytes of JSON: it gets the newest events that fit, after a `missed` event. Default 1 MiB. */
  replayRequestBytes?: number;
  /** Channels whose replay buffer is kept; the least recently published is forgotten beyond. Default 10,000. */
  maxChannels?: number;
  /** The largest published message, in bytes of JSON. Default 65,536. */
  maxMessageBytes?: number;
}

export const DEFAULT_MAX_MESSAGE_BYTES = 65_536;
export const DEFAULT_REPLAY_REQUEST_BYTES = 1024 * 1024;
const IPC_TIMEOUT_MS = 5000;

interface Position {
  readonly epoch: string;
  readonly seq: number;
}

interface Subscription {
  readonly sink: ChannelSink;
  /** Live events that arrived while the replay was being read; undefined once caught up. */
  pending: ChannelEvent[] | undefined;
  pendingBytes: number;
  /** The newest live event let go from `pending` (over its bound): the replay reads up to it instead. */
  pendingTo: Position | undefined;
  active: boolean;
  /**
   * The position of the last event delivered, or the client's resume point before the first: an
   * event at or before it (replayed, then announced live again; or caught up by a store after a
   * lost LISTEN) is not sent.
   */
  last: Position | undefined;
}

/**
 * The process's channels: its subscribers by channel, and the broker that numbers events. Under
 * the keelson supervisor the broker is the primary (every worker's subscribers get every event,
 * and a client may resume on any worker); otherwise this process.
 */
export class StreamHub {
  readonly #subscribers = new Map<string, Set<Subscription>>();
  #broker: Broker | undefined;
  readonly #connectBroker: ((deliver: (event: ChannelEvent) => void) => Broker) | undefined;
  #logger: Logger | undefined;
  #options: Required<StreamsOptions> = {
    replayEvents: DEFAULT_REPLAY_EVENTS, replayBytes: DEFAULT_REPLAY_BYTES, replayTotalBytes: DEFAULT_REPLAY_TOTAL_BYTES,
    replayRequestBytes: DEFAULT_REPLAY_REQUEST_BYTES, maxChannels: DEFAULT_MAX_CHANNELS, maxMessageBytes: DEFAULT_MAX_MESSAGE_BYTES,
  };

  /** @param broker what numbers and buffers events, given this hub's delivery (default: the primary, a shared store or this process). */
  constructor(broker?: (deliver: (event: ChannelEvent) => void) => Broker) {
    this.#connectBroker = broker;
  }

  configure(options: StreamsOptions): void {
    checkOptionalNumber(options.replayEvents, "replayEvents", { integer: true, min: 0, max: MAX_REPLAY_EVENTS });
    checkOptionalNumber(options.replayBytes, "replayBytes", { integer: true, min: 1, max: MAX_REPLAY_BYTES });
    checkOptionalNumber(options.replayTotalBytes, "replayTotalBytes", { integer: true, min: 1, max: MAX_REPLAY_BYTES });
    checkOptionalNumber(options.replayRequestBytes, "replayRequestBytes", { integer: true, min: 0, max: MAX_REPLAY_BYTES });
    checkOptionalNumber(options.maxChannels, "maxChannels", { integer: true, min: 1 });
    checkOptionalNumber(options.maxMessageBytes, "maxMessageBytes", { integer: true, min: 1, max: MAX_REPLAY_BYTES });
    if (this.#broker !== undefined && options.maxChannels !== undefined) {
      throw new Error("configureStreams({ maxChannels }) must come before the first publish or subscribe");
    }
    this.#options = { ...this.#options, ...Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) };
  }

  /**
   * The logger the hub's store logs through: the first App's (the process has one hub, whatever
   * its number of Apps). Without an App, a logger of its own is made when the store opens.
   */
  useLogger(logger: Logger): void {
    this.#logger ??= logger;
  }

  /** What `useLogger` kept: undefined until an App is made. */
  get logger(): Logger | undefined {
    return this.#logger;
  }

  get options(): Readonly<Required<StreamsOptions>> {
    return this.#options;
  }

  /** Publishes `data` (any JSON value) to `channel`; resolves with its event id. */
  async publish(channel: string, data: unknown): Promise<string> {
    checkChannel(channel);
    const text = JSON.stringify(data);
    if (text === undefined) throw new TypeError(`cannot publish ${typeof data} to ${channel}: not a JSON value`);
    const bytes = Buffer.byteLength(text);
    if (bytes > this.#options.maxMessageBytes) {
      throw new RangeError(`message to ${channel} is ${bytes} bytes of JSON, over the maxMessageBytes limit of ${this.#options.maxMessageBytes}`);
    }
    const { replayEvents, replayBytes, replayTotalBytes } = this.#options;
    return this.#connect().publish(channel, text, { replayEvents, replayBytes, replayTotalBytes });
  }

  /**
   * Delivers the channel's events to `sink` from now on; with `lastEventId`, first those after it
   * (from the replay buffer, in pieces as the sink takes them), each event once and in order, and
   * never one at or before the resume point. An id that cannot be placed gets a `missed` call
   * ("unknown") and no backlog. Returns the undo.
   */
  subscribe(channel: string, sink: ChannelSink, lastEventId?: string): () => void {
    checkChannel(channel);
    const broker = this.#connect();
    const subscription: Subscription = {
      sink, pending: lastEventId === undefined ? undefined : [], pendingBytes: 0, pendingTo: undefined, active: true, last: undefined,
    };
    let set = this.#subscribers.get(channel);
    if (set === undefined) {
      this.#subscribers.set(channel, (set = new Set()));
      broker.interest?.(channel, true);
    }
    set.add(subscription);
    if (lastEventId !== undefined) {
      this.#replay(broker, subscription, channel, lastEventId).catch(() => {
        // The broker failed (the primary did not answer, the store is down): the client is told, and goes on live.
        if (subscription.active && subscription.pending !== undefined) subscription.sink.missed(channel, "unknown");
      }).finally(() => this.#caughtUp(subscription));
    }
    return () => {
      subscription.active = false;
      set.delete(subscription);
      if (set.size === 0 && this.#subscribers.get(channel) === set) {
        this.#subscribers.delete(channel);
        broker.interest?.(channel, false);
      }
    };
  }

  /** Subscribers of this process, all channels together. */
  get subscriberCount(): number {
    let count = 0;
    for (const set of this.#subscribers.values()) count += set.size;
    return count;
  }

  async #replay(broker: Broker, subscription: Subscription, channel: string, lastEventId: string): Promise<void> {
    const plan = await broker.plan(channel, lastEventId, this.#options.replayRequestBytes);
    if (!subscription.active) return;
    if (plan.missed === "unknown") {
      subscription.sink.missed(channel, "unknown");
      return;
    }
    subscription.last = { epoch: plan.epoch, seq: plan.resume };
    if (plan.missed > 0) subscription.sink.missed(channel, plan.missed);
    let { after, to } = plan;
    for (;;) {
      const overflow = subscription.pendingTo;
      if (overflow !== undefined && overflow.epoch === plan.epoch) to = Math.max(to, overflow.seq);
      if (after >= to) return;
      await subscription.sink.ready?.();
      if (!subscription.active) return;
      const events = await broker.piece(channel, after, to, REPLAY_PIECE_BYTES);
      if (!subscription.active) return;
      const first = events[0];
      // What fell out of the buffer while the client read the pieces before.
      const gone = first === undefined ? to - after : first.seq - after - 1;
      if (gone > 0) subscription.sink.missed(channel, gone);
      if (first === undefined) return;
      for (const event of events) {
        if (!subscription.active) return;
        send(subscription, event);
      }
      after = events.at(-1)!.seq;
    }
  }

  /** The live events that came in meanwhile, after the replay: those it held are skipped. */
  #caughtUp(subscription: Subscription): void {
    const pending = subscription.pending ?? [];
    subscription.pending = undefined;
    for (const event of pending) {
      if (!subscription.active) return;
      send(subscription, event);
    }
  }

  /** An event from the broker, to every subscriber of its channel in this process. */
  deliver(event: ChannelEvent): void {
    const set = this.#subscribers.get(event.channel);
    if (set === undefined) return;
    for (const subscription of set) {
      if (subscription.pending === undefined) {
        send(subscription, event);
        continue;
      }
      subscription.pending.push(event);
      subscription.pendingBytes += event.data.length;
      if (subscription.pendingBytes > REPLAY_PIECE_BYTES) {
        // A long replay: what comes live meanwhile is read from the buffer after it instead of held here.
        countLimitHit("stream_replay_pending_bytes");
        const newest = parseEventId(event.id);
        if (newest !== undefined) subscription.pendingTo = newest;
        subscription.pending = [];
        subscription.pendingBytes = 0;
      }
    }
  }

  #connect(): Broker {
    if (this.#broker !== undefined) return this.#broker;
    const deliver = (event: ChannelEvent) => this.deliver(event);
    if (this.#connectBroker !== undefined) return (this.#broker = this.#connectBroker(deliver));
    const primary = getPrimaryChannel();
    this.#broker = primary === undefined ? this.#localBroker(deliver) : this.#primaryBroker(primary);
    return this.#broker;
  }

  #localBroker(deliver: (event: ChannelEvent) => void): Broker {
    const url = streamsDatabaseUrl();
    if (url === undefined) return memoryBroker(new ReplayLog({ maxChannels: this.#options.maxChannels }), deliver);
    // The store's connections stay open for the process's life: the process exits through the App's shutdown.
    return storeBroker(import("./postgres-store.js").then(({ openPostgresStreamStore }) => openPostgresStreamStore(url, this.#logger ?? newLogger(process.env.NODE_ENV === "production"))), deliver);
  }

  #primaryBroker(primary: PrimaryChannel): Broker {
    primary.on(streamsEvent, (event) => this.deliver(event));
    return coalesced({
      publish: async (channel, data, limits) => (await primary.request(streamsPublish, { channel, data, ...limits }, IPC_TIMEOUT_MS)).id,
      plan: (channel, lastEventId, maxBytes) => primary.request(streamsReplay, { channel, lastEventId, maxBytes }, IPC_TIMEOUT_MS),
      piece: async (channel, after, to, maxBytes) => (await primary.request(streamsPiece, { channel, after, to, maxBytes }, IPC_TIMEOUT_MS)).events,
      interest: (channel, subscribed) => void primary.send(streamsInterest, { channel, subscribed }),
    });
  }
}

/** Delivers `event` unless it is not newer than the subscription's position (same log): a duplicate, or before its resume point. */
function send(subscription: Subscription, event: ChannelEvent): void {
  const last = subscription.last;
  const position = parseEventId(event.id);
  if (last !== undefined && position !== undefined && position.seq <= last.seq && position.epoch === last.epoch) return;
  subscription.last = position;
  subscription.sink.deliver(event);
}

/** The hub of this process: one, whatever the number of Apps. */
export const hub = new StreamHub();

/**
 * Publishes `data` (any JSON value) to `channel`: every event-stream and WebSocket subscriber of
 * the channel gets it, on every worker of the pod under the supervisor. Resolves with the
 * event's id once it is numbered (and buffered for replay).
 *
 * @example
 * app.route(post("/rooms/:room/messages", async (ctx) => {
 *   const id = await publish(`room:${ctx.params.room}`, ctx.body);
 *   return created({ id });
 * }));
 */
export function publish(channel: string, data: unknown): Promise<string> {
  return hub.publish(channel, data);
}

/**
 * Sets this process's stream limits (replay buffer per channel and in all, a resuming client's
 * replay, channels kept, largest message); call it before the first publish. Under the
 * supervisor each publish carries its process's `replayEvents`, `replayBytes` and
 * `replayTotalBytes`, so set them the same in every worker (the same code does).
 *
 * @example
 * configureStreams({ replayEvents: 5000 });
 */
export function configureStreams(options: StreamsOptions): void {
  hub.configure(options);
}
