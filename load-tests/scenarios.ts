// Load-test scenarios, each ending in one `VERDICT <name>: PASS|FAIL — …` line; exits 1 if any fails.
//   node --import tsx load-tests/scenarios.ts [--only sigterm,sighup] [--seconds 4]     (make scenarios)
// Real processes and sockets on 127.0.0.1 only; every child is killed when this script ends.
import * as os from "node:os";
import * as path from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { killAll } from "./lib/children.js";
import { LoadClient } from "./lib/load-client.js";
import { choosePinning } from "./lib/machine.js";
import { createContext, verdict, type Scenario, type Verdict } from "./scenarios/common.js";
import { malformed } from "./scenarios/malformed.js";
import { metricsScrapeScenario } from "./scenarios/metrics-scrape.js";
import { randomPaths } from "./scenarios/random-paths.js";
import { loadShed } from "./scenarios/load-shed.js";
import { reloadBurst } from "./scenarios/reload-burst.js";
import { sighup } from "./scenarios/sighup.js";
import { sigkillWorker } from "./scenarios/sigkill-worker.js";
import { sigterm } from "./scenarios/sigterm.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const SCENARIOS: Record<string, Scenario> = {
  sigterm,
  sighup,
  "reload-burst": reloadBurst,
  "load-shed": loadShed,
  "sigkill-worker": sigkillWorker,
  "metrics-scrape": metricsScrapeScenario,
  "random-paths": randomPaths,
  malformed,
};
// A scenario that hangs is cut off here and counts as FAIL; every wait inside one is bounded too.
const SCENARIO_TIMEOUT_MS = 180_000;

const USAGE = `usage: node --import tsx load-tests/scenarios.ts [--only name,name] [--seconds N]
  --only      subset of: ${Object.keys(SCENARIOS).join(", ")} (default: all, in this order)
  --seconds   length of each load phase in seconds (default 4)`;

function parse(): { names: string[]; seconds: number } | null {
  const { values } = parseArgs({
    strict: true,
    options: { only: { type: "string" }, seconds: { type: "string" }, help: { type: "boolean", short: "h", default: false } },
  });
  if (values.help) return null;
  const names = values.only === undefined ? Object.keys(SCENARIOS) : values.only.split(",").map((n) => n.trim()).filter(Boolean);
  const unknown = names.filter((n) => !(n in SCENARIOS));
  if (unknown.length > 0 || names.length === 0) throw new Error(`unknown scenario(s) ${unknown.join(", ") || "(none given)"}`);
  const seconds = Number(values.seconds ?? "4");
  if (!Number.isFinite(seconds) || seconds < 1 || seconds > 60) throw new Error(`--seconds must be between 1 and 60, got ${values.seconds}`);
  return { names: [...new Set(names)], seconds };
}

process.on("exit", killAll);
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    console.error(`\n${signal}: stopping every server and the load generator`);
    process.exit(130);
  });
}

let config: ReturnType<typeof parse>;
try {
  config = parse();
} catch (error) {
  console.error(`${(error as Error).message}\n${USAGE}`);
  process.exit(2);
}
if (config === null) {
  console.log(USAGE);
  process.exit(0);
}

const started = performance.now();
const pinning = choosePinning();
const base = createContext(ROOT, pinning, config.seconds);
console.log(`machine: ${os.cpus().length} x ${os.cpus()[0]?.model ?? "?"}, node ${process.version}, load average ${os.loadavg()[0]?.toFixed(2)}; ${pinning.note}`);

const verdicts: Verdict[] = [];
for (const name of config.names) {
  const scenario = SCENARIOS[name];
  if (!scenario) continue;
  console.log(`\n## ${name}\n`);
  const t0 = performance.now();
  let timer: NodeJS.Timeout | undefined;
  // A load generator per scenario, so that killing whatever a failed scenario left running kills it too.
  const client = new LoadClient(pinning.load, ROOT);
  try {
    verdicts.push(await Promise.race([
      scenario({ ...base, client }),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`did not finish within ${SCENARIO_TIMEOUT_MS / 1000} s`)), SCENARIO_TIMEOUT_MS);
      }),
    ]));
  } catch (error) {
    console.error(error);
    verdicts.push(verdict(name, false, `the scenario itself failed: ${(error as Error).message.split("\n")[0]}`));
  } finally {
    clearTimeout(timer);
    client.close();
    // Whatever a scenario left running (it failed half-way) must not disturb the next one.
    killAll();
  }
  console.log(`(${name}: ${((performance.now() - t0) / 1000).toFixed(1)} s)`);
}

const failed = verdicts.filter((v) => !v.pass);
console.log(`\n## Summary (${((performance.now() - started) / 1000).toFixed(0)} s, load average ${os.loadavg()[0]?.toFixed(2)})\n`);
for (const v of verdicts) console.log(v.line);
console.log(`\n${verdicts.length - failed.length}/${verdicts.length} PASS${failed.length > 0 ? `; FAIL: ${failed.map((v) => v.name).join(", ")}` : ""}`);
process.exit(failed.length > 0 ? 1 : 0);
