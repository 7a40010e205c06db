import type { ChannelEvent, Replay } from "./event.js";
import type { StreamStore } from "./postgres-store.js";
import { ReplayLog } from "./replay-log.js";

/**
 * Where a pod's events are numbered and buffered for replay: in memory (one pod: the supervisor's
 * primary, or a process without the supervisor), or in a shared store (every pod). Either way each
 * event is handed to `deliver` once, in its channel's order.
 */
export interface Broker {
  publish(channel: string, data: string, replayEvents: number): Promise<string>;
  replay(channel: string, lastEventId: string): Promise<Replay>;
  /** This process has subscribers of `channel` from now on (`true`), or none any more (`false`). */
  interest?(channel: string, subscribed: boolean): void;
}

/** Numbers and buffers events in this process's memory, and delivers them at once. */
export function memoryBroker(log: ReplayLog, deliver: (event: ChannelEvent) => void): Broker {
  return {
    publish: async (channel, data, replayEvents) => {
      const event = log.append(channel, data, replayEvents);
      deliver(event);
      return event.id;
    },
    replay: async (channel, lastEventId) => log.since(channel, lastEventId),
  };
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
  return {
    publish: async (channel, data, replayEvents) => (await ready).append(channel, data, replayEvents),
    replay: async (channel, lastEventId) => (await ready).since(channel, lastEventId),
  };
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
