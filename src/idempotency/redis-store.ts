import { defineRedisScript, type RedisConnection } from "../redis/connection.js";
import { responseOf, responseText, stateOf } from "./shared-store.js";
import type { IdempotencyBegin, IdempotencyComplete, IdempotencyRelease, IdempotencyState, IdempotencyStore } from "./store.js";

/** Options of `createRedisIdempotencyStore()`. */
export interface RedisIdempotencyStoreOptions {
  /** Prepended to every key (default `"keelson:idem:"`): several services can share one Redis. */
  prefix?: string;
}

/** The claim: the holder's token, fingerprint and response (nil while it runs), or nil after making ours with the lease as its expiry. */
const BEGIN = defineRedisScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('HMGET', KEYS[1], 'token', 'fingerprint', 'response') end
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'fingerprint', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return false
`);

/** Keeps the response (ARGV[2]) for ARGV[3] ms, only while the token ARGV[1] still holds the key and has not completed. */
const COMPLETE = defineRedisScript(`
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] or redis.call('HEXISTS', KEYS[1], 'response') == 1 then return 0 end
redis.call('HSET', KEYS[1], 'response', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`);

const RELEASE = defineRedisScript(`
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] or redis.call('HEXISTS', KEYS[1], 'response') == 1 then return 0 end
return redis.call('DEL', KEYS[1])
`);

/**
 * An idempotency store in Redis, for keys shared by several pods: one hash per key holding the
 * claim (token, fingerprint) and, once complete, the response. Each step is one Lua script (one
 * round trip, atomic on the server); leases and times to live are the keys' own expiry, counted
 * by Redis's clock.
 *
 * @example
 * const redis = openRedis({ url: process.env.REDIS_URL! });
 * app.route(post("/orders", create).use(idempotency({ store: createRedisIdempotencyStore(redis) })));
 */
export function createRedisIdempotencyStore(redis: RedisConnection, options: RedisIdempotencyStoreOptions = {}): IdempotencyStore {
  const prefix = options.prefix ?? "keelson:idem:";
  if (typeof prefix !== "string") throw new TypeError(`createRedisIdempotencyStore: prefix must be a string, got ${String(prefix)}`);
  if (typeof redis?.run !== "function") throw new TypeError("createRedisIdempotencyStore: pass the connection openRedis() returns");
  return {
    async begin(begin: IdempotencyBegin): Promise<IdempotencyState> {
      const held = await redis.run(BEGIN, [prefix + begin.key], [begin.token, begin.fingerprint, String(begin.leaseMs)]);
      if (!Array.isArray(held)) return { state: "acquired" };
      const [token, fingerprint, response] = held as (string | null)[];
      return stateOf({ token: token ?? "", fingerprint: fingerprint ?? "", response: typeof response === "string" ? responseOf(response) : undefined });
    },
    async complete(done: IdempotencyComplete): Promise<void> {
      await redis.run(COMPLETE, [prefix + done.key], [done.token, responseText(done.response), String(done.ttlMs)]);
    },
    async release(freed: IdempotencyRelease): Promise<void> {
      await redis.run(RELEASE, [prefix + freed.key], [freed.token]);
    },
  };
}
