// Does scraping /metrics move request latency? The supervisor runs 2 workers of
// test/fixtures/metrics-cluster-app.ts; autocannon loads GET /hello in phases that alternate
// between no scraping and a scrape every --interval ms (default 250, 60x Prometheus' default).
// The logic lives in scenarios/metrics-scrape.ts (the `metrics-scrape` scenario of scenarios.ts,
// which adds a verdict); this prints the phase table only.
//
//   node --import tsx load-tests/metrics-scrape.ts [--pairs 4] [--seconds 5] [--interval 250] [--connections 20]
import * as os from "node:os";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { killAllChildren as killAll } from "../test/helpers/child.js";
import { LoadClient } from "./lib/load-client.js";
import { choosePinning } from "./lib/machine.js";
import { measureScrapeImpact, PHASE_HEADERS, phaseRow } from "./scenarios/metrics-scrape.js";

const { values } = parseArgs({ options: {
  pairs: { type: "string", default: "4" }, seconds: { type: "string", default: "5" }, interval: { type: "string", default: "250" },
  connections: { type: "string", default: "20" },
} });
const [pairs, seconds, intervalMs, connections] = [values.pairs, values.seconds, values.interval, values.connections].map(Number) as [number, number, number, number];
if (![pairs, seconds, intervalMs, connections].every((n) => Number.isInteger(n) && n > 0)) {
  console.error("usage: node --import tsx load-tests/metrics-scrape.ts [--pairs N] [--seconds N] [--interval MS] [--connections N]");
  process.exit(2);
}

const ROOT = fileURLToPath(new URL("..", import.meta.url));
process.on("exit", killAll);
const pinning = choosePinning();
const client = new LoadClient(pinning.load, ROOT);
console.log(`machine: ${os.cpus().length} x ${os.cpus()[0]?.model ?? "?"}, node ${process.version}; ${pinning.note}`);
console.log(`| ${PHASE_HEADERS.join(" | ")} |\n| ${PHASE_HEADERS.map(() => "---").join(" | ")} |`);
await measureScrapeImpact({ root: ROOT, pinning, client, pairs, seconds, intervalMs, connections }, (phase) => {
  console.log(`| ${phaseRow(phase, intervalMs).join(" | ")} |`);
});
client.close();
process.exit(0);
