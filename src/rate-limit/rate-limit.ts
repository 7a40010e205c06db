import cluster from "node:cluster";
import type { H3Event, Middleware } from "h3";
import { createError } from "../errors.js";
import { errorResponse } from "../http/error-response.js";
import { setResponseHeader } from "../http/headers.js";
import { Leases, type Verdict } from "./leases.js";
import { primaryRateLimitStore } from "./ipc.js";
import { MemoryRateLimitStore, type RateLimitAlgorithm, type RateLimitGrant, type RateLimitTake } from "./window.js";
import { getPrimaryChannel } from "../cluster/worker-link.js";
import { clientAddress, rateLimitHeaders, validateRateLimitOptions } from "./options.js";

export { MemoryRateLimitStore, type RateLimitAlgorithm, type RateLimitGrant, type RateLimitTake };

/**
 * Where a limiter's counts live. `take` grants up to `want` units of a key's budget atomically
 * (never more than is left); keelson ships the in-memory store, the supervisor's (automatic
 * under `keelson start`) and `defineSQLRateLimitStore` (keelson/sql). A Redis store implements
 * the same one method (e.g. a Lua script doing the same arithmetic as the SQL upsert).
 */
export interface RateLimitStore {
  take(take: RateLimitTake): Promise<RateLimitGrant>;
}

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
  /** Also limit `GET /health` (default false: a liveness probe must never be refused). */
  limitHealth?: boolean;
  /** The time, ms since the epoch (default `Date.now`); for tests. */
  clock?: () => number;
}

/**
 * A rate-limit middleware: each key gets `limit` requests per `windowMs`; the rest get 429
 * `RATE_LIMITED` with `Retry-After`. Every response of a limited route carries the IETF draft's
 * `RateLimit-Policy` and `RateLimit` headers. Under the supervisor the counts are the
 * cluster's: workers lease batches of each key's budget from the primary (see docs/rate-limits.md).
 *
 * @example
 * app.group("/api", rateLimit({ limit: 100, windowMs: 60_000 })).route(get("/books", list));
 */
export function rateLimit(options: RateLimitOptions): Middleware {
  const { name, algorithm, batch, trustedProxies, ipv6Subnet } = validateRateLimitOptions(options);
  const { limit, windowMs } = options;
  const keyOf = options.key ?? ((event: H3Event) => clientAddress(event, trustedProxies, ipv6Subnet));
  const reject = options.onStoreError === "reject";
  const policy = `"${name}";q=${limit};w=${Math.ceil(windowMs / 1000)}`;
  let leases: Leases | undefined;
  let failures = 0;
  const open = () => {
    // Only keelson's supervisor answers `ratelimit:take`: another node:cluster primary (PM2's
    // cluster mode) would leave every lease to time out, so its workers count in memory instead.
    const channel = cluster.isWorker && process.env.KEELSON_WORKER_ID !== undefined ? getPrimaryChannel() : undefined;
    const store = options.store ?? (channel ? primaryRateLimitStore(channel) : new MemoryRateLimitStore());
    return new Leases(store, { limit, windowMs, algorithm, batch, clock: options.clock ?? Date.now, timeoutMs: options.storeTimeoutMs ?? 1000 });
  };
  const answer = (event: H3Event, verdict: Verdict) => {
    const headers = rateLimitHeaders(name, policy, verdict);
    if (!verdict.allowed) return errorResponse(createError("RATE_LIMITED"), headers);
    for (const header in headers) setResponseHeader(event, header, headers[header]!);
    return undefined;
  };
  return function rateLimitMiddleware(event, next) {
    if (options.limitHealth !== true && event.url.pathname === "/health") return next();
    leases ??= open();
    const key = `${name}:${keyOf(event)}`;
    const verdict = leases.tryTake(key);
    if (verdict !== undefined) return answer(event, verdict);
    return leases.take(key).then((taken) => answer(event, taken), (error: unknown) => {
      // Logged once per 100 failures: a store that is down would otherwise log every request.
      if (failures++ % 100 === 0) console.error(`keelson: rate limit ${name}: ${(error as Error)?.message ?? String(error)} (${reject ? "rejecting" : "allowing"} requests)`);
      setResponseHeader(event, "ratelimit-policy", policy);
      return reject
        ? errorResponse(createError("SERVICE_UNAVAILABLE", "rate limiting is unavailable: retry later"), { "retry-after": "1" }, event.context.keelson?.requestId)
        : undefined;
    });
  };
}
