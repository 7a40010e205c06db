// Does scraping /metrics (on the primary's metrics port) move request latency? The supervisor runs 2 workers of
// test/fixtures/metrics-cluster-app.ts (through tsx); autocannon loads GET /hello in phases that
// alternate between no scraping and a scrape every `intervalMs` (250: 60× Prometheus' default),
// after one discarded warm-up phase, and prints the phase table.
import { startCluster } from "../lib/cluster.js";
import { request, sleep } from "../lib/http.js";
import type { LoadClient } from "../lib/load-client.js";
import type { Pinning } from "../lib/machine.js";
import { median } from "../lib/stats.js";
import { table, verdict, type Context, type Verdict } from "./common.js";

const NAME = "metrics-scrape";
/** PASS when median p99 with scraping <= median p99 without × FACTOR + SLACK_MS. */
const FACTOR = 1.5;
const SLACK_MS = 2;

export interface ScrapeOptions {
  root: string;
  pinning: Pinning;
  client: LoadClient;
  pairs: number;
  seconds: number;
  intervalMs: number;
  connections: number;
}

export interface Phase {
  scrape: boolean;
  reqPerSec: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  errors: number;
  non2xx: number;
  scrapes: number;
  failedScrapes: number;
  meanScrapeMs: number | null;
}

export const PHASE_HEADERS = ["phase", "req/s", "p50", "p90", "p99", "max", "scrapes", "mean scrape ms"];

export function phaseRow(phase: Phase, intervalMs: number): Array<string | number> {
  return [phase.scrape ? `scrape / ${intervalMs} ms` : "no scrape", Math.round(phase.reqPerSec), phase.p50, phase.p90, phase.p99, phase.max,
    phase.scrapes + (phase.failedScrapes > 0 ? ` (${phase.failedScrapes} failed)` : ""), phase.meanScrapeMs === null ? "—" : phase.meanScrapeMs.toFixed(1)];
}

async function runPhase(options: ScrapeOptions, origin: string, metricsUrl: string, scrape: boolean): Promise<Phase> {
  const state = { stop: false };
  const took: number[] = [];
  let failedScrapes = 0;
  const scraper = (async () => {
    if (!scrape) return;
    // Bounded by the phase: the load below always ends.
    while (!state.stop) {
      const started = performance.now();
      const res = await request(metricsUrl, { timeoutMs: 5_000 }).catch(() => null);
      if (res?.status === 200 && res.body.includes("http_request_duration_seconds")) took.push(performance.now() - started);
      else failedScrapes++;
      await sleep(options.intervalMs);
    }
  })();
  const result = await options.client.run({
    origin, requests: [{ method: "GET", path: "/hello" }], durationSec: options.seconds, connections: options.connections, pipelining: 1, measureCpu: false,
  }).finally(() => {
    state.stop = true;
  });
  await scraper;
  return {
    scrape, reqPerSec: result.reqPerSec, p50: result.p50Ms, p90: result.p90Ms, p99: result.p99Ms, max: result.maxMs, errors: result.errors + result.timeouts,
    non2xx: result.non2xx, scrapes: took.length, failedScrapes, meanScrapeMs: took.length === 0 ? null : took.reduce((a, b) => a + b, 0) / took.length,
  };
}

/** Starts the cluster, runs the warm-up and `pairs` × (no scrape, scrape), stops the cluster. */
export async function measureScrapeImpact(options: ScrapeOptions, onPhase: (phase: Phase) => void = () => undefined): Promise<Phase[]> {
  const cluster = await startCluster({
    cwd: options.root, entry: "test/fixtures/metrics-cluster-app.ts", workers: 2, tsx: true, pinCpu: options.pinning.server,
  });
  try {
    // Production: the scrape goes to the primary's metrics port, as Prometheus' does.
    const metricsUrl = /http:\/\/[^\s"]+\/metrics/.exec(await cluster.waitFor(/cluster-wide metrics on/))?.[0] ?? "";
    await runPhase(options, cluster.origin, metricsUrl, false);
    const phases: Phase[] = [];
    for (let pair = 0; pair < options.pairs; pair++) {
      for (const scrape of [false, true]) {
        const phase = await runPhase(options, cluster.origin, metricsUrl, scrape);
        phases.push(phase);
        onPhase(phase);
      }
    }
    return phases;
  } finally {
    await cluster.stop();
  }
}

export async function metricsScrapeScenario(context: Context): Promise<Verdict> {
  const intervalMs = 250;
  const connections = 20;
  const pairs = 3;
  const phases = await measureScrapeImpact({ root: context.root, pinning: context.pinning, client: context.client, pairs, seconds: context.seconds, intervalMs, connections });
  table(PHASE_HEADERS, phases.map((p) => phaseRow(p, intervalMs)));
  const p99 = (scrape: boolean) => median(phases.filter((p) => p.scrape === scrape).map((p) => p.p99)) ?? Number.NaN;
  const [without, withScrapes] = [p99(false), p99(true)];
  const limit = without * FACTOR + SLACK_MS;
  const scrapes = phases.reduce((n, p) => n + p.scrapes, 0);
  const failedScrapes = phases.reduce((n, p) => n + p.failedScrapes, 0);
  const errors = phases.reduce((n, p) => n + p.errors + p.non2xx, 0);
  const pass = withScrapes <= limit && scrapes > 0 && failedScrapes === 0 && errors === 0;
  return verdict(NAME, pass,
    `median p99 ${withScrapes} ms with a scrape every ${intervalMs} ms vs ${without} ms without (${pairs} pairs of ${context.seconds} s phases, ${connections} connections, 2 workers); ` +
    `rule: with <= without × ${FACTOR} + ${SLACK_MS} ms = ${limit.toFixed(1)} ms; ${scrapes} scrapes answered, ${failedScrapes} failed, ${errors} request errors or non-2xx.`);
}
