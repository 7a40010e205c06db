// keelson vs its peers, side by side in one run: `node --import tsx load-tests/bench.ts peers --help`.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { BUNDLED_TARGETS, estimateSec, parseConfig, scenariosFor, USAGE, type Config } from "../lib/args.js";
import { builtServers, type Build } from "../lib/build.js";
import { killAllChildren as killAll } from "../../harness/child.js";
import { LoadClient } from "../lib/load-client.js";
import { choosePinning, describeMachine, type Pinning } from "../lib/machine.js";
import { formatMachine, formatRatios, formatRound, formatTables, writeResults } from "../lib/report.js";
import { coldStart, startServer, type LaunchSpec } from "../lib/server.js";
import { measureIdleRss, runSession } from "../lib/session.js";
import { fillRatios, median, pairRatio, roundOrder, SAME_SPEED, summarise, type PairRatio } from "../lib/stats.js";
import type { RunRecord, TargetInfo } from "../lib/types.js";
import { runSideBySide } from "../lib/side-by-side.js";
import { checkCounts, describeCounts } from "../lib/work.js";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "../..");
// BENCH_RESULTS_DIR: elsewhere than the committed results (the tooling test's short run).
const RESULTS_DIR = process.env.BENCH_RESULTS_DIR || path.join(ROOT, "load-tests", "results");

const wallStart = performance.now();
const cleanups: Array<() => void> = [];
function cleanup(): void {
  killAll();
  for (const fn of cleanups.splice(0)) {
    try {
      fn();
    } catch {
      // Best effort: cleanup must not mask the original failure.
    }
  }
}
process.on("exit", cleanup);
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    console.error(`\n${signal}: stopping all servers and the load generator`);
    cleanup();
    process.exit(130);
  });
}

function loud(message: string): void {
  const bar = "!".repeat(78);
  console.error(`\n${bar}\n${message}\n${bar}\n`);
}

function emptyDir(dir: string): void {
  for (const name of fs.readdirSync(dir)) fs.rmSync(path.join(dir, name), { force: true, recursive: true });
}

function launchSpec(target: string, build: Build | null, pinning: Pinning, logDir: string, bundled = false): LaunchSpec {
  const args = build
    ? [bundled ? build.bundledEntry(target) : build.entry(target)]
    : ["--import", "tsx", path.join(ROOT, "load-tests", "servers", `${target}.ts`)];
  return { target, args, pinCpu: pinning.server, logDir, cwd: ROOT };
}

/**
 * Interleaved cold starts; the first pass also decides which targets can run at all. With
 * `bundled`, the BUNDLED_TARGETS also start from one bundled file, interleaved with the rest.
 */
async function measureColdStarts(
  config: Config, spec: (t: string) => LaunchSpec, infos: Map<string, TargetInfo>, bundled: ((t: string) => LaunchSpec) | null,
): Promise<void> {
  for (let i = 0; i < config.coldStarts; i++) {
    for (const target of config.targets) {
      const info = infos.get(target);
      if (!info || info.skipped) continue;
      if (bundled && BUNDLED_TARGETS.includes(target)) {
        try {
          info.bundledColdStartsMs.push(await coldStart(bundled(target)));
          const rss = await measureIdleRss(bundled(target));
          if (rss !== null) info.bundledRssSamplesMb.push(rss);
        } catch (error) {
          const why = error instanceof Error ? error.message.split("\n")[0] : String(error);
          loud(`bundled cold start of "${target}" failed: ${why}`);
          if (!info.warnings.includes("bundled cold start failed")) info.warnings.push("bundled cold start failed");
        }
      }
      try {
        info.coldStartsMs.push(await coldStart(spec(target)));
      } catch (error) {
        const why = error instanceof Error ? error.message : String(error);
        if (i === 0) {
          info.skipped = why;
          loud(`SKIPPING TARGET "${target}": its server does not start.\n${why}`);
        } else {
          info.warnings.push(`cold start ${i + 1} failed`);
        }
      }
    }
  }
  for (const info of infos.values()) {
    info.coldStartMs = median(info.coldStartsMs);
    info.bundledColdStartMs = info.bundledColdStartsMs.length > 0 ? median(info.bundledColdStartsMs) : null;
    info.bundledIdleRssMb = info.bundledRssSamplesMb.length > 0 ? median(info.bundledRssSamplesMb) : null;
  }
}

/** A target started per round, all its scenarios measured, then stopped: the recorded method until side by side. */
async function runSequential(
  config: Config, runnable: readonly string[], infos: Map<string, TargetInfo>, spec: (t: string) => LaunchSpec, loader: LoadClient, logDir: string,
): Promise<RunRecord[]> {
  const records: RunRecord[] = [];
  for (let round = 1; round <= config.rounds; round++) {
    const order = roundOrder(runnable, round, config.seed);
    console.log(`\nround ${round}/${config.rounds}: ${order.join(" ")}`);
    for (const target of order) {
      const info = infos.get(target);
      if (!info) continue;
      let server;
      try {
        server = await startServer(spec(target));
      } catch (error) {
        loud(`round ${round}: "${target}" failed to start, no data this round.\n${error instanceof Error ? error.message : String(error)}`);
        info.warnings.push(`round ${round}: failed to start`);
        continue;
      }
      try {
        const session = await runSession(server, loader, config, target, round, logDir);
        const unequal = checkCounts(target, session.counts, session.responses);
        if (unequal !== null) {
          loud(`round ${round}: ${unequal}: this round's rows are left out`);
          info.warnings.push(`round ${round}: unequal work`);
          continue;
        }
        const counted = describeCounts(session.counts, session.responses);
        if (counted !== null) info.workCounts.push(counted);
        records.push(...session.records);
        if (session.idleRssMb !== null) info.rssSamplesMb.push(session.idleRssMb);
        for (const warning of session.warnings) {
          if (!info.warnings.includes(warning)) {
            info.warnings.push(warning);
            loud(`"${target}" answers differently from the others: ${warning}`);
          }
        }
        console.log(formatRound(target, session.records));
      } catch (error) {
        loud(`round ${round}: "${target}" run failed: ${error instanceof Error ? error.message : String(error)}`);
        info.warnings.push(`round ${round}: run failed`);
      } finally {
        await server.stop();
        emptyDir(logDir);
      }
    }
  }
  return records;
}

async function main(): Promise<void> {
  const config = parseConfig(process.argv.slice(2));
  if (!config) {
    console.log(USAGE);
    return;
  }
  const pinning = choosePinning();
  const machine = describeMachine(pinning);
  console.log(formatMachine(machine));
  if (!machine.pinned) loud(pinning.note);
  if (machine.loadAvgBefore > 0.5) {
    loud(`the machine is busy (load average ${machine.loadAvgBefore.toFixed(2)}): other processes will skew the numbers`);
  }
  console.log(
    `targets: ${config.targets.join(", ")}\nrounds ${config.rounds}, warm-up ${config.warmupSec} s per server start, ` +
      `${config.durationSec} s per scenario, ${config.connections} connections x ${config.pipelining} pipelined; ` +
      `${config.origin === undefined ? "no Origin header" : `Origin: ${config.origin} on every request (CORS active)`}; ` +
      `${config.sideBySide ? "side by side (every target up at once, one window per scenario per target each round)" : "one target at a time, started per round"}; estimated ${Math.round(estimateSec(config))} s\n`,
  );

  const build = config.viaTsx ? null : builtServers(ROOT);
  if (build) {
    cleanups.push(() => build.remove());
  }
  const logDir = fs.mkdtempSync(path.join(os.tmpdir(), "keelson-bench-logs-"));
  cleanups.push(() => fs.rmSync(logDir, { recursive: true, force: true }));
  const spec = (target: string): LaunchSpec => launchSpec(target, build, pinning, logDir);

  const infos = new Map<string, TargetInfo>(
    config.targets.map((target) => [
      target,
      {
        target, idleRssMb: null, coldStartMs: null, coldStartsMs: [], bundledColdStartMs: null, bundledColdStartsMs: [],
        bundledIdleRssMb: null, bundledRssSamplesMb: [],
        rssSamplesMb: [], skipped: null, warnings: [], workCounts: [],
      },
    ]),
  );
  console.log(`cold starts (${config.coldStarts} per target, interleaved)...`);
  const bundledSpec = build ? (target: string): LaunchSpec => launchSpec(target, build, pinning, logDir, true) : null;
  await measureColdStarts(config, spec, infos, bundledSpec);
  emptyDir(logDir);

  const loader = new LoadClient(pinning.load, ROOT);
  cleanups.push(() => loader.close());
  const runnable = config.targets.filter((t) => !infos.get(t)?.skipped);
  const records = config.sideBySide
    ? await runSideBySide(config, runnable, infos, (target, dir) => launchSpec(target, build, pinning, dir), loader, logDir, loud, pinning.server, ROOT)
    : await runSequential(config, runnable, infos, spec, loader, logDir);
  loader.close();

  fillRatios(records);
  for (const info of infos.values()) info.idleRssMb = median(info.rssSamplesMb);
  const scenarioNames = scenariosFor(config).map((s) => s.name);
  const summary = summarise(records, config.targets, scenarioNames);
  const totalWallSec = (performance.now() - wallStart) / 1_000;
  machine.loadAvgAfter = os.loadavg()[0] ?? null;
  const targets = [...infos.values()];
  console.log(`\n${formatMachine(machine)}\nmedians over ${config.rounds} round(s); "vs h3" = req/CPU-s divided by bare h3's in the same round\n`);
  console.log(formatTables(summary, targets));
  // keelson ÷ every other target; over the steady rounds too when the run read the machine's speed.
  const ofKeelson = (steady: boolean): PairRatio[] =>
    config.targets.includes("keelson") && (!steady || config.sideBySide)
      ? config.targets.filter((t) => t !== "keelson").flatMap((other) => scenarioNames.map((s) => pairRatio(records, "keelson", other, s, steady)))
      : [];
  const keelsonRatios = ofKeelson(false);
  const keelsonSteadyRatios = ofKeelson(true);
  if (keelsonRatios.length > 0) {
    console.log(`\nkeelson's req/CPU-s ÷ each target's, per round: median (range) [ratio of the medians]\n${formatRatios(keelsonRatios, scenarioNames)}`);
  }
  if (keelsonSteadyRatios.length > 0) {
    console.log(
      "\nthe same over the rounds whose two windows ran at one machine speed (the speed probe's readings before and after " +
        `each window within ${SAME_SPEED * 100} % of each other and of the other window's): median (range, rounds kept) [ratio of the medians]\n` +
        formatRatios(keelsonSteadyRatios, scenarioNames, true),
    );
  }
  const files = writeResults(
    RESULTS_DIR,
    { date: new Date().toISOString(), totalWallSec, machine, config, targets, summary, runs: records, keelsonRatios, keelsonSteadyRatios },
    scenarioNames,
  );
  console.log(`\nwrote ${files.map((f) => path.relative(ROOT, f)).join(", ")}`);
  console.log(`total wall time: ${totalWallSec.toFixed(1)} s (${(totalWallSec / 60).toFixed(1)} min)`);
}

main().then(
  () => {
    cleanup();
    process.exit(0);
  },
  (error: unknown) => {
    console.error(error instanceof Error ? (error.stack ?? error.message) : error);
    cleanup();
    process.exit(1);
  },
);
