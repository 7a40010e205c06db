import type { IpcHandler, IpcRequestType } from "../cluster/ipc.js";
import type { ChannelEvent } from "./event.js";
import { checkChannel } from "./event.js";
import { streamsEvent, streamsPublish, streamsReplay } from "./ipc.js";
import { ReplayLog } from "./replay-log.js";

/** A worker as the streams broker sees it. */
export interface StreamsWorker {
  readonly state: string;
  readonly channel: { send(type: typeof streamsEvent, payload: ChannelEvent): boolean };
}

/** What the streams broker needs from the supervisor. */
export interface StreamsHost {
  handle<P, R>(type: IpcRequestType<P, R>, handler: IpcHandler<P, R>): unknown;
  readonly workers: readonly StreamsWorker[];
}

const MAX_REPLAY_EVENTS = 100_000;

/**
 * The pod's stream broker, in the primary: it numbers each channel's events, keeps the replay
 * buffers, and sends every event to every worker that is starting, ready or draining (a draining
 * worker's clients get what is published until their stream ends). One IPC message per worker
 * per event, whatever the number of subscribers on it. Costs nothing until a worker publishes.
 */
export function installStreams(host: StreamsHost): ReplayLog {
  const log = new ReplayLog();
  host.handle(streamsPublish, (message) => {
    const { channel, data, replayEvents } = message ?? {};
    if (typeof data !== "string" || !Number.isSafeInteger(replayEvents) || replayEvents < 0) throw new Error("malformed streams:publish request");
    const event = log.append(checkChannel(channel), data, Math.min(replayEvents, MAX_REPLAY_EVENTS));
    for (const worker of host.workers) if (worker.state !== "exited") worker.channel.send(streamsEvent, event);
    return { id: event.id };
  });
  host.handle(streamsReplay, ({ channel, lastEventId }) => log.since(checkChannel(channel), String(lastEventId)));
  return log;
}
