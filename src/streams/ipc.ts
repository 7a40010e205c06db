import { defineIpcMessage, defineIpcRequest } from "../cluster/ipc.js";
import type { ChannelEvent, ReplayPlan } from "./event.js";

/**
 * The streams integration's IPC types. Within a pod the primary numbers every channel's events
 * and keeps their replay buffers (streams/primary.ts), so that a client may resume on any worker.
 */

/**
 * Worker → primary: publish `data` (JSON text) to `channel`; the reply is the event's id. A
 * request, handled in arrival order: one worker's publishes to a channel keep their order.
 * `replayEvents` and `replayBytes` are the publisher's replay buffer bounds for the channel,
 * `replayTotalBytes` its bound for all channels together.
 */
export const streamsPublish = defineIpcRequest<{ channel: string; data: string; replayEvents: number; replayBytes: number; replayTotalBytes: number }, { id: string }>("streams:publish");

/**
 * Worker → primary: the worker has subscribers of `channel` from now on, or none any more. The
 * primary sends a channel's events only to the workers that have subscribers of it. Sent before the
 * replay request of the same subscription, on the same ordered channel: nothing falls in between.
 */
export const streamsInterest = defineIpcMessage<{ channel: string; subscribed: boolean }>("streams:interest");

/** Primary → every worker with subscribers of the channel: an event to deliver to them. */
export const streamsEvent = defineIpcMessage<ChannelEvent>("streams:event");

/** Worker → primary: how to serve a client resuming after `lastEventId` with at most `maxBytes` of backlog. */
export const streamsReplay = defineIpcRequest<{ channel: string; lastEventId: string; maxBytes: number }, ReplayPlan>("streams:replay");

/**
 * Worker → primary: the next piece of a replay, the events `after < seq <= to` up to `maxBytes`
 * (the primary caps it at `REPLAY_PIECE_BYTES`). The worker asks for the next piece once its
 * client has taken this one: a replay never crosses the IPC channel as one message.
 */
export const streamsPiece = defineIpcRequest<{ channel: string; after: number; to: number; maxBytes: number }, { events: ChannelEvent[] }>("streams:piece");

/** The most a replay piece carries, in bytes of event data. */
export const REPLAY_PIECE_BYTES = 256 * 1024;
