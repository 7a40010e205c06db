import type { StoreBreaker } from "./breaker.js";
import { MemoryRateLimitStore, windowOf, type RateLimitAlgorithm, type RateLimitGrant, type RateLimitTake } from "./window.js";

/** A store as the leases see it (the public `RateLimitStore`). */
export interface LeaseStore {
  take(take: RateLimitTake): Promise<RateLimitGrant>;
}

/** One request's verdict. `remaining` is this process's view: other workers may have spent more since. */
export interface Verdict {
  allowed: boolean;
  remaining: number;
  /** Milliseconds until the window ends. */
  resetMs: number;
  /** When refused: milliseconds until a unit may be available. */
  retryMs: number;
}

const CIRCUIT_OPEN = "the rate-limit store keeps failing: circuit open, not asked";

interface Lease {
  window: number;
  /** Units leased and not yet spent by this process. */
  left: number;
  /** What the store had left after its last grant. */
  remaining: number;
  windowEnd: number;
  /** Refused until this time (ms since the epoch); 0 when not refused. */
  deniedUntil: number;
  refill: Promise<void> | undefined;
}

export interface LeasePolicy {
  limit: number;
  windowMs: number;
  algorithm: RateLimitAlgorithm;
  /** The largest lease asked for at once. */
  batch: number;
  clock: () => number;
  /** The store's answer is awaited this long at most; then the take rejects. */
  timeoutMs: number;
  /** Fails takes at once while the store keeps failing; undefined: always ask. */
  breaker?: StoreBreaker;
}

/**
 * This process's leases of each key's budget. A request spends a unit of the key's lease with
 * no I/O; only when the lease is spent does it ask the store for another (one request in
 * flight per key: concurrent requests wait for it). A refusal is remembered until the store's
 * retry time, so a flood of refused requests costs the store nothing either. Leases end with
 * their window; units left unspent then are lost (counted as used), never carried over.
 */
export class Leases {
  readonly #store: LeaseStore;
  readonly #policy: LeasePolicy;
  readonly #leases = new Map<string, Lease>();
  /** The in-memory store, asked synchronously: its answer is at hand, a promise would only delay it. */
  readonly #local: MemoryRateLimitStore | undefined;
  #sweepAt = 0;

  constructor(store: LeaseStore, policy: LeasePolicy) {
    this.#store = store;
    this.#policy = policy;
    // Not a subclass that answers `take` its own way.
    this.#local = store instanceof MemoryRateLimitStore && store.take === MemoryRateLimitStore.prototype.take ? store : undefined;
  }

  /** The verdict without waiting when the lease (or the in-memory store) can answer, else undefined (call `take`). */
  tryTake(key: string): Verdict | undefined {
    const now = this.#policy.clock();
    let lease = this.#leases.get(key);
    if (lease === undefined || lease.window !== windowOf(now, this.#policy.windowMs)) {
      if (this.#local === undefined) return undefined;
      lease = this.#current(key, now);
    }
    if (lease.left === 0 && this.#local !== undefined && now >= lease.deniedUntil && lease.refill === undefined) {
      this.#apply(lease, this.#local.takeNow(this.#takeOf(key, now)), now);
    }
    if (lease.left > 0) {
      lease.left--;
      return { allowed: true, remaining: lease.remaining + lease.left, resetMs: lease.windowEnd - now, retryMs: 0 };
    }
    if (now < lease.deniedUntil) return { allowed: false, remaining: 0, resetMs: lease.windowEnd - now, retryMs: lease.deniedUntil - now };
    return undefined;
  }

  /** The verdict, asking the store when the lease is spent; rejects when the store fails or is late. */
  async take(key: string): Promise<Verdict> {
    for (;;) {
      const verdict = this.tryTake(key);
      if (verdict !== undefined) return verdict;
      const lease = this.#current(key);
      // While the store is being probed, the key's other requests do not wait for the probe.
      if (lease.refill !== undefined && this.#policy.breaker !== undefined && this.#policy.breaker.state !== "closed") throw new Error(CIRCUIT_OPEN);
      lease.refill ??= this.#refill(key, lease).finally(() => (lease.refill = undefined));
      await lease.refill;
    }
  }

  #current(key: string, now = this.#policy.clock()): Lease {
    const { windowMs } = this.#policy;
    const window = windowOf(now, windowMs);
    let lease = this.#leases.get(key);
    if (lease === undefined || lease.window !== window) {
      this.#sweep(now);
      // A refill of the old window still in flight is left to finish on its own lease object.
      lease = { window, left: 0, remaining: 0, windowEnd: (window + 1) * windowMs, deniedUntil: 0, refill: undefined };
      this.#leases.set(key, lease);
    }
    return lease;
  }

  #takeOf(key: string, now: number): RateLimitTake {
    const { limit, windowMs, algorithm, batch } = this.#policy;
    return { key, limit, windowMs, algorithm, now, want: batch };
  }

  async #refill(key: string, lease: Lease): Promise<void> {
    const now = this.#policy.clock();
    const { breaker } = this.#policy;
    if (breaker !== undefined && !breaker.allow()) throw new Error(CIRCUIT_OPEN);
    const taking = this.#store.take(this.#takeOf(key, now));
    let grant: RateLimitGrant;
    try {
      grant = await withTimeout(taking, this.#policy.timeoutMs);
    } catch (error) {
      breaker?.failed();
      // Units the store grants after the wait are counted as used there: spend them, do not lose them.
      taking.then((late) => void (lease.left += late.granted), () => {});
      throw error;
    }
    breaker?.succeeded();
    this.#apply(lease, grant, now);
  }

  #apply(lease: Lease, grant: RateLimitGrant, now: number): void {
    lease.left += grant.granted;
    lease.remaining = grant.remaining;
    lease.deniedUntil = grant.granted > 0 ? 0 : now + Math.max(1, grant.retryMs);
  }

  /** Drops leases of past windows, at most once per window length. */
  #sweep(now: number): void {
    if (now < this.#sweepAt) return;
    this.#sweepAt = now + this.#policy.windowMs;
    const current = windowOf(now, this.#policy.windowMs);
    for (const [key, lease] of this.#leases) {
      if (lease.window < current && lease.refill === undefined) this.#leases.delete(key);
    }
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the rate-limit store did not answer within ${ms}ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}
