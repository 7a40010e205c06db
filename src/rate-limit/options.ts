import type { H3Event } from "h3";
import type { BreakerPolicy } from "./breaker.js";
import type { Verdict } from "./leases.js";
import type { RateLimitAlgorithm, RateLimitStore } from "./window.js";
import { DEFAULT_IPV6_SUBNET, addressKey } from "./address.js";
import { MAX_TIMER_MS } from "../checks.js";

/** Options of `rateLimit()`. */
export interface RateLimitOptions {
  /** Requests allowed per key per window. */
  limit: number;
  /** The window length, ms. */
  windowMs: number;
  /** `"fixed"` (default): counts reset when the window ends. `"sliding"`: the previous window still weighs in proportionally. */
  algorithm?: RateLimitAlgorithm;
  /**
   * The policy's name in the `RateLimit-Policy` header and in the store's keys (default
   * `"<limit>-in-<window>"`, e.g. `"100-in-60s"`). Limiters with the same name and store count together.
   */
  name?: string;
  /** The key a request counts against. Default: the client's address (see `trustedProxies`). */
  key?: (event: H3Event) => string;
  /**
   * How many reverse proxies you run in front of the service, each appending to
   * `X-Forwarded-For` (default 0: the socket's peer address is the client). The client is the
   * entry that many from the right; entries further left are whatever the client sent and are never trusted.
   */
  trustedProxies?: number;
  /**
   * The prefix length an IPv6 client is counted by (default 56, as express-rate-limit v8): every
   * address of one /56 shares a budget, since whoever holds one address of a network usually holds
   * them all. 32 to 128; `false` (or 128) keys by the full address. An IPv4-mapped IPv6 address
   * (`::ffff:192.0.2.1`) counts as its IPv4 address. Applies to the default key only.
   */
  ipv6Subnet?: number | false;
  /**
   * Default: the supervisor's primary under `keelson start` (or `startSupervisor()`), else this
   * process's memory (also in workers of another node:cluster primary, such as PM2's cluster mode).
   */
  store?: RateLimitStore;
  /** The largest lease taken from the store at once (default 10; 1 asks the store on every request). */
  batch?: number;
  /** How long a request waits for the store, ms (default 1000). */
  storeTimeoutMs?: number;
  /** A store that fails or is late: `"allow"` (default) serves the request, `"reject"` answers 503. */
  onStoreError?: "allow" | "reject";
  /**
   * The store's circuit breaker: after `failures` (default 5) failed or late answers in a row, the
   * store is not asked for `resetMs` (default 5000) and requests that need it get `onStoreError`'s
   * answer at once instead of waiting `storeTimeoutMs`; then one request probes it. `false` asks the
   * store on every request whatever it did before.
   */
  breaker?: false | { failures?: number; resetMs?: number };
  /** Also limit `GET /health` (default false: a liveness probe must never be refused). */
  limitHealth?: boolean;
  /** The time, ms since the epoch (default `Date.now`); for tests. */
  clock?: () => number;
}

const NAME = /^[A-Za-z0-9._-]{1,64}$/;

function positiveInteger(value: unknown, what: string): number {
  if (!Number.isSafeInteger(value) || (value as number) < 1) throw new TypeError(`rateLimit: ${what} must be a positive integer, got ${String(value)}`);
  return value as number;
}

/** "60s", "15min", "1h", "1500ms": the window in the default policy name. */
function windowLabel(ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0) return `${ms / 60_000}min`;
  if (ms % 1000 === 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}

/** Misuse is refused when the middleware is made, with what to write instead. */
export function validateRateLimitOptions(options: RateLimitOptions): {
  name: string; algorithm: RateLimitAlgorithm; batch: number; trustedProxies: number; ipv6Subnet: number | false; breaker: BreakerPolicy | undefined;
} {
  if (typeof options !== "object" || options === null) throw new TypeError("rateLimit: pass an options object, e.g. rateLimit({ limit: 100, windowMs: 60_000 })");
  const limit = positiveInteger(options.limit, "limit");
  const windowMs = positiveInteger(options.windowMs, "windowMs");
  const algorithm = options.algorithm ?? "fixed";
  if (algorithm !== "fixed" && algorithm !== "sliding") throw new TypeError(`rateLimit: algorithm must be "fixed" or "sliding", got ${JSON.stringify(algorithm)}`);
  const name = options.name ?? `${limit}-in-${windowLabel(windowMs)}`;
  if (!NAME.test(name)) throw new TypeError(`rateLimit: name must be 1–64 letters, digits, ".", "_" or "-", got ${JSON.stringify(name)}`);
  if (options.key !== undefined && typeof options.key !== "function") throw new TypeError("rateLimit: key must be a function (event) => string");
  if (options.key !== undefined && options.trustedProxies !== undefined) throw new TypeError("rateLimit: trustedProxies applies to the default key only; read the forwarded address in your key function instead");
  const trustedProxies = options.trustedProxies ?? 0;
  if (!Number.isSafeInteger(trustedProxies) || trustedProxies < 0) throw new TypeError(`rateLimit: trustedProxies must be 0 or more, got ${String(trustedProxies)}`);
  if (options.key !== undefined && options.ipv6Subnet !== undefined) throw new TypeError("rateLimit: ipv6Subnet applies to the default key only; group addresses in your key function instead (see addressKey)");
  const ipv6Subnet = options.ipv6Subnet ?? DEFAULT_IPV6_SUBNET;
  if (ipv6Subnet !== false && (!Number.isInteger(ipv6Subnet) || ipv6Subnet < 32 || ipv6Subnet > 128)) {
    throw new TypeError(`rateLimit: ipv6Subnet must be a prefix length from 32 to 128, or false, got ${String(ipv6Subnet)}`);
  }
  const batch = positiveInteger(options.batch ?? 10, "batch");
  if (options.storeTimeoutMs !== undefined && positiveInteger(options.storeTimeoutMs, "storeTimeoutMs") > MAX_TIMER_MS) {
    throw new TypeError(`rateLimit: storeTimeoutMs must be at most ${MAX_TIMER_MS} (a timer's limit), got ${options.storeTimeoutMs}`);
  }
  if (options.store !== undefined && typeof options.store?.take !== "function") throw new TypeError("rateLimit: store must have a take(request) method (see RateLimitStore)");
  if (options.onStoreError !== undefined && options.onStoreError !== "allow" && options.onStoreError !== "reject") {
    throw new TypeError(`rateLimit: onStoreError must be "allow" or "reject", got ${JSON.stringify(options.onStoreError)}`);
  }
  return { name, algorithm, batch, trustedProxies, ipv6Subnet, breaker: breakerPolicy(options.breaker) };
}

function breakerPolicy(given: RateLimitOptions["breaker"]): BreakerPolicy | undefined {
  if (given === false) return undefined;
  if (given !== undefined && (typeof given !== "object" || given === null)) {
    throw new TypeError(`rateLimit: breaker must be false or { failures?, resetMs? }, got ${JSON.stringify(given)}`);
  }
  const failures = positiveInteger(given?.failures ?? 5, "breaker.failures");
  const resetMs = positiveInteger(given?.resetMs ?? 5000, "breaker.resetMs");
  if (resetMs > MAX_TIMER_MS) throw new TypeError(`rateLimit: breaker.resetMs must be at most ${MAX_TIMER_MS}, got ${resetMs}`);
  return { failures, resetMs };
}

/**
 * The client's address: the socket's peer, or with `trustedProxies` = n the n-th
 * `X-Forwarded-For` entry from the right (the ones your proxies appended). A request with
 * fewer entries did not come through all of them: its leftmost entry (or the peer) is used.
 * No address at all (an in-process `app.request()`) is the empty key. The address is then grouped
 * by `addressKey`: an IPv6 client counts by its `ipv6Subnet` prefix.
 */
export function clientAddress(event: H3Event, trustedProxies: number, ipv6Subnet: number | false): string {
  return addressKey(forwardedClient(event, trustedProxies), ipv6Subnet);
}

function forwardedClient(event: H3Event, trustedProxies: number): string {
  const peer = event.req.ip ?? "";
  if (trustedProxies === 0) return peer;
  const forwarded = event.req.headers.get("x-forwarded-for");
  if (forwarded === null) return peer;
  const entries = forwarded.split(",").map((entry) => entry.trim()).filter((entry) => entry !== "");
  return entries[Math.max(0, entries.length - trustedProxies)] ?? peer;
}

/** The `RateLimit` field: the units left and the seconds until the window ends. */
export function remainingHeader(name: string, verdict: Verdict): string {
  return `"${name}";r=${verdict.allowed ? verdict.remaining : 0};t=${Math.max(0, Math.ceil(verdict.resetMs / 1000))}`;
}

/** The draft-ietf-httpapi-ratelimit-headers fields (the format express-rate-limit sends as `draft-8`), plus Retry-After on a refusal. */
export function rateLimitHeaders(name: string, policy: string, verdict: Verdict): Record<string, string> {
  const headers: Record<string, string> = { "ratelimit-policy": policy, ratelimit: remainingHeader(name, verdict) };
  if (!verdict.allowed) headers["retry-after"] = String(Math.max(1, Math.ceil(verdict.retryMs / 1000)));
  return headers;
}
