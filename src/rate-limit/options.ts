import type { H3Event } from "h3";
import type { RateLimitOptions } from "./rate-limit.js";
import type { Verdict } from "./leases.js";
import type { RateLimitAlgorithm } from "./window.js";
import { DEFAULT_IPV6_SUBNET, addressKey } from "./address.js";
import { MAX_TIMER_MS } from "../checks.js";

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
export function validateRateLimitOptions(options: RateLimitOptions): { name: string; algorithm: RateLimitAlgorithm; batch: number; trustedProxies: number; ipv6Subnet: number | false } {
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
  return { name, algorithm, batch, trustedProxies, ipv6Subnet };
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

/** The draft-ietf-httpapi-ratelimit-headers fields (the format express-rate-limit sends as `draft-8`), plus Retry-After on a refusal. */
export function rateLimitHeaders(name: string, policy: string, verdict: Verdict): Record<string, string> {
  const reset = Math.max(0, Math.ceil(verdict.resetMs / 1000));
  const headers: Record<string, string> = {
    "ratelimit-policy": policy,
    ratelimit: `"${name}";r=${verdict.allowed ? verdict.remaining : 0};t=${reset}`,
  };
  if (!verdict.allowed) headers["retry-after"] = String(Math.max(1, Math.ceil(verdict.retryMs / 1000)));
  return headers;
}
