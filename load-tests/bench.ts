// The one launcher of the benchmarks: `node --import tsx load-tests/bench.ts [mode] [flags]`.
// Every mode runs the servers from dist/ (make build-bench) and shares lib/; `make bench` runs
// `peers`, `make bench MODE=supervisor` another mode. Load scenarios with verdicts are a vitest
// project instead (`make scenarios`).
import { ALL_TARGETS, PEERS_OPTIONS, VARIANT_TARGETS } from "./lib/args.js";

const TARGETS = `subset of: ${ALL_TARGETS.join(",")} (default all)`;
const MODES: Record<string, { what: string; module: string; options: readonly string[] }> = {
  peers: {
    what: "keelson against h3, fastify, hono and node:http: req/CPU-s, latency, RSS, cold start",
    module: "./modes/peers.js",
    options: PEERS_OPTIONS,
  },
  instructions: {
    what: "instructions per request under valgrind (callgrind), noise-free",
    module: "./modes/instructions.js",
    options: [
      `--targets a,b,...  ${TARGETS}; variants only when named: ${VARIANT_TARGETS.join(",")}`,
      "--requests N       counted requests per scenario (default 8000)",
      "--warmup N         uncounted warm-up requests, all routes mixed (default 20000)",
      "--origin URL       send Origin: URL on every request (browser traffic, CORS active)",
      "--profile DIR      keep each counted window's callgrind file in DIR (for callgrind_annotate)",
    ],
  },
  supervisor: {
    what: "1 vs 2 workers, worker replacement and rolling reload times, idle RSS",
    module: "./modes/supervisor.js",
    options: [
      "--duration S       seconds of load per measurement (default 10)",
      "--connections N    autocannon connections (default 50)",
      "--runs N           runs per measurement (default 3)",
      "--root DIR         a directory with its own dist/ and node_modules/ (default this checkout)",
    ],
  },
  cluster: {
    what: "multi-core serving: bare h3, bare node:cluster (round-robin, reusePort), PM2, keelson (one process, both balancers); req/CPU-s, keep-alive and a connection per request",
    module: "./modes/cluster.js",
    options: [
      "--rounds N         interleaved rounds (default 6, or ROUNDS)",
      "--duration S       seconds of load per measurement (default 10)",
      "--warmup S         uncounted seconds of each load first (default 2)",
      "--connections N    concurrent connections in both loads (default 50)",
      "--only 2,5         measure only these rows (1-based) besides bare h3 (row 1, the baseline)",
    ],
  },
  startup: {
    what: "process start to serving: the example under the CLI with 1 and 4 workers, compile cache empty/warm, vs bare h3",
    module: "./modes/startup.js",
    options: [
      "--runs N           interleaved rounds (default 10)",
      "--workers a,b      worker counts to start under the CLI (default 1,4)",
      "--root DIR         a directory with its own dist/ and node_modules/ (default this checkout)",
    ],
  },
  shutdown: {
    what: "SIGTERM to exit, idle and under load",
    module: "./modes/shutdown.js",
    options: ["--runs N           runs per case (default 5)", "--connections N    autocannon connections (default 50)"],
  },
  "sqlite-lock": {
    what: "waiting for another process's SQLite lock: node:sqlite's busy timeout vs retries on timers vs a worker thread",
    module: "./modes/sqlite-lock.js",
    options: ["--queries N        queries per measurement (default 5000)", "--rounds N         interleaved rounds (default 5)", "--hold MS          how long the second process holds the lock (default 1000)"],
  },
  uploads: {
    what: "peak RSS with N concurrent multipart uploads: keelson's form routes (busboy, spooled to disk) vs Request.formData()",
    module: "./modes/uploads.js",
    options: ["--uploads N        concurrent uploads (default 20)", "--size-mb N        size of each (default 50)", "--rounds N         interleaved rounds (default 3)"],
  },
  tracing: {
    what: "the tracer's and the collector's cost per request, in-process (run node with --expose-gc)",
    module: "./modes/tracing.js",
    options: ["--requests N       requests per variant and round (default 5000)", "--rounds N         interleaved rounds (default 15)"],
  },
  "request-id": {
    what: "ns per generated request id: keelson's generator against randomUUID() and others, in a tight loop",
    module: "./modes/request-id.js",
    options: ["--ids N            ids per candidate and round (default 1000000)", "--rounds N         interleaved rounds (default 9)"],
  },
};

function usage(only?: string): string {
  const modes = Object.entries(MODES).filter(([name]) => only === undefined || name === only);
  const lines = [`Usage: node --import tsx load-tests/bench.ts [mode] [flags]   (mode defaults to peers)`, ""];
  for (const [name, { what, options }] of modes) {
    lines.push(`${name}: ${what}`, ...options.map((option) => `  ${option}`), "");
  }
  return lines.join("\n");
}

const args = process.argv.slice(2);
const [first] = args;
const wantsHelp = args.includes("--help") || args.includes("-h") || first === "help";
if (wantsHelp && (first === undefined || first.startsWith("-") || first === "help")) {
  console.log(usage());
  process.exit(0);
}
const mode = first === undefined || first.startsWith("-") ? "peers" : first;
const chosen = MODES[mode];
if (chosen === undefined) {
  console.error(`unknown mode "${mode}".\n\n${usage()}`);
  process.exit(2);
}
if (wantsHelp) {
  console.log(usage(mode));
  process.exit(0);
}
// The mode reads its own flags from process.argv, as if it had been started directly.
if (mode === first) process.argv.splice(2, 1);
await import(chosen.module);
