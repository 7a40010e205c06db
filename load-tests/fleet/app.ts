// One pod of the fleet scenario (load-tests/fleet/run.ts), run by `keelson start`: GET /hello
// for the load, two routes limited to 100 per window for the whole fleet (one in Redis, one in
// PostgreSQL), a job every second leased in PostgreSQL that appends each finished tick to
// FLEET_JOBS_FILE, and the Prometheus metrics. The shutdown settings are the Kubernetes manifests'.
import { appendFileSync } from "node:fs";
import { App, get, rateLimit } from "../../src/index.js";
import { createPrometheus } from "../../src/entries/metrics.js";
import { createRedisRateLimitStore, openRedis } from "../../src/entries/redis.js";
import { createSQLJobStore, createSQLRateLimitStore, openPostgres } from "../../src/entries/sql.js";

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined || value === "") throw new Error(`the fleet app needs ${name}`);
  return value;
};
const pod = env("FLEET_POD");
const run = env("FLEET_RUN");
const jobsFile = env("FLEET_JOBS_FILE");
const db = openPostgres({ url: env("FLEET_DATABASE_URL"), max: 4 });
const redis = openRedis({ url: env("FLEET_REDIS_URL") });
// Connected before the port opens: the first lease must not wait for a connection.
await Promise.all([redis.command(["PING"]), db.query("SELECT 1")]);

const app = new App({
  serviceName: "fleet",
  shutdownDelay: Number(process.env.KEELSON_SHUTDOWN_DELAY_MS ?? 0),
  shutdownTimeout: Number(process.env.KEELSON_SHUTDOWN_TIMEOUT_MS ?? 10_000),
});
app.use(createPrometheus({ defaultMetrics: false }));
app.route(get("/hello", () => ({ pod })));
const limited = (store: "redis" | "pg") => rateLimit({
  name: `${store}-${run}`, limit: 100, windowMs: 86_400_000, key: () => "fleet",
  store: store === "redis" ? createRedisRateLimitStore(redis) : createSQLRateLimitStore(db),
});
app.group("/redis", limited("redis")).route(get("/limited", () => ({ pod })));
app.group("/pg", limited("pg")).route(get("/limited", () => ({ pod })));
app.schedule({
  name: "fleet-tick",
  every: 1000,
  store: createSQLJobStore(db),
  async run({ scheduledAt, signal }) {
    const tick = scheduledAt.toISOString();
    console.log(`FLEETJOB started ${tick} ${pod} ${process.pid}`);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    signal.throwIfAborted();
    appendFileSync(jobsFile, `${tick} ${pod} ${process.pid}\n`);
  },
});
app.onShutdown(() => db.close(), "database: close");
app.onShutdown(() => redis.close(), "redis: close");
await app.listen();
