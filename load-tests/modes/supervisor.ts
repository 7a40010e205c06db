// Supervisor benchmark: throughput with 1 vs 2 workers, time for a killed worker to be replaced and
// serving, time for a full rolling reload, idle RSS of the primary and of each worker. Runs the
// built example (make build first): node dist/supervisor/cli.js start dist/examples/bookstore/main.js
//   node --import tsx load-tests/bench.ts supervisor [--duration 10] [--connections 50] [--runs 3] [--root DIR]
// Prints a Markdown report (the `## Supervisor` section of BENCHMARKS.md comes from it).
import autocannon, { type Result } from "autocannon";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, openSync, readFileSync, readSync } from "node:fs";
import { request } from "node:http";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const { values } = parseArgs({
  options: {
    duration: { type: "string", default: "10" }, connections: { type: "string", default: "50" }, runs: { type: "string", default: "3" },
    // A directory holding its own dist/ (and node_modules), so a build elsewhere cannot change it mid-run.
    root: { type: "string", default: ROOT },
  },
});
const BUILD = values.root.endsWith("/") ? values.root : `${values.root}/`;
const DURATION = Number(values.duration);
const CONNECTIONS = Number(values.connections);
const RUNS = Number(values.runs);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const median = (xs: number[]) => {
  const sorted = xs.toSorted((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
};

// Every supervisor started here is SIGKILLed with its workers (own process group) if this script ends early.
const spawned = new Set<ChildProcess>();
process.on("exit", () => {
  for (const child of spawned) {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
});
process.on("uncaughtException", (error) => {
  console.error(error);
  process.exit(1);
});
process.on("unhandledRejection", (error) => {
  console.error(error);
  process.exit(1);
});

interface Cluster {
  child: ChildProcess;
  port: number;
  text: () => string;
  waitFor: (pattern: RegExp, from: number, timeoutMs?: number) => Promise<number>;
}

/** Starts the built supervisor on the built example bookstore, in production mode (JSON logs, no docs). */
async function startCluster(workers: number): Promise<Cluster> {
  const port = 20_000 + Math.floor(Math.random() * 40_000);
  if (!existsSync(`${BUILD}dist/supervisor/cli.js`)) throw new Error(`${BUILD}dist/ is missing: run make build first`);
  const logFile = join(mkdtempSync(join(tmpdir(), "keelson-bench-")), "supervisor.log");
  const fd = openSync(logFile, "w+");
  const child = spawn(process.execPath, ["dist/supervisor/cli.js", "start", "dist/examples/bookstore/main.js",
    "--workers", String(workers), "--port", String(port)], { cwd: BUILD, env: { ...process.env, NODE_ENV: "production" }, stdio: ["ignore", fd, "inherit"], detached: true });
  spawned.add(child);
  child.once("exit", () => spawned.delete(child));
  let text = "";
  let offset = 0;
  // Read the log file incrementally, keeping only the supervisor's lines: parsing every request
  // line here would take CPU from autocannon, which runs in this process.
  const refresh = () => {
    const chunk = Buffer.alloc(1 << 20);
    for (let n = readSync(fd, chunk, 0, chunk.length, offset); n > 0; n = readSync(fd, chunk, 0, chunk.length, offset)) {
      offset += n;
      for (const line of chunk.subarray(0, n).toString().split("\n")) if (/worker|reload/.test(line)) text += line + "\n";
    }
    return text;
  };
  const cluster: Cluster = {
    child, port, text: refresh,
    async waitFor(pattern, from, timeoutMs = 30_000) {
      const deadline = performance.now() + timeoutMs;
      while (performance.now() < deadline) {
        if (pattern.test(refresh().slice(from))) return performance.now();
        await sleep(2);
      }
      throw new Error(`timed out waiting for ${pattern}`);
    },
  };
  await cluster.waitFor(/worker\(s\) ready in/, 0);
  return cluster;
}

async function stopCluster(cluster: Cluster): Promise<void> {
  const exited = new Promise((resolve) => cluster.child.once("exit", resolve));
  cluster.child.kill("SIGTERM");
  await exited;
}

/** Status of GET /hello on a fresh connection; 0 when the connection fails. */
function hello(port: number): Promise<number> {
  return new Promise((resolve) => {
    request({ host: "127.0.0.1", port, path: "/hello", agent: false }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    }).on("error", () => resolve(0)).end();
  });
}

function load(port: number, seconds: number): Promise<Result> {
  return new Promise((resolve, reject) => {
    autocannon({ url: `http://127.0.0.1:${port}/hello`, connections: CONNECTIONS, pipelining: 1, duration: seconds },
      (error, result) => (error ? reject(error) : resolve(result)));
  });
}

function workerPids(cluster: Cluster): Map<number, number> {
  const pids = new Map<number, number>();
  for (const match of cluster.text().matchAll(/worker (\d+) \(pid (\d+)\) ready/g)) pids.set(Number(match[1]), Number(match[2]));
  return pids;
}

function rssMB(pid: number | undefined): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"));
  return Number(/(\d+)/.exec(line ?? "")?.[1] ?? 0) / 1024;
}

async function throughput(workers: number): Promise<{ rps: number; p50: number; p99: number; errors: number; non2xx: number }> {
  const cluster = await startCluster(workers);
  await load(cluster.port, 2);
  const result = await load(cluster.port, DURATION);
  await stopCluster(cluster);
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, errors: result.errors, non2xx: result.non2xx };
}

async function replaceKilled(cluster: Cluster): Promise<{ ready: number; serving: number }> {
  const victim = workerPids(cluster).get(1);
  if (victim === undefined) throw new Error("no worker 1");
  const mark = cluster.text().length;
  const killed = performance.now();
  process.kill(victim, "SIGKILL");
  const ready = await cluster.waitFor(/worker 1 \(pid \d+\) ready/, mark);
  // Both slots filled again: the next connections alternate between them, all answered.
  for (let i = 0; i < 4; i++) if ((await hello(cluster.port)) !== 200) throw new Error("a request failed after the replacement");
  return { ready: ready - killed, serving: performance.now() - killed };
}

async function rollingReload(cluster: Cluster): Promise<number> {
  const mark = cluster.text().length;
  const started = performance.now();
  cluster.child.kill("SIGHUP");
  return (await cluster.waitFor(/reload complete/, mark, 60_000)) - started;
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

const cluster = await startCluster(2);
for (let i = 0; i < 20; i++) await hello(cluster.port);
await sleep(1000);
const pids = workerPids(cluster);
const rss = { primary: rssMB(cluster.child.pid), workers: [...pids.values()].map(rssMB) };
const kills: Array<{ ready: number; serving: number }> = [];
for (let i = 0; i < 5; i++) {
  kills.push(await replaceKilled(cluster));
  await sleep(500);
}
const reloads: number[] = [];
for (let i = 0; i < 3; i++) {
  reloads.push(await rollingReload(cluster));
  await sleep(500);
}
await stopCluster(cluster);
console.log(`\n### Recovery and footprint (2 workers, median)\n`);
console.log("| measure | value |\n| --- | --- |");
console.log(`| SIGKILL a worker → replacement ready (5 runs) | ${fmt(median(kills.map((k) => k.ready)))} ms |`);
console.log(`| SIGKILL a worker → replacement ready, then 4 fresh connections answered 200 (5 runs) | ${fmt(median(kills.map((k) => k.serving)))} ms |`);
console.log(`| SIGHUP → rolling reload of 2 workers complete (3 runs) | ${fmt(median(reloads))} ms |`);
console.log(`| idle RSS, primary | ${rss.primary.toFixed(1)} MB |`);
console.log(`| idle RSS, each worker | ${rss.workers.map((m) => m.toFixed(1)).join(" MB, ")} MB |`);
