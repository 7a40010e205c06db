import type { Logger } from "../src/logging/logger.js";
import type { WorkerHandle } from "./worker-handle.js";

/**
 * Kills a ready worker whose heartbeats stopped for longer than `timeout` ms. Heartbeats come
 * from a timer in the worker's event loop, so silence means the loop is blocked (a busy loop,
 * a synchronous call that never returns): such a worker answers nothing, and a signal's handler
 * would never run either, hence SIGKILL. Its exit is then a crash like any other.
 *
 * Only silence while the primary itself ran counts. When the watchdog's own timer comes late by
 * more than a check period, the primary did not run meanwhile (the host, container or process
 * group was paused: SIGSTOP, `docker pause`, a cgroup freezer, a VM pause; or the primary's loop
 * was blocked): the workers were most likely paused with it, and their heartbeats may still wait
 * unread in the IPC pipes. Their silence is then counted from the moment the primary runs again.
 */
export class Watchdog {
  readonly #timeout: number;
  readonly #workers: () => Iterable<WorkerHandle>;
  readonly #logger: Logger | undefined;
  readonly #period: number;
  #timer: NodeJS.Timeout | undefined;
  #lastCheck = 0;
  /** Silence before this moment (performance.now()) does not count: the primary was not running. */
  #countFrom = 0;

  constructor(timeout: number, workers: () => Iterable<WorkerHandle>, logger?: Logger) {
    this.#timeout = timeout;
    this.#workers = workers;
    this.#logger = logger;
    // Check a few times per timeout so a blocked worker dies soon after the threshold.
    this.#period = Math.max(25, Math.min(1000, Math.round(timeout / 4)));
  }

  start(): void {
    if (this.#timeout === 0 || this.#timer !== undefined) return;
    this.#lastCheck = performance.now();
    this.#timer = setInterval(() => this.#check(), this.#period);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #check(): void {
    const now = performance.now();
    const late = now - this.#lastCheck - this.#period;
    this.#lastCheck = now;
    // A full period late (and at least half a second: a busy but running primary is often a few ms late).
    if (late > Math.max(this.#period, 500)) {
      this.#countFrom = now;
      this.#logger?.warn("watchdog: the primary itself did not run for %dms (paused host or container, or a blocked primary): "
        + "workers' silence counts again from now", Math.round(late + this.#period));
      return;
    }
    for (const handle of this.#workers()) {
      const silent = now - Math.max(handle.lastBeat, this.#countFrom);
      if (handle.state === "ready" && handle.killedBy === undefined && silent > this.#timeout) {
        handle.kill(`watchdog: no heartbeat for ${Math.round(silent)}ms (limit ${this.#timeout}ms), event loop blocked`);
      }
    }
  }
}
