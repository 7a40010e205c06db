import type { FeatureHost } from "../cluster/feature-host.js";
import { rateLimitTake } from "./ipc.js";
import { MemoryRateLimitStore, type RateLimitTake } from "./window.js";

/** What the rate-limit broker needs from the primary. */
export type RateLimitHost = Pick<FeatureHost, "handle">;

const MAX_WANT = 10_000;

/**
 * The cluster's rate-limit counts, in the primary: workers lease batches of a key's budget
 * (`ratelimit:take`) and serve them locally, so the primary sees one message per lease, not
 * one per request. It grants at most what is left, so the cluster never serves more than the
 * limit. Costs nothing until a worker's limiter asks.
 */
export function installRateLimits(host: RateLimitHost): MemoryRateLimitStore {
  const store = new MemoryRateLimitStore();
  host.handle(rateLimitTake, (take) => store.takeNow(checked(take)));
  return store;
}

const positive = (value: unknown) => Number.isSafeInteger(value) && (value as number) > 0;

/** A worker's payload, checked: a malformed one is refused (the worker's limiter then fails open or closed). */
function checked(take: RateLimitTake): RateLimitTake {
  const { key, limit, windowMs, algorithm, now, want } = take ?? {};
  if (typeof key !== "string" || !positive(limit) || !positive(windowMs) || !positive(want) || !Number.isFinite(now)
    || (algorithm !== "fixed" && algorithm !== "sliding")) {
    throw new Error("malformed ratelimit:take request");
  }
  return { key, limit, windowMs, algorithm, now, want: Math.min(want, MAX_WANT) };
}
