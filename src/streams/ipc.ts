import { defineIpcMessage, defineIpcRequest } from "../cluster/ipc.js";
import type { ChannelEvent, Replay } from "./event.js";

/**
 * The streams integration's IPC types. Within a pod the primary numbers every channel's events
 * and keeps their replay buffers (streams/primary.ts), so that a client may resume on any worker.
 */

/**
 * Worker → primary: publish `data` (JSON text) to `channel`; the reply is the event's id. A
 * request, handled in arrival order: one worker's publishes to a channel keep their order.
 * `replayEvents` is the publisher's replay buffer size for the channel.
 */
export const streamsPublish = defineIpcRequest<{ channel: string; data: string; replayEvents: number }, { id: string }>("streams:publish");

/**
 * Worker → primary: the worker has subscribers of `channel` from now on, or none any more. The
 * primary sends a channel's events only to the workers that have subscribers of it. Sent before the
 * replay request of the same subscription, on the same ordered channel: nothing falls in between.
 */
export const streamsInterest = defineIpcMessage<{ channel: string; subscribed: boolean }>("streams:interest");

/** Primary → every worker with subscribers of the channel: an event to deliver to them. */
export const streamsEvent = defineIpcMessage<ChannelEvent>("streams:event");

/** Worker → primary: the buffered events of `channel` after `lastEventId`. */
export const streamsReplay = defineIpcRequest<{ channel: string; lastEventId: string }, Replay>("streams:replay");
