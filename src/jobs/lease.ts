import type { JobStore } from "./define.js";

/** One claimed tick, as the store knows it. */
export interface LeasedTick {
  readonly store: JobStore;
  readonly job: string;
  readonly scheduledAt: Date;
  readonly owner: string;
}

/** How often a held lease is renewed: four chances before it could run out. */
export function renewEveryMs(store: JobStore): number {
  return Math.floor(store.leaseMs / 4);
}

/**
 * How long a run goes on without a successful renewal before it is aborted: three quarters of
 * the lease, counted from when the last successful renewal was *sent* (the store's expiry is
 * counted from when it received it, which is later), so the run has the last quarter to stop
 * before anyone else may claim the tick.
 */
export function abortAfterMs(store: JobStore): number {
  return Math.floor((store.leaseMs * 3) / 4);
}

/**
 * Keeps the lease of a running tick alive: renews it every quarter of `leaseMs`, and calls
 * `onLost` once, then stops, when the store says the lease is no longer ours or when no renewal
 * succeeded for `abortAfterMs` since `claimSentAt` (performance.now() when the claim was sent).
 * A renewal that hangs does not hold the next one back: each gets its own deadline, and a late
 * success still counts from when it was sent. Returns `stop`.
 */
export function keepLease(tick: LeasedTick, claimSentAt: number, onLost: (reason: string) => void): () => void {
  const { store, job, scheduledAt, owner } = tick;
  const every = renewEveryMs(store);
  const grace = abortAfterMs(store);
  let stopped = false;
  let confirmedAt = claimSentAt;
  let deadline: NodeJS.Timeout | undefined;

  const stop = () => {
    stopped = true;
    clearInterval(interval);
    clearTimeout(deadline);
  };
  const lose = (reason: string) => {
    if (stopped) return;
    stop();
    onLost(reason);
  };
  const arm = () => {
    clearTimeout(deadline);
    deadline = setTimeout(() => lose(`no renewal succeeded for ${grace}ms`), Math.max(0, confirmedAt + grace - performance.now()));
    deadline.unref();
  };
  const renew = () => {
    const sentAt = performance.now();
    const late = new AbortController();
    const timer = setTimeout(() => late.abort(new Error(`the lease renewal did not answer within ${every}ms`)), every);
    timer.unref();
    store.renew(job, scheduledAt, owner, late.signal).then((held) => {
      if (stopped) return;
      if (!held) return lose("the store says another instance holds it, or it is finished");
      if (sentAt > confirmedAt) {
        confirmedAt = sentAt;
        arm();
      }
    }, () => {
      // A failed renewal is retried at the next beat; the deadline decides when to give up.
    }).finally(() => clearTimeout(timer));
  };
  const interval = setInterval(renew, every);
  interval.unref();
  arm();
  return stop;
}
