import { setBreakerState, type BreakerState } from "../breaker-states.js";

/** The resolved `breaker` option of `rateLimit()`. */
export interface BreakerPolicy {
  /** Failures (errors or timeouts) in a row that open the circuit. */
  failures: number;
  /** How long an open circuit fails fast before one request probes the store. */
  resetMs: number;
}

/**
 * A circuit breaker in front of a rate-limit store, as opossum's and Envoy's outlier detection: after
 * `failures` failed or late answers in a row, the store is not asked for `resetMs` and every request
 * that needs it fails at once (then fail-open or fail-closed, as `onStoreError` says) instead of
 * each waiting `storeTimeoutMs`. Then one request probes it (half-open): an answer closes the
 * circuit, a failure opens it for another `resetMs`. Transitions are logged and the state is a metric.
 */
export class StoreBreaker {
  readonly #policy: BreakerPolicy;
  readonly #name: string;
  readonly #clock: () => number;
  readonly #log: (line: string) => void;
  #state: BreakerState = "closed";
  #failures = 0;
  #openedAt = 0;

  constructor(name: string, policy: BreakerPolicy, clock: () => number, log: (line: string) => void) {
    this.#name = name;
    this.#policy = policy;
    this.#clock = clock;
    this.#log = log;
    setBreakerState(name, "closed");
  }

  get state(): BreakerState {
    return this.#state;
  }

  /** Whether the store may be asked now; an open circuit past its reset lets this one request probe. */
  allow(): boolean {
    if (this.#state === "closed") return true;
    if (this.#state === "half_open") return false;
    if (this.#clock() - this.#openedAt < this.#policy.resetMs) return false;
    this.#set("half_open");
    return true;
  }

  /** The store answered. */
  succeeded(): void {
    this.#failures = 0;
    if (this.#state !== "closed") {
      this.#set("closed");
      this.#log(`the store answers again: circuit closed`);
    }
  }

  /** The store failed or was late. */
  failed(): void {
    this.#failures++;
    if (this.#state === "half_open" || (this.#state === "closed" && this.#failures >= this.#policy.failures)) {
      const reopened = this.#state === "half_open";
      this.#openedAt = this.#clock();
      this.#set("open");
      if (!reopened) this.#log(`${this.#failures} store failures in a row: circuit open: not asked for ${this.#policy.resetMs}ms at a time until it answers a probe, requests get onStoreError's answer at once`);
    }
  }

  #set(state: BreakerState): void {
    this.#state = state;
    setBreakerState(this.#name, state);
  }
}
