/**
 * The state of each circuit breaker of this process (the rate-limit stores' breakers today), kept
 * here because the parts that own breakers cannot depend on the metrics module: `createPrometheus()`
 * reads it at each scrape as `keelson_rate_limit_breaker_state{limiter,state}`.
 */

export type BreakerState = "closed" | "open" | "half_open";

export const BREAKER_STATES: readonly BreakerState[] = ["closed", "open", "half_open"];

const states = new Map<string, BreakerState>();

/** Records `name`'s breaker state. */
export function setBreakerState(name: string, state: BreakerState): void {
  states.set(name, state);
}

/** Every breaker of this process and its state. */
export function breakerStates(): ReadonlyMap<string, BreakerState> {
  return states;
}
