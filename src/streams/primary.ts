import type { FeatureHost, FeatureWorker } from "../cluster/feature-host.js";
import type { ChannelEvent } from "./event.js";
import { checkChannel } from "./event.js";
import { memoryBroker, storeBroker, streamsDatabaseUrl, type Broker } from "./broker.js";
import { REPLAY_PIECE_BYTES, streamsEvent, streamsInterest, streamsPiece, streamsPublish, streamsReplay } from "./ipc.js";
import { MAX_REPLAY_BYTES, MAX_REPLAY_EVENTS, ReplayLog } from "./replay-log.js";
import { errorMessage } from "../errors.js";

/** A bound a worker sent: an integer from `min` to `max`, else the request is refused. */
function bound(value: unknown, min: number, max: number, what: string): number {
  if (!Number.isSafeInteger(value) || (value as number) < min) throw new Error(`malformed ${what} request`);
  return Math.min(value as number, max);
}

/**
 * The pod's stream broker, in the primary: it numbers each channel's events, keeps the replay
 * buffers, and sends every event to every worker (starting, ready or draining: a draining worker's
 * clients get what is published until their stream ends) that has subscribers of its channel
 * (`streams:interest`). One IPC message per such worker per event, whatever the number of
 * subscribers on it. A replay is answered in pieces of at most `REPLAY_PIECE_BYTES`, each asked for
 * by the worker once its client took the one before. With KEELSON_STREAMS_DATABASE_URL the
 * numbering and the buffers are in PostgreSQL, shared by every pod (postgres-store.ts).
 */
export function installStreams(host: Pick<FeatureHost, "handle" | "onWorker" | "onMessage" | "finished" | "fail" | "logger">): void {
  // The channels each live worker has subscribers of.
  const interests = new Map<FeatureWorker, Set<string>>();
  host.onWorker((worker) => {
    interests.set(worker, new Set());
    void worker.exited.then(() => interests.delete(worker));
  });
  host.onMessage(streamsInterest, ({ channel, subscribed }, worker) => {
    const channels = interests.get(worker);
    if (channels === undefined || typeof channel !== "string") return;
    if (subscribed === true) channels.add(channel);
    else channels.delete(channel);
  });
  const broadcast = (event: ChannelEvent) => {
    for (const [worker, channels] of interests) if (channels.has(event.channel)) worker.channel.send(streamsEvent, event);
  };
  let broker: Broker | undefined;
  const url = streamsDatabaseUrl();
  if (url !== undefined) {
    const opening = import("./postgres-store.js").then(({ openPostgresStreamStore }) => openPostgresStreamStore(url, host.logger));
    opening.then((store) => void host.finished.then(() => store.close()), (error: unknown) => {
      host.fail(`streams: the shared store (KEELSON_STREAMS_DATABASE_URL) cannot be used: ${errorMessage(error)}`);
    });
    broker = storeBroker(opening, broadcast);
  }
  // In memory unless the store is configured; created at the first publish, so it costs nothing until then.
  const use = () => (broker ??= memoryBroker(new ReplayLog(), broadcast));
  host.handle(streamsPublish, (message) => {
    const { channel, data, replayEvents, replayBytes, replayTotalBytes } = message ?? {};
    if (typeof data !== "string") throw new Error("malformed streams:publish request");
    return use().publish(checkChannel(channel), data, {
      replayEvents: bound(replayEvents, 0, MAX_REPLAY_EVENTS, "streams:publish"),
      replayBytes: bound(replayBytes, 1, MAX_REPLAY_BYTES, "streams:publish"),
      replayTotalBytes: bound(replayTotalBytes, 1, MAX_REPLAY_BYTES, "streams:publish"),
    }).then((id) => ({ id }));
  });
  host.handle(streamsReplay, ({ channel, lastEventId, maxBytes }) =>
    use().plan(checkChannel(channel), String(lastEventId), bound(maxBytes, 0, MAX_REPLAY_BYTES, "streams:replay")));
  host.handle(streamsPiece, async ({ channel, after, to, maxBytes }) => ({
    events: await use().piece(checkChannel(channel), bound(after, 0, Number.MAX_SAFE_INTEGER, "streams:piece"),
      bound(to, 0, Number.MAX_SAFE_INTEGER, "streams:piece"), bound(maxBytes, 1, REPLAY_PIECE_BYTES, "streams:piece")),
  }));
}
