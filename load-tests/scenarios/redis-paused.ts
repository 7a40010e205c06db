// Issue 32, defect 7, under the supervisor with 2 workers (fixture test/fixtures/rate-limit-app.ts:
// GET /hit limited through a real redis-server, the limiter's defaults: storeTimeoutMs 1 s, fail
// open, the circuit breaker opening after 5 failures in a row for 5 s). The same load twice: Redis
// answering, then Redis SIGSTOPped (a paused container, a host frozen by its hypervisor). Bound (the
// issue's target): limited-request throughput with Redis paused, once each worker's breaker is
// open, at least half the unpaused rate; every request answered, none failed.
import { startCluster } from "../lib/cluster.js";
import { startRedis } from "../../test/helpers/redis.js";
import type { LoadResult } from "../lib/types.js";
import { table, verdict, type Context, type Verdict } from "./common.js";

const NAME = "redis-paused";
const CONNECTIONS = 10;

const row = (what: string, r: LoadResult) => [what, r.reqPerSec.toFixed(0), `${r.p50Ms} / ${r.p99Ms} / ${r.maxMs}`, String(r.non2xx), String(r.errors)];

export async function redisPaused(context: Context): Promise<Verdict> {
  const redis = await startRedis();
  const cluster = await startCluster({
    cwd: context.root, entry: "test/fixtures/rate-limit-app.ts", workers: 2, tsx: true, pinCpu: context.pinning.server,
    env: { RATE_LIMIT_REDIS: redis.url, RATE_LIMIT: "100000000" },
  });
  try {
    const job = () => ({
      origin: cluster.origin, requests: [{ method: "GET" as const, path: "/hit" }], durationSec: context.seconds,
      connections: CONNECTIONS, pipelining: 1, measureCpu: false,
    });
    const load = (): Promise<LoadResult> => context.client.run(job());
    const running = await load();
    redis.server.kill("SIGSTOP");
    let paused: LoadResult;
    const from = cluster.log().length;
    const bothOpen = () => (cluster.log().slice(from).match(/circuit open/g) ?? []).length >= 2;
    try {
      // Until each worker's breaker has seen its failures in a row (a lease waits storeTimeoutMs
      // each time); then the measured run, with the circuit open and probing.
      const opening = new AbortController();
      const poll = setInterval(() => bothOpen() && opening.abort(), 100);
      await context.client.run({ ...job(), durationSec: 30 }, opening.signal).finally(() => clearInterval(poll));
      paused = await load();
    } finally {
      redis.server.kill("SIGCONT");
    }
    const opened = bothOpen();
    const ratio = paused.reqPerSec / running.reqPerSec;
    table(["Redis", "req/s", "latency p50/p99/max ms", "non-2xx", "errors"], [row("answering", running), row("SIGSTOPped", paused)]);
    const stopped = await cluster.stop();
    const pass = ratio >= 0.5 && opened && paused.errors === 0 && paused.non2xx === 0 && running.non2xx === 0 && stopped.code === 0;
    return verdict(NAME, pass, `limited GET /hit at ${paused.reqPerSec.toFixed(0)} req/s with Redis paused against ${running.reqPerSec.toFixed(0)} answering ` +
      `(${ratio.toFixed(2)} ×, bound 0.5), circuit ${opened ? "opened" : "NEVER opened"}, ${paused.non2xx} non-2xx, ${paused.errors} errors, exit ${stopped.code}`);
  } finally {
    await cluster.stop().catch(() => undefined);
    await redis.stop();
  }
}
