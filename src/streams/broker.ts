import type { ChannelEvent, ReplayPlan } from "./event.js";
import type { StreamStore } from "./postgres-store.js";
import type { PublishLimits, ReplayLog } from "./replay-log.js";

export type { PublishLimits };

/**
 * Where a pod's events are numbered and buffered for replay: in memory (one pod: the supervisor's
 * primary, or a process without the supervisor), or in a shared store (every pod). Either way each
 * event is handed to `deliver` once, in its channel's order. A replay is a plan, then pieces of
 * at most a few hundred KiB each, read one at a time as the client takes them.
 */
export interface Broker {
  publish(channel: string, data: string, limits: PublishLimits): Promise<string>;
  /** How to serve a client resuming after `lastEventId` with at most `maxBytes` of backlog (see ReplayLog.plan). */
  plan(channel: string, lastEventId: string, maxBytes: number): Promise<ReplayPlan>;
  /** The buffered events `after < seq <= to`, oldest first, at most `maxBytes` (at least one unless none is left). */
  piece(channel: string, after: number, to: number, maxBytes: number): Promise<ChannelEvent[]>;
  /** This process has subscribers of `channel` from now on (`true`), or none any more (`false`). */
  interest?(channel: string, subscribed: boolean): void;
}

/** Numbers and buffers events in this process's memory, and delivers them at once. */
export function memoryBroker(log: ReplayLog, deliver: (event: ChannelEvent) => void): Broker {
  return coalesced({
    publish: async (channel, data, limits) => {
      const event = log.append(channel, data, limits);
      deliver(event);
      return event.id;
    },
    plan: async (channel, lastEventId, maxBytes) => log.plan(channel, lastEventId, maxBytes),
    piece: async (channel, after, to, maxBytes) => log.piece(channel, after, to, maxBytes),
  });
}

/**
 * Numbers and keeps events in the shared store; delivers what the store announces, from every
 * pod (this one's own publishes included, so every pod delivers in the same order).
 */
export function storeBroker(opening: Promise<StreamStore>, deliver: (event: ChannelEvent) => void): Broker {
  const ready = opening.then(async (store) => {
    await store.listen(deliver);
    return store;
  });
  ready.catch(() => {});
  return coalesced({
    publish: async (channel, data, limits) => (await ready).append(channel, data, limits),
    plan: async (channel, lastEventId, maxBytes) => (await ready).plan(channel, lastEventId, maxBytes),
    piece: async (channel, after, to, maxBytes) => (await ready).piece(channel, after, to, maxBytes),
  });
}

/**
 * The same broker, with the plans and pieces asked for while an identical one is on its way
 * answered by that one: clients resuming together on one channel (a reconnect storm after a
 * deploy, or many clients replaying the same garbage id) cost one read, and one IPC message per
 * piece, not one each.
 */
export function coalesced(broker: Broker): Broker {
  const plans = new Map<string, Promise<ReplayPlan>>();
  const pieces = new Map<string, Promise<ChannelEvent[]>>();
  return {
    publish: (channel, data, limits) => broker.publish(channel, data, limits),
    plan: (channel, lastEventId, maxBytes) => once(plans, `${channel}\n${lastEventId}\n${maxBytes}`, () => broker.plan(channel, lastEventId, maxBytes)),
    piece: (channel, after, to, maxBytes) => once(pieces, `${channel}\n${after}\n${to}\n${maxBytes}`, () => broker.piece(channel, after, to, maxBytes)),
    ...(broker.interest === undefined ? {} : { interest: broker.interest.bind(broker) }),
  };
}

/** `read()`'s answer, or the one already on its way for `key`. */
function once<T>(inFlight: Map<string, Promise<T>>, key: string, read: () => Promise<T>): Promise<T> {
  let answer = inFlight.get(key);
  if (answer === undefined) {
    answer = read();
    inFlight.set(key, answer);
    const forget = () => void inFlight.delete(key);
    answer.then(forget, forget);
  }
  return answer;
}

/** The shared store's URL from the environment (every pod sets it), or undefined. */
export function streamsDatabaseUrl(): string | undefined {
  const url = process.env.KEELSON_STREAMS_DATABASE_URL;
  if (url === undefined || url === "") return undefined;
  if (!/^postgres(ql)?:\/\//.test(url)) {
    throw new Error(`invalid KEELSON_STREAMS_DATABASE_URL: expected a postgres:// or postgresql:// URL, got ${JSON.stringify(url.replace(/\/\/[^@/]*@/, "//…@"))}`);
  }
  return url;
}
