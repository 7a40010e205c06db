import { performance, type EventLoopUtilization } from "node:perf_hooks";
import { MS_ABOVE_0, checkOptionalNumber } from "../checks.js";
import type { Logger } from "../logging/logger.js";

/** When a worker counts as saturated and rejects new requests with 503. Each limit is off when unset. */
export interface LoadSheddingOptions {
  /** Event-loop delay: how late the last sampling tick ran, ms. Default 100. */
  maxEventLoopDelay?: number;
  /**
   * Queue delay, ms: a request the event loop reaches only after this much other work in the same
   * turn has waited at least that long in the socket queue, and is rejected. Checked per request,
   * not sampled. Default: `maxEventLoopDelay`.
   */
  maxQueueDelay?: number;
  /** Event-loop utilisation over the last sample, 0..1. Default: off (a busy worker on time is not saturated). */
  maxEventLoopUtilization?: number;
  /** Requests being served at once. Default: off. */
  maxInflight?: number;
  /** The `Retry-After` header of the rejections, seconds. Default 1. */
  retryAfter?: number;
  /** How often the event loop is sampled, ms. Default 100. */
  sampleInterval?: number;
}

/** Why a request was shed: also the `reason` label of the shed counter. */
export type ShedReason = "event_loop_delay" | "event_loop_utilization" | "inflight" | "queue_delay";

const WARN_EVERY_MS = 5000;

/** Each limit, when set, must be a limit: NaN or 0 would shed every request or none. */
function checkLoadSheddingOptions(options: LoadSheddingOptions): void {
  checkOptionalNumber(options.maxEventLoopDelay, "loadShedding.maxEventLoopDelay", MS_ABOVE_0);
  checkOptionalNumber(options.maxQueueDelay, "loadShedding.maxQueueDelay", MS_ABOVE_0);
  checkOptionalNumber(options.maxEventLoopUtilization, "loadShedding.maxEventLoopUtilization", { above: 0, max: 1 });
  checkOptionalNumber(options.maxInflight, "loadShedding.maxInflight", { integer: true, min: 1 });
  // Retry-After is a whole number of seconds (RFC 9110).
  checkOptionalNumber(options.retryAfter, "loadShedding.retryAfter", { integer: true, min: 0 });
  checkOptionalNumber(options.sampleInterval, "loadShedding.sampleInterval", MS_ABOVE_0);
}

/**
 * Decides, per request, whether the worker is too busy to take it. The event loop is sampled on a
 * timer (the delay is how late the timer itself ran, the utilisation comes from
 * `performance.eventLoopUtilization`), so a request only reads a flag and compares the in-flight
 * count. The decision holds until the next sample: a saturated worker is re-checked every period.
 *
 * The sample alone reacts a period late: a CPU-bound worker that is on time at one tick accepts
 * every request for the next period, and the ones that queued behind that work are rejected only
 * after waiting for it. So each request also gets its own queue delay: the first request checked in
 * an event-loop turn starts a clock (a `setImmediate` stops it once the turn's I/O is done), and a
 * request checked later in the same turn has waited in the socket queue for at least the work done
 * since. Rejections are logged at most once per 5 s, with how many there were.
 */
export class LoadShedder {
  readonly retryAfter: string;
  readonly #maxDelay: number | undefined;
  readonly #maxElu: number | undefined;
  readonly #maxInflight: number;
  readonly #maxQueueDelay: number;
  readonly #logger: Logger;
  readonly #period: number;
  readonly #timer: NodeJS.Timeout;
  #lastTick = performance.now();
  #lastElu: EventLoopUtilization = performance.eventLoopUtilization();
  #saturated: ShedReason | undefined;
  #detail = "";
  #shedSinceWarn = 0;
  #lastWarn = Number.NEGATIVE_INFINITY;
  /** When the first request of the current event-loop turn was checked; undefined between turns. */
  #turnStart: number | undefined;
  #queueDelay = 0;
  readonly #endTurn = (): void => {
    this.#turnStart = undefined;
  };

  constructor(options: LoadSheddingOptions, logger: Logger) {
    checkLoadSheddingOptions(options);
    this.#maxDelay = options.maxEventLoopDelay ?? 100;
    this.#maxElu = options.maxEventLoopUtilization;
    this.#maxInflight = options.maxInflight ?? Number.POSITIVE_INFINITY;
    this.#maxQueueDelay = options.maxQueueDelay ?? this.#maxDelay ?? 100;
    this.retryAfter = String(options.retryAfter ?? 1);
    this.#logger = logger;
    this.#period = options.sampleInterval ?? 100;
    this.#timer = setInterval(() => this.#sample(), this.#period);
    this.#timer.unref();
  }

  /** The reason to reject a request now, or undefined to serve it. */
  check(inflight: number): ShedReason | undefined {
    return this.#saturated ?? (inflight >= this.#maxInflight ? "inflight" : this.#checkQueueDelay());
  }

  #checkQueueDelay(): ShedReason | undefined {
    const now = performance.now();
    if (this.#turnStart === undefined) {
      this.#turnStart = now;
      // Check phase: after every socket the poll phase read in this turn.
      setImmediate(this.#endTurn);
      return undefined;
    }
    this.#queueDelay = now - this.#turnStart;
    return this.#queueDelay > this.#maxQueueDelay ? "queue_delay" : undefined;
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  #sample(): void {
    const elu = performance.eventLoopUtilization(this.#lastElu).utilization;
    this.#lastElu = performance.eventLoopUtilization();
    const now = performance.now();
    const delay = Math.max(0, now - this.#lastTick - this.#period);
    this.#lastTick = now;
    if (this.#maxDelay !== undefined && delay > this.#maxDelay) {
      this.#saturated = "event_loop_delay";
      this.#detail = `event-loop delay ${delay.toFixed(0)}ms over ${this.#maxDelay}ms`;
    } else if (this.#maxElu !== undefined && elu > this.#maxElu) {
      this.#saturated = "event_loop_utilization";
      this.#detail = `event-loop utilisation ${elu.toFixed(2)} over ${this.#maxElu}`;
    } else {
      this.#saturated = undefined;
    }
  }

  /** Counts a rejection; warns with the count at most once per 5 s. */
  record(reason: ShedReason, inflight: number): void {
    this.#shedSinceWarn++;
    const now = performance.now();
    if (now - this.#lastWarn < WARN_EVERY_MS) return;
    const why = reason === "inflight" ? `${inflight} request(s) in flight, limit ${this.#maxInflight}`
      : reason === "queue_delay" ? `queue delay: reached after ${this.#queueDelay.toFixed(0)}ms of other work in the same event-loop turn, limit ${this.#maxQueueDelay}ms`
      : this.#detail;
    this.#logger.warn("load shedding: %s: %d request(s) rejected with 503 since the last warning", why, this.#shedSinceWarn);
    this.#lastWarn = now;
    this.#shedSinceWarn = 0;
  }
}
