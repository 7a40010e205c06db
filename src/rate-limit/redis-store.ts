import { retryMsOf, windowOf, type RateLimitGrant, type RateLimitTake } from "./window.js";
import type { RateLimitStore } from "./rate-limit.js";
import { redisScript, type RedisConnection } from "../redis/connection.js";

/** Options of `defineRedisRateLimitStore()`. */
export interface RedisRateLimitStoreOptions {
  /** Prepended to every key (default `"keelson:rl:"`): several services can share one Redis. */
  prefix?: string;
}

/**
 * The grant, atomically: the same arithmetic as `capacityOf` and `leaseSize` in window.ts (and
 * the SQL store's upsert). KEYS: this window's count, the previous window's. ARGV: limit, want,
 * the previous window's weight ("" for a fixed window), the count's time to live (ms).
 */
const TAKE = redisScript(`
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
local previous = 0
local capacity = tonumber(ARGV[1])
if ARGV[3] ~= '' then
  previous = tonumber(redis.call('GET', KEYS[2]) or '0')
  capacity = math.max(0, math.floor(capacity - previous * tonumber(ARGV[3])))
end
local available = capacity - used
local granted = math.max(0, math.min(tonumber(ARGV[2]), available, math.max(1, math.floor(available / 4))))
if granted > 0 then
  used = redis.call('INCRBY', KEYS[1], granted)
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
end
return { used, granted, previous, capacity }
`);

/**
 * A rate-limit store in Redis, for limits shared by several pods: one counter per key and
 * window, updated by one Lua script (one round trip, atomic on the server: EVALSHA), which grants
 * at most what is left. Counters expire on their own once their window no longer counts (two
 * window lengths after its start, counted from the limiter's clock, not Redis's). The two
 * keys of a limiter key share a hash tag, so the script also runs on Redis Cluster.
 *
 * @example
 * const redis = openRedis({ url: process.env.REDIS_URL! });
 * app.group("/api", rateLimit({ limit: 100, windowMs: 60_000, store: defineRedisRateLimitStore(redis) }));
 */
export function defineRedisRateLimitStore(redis: RedisConnection, options: RedisRateLimitStoreOptions = {}): RateLimitStore {
  const prefix = options.prefix ?? "keelson:rl:";
  if (typeof prefix !== "string") throw new TypeError(`defineRedisRateLimitStore: prefix must be a string, got ${String(prefix)}`);
  if (typeof redis?.run !== "function") throw new TypeError("defineRedisRateLimitStore: pass the connection openRedis() returns");
  return {
    async take(take: RateLimitTake): Promise<RateLimitGrant> {
      const win = windowOf(take.now, take.windowMs);
      const tagged = `${prefix}{${take.key}}:`;
      const weight = take.algorithm === "sliding" ? String(1 - (take.now % take.windowMs) / take.windowMs) : "";
      const reply = await redis.run(TAKE, [`${tagged}${win}`, `${tagged}${win - 1}`],
        [String(take.limit), String(take.want), weight, String((win + 2) * take.windowMs - take.now)]);
      const [used, granted, previous, capacity] = (reply as unknown[]).map(Number) as [number, number, number, number];
      return {
        granted,
        remaining: Math.max(0, capacity - used),
        resetMs: take.windowMs - (take.now % take.windowMs),
        retryMs: granted > 0 ? 0 : retryMsOf(take, used, previous),
      };
    },
  };
}
