// Load scenarios: real processes on 127.0.0.1 under autocannon, each judged by one verdict line.
// `make scenarios` runs them all; ONLY=sigterm,sighup picks some, LOAD_SECONDS=N sets each load phase.
// They are vitest's `scenarios` project, not part of `make test`: they measure more than they check.
import * as os from "node:os";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { killAllChildren } from "../harness/child.js";
import { LoadClient } from "./lib/load-client.js";
import { choosePinning } from "./lib/machine.js";
import { createContext, type Scenario } from "./scenarios/common.js";
import { malformed } from "./scenarios/malformed.js";
import { metricsScrapeScenario } from "./scenarios/metrics-scrape.js";
import { loadShed } from "./scenarios/load-shed.js";
import { randomPaths } from "./scenarios/random-paths.js";
import { reloadBurst } from "./scenarios/reload-burst.js";
import { replayGarbage } from "./scenarios/replay-garbage.js";
import { sighup } from "./scenarios/sighup.js";
import { sigkillWorker } from "./scenarios/sigkill-worker.js";
import { sigterm } from "./scenarios/sigterm.js";
import { streams } from "./scenarios/streams.js";
import { jwksJunk } from "./scenarios/jwks-junk.js";
import { redisPaused } from "./scenarios/redis-paused.js";
import { uploadLeftovers } from "./scenarios/upload-leftovers.js";
import { wsFlood } from "./scenarios/ws-flood.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const SCENARIOS: Record<string, Scenario> = {
  sigterm,
  sighup,
  "reload-burst": reloadBurst,
  "load-shed": loadShed,
  "sigkill-worker": sigkillWorker,
  "metrics-scrape": metricsScrapeScenario,
  "random-paths": randomPaths,
  malformed,
  streams,
  "replay-garbage": replayGarbage,
  "ws-flood": wsFlood,
  "upload-leftovers": uploadLeftovers,
  "jwks-junk": jwksJunk,
  "redis-paused": redisPaused,
};
// A scenario that hangs is cut off here and fails; every wait inside one is bounded too.
const SCENARIO_TIMEOUT_MS = 180_000;

function selected(): string[] {
  const only = process.env.ONLY ?? "";
  const names = only === "" ? Object.keys(SCENARIOS) : only.split(",").map((n) => n.trim()).filter(Boolean);
  const unknown = names.filter((n) => !(n in SCENARIOS));
  if (unknown.length > 0) throw new Error(`ONLY names unknown scenario(s) ${unknown.join(", ")}; known: ${Object.keys(SCENARIOS).join(", ")}`);
  return names;
}

function loadSeconds(): number {
  const seconds = Number(process.env.LOAD_SECONDS || "4");
  if (!Number.isFinite(seconds) || seconds < 1 || seconds > 60) throw new Error(`LOAD_SECONDS must be between 1 and 60, got ${process.env.LOAD_SECONDS}`);
  return seconds;
}

const pinning = choosePinning();
const base = createContext(ROOT, pinning, loadSeconds());
console.log(`machine: ${os.cpus().length} x ${os.cpus()[0]?.model ?? "?"}, node ${process.version}, load average ${os.loadavg()[0]?.toFixed(2)}; ${pinning.note}`);
afterAll(killAllChildren);

describe("load scenarios", () => {
  for (const name of selected()) {
    it(name, async () => {
      // A load generator per scenario, so that killing whatever a failed scenario left running kills it too.
      const client = new LoadClient(pinning.load, ROOT);
      try {
        const verdict = await (SCENARIOS[name] as Scenario)({ ...base, client });
        expect(verdict.pass, verdict.line).toBe(true);
      } finally {
        client.close();
        // Whatever a scenario left running (it failed half-way) must not disturb the next one.
        killAllChildren();
      }
    }, SCENARIO_TIMEOUT_MS);
  }
});
