export { openRedis, redisScript, type RedisConnection, type RedisOptions, type RedisScript } from "./connection.js";
export { defineRedisRateLimitStore, type RedisRateLimitStoreOptions } from "../rate-limit/redis-store.js";
