import { workerStatsMessage } from "../src/cluster/worker-stats.js";
import type { Logger } from "../src/logging/logger.js";
import type { Clock } from "./clock.js";
import { formatMegabytes } from "./size.js";
import type { WorkerHandle } from "./worker-handle.js";

/** What the memory limit needs from the primary. */
export interface MemoryLimitOptions {
  /** Bytes. */
  limit: number;
  windowMs: number;
  logger: Logger;
  clock: Clock;
  /** Every worker, present and future (the pool's `onWorker`). */
  onWorker(listener: (handle: WorkerHandle) => void): unknown;
  /** Replaces the worker (like a reload does); `why` is the one-line reason. */
  replace(handle: WorkerHandle, why: string): void;
}

/**
 * Watches each ready worker's RSS (from its periodic stats) and asks for its replacement once
 * it has stayed above `limit` bytes for `windowMs`: a short spike (a big response, a GC cycle
 * behind) is left alone, a leak is not. The replacement itself is the supervisor's, done like a
 * reload's: the new worker is ready before the old one drains.
 */
export class MemoryLimit {
  readonly #limit: number;
  readonly #windowMs: number;
  readonly #logger: Logger;
  readonly #clock: Clock;
  readonly #replace: (handle: WorkerHandle, why: string) => void;
  readonly #overSince = new WeakMap<WorkerHandle, number>();
  readonly #asked = new WeakSet<WorkerHandle>();

  constructor(options: MemoryLimitOptions) {
    this.#limit = options.limit;
    this.#windowMs = options.windowMs;
    this.#logger = options.logger;
    this.#clock = options.clock;
    this.#replace = options.replace;
    options.onWorker((handle) => handle.channel.on(workerStatsMessage, ({ rss }) => this.#check(handle, rss)));
  }

  #check(handle: WorkerHandle, rss: number): void {
    if (rss <= this.#limit) {
      this.#overSince.delete(handle);
      return;
    }
    if (handle.state !== "ready" || this.#asked.has(handle)) return;
    const now = this.#clock.now();
    const since = this.#overSince.get(handle);
    if (since === undefined) {
      this.#overSince.set(handle, now);
      this.#logger.warn("%s: RSS %s over the limit of %s: replacing it if it stays over for %dms",
        handle.name, formatMegabytes(rss), formatMegabytes(this.#limit), this.#windowMs);
      return;
    }
    if (now - since < this.#windowMs) return;
    this.#asked.add(handle);
    this.#replace(handle, `RSS ${formatMegabytes(rss)} over the limit of ${formatMegabytes(this.#limit)} for ${Math.round(now - since)}ms`);
  }

  /** Forgets that a replacement was asked for (it could not run: a reload was going on); the next report asks again. */
  retry(handle: WorkerHandle): void {
    this.#asked.delete(handle);
  }
}
