// Supervisor benchmark: throughput with 1 vs 2 workers, time for a killed worker to be replaced and
// serving, time for a full rolling reload, idle RSS of the primary and of each worker. Runs the
// built example (make build first): node dist/cli/cli.js start dist/examples/bookstore/main.js
//   node --import tsx load-tests/bench.ts supervisor [--duration 10] [--connections 50] [--runs 3] [--root DIR]
// Prints a Markdown report (the `## Supervisor` section of BENCHMARKS.md comes from it).
import { cpus } from "node:os";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { killAllChildren } from "../../harness/child.js";
import { startCluster, type Cluster } from "../lib/cluster.js";
import { sleep } from "../lib/http.js";
import { LoadClient } from "../lib/load-client.js";
import { choosePinning, readRssMb } from "../lib/machine.js";
import { median as medianOrNull } from "../lib/stats.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const { values } = parseArgs({
  options: {
    duration: { type: "string", default: "10" }, connections: { type: "string", default: "50" }, runs: { type: "string", default: "3" },
    // A directory holding its own dist/ (and node_modules), so a build elsewhere cannot change it mid-run.
    root: { type: "string", default: ROOT },
  },
});
const DURATION = Number(values.duration);
const CONNECTIONS = Number(values.connections);
const RUNS = Number(values.runs);
const median = (xs: number[]): number => medianOrNull(xs) ?? 0;
process.on("exit", killAllChildren);
const pinning = choosePinning();
const client = new LoadClient(pinning.load, ROOT);

/** The built supervisor on the built example bookstore, in production mode (JSON logs, no docs). */
const cluster = (workers: number): Promise<Cluster> =>
  startCluster({ cwd: values.root, entry: "dist/examples/bookstore/main.js", workers, pinCpu: null });

/** Status of GET /hello on a fresh connection; 0 when the connection fails. */
const hello = (origin: string): Promise<number> =>
  fetch(`${origin}/hello`, { headers: { connection: "close" } }).then(async (res) => (await res.arrayBuffer(), res.status), () => 0);

const load = (origin: string, durationSec: number) => client.run({
  origin, requests: [{ method: "GET", path: "/hello" }], durationSec, connections: CONNECTIONS, pipelining: 1, measureCpu: false,
});

async function throughput(workers: number): Promise<{ rps: number; p50: number; p99: number; errors: number; non2xx: number }> {
  const running = await cluster(workers);
  await load(running.origin, 2);
  const result = await load(running.origin, DURATION);
  await running.stop();
  return { rps: result.reqPerSec, p50: result.p50Ms, p99: result.p99Ms, errors: result.errors, non2xx: result.non2xx };
}

async function replaceKilled(running: Cluster): Promise<{ ready: number; serving: number }> {
  const victim = running.workers().get(1);
  if (victim === undefined) throw new Error("no worker 1");
  const mark = running.log().length;
  const killed = performance.now();
  process.kill(victim, "SIGKILL");
  await running.waitFor(/worker 1 \(pid \d+\) ready/, mark);
  const ready = performance.now();
  // Both slots filled again: the next connections alternate between them, all answered.
  for (let i = 0; i < 4; i++) if ((await hello(running.origin)) !== 200) throw new Error("a request failed after the replacement");
  return { ready: ready - killed, serving: performance.now() - killed };
}

async function rollingReload(running: Cluster): Promise<number> {
  const mark = running.log().length;
  const started = performance.now();
  process.kill(running.pid, "SIGHUP");
  await running.waitFor(/reload complete/, mark, 60_000);
  return performance.now() - started;
}

const rows: string[] = [];
const fmt = (n: number) => n.toFixed(0);
console.error(`machine: ${cpus().length} × ${cpus()[0]?.model ?? "?"}, Node ${process.version}; ${RUNS} runs, ${DURATION}s each`);
const one: Awaited<ReturnType<typeof throughput>>[] = [];
const two: Awaited<ReturnType<typeof throughput>>[] = [];
for (let run = 0; run < RUNS; run++) {
  // Interleaved, so drift on a shared machine hits both alike.
  one.push(await throughput(1));
  two.push(await throughput(2));
}
for (const [label, results] of [["WORKERS=1", one], ["WORKERS=2", two]] as const) {
  rows.push(`| ${label} | ${fmt(median(results.map((r) => r.rps)))} | ${median(results.map((r) => r.p50))} | ${median(results.map((r) => r.p99))} | ${results.reduce((s, r) => s + r.errors, 0)} | ${results.reduce((s, r) => s + r.non2xx, 0)} |`);
}
console.log(`### Throughput (GET /hello of the example, autocannon ${CONNECTIONS} connections, pipelining 1, ${DURATION}s, median of ${RUNS})\n`);
console.log("| workers | req/s | p50 ms | p99 ms | errors | non-2xx |\n| --- | --- | --- | --- | --- | --- |\n" + rows.join("\n"));

const running = await cluster(2);
for (let i = 0; i < 20; i++) await hello(running.origin);
await sleep(1000);
const rss = { primary: readRssMb(running.pid) ?? 0, workers: [...running.workers().values()].map((pid) => readRssMb(pid) ?? 0) };
const kills: Array<{ ready: number; serving: number }> = [];
for (let i = 0; i < 5; i++) {
  kills.push(await replaceKilled(running));
  await sleep(500);
}
const reloads: number[] = [];
for (let i = 0; i < 3; i++) {
  reloads.push(await rollingReload(running));
  await sleep(500);
}
await running.stop();
client.close();
console.log(`\n### Recovery and footprint (2 workers, median)\n`);
console.log("| measure | value |\n| --- | --- |");
console.log(`| SIGKILL a worker → replacement ready (5 runs) | ${fmt(median(kills.map((k) => k.ready)))} ms |`);
console.log(`| SIGKILL a worker → replacement ready, then 4 fresh connections answered 200 (5 runs) | ${fmt(median(kills.map((k) => k.serving)))} ms |`);
console.log(`| SIGHUP → rolling reload of 2 workers complete (3 runs) | ${fmt(median(reloads))} ms |`);
console.log(`| idle RSS, primary | ${rss.primary.toFixed(1)} MB |`);
console.log(`| idle RSS, each worker | ${rss.workers.map((m) => m.toFixed(1)).join(" MB, ")} MB |`);
