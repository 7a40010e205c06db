// Instructions per GET /hello of one serving process under callgrind, in four shapes: bare h3 and
// keelson-hello as one process, and each as the only worker of a cluster (`keelson start --workers 1`,
// and `plain-cluster.js` for bare h3), the worker under valgrind and its primary native. With
// keep-alive connections (autocannon, 50 connections) or a new connection per request
// (lib/close-load.ts). Counted windows are kept as callgrind files for load-tests/callgrind-net.ts.
//
//   node --import tsx load-tests/worker-instructions.ts --shape keelson-worker --load close --out DIR
//   node --import tsx load-tests/callgrind-net.ts --requests N DIR/counted-1.out
//
// A worker does per-second work a single process does not (heartbeat, stats, the event-loop delay
// histogram's read), and under valgrind the server answers only a few hundred requests a second,
// so that work weighs a hundred times more per request than at full speed: the idle window's rate
// is printed with each counted window's share of it, to be taken off before comparing shapes.
// Build first (`make build-bench`); the reuseport balancer needs net.ipv4.tcp_migrate_req=1, so
// when the host has it off the script reruns itself in a network namespace of its own (root).
import { execFileSync, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import autocannon from "autocannon";
import { adopt, freePort, killAllChildren } from "../harness/child.js";
import { createNetns } from "../harness/netns.js";
import { reusePortRefusal } from "../supervisor/balancer.js";
import { childPids } from "./lib/cluster.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const SHAPES = ["h3", "keelson", "h3-worker", "keelson-worker"] as const;
type Shape = (typeof SHAPES)[number];
const { values } = parseArgs({
  options: {
    shape: { type: "string" },
    load: { type: "string", default: "keep-alive" },
    balancer: { type: "string", default: "reuseport" },
    out: { type: "string" },
    windows: { type: "string", default: "2" },
    requests: { type: "string", default: "8000" },
    seconds: { type: "string", default: "40" },
    clients: { type: "string", default: "8" },
    "supervisor-args": { type: "string", default: "" },
  },
});
const shape = values.shape as Shape;
const keepAlive = values.load === "keep-alive";
const windows = Number(values.windows);
const requests = Number(values.requests);
const seconds = Number(values.seconds);
if (!SHAPES.includes(shape) || !["keep-alive", "close"].includes(values.load) || !["reuseport", "round-robin"].includes(values.balancer)
  || values.out === undefined || !(windows > 0) || !(requests > 0) || !(seconds > 0)) {
  console.error(`usage: worker-instructions.ts --shape ${SHAPES.join("|")} --out DIR [--load keep-alive|close] [--balancer reuseport|round-robin] `
    + "[--windows 2] [--requests 8000 (keep-alive)] [--seconds 40 --clients 8 (close)] [--supervisor-args \"--heartbeat-interval 600000\"]");
  process.exit(2);
}
const outDir = path.resolve(values.out);

const NETNS_ENV = "KEELSON_WORKER_IR_NETNS";
if (shape.endsWith("-worker") && values.balancer === "reuseport" && reusePortRefusal() !== undefined && process.env[NETNS_ENV] === undefined) {
  const ns = createNetns(`keelson-wir-${process.pid}`, { "net.ipv4.tcp_migrate_req": "1" });
  if (typeof ns === "string") throw new Error(`the reuseport balancer is refused here and ${ns}`);
  try {
    execFileSync(ns.wrap[0]!, [...ns.wrap.slice(1), process.execPath, ...process.execArgv, fileURLToPath(import.meta.url), ...process.argv.slice(2)], {
      stdio: "inherit", env: { ...process.env, [NETNS_ENV]: ns.name },
    });
  } finally {
    ns.remove();
  }
  process.exit(0);
}

fs.rmSync(outDir, { recursive: true, force: true });
fs.mkdirSync(outDir, { recursive: true });
process.on("exit", killAllChildren);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const port = await freePort();
const servers = path.join(ROOT, "dist/load-tests/servers");
const outFile = path.join(outDir, "callgrind.%p");
const valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no", `--callgrind-out-file=${outFile}`, process.execPath];
const preload = ["--require", path.join(ROOT, "load-tests/lib/callgrind-fork.cjs")];
const argv: Record<Shape, string[]> = {
  "h3": [...valgrind, path.join(servers, "h3.js")],
  "keelson": [...valgrind, path.join(servers, "keelson-hello.js")],
  "h3-worker": [process.execPath, ...preload, path.join(servers, "plain-cluster.js"), path.join(servers, "h3.js"), "1"],
  "keelson-worker": [process.execPath, ...preload, "dist/cli/cli.js", "start", path.join(servers, "keelson-hello.js"), "--workers", "1",
    // The watchdog off: under valgrind a worker's loop can stall past its default 10 s, and a
    // replacement would leave the counted worker's pid behind. It only runs in the native primary.
    "--port", String(port), "--balancer", values.balancer, "--ready-timeout", "300000", "--watchdog-timeout", "0",
    ...values["supervisor-args"].split(" ").filter(Boolean)],
};
for (const file of [argv[shape].find((arg) => arg.endsWith(".js"))!, path.join(ROOT, "dist/cli/cli.js")]) {
  if (!fs.existsSync(path.resolve(ROOT, file))) throw new Error(`${file} is missing: run make build-bench first`);
}
// The server on CPU 0, this script and its load on CPU 1, as in the benchmarks.
const child = spawn("taskset", ["-c", "0", ...argv[shape]], {
  cwd: ROOT, detached: true, stdio: ["ignore", "pipe", "pipe"],
  env: {
    ...process.env, NODE_ENV: "production", PORT: String(port), KEELSON_METRICS_PORT: "0", CALLGRIND_FORK_OUT: outFile,
    ...(shape === "h3-worker" ? { H3_LISTEN: values.balancer } : {}),
  },
});
adopt(child, { group: true });
let output = "";
child.stdout.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
child.stderr.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));

/** The pid of the process under valgrind (taskset execs its command: a single process keeps the pid). */
async function servingPid(): Promise<number> {
  const deadline = Date.now() + 300_000;
  for (;;) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`${shape} did not start under valgrind:\n${output}`);
    const ready = /READY/.test(output);
    if (ready && (shape === "h3" || shape === "keelson")) return child.pid!;
    if (ready && shape === "h3-worker") return childPids(child.pid!)[0]!;
    const worker = /worker 1 \(pid (\d+)\) ready/.exec(output)?.[1];
    if (worker !== undefined) return Number(worker);
    await sleep(200);
  }
}
const pid = await servingPid();
const origin = `http://127.0.0.1:${port}`;

interface Fired {
  ok: number;
  failed: number;
}

function fireKeepAlive(amount: number): Promise<Fired> {
  return new Promise((resolve, reject) => {
    autocannon({ url: `${origin}/hello`, connections: 50, pipelining: 1, amount, timeout: 120 }, (error, result) => {
      if (error) reject(error);
      else resolve({ ok: result["2xx"], failed: result.errors + result.non2xx + result.timeouts });
    });
  });
}

function fireClose(forSeconds: number): Promise<Fired> {
  return new Promise((resolve, reject) => {
    const load = spawn(process.execPath, ["--import", "tsx", "load-tests/lib/close-load.ts", String(port), values.clients, String(forSeconds)], {
      cwd: ROOT, stdio: ["ignore", "pipe", "inherit"],
    });
    let text = "";
    load.stdout.setEncoding("utf8").on("data", (chunk: string) => (text += chunk));
    load.once("exit", () => {
      const result = /RESULT (.*)/.exec(text)?.[1];
      if (result === undefined) reject(new Error(`close-load.ts printed no RESULT: ${text}`));
      else resolve(JSON.parse(result) as Fired);
    });
  });
}

const fire = (amount: number, forSeconds: number): Promise<Fired> => (keepAlive ? fireKeepAlive(amount) : fireClose(forSeconds));

/** Dumps callgrind's counters (which zeroes them) to `name` in outDir; returns the instructions counted. */
function dump(name: string): number {
  execFileSync("callgrind_control", ["--dump", String(pid)], { stdio: "ignore" });
  const dumps = fs.readdirSync(outDir).filter((file) => file.startsWith(`callgrind.${pid}.`)).map((file) => path.join(outDir, file))
    .toSorted((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs);
  const latest = dumps[0];
  const summary = latest === undefined ? null : /^summary:\s*(\d+)/m.exec(fs.readFileSync(latest, "utf8"));
  if (latest === undefined || summary === null) throw new Error(`no callgrind dump of pid ${pid} in ${outDir}; the server's output:\n${output}`);
  fs.renameSync(latest, path.join(outDir, `${name}.out`));
  for (const file of dumps.slice(1)) fs.rmSync(file);
  return Number(summary[1]);
}

const label = `${shape}${shape.endsWith("-worker") ? ` (${values.balancer})` : ""}, ${values.load}`;
let started = Date.now();
const warm = await fire(20_000, 40);
console.log(`${label}: pid ${pid}, uncounted warm-up ${warm.ok} answered, ${warm.failed} failed, in ${Math.round((Date.now() - started) / 1000)} s`);
execFileSync("callgrind_control", ["--instr=on", String(pid)], { stdio: "ignore" });
await sleep(2000);
dump("discarded-0");
started = Date.now();
await sleep(10_000);
const idleRate = dump("idle") / ((Date.now() - started) / 1000);
console.log(`${label}: idle ${(idleRate / 1e6).toFixed(2)} million instructions a second`);
await fire(2000, 8);
dump("discarded-1");
for (let window = 1; window <= windows; window++) {
  started = Date.now();
  const fired = await fire(requests, seconds);
  const elapsed = (Date.now() - started) / 1000;
  const total = dump(`counted-${window}`);
  console.log(`${label}: window ${window}: ${fired.ok} answered, ${fired.failed} failed, in ${elapsed.toFixed(1)} s; `
    + `${Math.round(total / fired.ok).toLocaleString("en-US")} instructions per request, of which the idle rate ${Math.round(idleRate * elapsed / fired.ok).toLocaleString("en-US")}; `
    + `callgrind-net.ts --requests ${fired.ok} ${path.join(outDir, `counted-${window}.out`)}`);
}
// The server's pipes would keep this process alive: the exit handler kills its process group.
process.exit(0);
