import type { Clock } from "./clock.js";
import type { WorkerHandle } from "./worker-handle.js";

/**
 * Kills a ready worker whose heartbeats stopped for longer than `timeout` ms. Heartbeats come
 * from a timer in the worker's event loop, so silence means the loop is blocked (a busy loop,
 * a synchronous call that never returns): such a worker answers nothing, and a signal's handler
 * would never run either, hence SIGKILL. Its exit is then a crash like any other.
 */
export class Watchdog {
  readonly #timeout: number;
  readonly #workers: () => Iterable<WorkerHandle>;
  readonly #clock: Clock;
  #cancel: (() => void) | undefined;

  constructor(timeout: number, workers: () => Iterable<WorkerHandle>, clock: Clock) {
    this.#timeout = timeout;
    this.#workers = workers;
    this.#clock = clock;
  }

  start(): void {
    if (this.#timeout === 0 || this.#cancel !== undefined) return;
    // Check a few times per timeout so a blocked worker dies soon after the threshold.
    const period = Math.max(25, Math.min(1000, Math.round(this.#timeout / 4)));
    this.#cancel = this.#clock.every(period, () => this.#check());
  }

  stop(): void {
    this.#cancel?.();
    this.#cancel = undefined;
  }

  #check(): void {
    const now = this.#clock.now();
    for (const handle of this.#workers()) {
      const silent = now - handle.lastBeat;
      if (handle.state === "ready" && handle.killedBy === undefined && silent > this.#timeout) {
        handle.kill(`watchdog: no heartbeat for ${Math.round(silent)}ms (limit ${this.#timeout}ms), event loop blocked`);
      }
    }
  }
}
