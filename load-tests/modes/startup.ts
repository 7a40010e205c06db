// Start-up benchmark: process start to serving, for the example as `make run` starts it (the built CLI:
// node dist/cli/cli.js start dist/examples/bookstore/main.js --workers N), as the image starts
// it (the bundle of make build: node dist/bundle/keelson.mjs start dist/bundle/main.mjs) and as one
// process without the supervisor, against bare h3 (alone, and under a bare node:cluster primary) in
// the same interleaved rounds. Needs make build-bench (dist/ with the bench servers and dist/bundle).
//   node --import tsx load-tests/bench.ts startup [--runs 10] [--workers 1,4] [--root DIR]
// "empty compile cache": a fresh NODE_COMPILE_CACHE per start (a container's first start without a
// shipped cache); "warm": a filled one (every later start, and an image that ships its cache).
// Prints a Markdown table.
import * as fs from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { killAllChildren } from "../../harness/child.js";
import { builtServers } from "../lib/build.js";
import { startCluster } from "../lib/cluster.js";
import { request } from "../lib/http.js";
import { coldStart, type LaunchSpec } from "../lib/server.js";
import { median } from "../lib/stats.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "10" },
    workers: { type: "string", default: "1,4" },
    root: { type: "string", default: ROOT },
  },
});
const RUNS = Number(values.runs);
const WORKERS = values.workers.split(",").map(Number);
if (!(RUNS > 0) || WORKERS.some((n) => !Number.isInteger(n) || n < 1)) throw new Error("--runs and --workers take positive integers");
process.on("exit", killAllChildren);

const build = builtServers(values.root);
const scratch = fs.mkdtempSync(path.join(tmpdir(), "keelson-bench-startup-"));
const warmCache = path.join(scratch, "warm-cache");
let emptyCaches = 0;
const emptyCache = (): string => path.join(scratch, `empty-cache-${emptyCaches++}`);

/** The CLI and the example's entry as `make run` starts them, and as the image does (make build's bundle). */
const UNBUNDLED = { cli: "dist/cli/cli.js", entry: "dist/examples/bookstore/main.js" };
const BUNDLED = { cli: "dist/bundle/keelson.mjs", entry: "dist/bundle/main.mjs" };
type Program = typeof UNBUNDLED;
const warm = (): string => warmCache;

/** One server process (no supervisor): spawn → first 200 on `probe`. */
const direct = (entry: string, probe: string, env: Record<string, string>) => (): Promise<number> => {
  const spec: LaunchSpec = { target: entry, args: [entry], pinCpu: null, logDir: scratch, cwd: values.root, env };
  return coldStart(spec, 30_000, probe);
};

/**
 * The CLI with `workers` workers: spawn → the primary's "N worker(s) ready" line (every worker
 * listening; the harness reads the log every 20 ms) → a 200 on GET /health.
 */
const supervised = (workers: number, cache: () => string, program: Program = UNBUNDLED) => async (): Promise<number> => {
  const started = performance.now();
  const cluster = await startCluster({ cwd: values.root, ...program, workers, pinCpu: null, env: { NODE_COMPILE_CACHE: cache() } });
  try {
    const res = await request(`${cluster.origin}/health`, { timeoutMs: 5_000 });
    if (res.status !== 200) throw new Error(`GET /health answered ${res.status} after the ready line`);
    return performance.now() - started;
  } finally {
    await cluster.stop();
  }
};

/**
 * A CLI start probed like the one-process rows (spawn → the first 200 on /health, polled every 5 ms):
 * the cold start as a client or a readiness probe sees it.
 */
const probedCli = ({ cli, entry }: Program, workers: number, cache: () => string) => (): Promise<number> => {
  const spec: LaunchSpec = {
    target: entry, args: [cli, "start", entry, "--workers", String(workers)], pinCpu: null, logDir: scratch, cwd: values.root,
    env: { NODE_COMPILE_CACHE: cache(), KEELSON_METRICS_PORT: "0" },
  };
  return coldStart(spec, 30_000, "/health");
};

if (!fs.existsSync(path.join(values.root, BUNDLED.cli))) throw new Error(`${BUNDLED.cli} is missing under ${values.root}: make build writes it`);

/**
 * The plain path a user starts with: an App with Prometheus and the tracer adapter and one route,
 * `node app.js`, importing keelson as a service does (`from "keelson"`: the package's bundled
 * dist/lib), and the same importing tsc's unbundled output (dist/src, what the package shipped before).
 * Written inside the checkout, so that "keelson" resolves to this build (a package's self-reference).
 */
const plainDir = fs.mkdtempSync(path.join(values.root, "dist", "bench-plain-"));
const plainApp = (from: (entry: string) => string): string => `import { App, get } from "${from("")}";
import { createPrometheus } from "${from("metrics")}";
import { createOtelTracer } from "${from("tracing")}";
const app = new App({ serviceName: "plain", env: "production", host: "127.0.0.1", port: Number(process.env.PORT) });
app.use(createPrometheus());
app.setTracer(createOtelTracer());
app.registerController({ routes: () => [get("/hello", () => ({ hello: "world" }))] });
await app.listen();
`;
const PLAIN_PACKAGE = path.join(plainDir, "package.mjs");
const PLAIN_TSC = path.join(plainDir, "tsc-output.mjs");
fs.writeFileSync(PLAIN_PACKAGE, plainApp((entry) => (entry === "" ? "keelson" : `keelson/${entry}`)));
fs.writeFileSync(PLAIN_TSC, plainApp((entry) => `../src/${entry === "" ? "" : `${entry}/`}index.js`));
const variants: Array<{ label: string; run: () => Promise<number>; times: number[] }> = [
  { label: "bare h3 (GET /hello)", run: direct(build.entry("h3"), "/hello", {}), times: [] },
  { label: "bare h3, warm compile cache", run: direct(build.entry("h3"), "/hello", { NODE_COMPILE_CACHE: warm() }), times: [] },
  {
    label: "bare h3 under a bare node:cluster primary (1 worker), warm compile cache",
    run: () => coldStart({
      target: "h3", args: [build.entry("plain-cluster"), build.entry("h3")], pinCpu: null, logDir: scratch, cwd: values.root,
      env: { NODE_COMPILE_CACHE: warm() },
    }, 30_000, "/hello"),
    times: [],
  },
  { label: "App + Prometheus + tracer, one route, `node app.js` from the package (dist/lib)", run: direct(PLAIN_PACKAGE, "/hello", {}), times: [] },
  { label: "the same from tsc's unbundled output (dist/src)", run: direct(PLAIN_TSC, "/hello", {}), times: [] },
  { label: "example, one process, no compile cache", run: direct(UNBUNDLED.entry, "/health", {}), times: [] },
  { label: "example, one process, warm compile cache", run: direct(UNBUNDLED.entry, "/health", { NODE_COMPILE_CACHE: warm() }), times: [] },
  { label: "example bundled, one process, no compile cache", run: direct(BUNDLED.entry, "/health", {}), times: [] },
  { label: "example bundled, one process, warm compile cache", run: direct(BUNDLED.entry, "/health", { NODE_COMPILE_CACHE: warm() }), times: [] },
  { label: "image command (bundled CLI, 1 worker), warm compile cache", run: probedCli(BUNDLED, 1, warm), times: [] },
  { label: "unbundled CLI (1 worker) probed the same way, warm compile cache", run: probedCli(UNBUNDLED, 1, warm), times: [] },
  ...WORKERS.flatMap((n) => [
    { label: `CLI --workers ${n}, empty compile cache`, run: supervised(n, emptyCache), times: [] },
    { label: `CLI --workers ${n}, warm compile cache`, run: supervised(n, warm), times: [] },
    { label: `image command (bundled CLI) --workers ${n}, warm compile cache`, run: supervised(n, warm, BUNDLED), times: [] },
  ]),
];

const load = (): string => loadavg().map((l) => l.toFixed(1)).join(" ");
console.error(`machine: ${cpus().length} × ${cpus()[0]?.model ?? "?"}, Node ${process.version}; ${RUNS} interleaved runs; load average ${load()}`);
// Untimed: one start of each variant that uses the warm cache fills it (workers write it when they exit).
for (const variant of variants.filter((v) => v.label.includes("warm compile cache"))) await variant.run();
for (let run = 0; run < RUNS; run++) {
  for (const variant of run % 2 === 0 ? variants : variants.toReversed()) variant.times.push(await variant.run());
}
fs.rmSync(scratch, { recursive: true, force: true });
fs.rmSync(plainDir, { recursive: true, force: true });
build.remove();

const h3 = median(variants[0]?.times ?? []) ?? 1;
const h3Warm = median(variants[1]?.times ?? []) ?? 1;
console.log(`### Start-up (median of ${RUNS} interleaved runs, Node ${process.version}, load average ${load()} at the end)\n`);
console.log("| started | ready ms (median) | min | × bare h3 | × bare h3, warm cache |\n| --- | --- | --- | --- | --- |");
for (const { label, times } of variants) {
  const mid = median(times) ?? 0;
  console.log(`| ${label} | ${mid.toFixed(0)} | ${Math.min(...times).toFixed(0)} | ${(mid / h3).toFixed(2)} | ${(mid / h3Warm).toFixed(2)} |`);
}
