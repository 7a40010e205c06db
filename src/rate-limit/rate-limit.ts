import type { H3Event, Middleware } from "h3";
import { errorMessage, createError } from "../errors.js";
import { errorResponse } from "../http/error-response.js";
import { setResponseHeader } from "../http/headers.js";
import { Leases, type Verdict } from "./leases.js";
import { StoreBreaker } from "./breaker.js";
import { primaryRateLimitStore } from "./ipc.js";
import { MemoryRateLimitStore, type RateLimitAlgorithm, type RateLimitGrant, type RateLimitStore, type RateLimitTake } from "./window.js";
import { getPrimaryChannel } from "../cluster/worker-link.js";
import { clientAddress, rateLimitHeaders, remainingHeader, validateRateLimitOptions, type RateLimitOptions } from "./options.js";
import { describeMiddleware, type MiddlewareContract, type MiddlewareHeaderDoc, type MiddlewareResponseDoc } from "../http/middleware-contract.js";

export { MemoryRateLimitStore, type RateLimitAlgorithm, type RateLimitGrant, type RateLimitOptions, type RateLimitStore, type RateLimitTake };

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
  const { name, algorithm, batch, trustedProxies, ipv6Subnet, breaker } = validateRateLimitOptions(options);
  const { limit, windowMs } = options;
  const keyOf = options.key ?? ((event: H3Event) => clientAddress(event, trustedProxies, ipv6Subnet));
  const reject = options.onStoreError === "reject";
  const policy = `"${name}";q=${limit};w=${Math.ceil(windowMs / 1000)}`;
  let leases: Leases | undefined;
  let failures = 0;
  const open = () => {
    const channel = getPrimaryChannel();
    const store = options.store ?? (channel ? primaryRateLimitStore(channel) : new MemoryRateLimitStore());
    const clock = options.clock ?? Date.now;
    const log = (line: string) => console.error(`keelson: rate limit ${name}: ${line}`);
    return new Leases(store, {
      limit, windowMs, algorithm, batch, clock, timeoutMs: options.storeTimeoutMs ?? 1000,
      breaker: breaker === undefined ? undefined : new StoreBreaker(name, breaker, clock, log),
    });
  };
  const answer = (event: H3Event, verdict: Verdict) => {
    if (!verdict.allowed) return errorResponse(createError("RATE_LIMITED"), rateLimitHeaders(name, policy, verdict));
    // The usual case, header by header: no headers object to build and walk.
    setResponseHeader(event, "ratelimit-policy", policy);
    setResponseHeader(event, "ratelimit", remainingHeader(name, verdict));
    return undefined;
  };
  return describeMiddleware(function rateLimitMiddleware(event, next) {
    if (options.limitHealth !== true && event.url.pathname === "/health") return next();
    leases ??= open();
    const key = `${name}:${keyOf(event)}`;
    const verdict = leases.tryTake(key);
    if (verdict !== undefined) return answer(event, verdict);
    return leases.take(key).then((taken) => answer(event, taken), (error: unknown) => {
      // Logged once per 100 failures: a store that is down would otherwise log every request.
      if (failures++ % 100 === 0) console.error(`keelson: rate limit ${name}: ${errorMessage(error)} (${reject ? "rejecting" : "allowing"} requests)`);
      setResponseHeader(event, "ratelimit-policy", policy);
      return reject
        ? errorResponse(createError("SERVICE_UNAVAILABLE", "rate limiting is unavailable: retry later"), { "retry-after": "1" }, event.context.keelson?.requestId)
        : undefined;
    });
  }, rateLimitContract(limit, windowMs, reject));
}

const RATE_LIMIT_HEADERS: Readonly<Record<string, MiddlewareHeaderDoc>> = {
  "RateLimit-Policy": { description: "The quota policy (IETF draft): `\"<name>\";q=<limit>;w=<window seconds>`" },
  RateLimit: { description: "What is left of the quota (IETF draft): `\"<name>\";r=<remaining>;t=<seconds to reset>`" },
};

/** What a rate-limited route adds to its document: the 429 and its headers, on every response. */
function rateLimitContract(limit: number, windowMs: number, rejectOnStoreError: boolean): MiddlewareContract {
  const responses: Record<number, MiddlewareResponseDoc> = {
    429: {
      description: `Rate limited (${limit} requests per ${Math.ceil(windowMs / 1000)} s): retry after Retry-After`,
      code: "RATE_LIMITED",
      headers: {
        ...RATE_LIMIT_HEADERS,
        "Retry-After": { description: "Seconds to wait before retrying", schema: { type: "integer", minimum: 1 } },
      },
    },
  };
  if (rejectOnStoreError) {
    responses[503] = {
      description: "The rate-limit store is unavailable (onStoreError: \"reject\"): retry after Retry-After",
      headers: { "Retry-After": { description: "Seconds to wait before retrying", schema: { type: "integer", minimum: 1 } } },
    };
  }
  return { responses, headers: RATE_LIMIT_HEADERS };
}
