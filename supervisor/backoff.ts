/** Restart delays of one worker slot: `initial` ms, doubling up to `max`, back to `initial` after `resetAfter` ms of uptime. */
export interface BackoffOptions {
  /** First restart delay in ms. Default 100. */
  initial?: number;
  /** Largest delay in ms. Default 10000. */
  max?: number;
  /** A worker that stayed up this long (ms since ready) resets its slot's delay. Default 30000. */
  resetAfter?: number;
}

/** The crash-loop breaker: `maxCrashes` crashes (all slots together) within `window` ms stop the supervisor with exit 1. */
export interface CrashLoopOptions {
  /** Default 10. */
  maxCrashes?: number;
  /** Default 60000. */
  window?: number;
}

/**
 * Restart delay of one worker slot: `initial`, doubling on each crash up to `max`. A worker that
 * stayed up `resetAfter` ms before it crashed starts the sequence over: one crash after a stable
 * period is an accident, not a loop.
 */
export class Backoff {
  readonly #options: Required<BackoffOptions>;
  #next: number;

  constructor(options: Required<BackoffOptions>) {
    this.#options = options;
    this.#next = options.initial;
  }

  /** The delay before the next restart, given how long the crashed worker had been up (0 if it never got ready). */
  delay(uptimeMs: number): number {
    const { initial, max, resetAfter } = this.#options;
    if (uptimeMs >= resetAfter) this.#next = initial;
    const delay = Math.min(this.#next, max);
    this.#next = Math.min(Math.max(this.#next * 2, 1), max);
    return delay;
  }
}

/**
 * Counts crashes of all slots in a sliding window. When the count reaches `maxCrashes`, the
 * supervisor gives up with exit 1, so an orchestrator (Kubernetes, systemd) restarts the whole
 * pod with its own, slower backoff instead of this process spinning.
 */
export class CrashBreaker {
  readonly #options: Required<CrashLoopOptions>;
  readonly #crashes: number[] = [];

  constructor(options: Required<CrashLoopOptions>) {
    this.#options = options;
  }

  /** Records a crash at `now` (ms, monotonic) and tells whether the breaker trips. */
  record(now: number): boolean {
    this.#crashes.push(now);
    return this.recent(now) >= this.#options.maxCrashes;
  }

  /** Crashes within the window ending at `now`. */
  recent(now: number): number {
    while (this.#crashes.length > 0 && (this.#crashes[0] ?? now) <= now - this.#options.window) this.#crashes.shift();
    return this.#crashes.length;
  }

  /** Crashes within the current window. */
  get count(): number {
    return this.#crashes.length;
  }
}
