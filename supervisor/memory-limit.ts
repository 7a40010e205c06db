import { workerStatsMessage } from "../src/cluster/worker-stats.js";
import type { Logger } from "../src/logging/logger.js";
import type { WorkerHandle } from "./worker-handle.js";
import type { WorkerPool } from "./worker-pool.js";

/** `512M`, `1.5G`, `800000000`: bytes. Throws a one-line reason, naming `what`, on anything else. */
export function parseSize(text: string, what = "maxMemory"): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([kmg]?)i?b?\s*$/i.exec(text);
  if (match === null) throw new Error(`${what} expects a size such as 512M, 2G or a number of bytes, got "${text}"`);
  const unit = { "": 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[(match[2] ?? "").toLowerCase() as "" | "k" | "m" | "g"];
  const bytes = Math.round(Number(match[1]) * unit);
  if (bytes <= 0) throw new Error(`${what} must be above 0, got "${text}"`);
  return bytes;
}

/** `512 MB`. */
export function formatMegabytes(bytes: number): string {
  return `${Math.round(bytes / 1024 ** 2)} MB`;
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
  readonly #replace: (handle: WorkerHandle, why: string) => void;
  readonly #overSince = new WeakMap<WorkerHandle, number>();
  readonly #asked = new WeakSet<WorkerHandle>();

  constructor(options: { limit: number; windowMs: number; logger: Logger; pool: WorkerPool; replace: (handle: WorkerHandle, why: string) => void }) {
    this.#limit = options.limit;
    this.#windowMs = options.windowMs;
    this.#logger = options.logger;
    this.#replace = options.replace;
    options.pool.onWorker((handle) => handle.channel.on(workerStatsMessage, ({ rss }) => this.#check(handle, rss)));
  }

  #check(handle: WorkerHandle, rss: number): void {
    if (rss <= this.#limit) {
      this.#overSince.delete(handle);
      return;
    }
    if (handle.state !== "ready" || this.#asked.has(handle)) return;
    const now = performance.now();
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
