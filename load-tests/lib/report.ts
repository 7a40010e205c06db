// Terminal tables and the result files (JSON per run, latest.json, latest.svg).
import * as fs from "node:fs";
import * as path from "node:path";
import type { Config } from "./args.js";
import { ratioChart } from "./svg.js";
import type { PairRatio } from "./stats.js";
import type { MachineInfo, RunRecord, SummaryRow, TargetInfo } from "./types.js";

export interface Results {
  date: string;
  totalWallSec: number;
  machine: MachineInfo;
  config: Config;
  targets: TargetInfo[];
  summary: SummaryRow[];
  runs: RunRecord[];
  /** keelson's req/CPU-s divided by every other target's, per round and by the medians. */
  keelsonRatios: PairRatio[];
  /** The same over the rounds whose two windows ran at one machine speed (side by side only). */
  keelsonSteadyRatios: PairRatio[];
}

const int = (n: number | null): string => (n === null ? "-" : Math.round(n).toLocaleString("en-US"));
const fixed = (n: number | null, digits: number): string => (n === null ? "-" : n.toFixed(digits));

function table(headers: string[], rows: string[][], leftColumns: number): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]): string =>
    cells.map((c, i) => (i < leftColumns ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join("  ");
  return [line(headers), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}

/** A target's windows of one round, on one line of the run's progress. */
export function formatRound(target: string, records: RunRecord[]): string {
  const windows = records.map((r) => {
    const speed = r.speedBefore === undefined ? "" : `, speed ${r.speedBefore.toFixed(2)}→${r.speedAfter?.toFixed(2)}`;
    return `${r.scenario} ${Math.round(r.reqPerSec)} req/s, ${r.reqPerCpuSec === null ? "-" : Math.round(r.reqPerCpuSec)} req/CPU-s${speed}`;
  });
  return `  ${target.padEnd(15)} ${windows.join(" | ")}`;
}

const ratioCell = (r: PairRatio | undefined, rounds: boolean): string =>
  r?.median == null ? "-" : `${fixed(r.median, 2)} (${fixed(r.min, 2)}-${fixed(r.max, 2)}${rounds ? `, ${r.rounds} rounds` : ""}) [${fixed(r.ofMedians, 2)}]`;

/** keelson ÷ each other target, one row per target, one cell per scenario: "median (min–max) [of the medians]". */
export function formatRatios(ratios: PairRatio[], scenarios: string[], rounds = false): string {
  const denominators = [...new Set(ratios.map((r) => r.denominator))];
  if (denominators.length === 0) return "";
  return table(
    ["keelson ÷", ...scenarios],
    denominators.map((d) => [d, ...scenarios.map((s) => ratioCell(ratios.find((r) => r.denominator === d && r.scenario === s), rounds))]),
    1,
  );
}

export function formatTables(summary: SummaryRow[], targets: TargetInfo[]): string {
  const main = table(
    ["target", "scenario", "req/s", "p50 ms", "p99 ms", "req/CPU-s", "srv CPU%", "vs h3", "non-2xx", "errors"],
    summary.map((r) => [
      r.target,
      r.scenario,
      int(r.reqPerSec),
      fixed(r.p50Ms, 1),
      fixed(r.p99Ms, 1),
      int(r.reqPerCpuSec),
      fixed(r.serverCpuPct, 0),
      r.ratioVsH3 === null ? "-" : `${r.ratioVsH3.toFixed(2)}x`,
      int(r.non2xx),
      int(r.errors),
    ]),
    2,
  );
  const perTarget = table(
    ["target", "idle RSS MB", "bundled idle RSS MB", "cold start ms", "bundled cold start ms", "status"],
    targets.map((t) => [
      t.target,
      fixed(t.idleRssMb, 1),
      fixed(t.bundledIdleRssMb, 1),
      fixed(t.coldStartMs, 0),
      fixed(t.bundledColdStartMs, 0),
      t.skipped ? `SKIPPED: ${t.skipped.split("\n")[0] ?? ""}` : t.warnings.length > 0 ? `WARN: ${t.warnings.join("; ")}` : "ok",
    ]),
    1,
  );
  // What each target emitted per response, counted (load-tests/lib/work.ts): the rows above compare equal work.
  const counted = targets
    .filter((t) => t.workCounts.length > 0)
    .map((t) => `  ${t.target.padEnd(18)} ${t.workCounts.join(" | ")}`);
  const work = counted.length === 0 ? "" : `\n\nwork counted per round (each within the responses answered..sent):\n${counted.join("\n")}`;
  return `${main}\n\n${perTarget}${work}`;
}

export function formatMachine(machine: MachineInfo): string {
  const load = `load average ${machine.loadAvgBefore.toFixed(2)} before${machine.loadAvgAfter === null ? "" : `, ${machine.loadAvgAfter.toFixed(2)} after (the run itself adds ~1-2)`}`;
  return `machine: ${machine.cpuModel}, ${machine.cores} cores, ${machine.platform} (kernel ${machine.kernel}), node ${machine.node}\n${machine.pinningNote}\n${load}`;
}

/** Written to a .tmp file then renamed, so a reader never sees half a result file. */
function writeAtomic(file: string, content: string): void {
  fs.writeFileSync(`${file}.tmp`, content);
  fs.renameSync(`${file}.tmp`, file);
}

export function writeResults(dir: string, results: Results, scenarios: string[]): string[] {
  fs.mkdirSync(dir, { recursive: true });
  const json = `${JSON.stringify(results, null, 2)}\n`;
  const stamp = results.date.replace(/:/g, "-").replace(/\.\d+Z$/, "Z");
  const dated = path.join(dir, `bench-${stamp}.json`);
  const subtitle = `median of ${results.config.rounds} rounds, ${results.config.durationSec} s each, ${results.config.connections} connections x ${results.config.pipelining} pipelined; ${results.machine.cpuModel}, node ${results.machine.node}, ${results.machine.pinned ? "pinned" : "NOT pinned"}; ${results.date}`;
  const svg = ratioChart(results.summary, results.config.targets, scenarios, subtitle);
  const files: Array<[string, string]> = [
    [dated, json],
    [path.join(dir, "latest.json"), json],
    [path.join(dir, "latest.svg"), svg],
  ];
  for (const [file, content] of files) writeAtomic(file, content);
  return files.map(([file]) => file);
}
