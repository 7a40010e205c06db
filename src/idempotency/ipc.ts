import { defineIpcRequest } from "../cluster/ipc.js";
import type { PrimaryChannel } from "../cluster/ipc.js";
import type { IdempotencyBegin, IdempotencyComplete, IdempotencyRelease, IdempotencyState, IdempotencyStore } from "./store.js";

/**
 * The idempotency integration's IPC types: a worker claims, completes and releases keys in the
 * primary, which keeps every key of the cluster (idempotency/primary.ts).
 */
export const idempotencyBegin = defineIpcRequest<IdempotencyBegin, IdempotencyState>("idempotency:begin");
export const idempotencyComplete = defineIpcRequest<IdempotencyComplete, true>("idempotency:complete");
export const idempotencyRelease = defineIpcRequest<IdempotencyRelease, true>("idempotency:release");

/** Longest a request may stay pending in the channel; the middleware gives up on it sooner. */
const IPC_TIMEOUT_MS = 10_000;

/** The store of a supervised worker: each step is one request to the primary. */
export function primaryIdempotencyStore(channel: PrimaryChannel): IdempotencyStore {
  return {
    begin: (begin) => channel.request(idempotencyBegin, begin, IPC_TIMEOUT_MS),
    complete: async (complete) => void await channel.request(idempotencyComplete, complete, IPC_TIMEOUT_MS),
    release: async (release) => void await channel.request(idempotencyRelease, release, IPC_TIMEOUT_MS),
  };
}
