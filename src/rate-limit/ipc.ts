import { defineIpcRequest } from "../cluster/ipc.js";
import type { RateLimitGrant, RateLimitTake } from "./window.js";
import type { PrimaryChannel } from "../cluster/ipc.js";

/**
 * The rate-limit integration's IPC type: a worker leases a batch of a key's budget from the
 * primary, which keeps the authoritative counts (rate-limit/primary.ts). Registered here,
 * not in the core protocol; this file imports nothing the primary would not load anyway.
 */
export const rateLimitTake = defineIpcRequest<RateLimitTake, RateLimitGrant>("ratelimit:take");

/** Longest a lease request may stay pending in the channel; the limiter gives up on it sooner. */
const IPC_TIMEOUT_MS = 10_000;

/** The store of a supervised worker: every lease is one request to the primary. */
export function primaryRateLimitStore(channel: PrimaryChannel): { take(take: RateLimitTake): Promise<RateLimitGrant> } {
  return { take: (take) => channel.request(rateLimitTake, take, IPC_TIMEOUT_MS) };
}
