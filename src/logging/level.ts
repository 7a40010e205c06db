import { checkOneOf } from "../checks.js";

/**
 * Log levels and their thresholds. A threshold is a rank: a line is written when its level's rank
 * is at least the threshold, so comparing two small integers is all a disabled line costs.
 */

/** The levels a line can have, lowest first. */
export const LOG_LEVELS = ["debug", "info", "warn", "error"] as const;
/** A level of a log line, and a threshold: lines below it are not written. */
export type LogLevel = (typeof LOG_LEVELS)[number];
/** A route's threshold (`logLevel` route option): a level, or `silent` for no lines at all. */
export type RouteLogLevel = LogLevel | "silent";

export const RANK_DEBUG = 10;
export const RANK_INFO = 20;
export const RANK_WARN = 30;
export const RANK_ERROR = 40;
/** Above every level: nothing is written. */
export const RANK_SILENT = 100;

const RANKS: Readonly<Record<RouteLogLevel, number>> = Object.freeze({
  debug: RANK_DEBUG, info: RANK_INFO, warn: RANK_WARN, error: RANK_ERROR, silent: RANK_SILENT,
});

/** The threshold's rank; `value` must already be valid. */
export function levelRank(value: RouteLogLevel): number {
  return RANKS[value];
}

const ROUTE_LOG_LEVELS: readonly RouteLogLevel[] = [...LOG_LEVELS, "silent"];

/**
 * `value` as a LogLevel (`silent` too when `allowSilent`), else an error naming `name` (the option
 * or variable it came from) and the value: `logLevel must be "debug", "info", "warn" or "error", got "verbose"`.
 */
export function parseLogLevel(value: unknown, name: string, allowSilent: true): RouteLogLevel;
export function parseLogLevel(value: unknown, name: string, allowSilent?: false): LogLevel;
export function parseLogLevel(value: unknown, name: string, allowSilent = false): RouteLogLevel {
  return checkOneOf(value, name, allowSilent ? ROUTE_LOG_LEVELS : LOG_LEVELS);
}

/**
 * The default threshold of a Logger: `LOG_LEVEL` when it is set (and not empty), else the spec's
 * rule: `info` in production (debug off), `debug` otherwise. A bad `LOG_LEVEL` is refused.
 */
export function defaultLogLevel(isProduction: boolean): LogLevel {
  const fromEnv = process.env.LOG_LEVEL;
  if (fromEnv !== undefined && fromEnv !== "") return parseLogLevel(fromEnv, "LOG_LEVEL");
  return isProduction ? "info" : "debug";
}
