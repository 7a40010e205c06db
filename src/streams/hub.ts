import { checkOptionalNumber } from "../checks.js";
import type { PrimaryChannel } from "../cluster/ipc.js";
import { getPrimaryChannel } from "../cluster/worker-link.js";
import { newLogger } from "../logging/logger.js";
import { checkChannel, parseEventId, type ChannelEvent, type Missed, type Replay } from "./event.js";
import { streamsEvent, streamsInterest, streamsPublish, streamsReplay } from "./ipc.js";
import { memoryBroker, storeBroker, streamsDatabaseUrl, type Broker } from "./broker.js";
import { DEFAULT_MAX_CHANNELS, DEFAULT_REPLAY_EVENTS, MAX_REPLAY_EVENTS, ReplayLog } from "./replay-log.js";

/** Where a subscription delivers: a stream or a WebSocket of this process. */
export interface ChannelSink {
  deliver(event: ChannelEvent): void;
  /** Called before the replayed events when some could not be replayed. */
  missed(channel: string, missed: Missed): void;
}

/** Settings of the process's streams (`configureStreams`); see docs/streams.md "Limits". */
export interface StreamsOptions {
  /** Events kept per channel for clients resuming with Last-Event-ID. Default 1000. */
  replayEvents?: number;
  /** Channels whose replay buffer is kept; the least recently published is forgotten beyond. Default 10,000. */
  maxChannels?: number;
  /** The largest published message, in bytes of JSON. Default 65,536. */
  maxMessageBytes?: number;
}

export const DEFAULT_MAX_MESSAGE_BYTES = 65_536;
const IPC_TIMEOUT_MS = 5000;

interface Subscription {
  readonly sink: ChannelSink;
  /** Live events that arrived while the replay was being fetched; undefined once caught up. */
  pending: ChannelEvent[] | undefined;
  active: boolean;
  /** The last event delivered: one that arrives again (live after being replayed) is not sent twice. */
  last: ChannelEvent | undefined;
}



/**
 * The process's channels: its subscribers by channel, and the broker that numbers events. Under
 * the keelson supervisor the broker is the primary (every worker's subscribers get every event,
 * and a client may resume on any worker); otherwise this process.
 */
export class StreamHub {
  readonly #subscribers = new Map<string, Set<Subscription>>();
  #broker: Broker | undefined;
  #options: Required<StreamsOptions> = {
    replayEvents: DEFAULT_REPLAY_EVENTS, maxChannels: DEFAULT_MAX_CHANNELS, maxMessageBytes: DEFAULT_MAX_MESSAGE_BYTES,
  };

  configure(options: StreamsOptions): void {
    checkOptionalNumber(options.replayEvents, "replayEvents", { integer: true, min: 0, max: MAX_REPLAY_EVENTS });
    checkOptionalNumber(options.maxChannels, "maxChannels", { integer: true, min: 1 });
    checkOptionalNumber(options.maxMessageBytes, "maxMessageBytes", { integer: true, min: 1 });
    if (this.#broker !== undefined && options.maxChannels !== undefined) {
      throw new Error("configureStreams({ maxChannels }) must come before the first publish or subscribe");
    }
    this.#options = { ...this.#options, ...Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) };
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
    return this.#connect().publish(channel, text, this.#options.replayEvents);
  }

  /**
   * Delivers the channel's events to `sink` from now on; with `lastEventId`, first those after it
   * (from the replay buffer), each event once and in order. Returns the undo.
   */
  subscribe(channel: string, sink: ChannelSink, lastEventId?: string): () => void {
    checkChannel(channel);
    const broker = this.#connect();
    const subscription: Subscription = { sink, pending: lastEventId === undefined ? undefined : [], active: true, last: undefined };
    let set = this.#subscribers.get(channel);
    if (set === undefined) {
      this.#subscribers.set(channel, (set = new Set()));
      broker.interest?.(channel, true);
    }
    set.add(subscription);
    if (lastEventId !== undefined) {
      broker.replay(channel, lastEventId).then(
        (replay) => this.#caughtUp(subscription, channel, replay),
        () => this.#caughtUp(subscription, channel, { events: [], missed: "unknown" }),
      );
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

  #caughtUp(subscription: Subscription, channel: string, replay: Replay): void {
    const pending = subscription.pending ?? [];
    subscription.pending = undefined;
    if (!subscription.active) return;
    if (replay.missed !== 0) subscription.sink.missed(channel, replay.missed);
    // Then the live events that came in meanwhile: those the replay already held are skipped.
    for (const event of [...replay.events, ...pending]) {
      if (!subscription.active) return;
      send(subscription, event);
    }
  }

  /** An event from the broker, to every subscriber of its channel in this process. */
  deliver(event: ChannelEvent): void {
    const set = this.#subscribers.get(event.channel);
    if (set === undefined) return;
    for (const subscription of set) {
      if (subscription.pending !== undefined) subscription.pending.push(event);
      else send(subscription, event);
    }
  }

  #connect(): Broker {
    if (this.#broker !== undefined) return this.#broker;
    // Only the keelson supervisor sets KEELSON_WORKER_ID: another node:cluster primary would never answer.
    const primary = process.env.KEELSON_WORKER_ID === undefined ? undefined : getPrimaryChannel();
    this.#broker = primary === undefined ? this.#localBroker() : this.#primaryBroker(primary);
    return this.#broker;
  }

  #localBroker(): Broker {
    const deliver = (event: ChannelEvent) => this.deliver(event);
    const url = streamsDatabaseUrl();
    if (url === undefined) return memoryBroker(new ReplayLog({ maxChannels: this.#options.maxChannels }), deliver);
    // The store's connections stay open for the process's life: the process exits through the App's shutdown.
    return storeBroker(import("./postgres-store.js").then(({ openPostgresStreamStore }) => openPostgresStreamStore(url, newLogger(process.env.NODE_ENV === "production"))), deliver);
  }

  #primaryBroker(primary: PrimaryChannel): Broker {
    primary.on(streamsEvent, (event) => this.deliver(event));
    return {
      publish: async (channel, data, replayEvents) => (await primary.request(streamsPublish, { channel, data, replayEvents }, IPC_TIMEOUT_MS)).id,
      replay: (channel, lastEventId) => primary.request(streamsReplay, { channel, lastEventId }, IPC_TIMEOUT_MS),
      interest: (channel, subscribed) => void primary.send(streamsInterest, { channel, subscribed }),
    };
  }
}

/**
 * Delivers `event` unless the subscription had it already. With a shared store, an event committed
 * before a resuming client's replay was read can still be announced live after it: the channel's
 * order makes "not newer than the last one sent, same log" a duplicate.
 */
function send(subscription: Subscription, event: ChannelEvent): void {
  const last = subscription.last;
  if (last !== undefined && event.seq <= last.seq && parseEventId(last.id)?.epoch === parseEventId(event.id)?.epoch) return;
  subscription.last = event;
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
 * Sets this process's stream limits (replay buffer per channel, channels kept, largest message);
 * call it before the first publish. Under the supervisor each publish carries its process's
 * `replayEvents`, so set it the same in every worker (the same code does).
 *
 * @example
 * configureStreams({ replayEvents: 5000 });
 */
export function configureStreams(options: StreamsOptions): void {
  hub.configure(options);
}
