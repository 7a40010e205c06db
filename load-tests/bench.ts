// The one launcher of the benchmarks: `node --import tsx load-tests/bench.ts [mode] [flags]`.
// Every mode runs the servers from dist/ (make build-bench) and shares lib/; `make bench` runs
// `peers`, `make bench MODE=supervisor` another mode. Load scenarios with verdicts are a vitest
// project instead (`make scenarios`).
const MODES: Record<string, { what: string; module: string }> = {
  peers: { what: "keelson against h3, fastify, hono and node:http: req/CPU-s, latency, RSS, cold start", module: "./modes/peers.js" },
  instructions: { what: "instructions per request under valgrind (callgrind), noise-free", module: "./modes/instructions.js" },
  supervisor: { what: "1 vs 2 workers, worker replacement and rolling reload times, idle RSS", module: "./modes/supervisor.js" },
  startup: { what: "process start to serving: the example under the CLI with 1 and 4 workers, compile cache empty/warm, vs bare h3", module: "./modes/startup.js" },
  shutdown: { what: "SIGTERM to exit, idle and under load", module: "./modes/shutdown.js" },
  tracing: { what: "the tracer's and the collector's cost per request, in-process (run node with --expose-gc)", module: "./modes/tracing.js" },
};

const [first] = process.argv.slice(2);
const mode = first === undefined || first.startsWith("-") ? "peers" : first;
const chosen = MODES[mode];
if (chosen === undefined) {
  console.error(`unknown mode "${mode}". Modes:`);
  for (const [name, { what }] of Object.entries(MODES)) console.error(`  ${name.padEnd(13)} ${what}`);
  process.exit(2);
}
// The mode reads its own flags from process.argv, as if it had been started directly.
if (mode === first) process.argv.splice(2, 1);
await import(chosen.module);
