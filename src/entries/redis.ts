export { openRedis, defineRedisScript, type RedisConnection, type RedisOptions, type RedisScript } from "../redis/connection.js";
export { createRedisRateLimitStore, type RedisRateLimitStoreOptions } from "../rate-limit/redis-store.js";
export { createRedisIdempotencyStore, type RedisIdempotencyStoreOptions } from "../idempotency/redis-store.js";
