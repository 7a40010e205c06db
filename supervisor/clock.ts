/**
 * Time as the primary's decisions see it: monotonic milliseconds and timers. The supervisor runs
 * on `systemClock`; a unit test passes a clock it moves by hand, so a backoff, a ready timeout or
 * a crash-loop window is decided in an instant instead of waited for.
 */
export interface Clock {
  /** Milliseconds, monotonic (like `performance.now()`). */
  now(): number;
  /** Calls `fn` once after `ms`; returns the cancel. */
  after(ms: number, fn: () => void): () => void;
  /** Calls `fn` every `ms` without keeping the process alive; returns the cancel. */
  every(ms: number, fn: () => void): () => void;
}

/** The process's own clock: `performance.now()`, `setTimeout`, an unref'd `setInterval`. */
export const systemClock: Clock = {
  now: () => performance.now(),
  after(ms, fn) {
    const timer = setTimeout(fn, ms);
    return () => clearTimeout(timer);
  },
  every(ms, fn) {
    const timer = setInterval(fn, ms);
    timer.unref();
    return () => clearInterval(timer);
  },
};
