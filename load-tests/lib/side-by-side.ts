// The peers mode side by side (`--side-by-side`): every target started once and kept up for the whole
// run, and each round one window per scenario per target, back to back. The sequential mode starts a
// target per round and measures all its scenarios before the next one starts, so the two windows a
// ratio divides lie a minute or more apart; on a machine whose speed drifts over seconds, that drift
// lands in the ratio. Here they lie one window per target apart, and a fixed workload on the servers'
// CPU reads the machine's speed before and after every window (speed-probe.ts).
import * as fs from "node:fs";
import * as path from "node:path";
import { scenariosFor, type Config } from "./args.js";
import type { LoadClient } from "./load-client.js";
import { startServer, type LaunchSpec, type ServerHandle } from "./server.js";
import { SpeedProbe } from "./speed-probe.js";
import { countWork, measureWindow, prepareServer } from "./session.js";
import { formatRound } from "./report.js";
import { roundOrder } from "./stats.js";
import type { RunRecord, TargetInfo } from "./types.js";
import { checkCounts, describeCounts, LogLineCounter, type Responses } from "./work.js";

interface Live {
  server: ServerHandle;
  logs: LogLineCounter;
  responses: Responses;
  /** False once the server died or its counts stopped matching: no more windows for it. */
  measuring: boolean;
}

/** The order of one round's windows: for each scenario, every target in the round's order. */
export function sideBySideWindows<T, S>(targets: readonly T[], scenarios: readonly S[], round: number, seed: number): Array<[S, T]> {
  const order = roundOrder(targets, round, seed);
  return scenarios.flatMap((scenario) => order.map((target): [S, T] => [scenario, target]));
}

export async function runSideBySide(
  config: Config,
  runnable: readonly string[],
  infos: Map<string, TargetInfo>,
  spec: (target: string, logDir: string) => LaunchSpec,
  loader: LoadClient,
  logDir: string,
  loud: (message: string) => void,
  /** The servers' CPU (the speed probe runs there) and the repository root. */
  pinCpu: number | null,
  cwd: string,
): Promise<RunRecord[]> {
  const live = new Map<string, Live>();
  const stopAll = (): Promise<unknown> => Promise.all([...live.values()].map((t) => t.server.stop()));
  const drop = (target: string, why: string, warning: string): void => {
    const t = live.get(target);
    if (t) t.measuring = false;
    loud(`"${target}": ${why}`);
    infos.get(target)?.warnings.push(warning);
  };
  const records: RunRecord[] = [];
  const probe = new SpeedProbe(pinCpu, cwd);
  try {
    for (const target of runnable) {
      // Its own log folder: the counts are per target, and every server writes for the whole run.
      const dir = path.join(logDir, target);
      fs.mkdirSync(dir, { recursive: true });
      try {
        live.set(target, { server: await startServer(spec(target, dir)), logs: new LogLineCounter(dir), responses: { answered: 0, sent: 0 }, measuring: true });
      } catch (error) {
        loud(`"${target}" failed to start, no data.\n${error instanceof Error ? error.message : String(error)}`);
        infos.get(target)?.warnings.push("failed to start");
      }
    }
    console.log(`\nall ${live.size} servers up; warming each up (${config.warmupSec} s)`);
    for (const [target, t] of live) {
      const info = infos.get(target);
      const prepared = await prepareServer(t.server, loader, config);
      t.responses = prepared.responses;
      if (prepared.idleRssMb !== null) info?.rssSamplesMb.push(prepared.idleRssMb);
      for (const warning of prepared.warnings) {
        if (info && !info.warnings.includes(warning)) {
          info.warnings.push(warning);
          loud(`"${target}" answers differently from the others: ${warning}`);
        }
      }
    }
    const scenarios = scenariosFor(config);
    for (let round = 1; round <= config.rounds; round++) {
      const targets = [...live.keys()].filter((target) => live.get(target)?.measuring === true);
      console.log(`\nround ${round}/${config.rounds}: ${roundOrder(targets, round, config.seed).join(" ")}, one window each per scenario`);
      const roundRecords: RunRecord[] = [];
      for (const [scenario, target] of sideBySideWindows(targets, scenarios, round, config.seed)) {
        const t = live.get(target);
        if (!t?.measuring) continue;
        try {
          roundRecords.push(await measureWindow(t.server, loader, config, scenario, target, round, t.responses, probe));
        } catch (error) {
          drop(target, `round ${round}: run failed: ${error instanceof Error ? error.message : String(error)}`, `round ${round}: run failed`);
        }
      }
      for (const target of targets) {
        const t = live.get(target);
        const info = infos.get(target);
        if (!t?.measuring || !info) continue;
        // Counted over the whole run so far, against every response so far.
        const counts = await countWork(t.server, target, t.logs);
        const unequal = checkCounts(target, counts, t.responses);
        if (unequal !== null) {
          drop(target, `round ${round}: ${unequal}: its rows from this round on are left out`, `round ${round}: unequal work`);
          continue;
        }
        const counted = describeCounts(counts, t.responses);
        if (counted !== null) info.workCounts.push(`after round ${round}: ${counted}`);
        const own = roundRecords.filter((r) => r.target === target);
        records.push(...own);
        console.log(formatRound(target, own));
      }
    }
  } finally {
    probe.close();
    await stopAll();
  }
  return records;
}
