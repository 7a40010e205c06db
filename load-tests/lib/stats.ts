// Ordering of rounds and reduction of per-round records to medians.
import type { RunRecord, SummaryRow } from "./types.js";

export function median(values: number[]): number | null {
  if (values.length === 0) return null;
  const sorted = values.toSorted((a, b) => a - b);
  const mid = sorted.length >> 1;
  const upper = sorted[mid] ?? 0;
  return sorted.length % 2 === 1 ? upper : ((sorted[mid - 1] ?? 0) + upper) / 2;
}

/** Small seeded PRNG so a shuffled round order is reproducible from the seed alone. */
function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/**
 * Round 1 in the given order, round 2 reversed, later rounds seeded shuffles: a target
 * is not always first (cold machine) or last (warm machine), so drift cancels out.
 */
export function roundOrder<T>(items: readonly T[], round: number, seed: number): T[] {
  if (round === 1) return [...items];
  if (round === 2) return items.toReversed();
  const random = mulberry32(seed * 1_000 + round);
  const shuffled = [...items];
  for (let i = shuffled.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    const a = shuffled[i] as T;
    shuffled[i] = shuffled[j] as T;
    shuffled[j] = a;
  }
  return shuffled;
}

/** Ratio to bare h3 within the same round and scenario, so slow drift divides out. */
export function fillRatios(records: RunRecord[]): void {
  for (const record of records) {
    const base = records.find((r) => r.target === "h3" && r.round === record.round && r.scenario === record.scenario);
    record.ratioVsH3 =
      base?.reqPerCpuSec && record.reqPerCpuSec !== null ? record.reqPerCpuSec / base.reqPerCpuSec : null;
  }
}

function medianOf(rows: RunRecord[], pick: (r: RunRecord) => number | null): number | null {
  return median(rows.map(pick).filter((v): v is number => v !== null && Number.isFinite(v)));
}

export function summarise(records: RunRecord[], targets: string[], scenarios: string[]): SummaryRow[] {
  const rows: SummaryRow[] = [];
  for (const target of targets) {
    for (const scenario of scenarios) {
      const runs = records.filter((r) => r.target === target && r.scenario === scenario);
      if (runs.length === 0) continue;
      rows.push({
        target,
        scenario,
        rounds: runs.length,
        reqPerSec: medianOf(runs, (r) => r.reqPerSec) ?? 0,
        p50Ms: medianOf(runs, (r) => r.p50Ms) ?? 0,
        p99Ms: medianOf(runs, (r) => r.p99Ms) ?? 0,
        reqPerCpuSec: medianOf(runs, (r) => r.reqPerCpuSec),
        serverCpuPct: medianOf(runs, (r) => (r.cpuSec === null || r.durationSec <= 0 ? null : (100 * r.cpuSec) / r.durationSec)),
        ratioVsH3: medianOf(runs, (r) => r.ratioVsH3),
        non2xx: runs.reduce((sum, r) => sum + r.non2xx, 0),
        errors: runs.reduce((sum, r) => sum + r.errors + r.timeouts, 0),
      });
    }
  }
  return rows;
}

/** One target divided by another on one scenario: per round (same round, same scenario), and by their medians. */
export interface PairRatio {
  numerator: string;
  denominator: string;
  scenario: string;
  /** Rounds in which both had a window. */
  rounds: number;
  median: number | null;
  min: number | null;
  max: number | null;
  /** The numerator's median req/CPU-s over the denominator's. */
  ofMedians: number | null;
}

/** How far two speed readings may differ and still count as the same machine speed. */
export const SAME_SPEED = 0.1;

const sameSpeed = (a: number | undefined, b: number | undefined): boolean =>
  a !== undefined && b !== undefined && Math.abs(a - b) <= SAME_SPEED * Math.max(a, b);

type Speeds = Pick<RunRecord, "speedBefore" | "speedAfter">;

/**
 * Whether two windows ran at one machine speed: each window's probe readings before and after it
 * agree, and the two windows' readings agree with each other.
 */
export function steadyPair(a: Speeds, b: Speeds): boolean {
  return sameSpeed(a.speedBefore, a.speedAfter) && sameSpeed(b.speedBefore, b.speedAfter) &&
    sameSpeed(a.speedBefore, b.speedBefore) && sameSpeed(a.speedAfter, b.speedAfter);
}

/** Per-round ratios of paired windows: median, range and the ratio of the two sides' medians. */
export type RoundRatios = Pick<PairRatio, "rounds" | "median" | "min" | "max" | "ofMedians">;

/**
 * `value(top) / value(bottom)` for each pair of one round's windows (pairs without a value left out;
 * with `steady`, pairs not run at one machine speed too), and the medians of the same windows, so that a
 * round left out on one side is left out on the other.
 */
export function roundRatios<T extends Speeds>(pairs: ReadonlyArray<readonly [T, T]>, value: (window: T) => number | null, steady = false): RoundRatios {
  const kept = pairs.filter(([top, bottom]) => value(top) !== null && value(bottom) && (!steady || steadyPair(top, bottom)));
  const perRound = kept.map(([top, bottom]) => (value(top) as number) / (value(bottom) as number));
  const top = median(kept.map(([t]) => value(t) as number));
  const bottom = median(kept.map(([, b]) => value(b) as number));
  return {
    rounds: perRound.length, median: median(perRound),
    min: perRound.length > 0 ? Math.min(...perRound) : null,
    max: perRound.length > 0 ? Math.max(...perRound) : null,
    ofMedians: top !== null && bottom ? top / bottom : null,
  };
}

/** With `steady`, only the rounds whose two windows ran at one machine speed (`steadyPair`). */
export function pairRatio(records: RunRecord[], numerator: string, denominator: string, scenario: string, steady = false): PairRatio {
  const pairs = records
    .filter((r) => r.target === numerator && r.scenario === scenario)
    .flatMap((top) => {
      const bottom = records.find((r) => r.target === denominator && r.scenario === scenario && r.round === top.round);
      return bottom === undefined ? [] : [[top, bottom] as const];
    });
  return { numerator, denominator, scenario, ...roundRatios(pairs, (r) => r.reqPerCpuSec, steady) };
}
