// Instructions per request, counted by valgrind (callgrind), for every target and scenario of
// the benchmark. Wall-clock and CPU-time figures on a shared VM move 30-50 % between rounds;
// an instruction count does not see CPU time stolen by neighbours. It still moves 10-20 % between
// runs (garbage collections and JIT compilations that land in the counted window, how many
// requests one event-loop turn handles), so targets are compared within one run.
//
//   node --import tsx load-tests/bench.ts instructions [--targets h3,keelson] [--requests 8000] [--warmup 20000] [--origin URL] [--profile DIR]
//   (--origin sends `Origin: URL` on every request, warm-up included: browser traffic, CORS active;
//   --profile keeps each target's counted windows as callgrind files in DIR for callgrind_annotate)
//   (variants such as keelson-ratelimit only when named: --targets keelson,keelson-ratelimit)
//   (keelson-idempotency adds "POST /books keyed", a fresh Idempotency-Key per request, for every target:
//   --targets keelson,keelson-idempotency gives the cost of an idempotent POST against the same POST)
//   (--scenarios "GET /hello,POST /books" counts only the scenarios named; the warm-up still runs them all)
//   (--accept-encoding VALUE sends `Accept-Encoding: VALUE` on every request: keelson-compress encodes)
//   (--cache-sim also simulates the caches, as valgrind's cachegrind does: the kept files then count
//   first-level and last-level misses beside the instructions, for callgrind-net.ts; --ll SIZE,ASSOC,LINE
//   sets the simulated last level, e.g. this machine's private L2 rather than the L3 it shares with its neighbours)
//   (--windows N counts N windows per scenario, each after its own short run and settle, and reports
//   their median with the range: the same build's net can move by 5 % between two windows, with the
//   code V8 happens to have optimised by then; with --profile the files are named .w1.out, .w2.out…)
//   (--settle S waits S seconds before each counted window, uncounted: V8's compiler thread, which
//   callgrind runs in turn with the main one, finishes the jobs the warm-up queued; without it a
//   window can hold tens of thousands of compiler instructions per request and code still unoptimised)
//
// Each server runs under `valgrind --tool=callgrind --instr-atstart=no`: startup and a warm-up
// (all routes, enough for V8 to optimise the hot path) run uninstrumented; then, per scenario,
// counting is switched on, a quarter of `--requests` of that scenario runs uncounted, then
// exactly `--requests` requests are counted. What is counted:
// user-space instructions of every thread of the server (JavaScript, V8, GC, libuv, the log
// writer's thread pool); not the kernel (the syscalls per request are the same for every
// target: one writev per response, see BENCHMARKS.md), and cache misses only as simulated with --cache-sim.
import { execFileSync, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import autocannon from "autocannon";
import { ALL_TARGETS, checkOrigin, needsIds, scenariosFor, VARIANT_TARGETS } from "../lib/args.js";
import { builtServers } from "../lib/build.js";
import { killAllChildren as killAll, adopt as track } from "../../harness/child.js";
import { freePort } from "../lib/server.js";
import { median } from "../lib/stats.js";
import type { Scenario } from "../lib/types.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const { values } = parseArgs({
  options: {
    targets: { type: "string", default: ALL_TARGETS.join(",") },
    requests: { type: "string", default: "8000" },
    warmup: { type: "string", default: "20000" },
    origin: { type: "string" },
    "accept-encoding": { type: "string" },
    profile: { type: "string" },
    scenarios: { type: "string" },
    settle: { type: "string", default: "0" },
    "cache-sim": { type: "boolean", default: false },
    windows: { type: "string", default: "1" },
    ll: { type: "string" },
  },
});
const acceptEncoding = values["accept-encoding"];
const targetsNamed = values.targets.split(",").map((t) => t.trim()).filter(Boolean);
const originHeader = values.origin === undefined ? undefined : checkOrigin(values.origin);
const only = values.scenarios?.split(",").map((name) => name.trim());
const WARMUP = scenariosFor({ origin: originHeader, targets: targetsNamed })
  .map((s) => (acceptEncoding === undefined ? s : { ...s, headers: { ...s.headers, "accept-encoding": acceptEncoding } }));
const SCENARIOS = WARMUP.filter((s) => only === undefined || only.includes(s.name));
const profileDir = values.profile === undefined ? undefined : path.resolve(values.profile);
if (profileDir !== undefined) fs.mkdirSync(profileDir, { recursive: true });
const targets = targetsNamed;
const requests = Number(values.requests);
const warmup = Number(values.warmup);
const settleMs = Number(values.settle) * 1000;
const windows = Number(values.windows);
// valgrind checks the geometry itself (its sets must be a power of two): what it refuses ends the start with its message.
const cacheArgs = values["cache-sim"] ? ["--cache-sim=yes", ...(values.ll === undefined ? [] : [`--LL=${values.ll}`])] : [];
const known = [...ALL_TARGETS, ...VARIANT_TARGETS];
if (targets.some((t) => !known.includes(t)) || !(requests > 0) || !(warmup >= 0) || !(settleMs >= 0) || !(Number.isInteger(windows) && windows >= 1) || SCENARIOS.length === 0 || (values.ll !== undefined && !values["cache-sim"])) {
  console.error(`usage: node --import tsx load-tests/bench.ts instructions [--targets ${known.join(",")}] [--requests N] [--warmup N] [--origin URL] [--accept-encoding VALUE] [--profile DIR] [--settle S] [--windows N] [--cache-sim [--ll SIZE,ASSOC,LINE]] [--scenarios "POST /books,POST /books keyed"]`);
  process.exit(2);
}
try {
  execFileSync("valgrind", ["--version"], { stdio: "ignore" });
} catch {
  console.error("valgrind is not installed: apt-get install valgrind");
  process.exit(1);
}

const build = builtServers(ROOT);
const logDir = fs.mkdtempSync(path.join(os.tmpdir(), "keelson-ir-"));
process.on("exit", () => {
  killAll();
  build.remove();
  fs.rmSync(logDir, { recursive: true, force: true });
});

interface Fired {
  /** Responses received. */
  answered: number;
  /** Connection errors and timeouts (autocannon reconnects and goes on). */
  errors: number;
}

/**
 * Sends `amount` requests of `scenarios` (round-robin). A non-2xx answer fails the run (the
 * targets would not be doing the same work); connection errors, which the server's ~50x slowdown
 * under valgrind causes now and then, are returned for the caller to judge.
 */
function fire(origin: string, scenarios: readonly Scenario[], amount: number): Promise<Fired> {
  return new Promise((resolve, reject) => {
    autocannon({
      url: origin, connections: 10, pipelining: 10, amount, timeout: 120, idReplacement: needsIds(scenarios),
      requests: scenarios.map((s) => ({
        method: s.method, path: s.path,
        ...(s.body === undefined ? {} : { body: s.body }),
        headers: { ...(s.body === undefined ? {} : { "content-type": "application/json" }), ...s.headers },
      })),
    }, (error, result) => {
      if (error) reject(error);
      else if (result.non2xx > 0) reject(new Error(`${result.non2xx} non-2xx answers`));
      else resolve({ answered: result.requests.total, errors: result.errors });
    });
  });
}

// A counted window with connection errors is thrown away and run again, this many times at most.
const COUNTED_ATTEMPTS = 3;

/** Callgrind's own summary of the instructions counted so far (it resets on each dump). */
function dumpInstructions(pid: number, outFile: string, keepAs?: string): number {
  execFileSync("callgrind_control", ["--dump", String(pid)], { stdio: "ignore" });
  const dumps = fs.readdirSync(path.dirname(outFile)).filter((f) => f.startsWith(path.basename(outFile) + "."));
  const latest = dumps.map((f) => path.join(path.dirname(outFile), f)).toSorted((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs)[0];
  const summary = latest && /^summary:\s*(\d+)/m.exec(fs.readFileSync(latest, "utf8"));
  if (!summary) throw new Error(`no callgrind summary in ${latest ?? "(no dump)"}`);
  if (keepAs !== undefined) fs.copyFileSync(latest, keepAs);
  for (const f of dumps) fs.rmSync(path.join(path.dirname(outFile), f), { force: true });
  return Number(summary[1]);
}

/**
 * Instructions per answered request over one counted window. A window with connection errors is
 * discarded (its requests may have been half-handled) and run again; after COUNTED_ATTEMPTS the
 * last one is kept, divided by the answers it got, with a warning.
 */
async function countedWindow(pid: number, outFile: string, run: () => Promise<Fired>, what: string, window?: number): Promise<number> {
  const keepAs = profileDir === undefined ? undefined : path.join(profileDir, `callgrind.${what.replace(/[^A-Za-z0-9]+/g, "-")}${window === undefined ? "" : `.w${window}`}.out`);
  for (let attempt = 1; ; attempt++) {
    const fired = await run();
    const instructions = dumpInstructions(pid, outFile, keepAs);
    if (fired.errors === 0 || attempt === COUNTED_ATTEMPTS) {
      if (fired.errors > 0) console.warn(`  warning: ${what}: ${fired.errors} connection errors in every one of ${attempt} attempts; kept the last, per answered request`);
      return instructions / fired.answered;
    }
    console.warn(`  ${what}: ${fired.errors} connection errors in the counted window, run again (${attempt}/${COUNTED_ATTEMPTS})`);
  }
}

/** One scenario's windows, per request: their median (what the tables compare) and all of them. */
interface Counted {
  median: number;
  windows: number[];
}

async function measure(target: string): Promise<Map<string, Counted>> {
  const port = await freePort();
  const outFile = path.join(logDir, `callgrind-${target}.out`);
  const child = spawn("valgrind", ["--tool=callgrind", "--instr-atstart=no", ...cacheArgs, `--callgrind-out-file=${outFile}`, process.execPath, build.entry(target)], {
    cwd: build.dir, stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, PORT: String(port), NODE_ENV: "production", BENCH_LOG_DIR: logDir },
  });
  track(child);
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${target} did not start under valgrind within 120 s`)), 120_000);
    child.stdout.on("data", (chunk: Buffer) => {
      if (chunk.toString().includes("READY")) {
        clearTimeout(timer);
        resolve();
      }
    });
    // valgrind says on stderr what it refused (a cache geometry given with --ll, say).
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4_096)));
    child.once("exit", (code) => reject(new Error(`${target} exited with ${code} before READY\n--- its stderr (tail) ---\n${stderr.trim() || "(none)"}`)));
  });
  const origin = `http://127.0.0.1:${port}`;
  const pid = child.pid!;
  // Uncounted: a connection error here only costs a few warm-up requests.
  await fire(origin, WARMUP, warmup);
  execFileSync("callgrind_control", ["--instr=on", String(pid)], { stdio: "ignore" });
  const perRequest = new Map<string, Counted>();
  for (const scenario of SCENARIOS) {
    const counted: number[] = [];
    for (let window = 1; window <= windows; window++) {
      // A short run of this scenario alone, then a dump that discards it: the counted window starts
      // in a steady state (no garbage or half-optimised code left over from the previous scenario).
      await fire(origin, [scenario], Math.max(1000, Math.round(requests / 4)));
      if (settleMs > 0) await new Promise((resolve) => setTimeout(resolve, settleMs));
      dumpInstructions(pid, outFile);
      counted.push(await countedWindow(pid, outFile, () => fire(origin, [scenario], requests), `${target} ${scenario.name}`, windows > 1 ? window : undefined));
    }
    perRequest.set(scenario.name, { median: median(counted)!, windows: counted });
  }
  child.kill("SIGKILL");
  return perRequest;
}

console.log(`instructions per request under callgrind: ${requests} requests per scenario after ${warmup} warm-up requests, ${values.origin === undefined ? "no Origin header" : `Origin: ${values.origin} on every request (CORS active)`}, ${acceptEncoding === undefined ? "no Accept-Encoding" : `Accept-Encoding: ${acceptEncoding}`}${settleMs > 0 ? `, ${settleMs / 1000} s settle before each counted window` : ""}${windows > 1 ? `, the median of ${windows} counted windows per scenario (each window's count in brackets)` : ""}, node ${process.version}`);
const results = new Map<string, Map<string, Counted>>();
for (const target of targets) {
  const started = Date.now();
  results.set(target, await measure(target));
  const shown = (counted: Counted) => `${Math.round(counted.median)}${windows > 1 ? ` (${counted.windows.map(Math.round).join(", ")})` : ""}`;
  console.log(`  ${target.padEnd(15)} ${SCENARIOS.map((s) => `${s.name} ${shown(results.get(target)!.get(s.name)!)}`).join(" | ")}  (${((Date.now() - started) / 1000).toFixed(0)} s)`);
}
const h3 = results.get("h3");
console.log(`\n| target | ${SCENARIOS.map((s) => `${s.name} instr/req`).join(" | ")} |${h3 ? ` ${SCENARIOS.map((s) => `${s.name} h3 ÷ target`).join(" | ")} |` : ""}`);
console.log(`| --- | ${SCENARIOS.map(() => "---").join(" | ")} |${h3 ? ` ${SCENARIOS.map(() => "---").join(" | ")} |` : ""}`);
for (const [target, row] of results) {
  const counts = SCENARIOS.map((s) => Math.round(row.get(s.name)!.median).toLocaleString("en-US"));
  const ratios = h3 ? SCENARIOS.map((s) => (h3.get(s.name)!.median / row.get(s.name)!.median).toFixed(2)) : [];
  console.log(`| ${target} | ${counts.join(" | ")} |${h3 ? ` ${ratios.join(" | ")} |` : ""}`);
}
if (h3) console.log("\nh3 ÷ target: above 1 means fewer instructions per request than bare h3 (the same direction as the req/CPU-s ratio).");
