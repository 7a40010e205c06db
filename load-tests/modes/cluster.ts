// Multi-core serving side by side: GET /hello (production, no request lines) from bare h3 in one
// process, bare node:cluster with 2 h3 workers (round-robin, and reusePort), PM2 cluster mode with 2
// instances, keelson in one process and `keelson start --workers 2` with each balancer; each with
// keep-alive connections (autocannon) and with a new TCP connection per request (lib/close-load.ts).
// The figure is requests per server CPU-second, the server being its whole process tree from /proc
// (primary, workers, PM2's daemon), with how the workers split the work and how much of the CPU
// was off the processes' main threads (V8's compilers: warm-up left in the window).
//   node --import tsx load-tests/bench.ts cluster [--rounds 6] [--duration 10] [--warmup 2] [--connections 50] [--only 2,5] [--side-by-side]
// ROUNDS=N sets the default of --rounds (make bench MODE=cluster ROUNDS=1). The reuseport balancer
// needs net.ipv4.tcp_migrate_req=1: when the host has it off the mode reruns itself in a network
// namespace of its own with it on (root and `ip netns`), else it skips keelson's reuseport row and
// says why. Prints a Markdown report.
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { freePort, killAllChildren, spawnChild, type Child } from "../../harness/child.js";
import { createNetns } from "../../harness/netns.js";
import { reusePortRefusal } from "../../supervisor/balancer.js";
import { builtServers } from "../lib/build.js";
import { startCluster } from "../lib/cluster.js";
import { request, sleep } from "../lib/http.js";
import { LoadClient } from "../lib/load-client.js";
import { choosePinning } from "../lib/machine.js";
import { cpuSpent, mainThreadCpu, treeCpu } from "../lib/proc-cpu.js";
import { SpeedProbe } from "../lib/speed-probe.js";
import { median, roundOrder, roundRatios, SAME_SPEED } from "../lib/stats.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const { values } = parseArgs({
  options: {
    rounds: { type: "string", default: process.env.ROUNDS || "6" },
    duration: { type: "string", default: "10" },
    warmup: { type: "string", default: "2" },
    connections: { type: "string", default: "50" },
    only: { type: "string" },
    "side-by-side": { type: "boolean", default: false },
  },
});
// Every server started once and kept up; each round, for each load, every server's window back to back.
const SIDE_BY_SIDE = values["side-by-side"] || process.env.SIDE_BY_SIDE === "1";
const ROUNDS = Number(values.rounds);
const DURATION = Number(values.duration);
const WARMUP = Number(values.warmup);
const CONNECTIONS = Number(values.connections);
if (!Number.isInteger(ROUNDS) || ROUNDS < 1 || !(DURATION > 0) || !(WARMUP >= 0) || !(CONNECTIONS > 0)) {
  throw new Error("--rounds takes a positive integer, --duration and --connections positive numbers, --warmup 0 or more");
}

const NETNS_ENV = "KEELSON_BENCH_NETNS";
const refusal = reusePortRefusal();
if (refusal !== undefined && process.env[NETNS_ENV] === undefined) {
  const ns = createNetns(`keelson-bench-${process.pid}`, { "net.ipv4.tcp_migrate_req": "1" });
  if (typeof ns !== "string") {
    console.error(`net.ipv4.tcp_migrate_req is off here: the whole run moves into network namespace ${ns.name}, where it is on`);
    const run = spawnSync(ns.wrap[0] as string, [...ns.wrap.slice(1), process.execPath, ...process.execArgv, fileURLToPath(import.meta.url), ...process.argv.slice(2)], {
      stdio: "inherit", env: { ...process.env, [NETNS_ENV]: ns.name },
    });
    ns.remove();
    process.exit(run.status ?? 1);
  }
  console.error(`(no network namespace: ${ns})`);
}

process.on("exit", killAllChildren);
const pinning = choosePinning();
const build = builtServers(ROOT);
const client = new LoadClient(pinning.load, ROOT);
const pinned = (argv: string[], cpu: number | null): string[] => (cpu === null ? argv : ["taskset", "-c", String(cpu), ...argv]);
const h3 = build.entry("h3");
const keelsonHello = path.relative(ROOT, build.entry("keelson-hello"));
const PRODUCTION = { NODE_ENV: "production" };

/** A server under test: the root of its process tree, its primary when it has one, its port. */
interface Running {
  root: number;
  /** The primary of a cluster (in the data path with round-robin), or null for one process. */
  primary: number | null;
  port: number;
  stop(): Promise<void>;
}

interface Shape {
  name: string;
  start(): Promise<Running>;
  /** Why this row is not measured here; undefined when it is. */
  skip?: string;
}

/** A process tree started with `argv`, ready once `ready` lines of its output have said READY. */
async function spawned(argv: string[], env: Record<string, string>, ready: number, primary: boolean): Promise<Running> {
  const port = await freePort();
  const child: Child = spawnChild(pinned([process.execPath, ...argv], pinning.server), {
    cwd: ROOT, env: { ...PRODUCTION, ...env, PORT: String(port) }, group: true, output: "file",
  });
  await child.waitUntil((out) => (out.match(/^READY \d+$/gm)?.length ?? 0) >= ready, { timeoutMs: 30_000, what: `${ready} READY line(s)` });
  return { root: child.pid, primary: primary ? child.pid : null, port, stop: async () => void (await child.stop(5_000)) };
}

/** PM2 cluster mode: a daemon of its own (a fresh PM2_HOME) whose 2 instances are the server's workers. */
async function pm2(): Promise<Running> {
  const home = fs.mkdtempSync(path.join(tmpdir(), "keelson-bench-pm2-"));
  const port = await freePort();
  const env = { ...process.env, ...PRODUCTION, PM2_HOME: home, PORT: String(port), H3_LISTEN: "round-robin" };
  const cli = path.join(ROOT, "node_modules", "pm2", "bin", "pm2");
  const pm2Run = (args: string[]) => {
    // Pinned: the daemon the first command spawns, and the instances it forks, inherit the CPU.
    const [command, ...rest] = pinned([process.execPath, cli, ...args], pinning.server);
    return spawnSync(command as string, rest, { cwd: ROOT, env, encoding: "utf8", timeout: 60_000 });
  };
  const stop = async (): Promise<void> => {
    pm2Run(["kill"]);
    fs.rmSync(home, { recursive: true, force: true });
  };
  const started = pm2Run(["start", h3, "-i", "2", "--name", "bench-h3"]);
  const daemon = Number(fs.readFileSync(path.join(home, "pm2.pid"), "utf8"));
  if (started.status !== 0 || !(daemon > 0)) {
    await stop();
    throw new Error(`pm2 start failed: ${started.stderr || started.stdout}`);
  }
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const out = fs.readdirSync(path.join(home, "logs")).filter((f) => f.endsWith("-out.log") || /-out-\d+\.log$/.test(f))
      .map((f) => fs.readFileSync(path.join(home, "logs", f), "utf8")).join("");
    if ((out.match(/^READY \d+$/gm)?.length ?? 0) >= 2) return { root: daemon, primary: daemon, port, stop };
    await sleep(100);
  }
  await stop();
  throw new Error("pm2's 2 instances did not say READY within 30 s");
}

const bareCluster = (listen: string) => () => spawned([build.entry("plain-cluster"), h3, "2"], { H3_LISTEN: listen }, 2, true);
const keelsonCluster = (balancer: string) => async (): Promise<Running> => {
  const cluster = await startCluster({ cwd: ROOT, entry: keelsonHello, workers: 2, pinCpu: pinning.server, env: { ...PRODUCTION, KEELSON_BALANCER: balancer } });
  return { root: cluster.pid, primary: cluster.pid, port: cluster.port, stop: async () => void (await cluster.stop()) };
};

const SHAPES: Shape[] = [
  { name: "bare h3, one process", start: () => spawned([h3], {}, 1, false) },
  { name: "bare node:cluster + 2 h3 workers (round-robin)", start: bareCluster("round-robin") },
  { name: "PM2 cluster mode, 2 instances", start: pm2 },
  { name: "keelson, one process", start: () => spawned([build.entry("keelson-hello")], {}, 1, false) },
  { name: "keelson start --workers 2 --balancer round-robin", start: keelsonCluster("round-robin") },
  {
    name: "keelson start --workers 2 --balancer reuseport", start: keelsonCluster("reuseport"),
    ...(refusal === undefined || process.env[NETNS_ENV] !== undefined ? {} : { skip: `skipped: the reuseport balancer is refused here: ${refusal}` }),
  },
  { name: "bare node:cluster + 2 h3 workers (reusePort)", start: bareCluster("reuseport") },
];
const BASELINE = SHAPES[0]?.name ?? "";
const only = values.only?.split(",").map(Number);
const shapes = SHAPES.filter((shape, index) => shape.skip === undefined && (only === undefined || index === 0 || only.includes(index + 1)));

interface Measure {
  requests: number;
  failed: number;
  cpu: number;
  /** CPU seconds of the primary (round-robin rows), else null. */
  primaryCpu: number | null;
  /** Each worker's share of the workers' CPU, largest first. */
  split: number[];
  /** The share of the tree's CPU outside its processes' main threads (V8's compilers and GC helpers). */
  offMain: number;
  /** The speed probe's readings right before and right after the measured load (side by side). */
  speedBefore?: number;
  speedAfter?: number;
}

/** The server tree's CPU over `run`, which returns its answered and failed requests. */
async function measured(server: Running, run: () => Promise<{ ok: number; failed: number }>): Promise<Measure> {
  const before = treeCpu(server.root);
  const mainBefore = mainThreadCpu(before.keys());
  const { ok, failed } = await run();
  const spent = cpuSpent(before, treeCpu(server.root));
  const main = cpuSpent(mainBefore, mainThreadCpu(spent.keys()));
  const total = [...spent.values()].reduce((a, b) => a + b, 0);
  const workers = [...spent].filter(([pid]) => pid !== server.root).map(([, cpu]) => cpu);
  const workerCpu = workers.reduce((a, b) => a + b, 0);
  return {
    requests: ok, failed,
    cpu: total,
    offMain: total > 0 ? Math.max(0, 1 - [...main.values()].reduce((a, b) => a + b, 0) / total) : 0,
    primaryCpu: server.primary === null ? null : spent.get(server.primary) ?? 0,
    split: workers.length < 2 || workerCpu === 0 ? [] : workers.map((cpu) => cpu / workerCpu).toSorted((a, b) => b - a),
  };
}

const keepAlive = (server: Running, seconds: number) => async () => {
  const result = await client.run({
    origin: `http://127.0.0.1:${server.port}`, requests: [{ method: "GET", path: "/hello" }], durationSec: seconds,
    connections: CONNECTIONS, pipelining: 1, measureCpu: false,
  });
  return { ok: result.requests - result.non2xx, failed: result.errors + result.non2xx };
};

const closing = (server: Running, seconds: number) => async () => {
  const load = spawnChild(pinned([process.execPath, "--import", "tsx", "load-tests/lib/close-load.ts", String(server.port), String(CONNECTIONS), String(seconds)], pinning.load), { cwd: ROOT });
  const line = await load.waitFor(/^RESULT /, { timeoutMs: (seconds + 60) * 1000 });
  await load.exited;
  return JSON.parse(line.slice("RESULT ".length)) as { ok: number; failed: number };
};

type Load = "keep-alive" | "close";
const results = new Map<string, Array<Measure & { round: number }>>();
const key = (shape: string, load: Load) => `${shape}\u0000${load}`;

console.error(`machine: ${cpus().length} × ${cpus()[0]?.model ?? "?"}, Node ${process.version}, load ${loadavg()[0]?.toFixed(2)}; ${pinning.note}`);
console.error(`${ROUNDS} round(s) of ${shapes.length} servers × 2 loads × ${DURATION}s (+${WARMUP}s warm-up each)${SIDE_BY_SIDE ? ", side by side (every server up for the whole run)" : ""}`);
for (const shape of SHAPES) if (shape.skip !== undefined) console.error(`${shape.name}: ${shape.skip}`);
/** A server started and answering GET /hello. */
async function startChecked(shape: Shape): Promise<Running> {
  const server = await shape.start();
  if (!(await request(`http://127.0.0.1:${server.port}/hello`, { timeoutMs: 5_000 }).then((r) => r.status === 200, () => false))) {
    await server.stop();
    throw new Error(`${shape.name}: GET /hello did not answer 200`);
  }
  return server;
}

/** One window of one load on one server, after its warm-up. */
async function measureWindow(shape: Shape, server: Running, load: Load, round: number, probe?: SpeedProbe): Promise<void> {
  const run = load === "keep-alive" ? keepAlive : closing;
  if (WARMUP > 0) await run(server, WARMUP)();
  const speedBefore = await probe?.measure();
  const measure: Measure = await measured(server, run(server, DURATION));
  if (probe && speedBefore !== undefined) Object.assign(measure, { speedBefore, speedAfter: await probe.measure() });
  results.set(key(shape.name, load), [...(results.get(key(shape.name, load)) ?? []), { ...measure, round }]);
  const speed = measure.speedBefore === undefined ? "" : `, speed ${measure.speedBefore.toFixed(2)}→${measure.speedAfter?.toFixed(2)}`;
  console.error(`round ${round} ${shape.name} ${load}: ${Math.round(measure.requests / measure.cpu)} req/CPU-s, ${measure.requests} requests, ${measure.failed} failed, ${Math.round(measure.offMain * 100)} % off the main threads${speed}`);
}

const LOADS = ["keep-alive", "close"] as const;
if (SIDE_BY_SIDE) {
  // The windows a round's ratio divides lie one window per server apart, not a whole server's session.
  const running = new Map<Shape, Running>();
  // The machine's speed before and after every window (lib/speed-probe.ts), on the servers' CPU.
  const probe = new SpeedProbe(pinning.server, ROOT);
  try {
    for (const shape of shapes) running.set(shape, await startChecked(shape));
    for (let round = 1; round <= ROUNDS; round++) {
      for (const load of LOADS) {
        for (const shape of roundOrder(shapes, round, 36)) await measureWindow(shape, running.get(shape) as Running, load, round, probe);
      }
    }
  } finally {
    probe.close();
    await Promise.all([...running.values()].map((server) => server.stop()));
  }
} else {
  for (let round = 1; round <= ROUNDS; round++) {
    for (const shape of roundOrder(shapes, round, 36)) {
      const server = await startChecked(shape);
      try {
        for (const load of LOADS) await measureWindow(shape, server, load, round);
      } finally {
        await server.stop();
      }
    }
  }
}
client.close();

const perCpu = (m: Measure) => m.requests / m.cpu;
/** Median over rounds of the ratio to bare h3 in the same round and load: slow drift divides out. */
function ratio(shape: string, load: Load): number | null {
  const base = new Map((results.get(key(BASELINE, load)) ?? []).map((m) => [m.round, perCpu(m)]));
  return median((results.get(key(shape, load)) ?? []).flatMap((m) => (base.has(m.round) ? [perCpu(m) / (base.get(m.round) as number)] : [])));
}
const cell = (shape: string, load: Load): string => {
  const runs = results.get(key(shape, load)) ?? [];
  const value = median(runs.map(perCpu));
  if (value === null) return "—";
  const share = ratio(shape, load);
  return `${Math.round(value).toLocaleString("en-US")}${shape === BASELINE || share === null ? "" : ` (${share.toFixed(2)} ×)`}`;
};
const split = (shape: string, load: Load): string => {
  const runs = (results.get(key(shape, load)) ?? []).filter((m) => m.split.length > 0);
  if (runs.length === 0) return "—";
  const shares = runs[0]?.split.map((_, i) => median(runs.map((m) => m.split[i] ?? 0)) ?? 0) ?? [];
  return shares.map((s) => Math.round(s * 100)).join("/");
};
const primaryUs = (shape: string, load: Load): string => {
  const runs = (results.get(key(shape, load)) ?? []).filter((m) => m.primaryCpu !== null);
  const us = median(runs.map((m) => ((m.primaryCpu ?? 0) / m.requests) * 1e6));
  return us === null ? "—" : us.toFixed(0);
};
/** Median share of the tree's CPU outside its main threads: a large one means the window held warm-up (compilation). */
const offMain = (shape: string, load: Load): string => {
  const share = median((results.get(key(shape, load)) ?? []).map((m) => m.offMain));
  return share === null ? "—" : `${Math.round(share * 100)} %`;
};
const failed = (shape: string): number => (["keep-alive", "close"] as const).reduce(
  (sum, load) => sum + (results.get(key(shape, load)) ?? []).reduce((s, m) => s + m.failed, 0), 0);

console.log(`### Multi-core serving (GET /hello, production, no request lines; ${ROUNDS} interleaved round(s) of ${DURATION}s${SIDE_BY_SIDE ? ", side by side" : ""}, medians)\n`);
console.log(`${pinning.note}; Node ${process.version}; ${CONNECTIONS} connections in both loads; requests per server CPU-second (× bare h3 in the same round).\n`);
console.log("| server | keep-alive | a new TCP connection per request | worker split (keep-alive / per request) | primary µs per request (keep-alive / per request) | off the main threads (keep-alive / per request) | failed |");
console.log("| --- | --- | --- | --- | --- | --- | --- |");
for (const shape of SHAPES) {
  if (shape.skip !== undefined || !shapes.includes(shape)) {
    if (shape.skip !== undefined) console.log(`| ${shape.name} | ${shape.skip} | | | | | |`);
    continue;
  }
  console.log(`| ${shape.name} | ${cell(shape.name, "keep-alive")} | ${cell(shape.name, "close")} | ${split(shape.name, "keep-alive")} / ${split(shape.name, "close")} | ${primaryUs(shape.name, "keep-alive")} / ${primaryUs(shape.name, "close")} | ${offMain(shape.name, "keep-alive")} / ${offMain(shape.name, "close")} | ${failed(shape.name)} |`);
}
// The issue's comparisons, each within a round and load: per-round median (range) [ratio of the medians].
const PAIRS: Array<[number, number]> = [[5, 2], [6, 7], [6, 5], [5, 3], [6, 3]];
const pairCell = (top: string, bottom: string, load: Load, steady = false): string => {
  const base = new Map((results.get(key(bottom, load)) ?? []).map((m) => [m.round, m]));
  const pairs = (results.get(key(top, load)) ?? []).flatMap((m) => {
    const other = base.get(m.round);
    return other === undefined ? [] : [[m, other] as const];
  });
  const r = roundRatios(pairs, perCpu, steady);
  const rounds = steady ? `, ${r.rounds} rounds` : "";
  return r.median === null ? "—" : `${r.median.toFixed(2)} (${r.min?.toFixed(2)}–${r.max?.toFixed(2)}${rounds}) [${r.ofMedians?.toFixed(2)}]`;
};
const pairs = PAIRS.map(([a, b]) => [SHAPES[a - 1], SHAPES[b - 1]] as const).filter(([a, b]) => a && b && shapes.includes(a) && shapes.includes(b));
if (pairs.length > 0) {
  console.log("\n| ratio, per round: median (range) [ratio of the medians] | keep-alive | a new TCP connection per request |");
  console.log("| --- | --- | --- |");
  for (const [a, b] of pairs) console.log(`| ${a?.name} ÷ ${b?.name} | ${pairCell(a?.name ?? "", b?.name ?? "", "keep-alive")} | ${pairCell(a?.name ?? "", b?.name ?? "", "close")} |`);
  if (SIDE_BY_SIDE) {
    console.log(`\n| the same over the rounds at one machine speed (probe readings within ${SAME_SPEED * 100} %): median (range, rounds kept) [ratio of the medians] | keep-alive | a new TCP connection per request |`);
    console.log("| --- | --- | --- |");
    for (const [a, b] of pairs) console.log(`| ${a?.name} ÷ ${b?.name} | ${pairCell(a?.name ?? "", b?.name ?? "", "keep-alive", true)} | ${pairCell(a?.name ?? "", b?.name ?? "", "close", true)} |`);
  }
}
const total = [...results.values()].flat().reduce((sum, m) => sum + m.failed, 0);
if (total > 0) process.exitCode = 1;
