/**
 * The arithmetic of a rate-limit window, shared by every store so they all grant the same way:
 * which window a moment falls in, how much of the budget is left (fixed or sliding), how big a
 * lease a worker gets, and when a refused key may try again.
 */

/** The counting algorithm of a limiter. */
export type RateLimitAlgorithm = "fixed" | "sliding";

/** What a limiter asks its store for: up to `want` units of `key`'s budget in the window holding `now`. */
export interface RateLimitTake {
  /** The limiter's name and the client key, e.g. `"api:203.0.113.7"`. */
  key: string;
  limit: number;
  windowMs: number;
  algorithm: RateLimitAlgorithm;
  /** Milliseconds since the epoch, from the limiter's clock. */
  now: number;
  /** The most units the caller would like at once (its lease size); at least 1. */
  want: number;
}

/** A store's answer. Units granted are counted as used at once, whether or not requests spend them. */
export interface RateLimitGrant {
  /** Units granted, 0..want; 0 means the key is over its limit. */
  granted: number;
  /** Units left for the key in this window after this grant (never negative). */
  remaining: number;
  /** Milliseconds until the current window ends. */
  resetMs: number;
  /** When nothing was granted: milliseconds until a unit may be available again; else 0. */
  retryMs: number;
}

/**
 * Where a limiter's counts live. `take` grants up to `want` units of a key's budget atomically
 * (never more than is left); keelson ships the in-memory store, the supervisor's (automatic
 * under `keelson start`) and `createSQLRateLimitStore` (keelson/sql). A Redis store implements
 * the same one method (e.g. a Lua script doing the same arithmetic as the SQL upsert).
 */
export interface RateLimitStore {
  take(take: RateLimitTake): Promise<RateLimitGrant>;
}

/** The window index of a moment: windows are aligned to the epoch, so every process agrees on them. */
export function windowOf(now: number, windowMs: number): number {
  return Math.floor(now / windowMs);
}

/**
 * The units the key may still use in the current window. Sliding: the previous window's count
 * weighs in for the part of it the sliding window still covers (the usual two-counter
 * approximation of a true sliding log, with O(1) state per key).
 */
export function capacityOf(take: RateLimitTake, previous: number): number {
  if (take.algorithm === "fixed") return take.limit;
  const into = (take.now % take.windowMs) / take.windowMs;
  return Math.max(0, Math.floor(take.limit - previous * (1 - into)));
}

/**
 * How many units to lease out of `available`: the caller's `want`, but never more than a quarter
 * of what is left (at least 1), so the last units of a budget go out one or two at a time and do
 * not sit unused in one worker while another is refused. Never more than `available`: a lease
 * never lets the cluster serve more than the limit.
 */
export function leaseSize(available: number, want: number): number {
  return Math.max(0, Math.min(want, available, Math.max(1, Math.floor(available / 4))));
}

/** Milliseconds until a refused key may be granted a unit again. */
export function retryMsOf(take: RateLimitTake, used: number, previous: number): number {
  const untilEnd = take.windowMs - (take.now % take.windowMs);
  if (take.algorithm === "fixed" || used >= take.limit || previous <= 0) return untilEnd;
  // Sliding: wait until the previous window's weight has decayed enough to free one unit.
  const into = 1 - (take.limit - used - 1) / previous;
  const at = Math.ceil(into * take.windowMs) - (take.now % take.windowMs);
  return Math.max(1, Math.min(untilEnd, at));
}

const SWEEP_MAX_MS = 60_000;

interface Counts {
  windowMs: number;
  window: number;
  used: number;
  previous: number;
}

/**
 * The in-memory store: the one a single process uses, and the authoritative one the supervisor's
 * primary keeps for all its workers. Keys of windows that no longer count are swept once per
 * window length, so memory follows the keys seen in the last two windows.
 *
 * @example
 * // a test that must not share counts with others
 * app.use(rateLimit({ limit: 5, windowMs: 60_000, store: new MemoryRateLimitStore() }));
 */
export class MemoryRateLimitStore {
  readonly #counts = new Map<string, Counts>();
  #sweepAt = 0;

  /** Grants up to `take.want` units; synchronous, also usable through the async store interface. */
  takeNow(take: RateLimitTake): RateLimitGrant {
    const window = windowOf(take.now, take.windowMs);
    this.#sweep(take.now, take.windowMs);
    let counts = this.#counts.get(take.key);
    if (counts === undefined) {
      counts = { windowMs: take.windowMs, window, used: 0, previous: 0 };
      this.#counts.set(take.key, counts);
    } else if (counts.window !== window || counts.windowMs !== take.windowMs) {
      counts.windowMs = take.windowMs;
      counts.previous = counts.window === window - 1 ? counts.used : 0;
      counts.window = window;
      counts.used = 0;
    }
    const capacity = capacityOf(take, counts.previous);
    const granted = leaseSize(capacity - counts.used, take.want);
    counts.used += granted;
    return {
      granted,
      remaining: Math.max(0, capacity - counts.used),
      resetMs: take.windowMs - (take.now % take.windowMs),
      retryMs: granted > 0 ? 0 : retryMsOf(take, counts.used, counts.previous),
    };
  }

  take(take: RateLimitTake): Promise<RateLimitGrant> {
    return Promise.resolve(this.takeNow(take));
  }

  #sweep(now: number, windowMs: number): void {
    if (now < this.#sweepAt) return;
    // Limiters of different window lengths share the store: each key is judged by its own.
    this.#sweepAt = now + Math.min(windowMs, SWEEP_MAX_MS);
    for (const [key, counts] of this.#counts) {
      if (counts.window < windowOf(now, counts.windowMs) - 1) this.#counts.delete(key);
    }
  }
}
