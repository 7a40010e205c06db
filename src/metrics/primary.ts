import type { FeatureHost, SupervisedWorker } from "../cluster/feature-host.js";
import { metricsCluster, metricsFinal, metricsSnapshot, type MetricsSnapshot } from "./ipc.js";
import { MetricSet, PROMETHEUS_CONTENT_TYPE } from "./metric-set.js";
import type { MetricData } from "./request-histogram.js";
import { limitHitsMetric, logDropsMetric } from "./log-drops.js";
import { balanceSkew, loadRates, workerStatsMessage, type WorkerStats } from "../cluster/worker-stats.js";

/** What the aggregator needs from the primary. */
export interface MetricsHost extends Pick<FeatureHost, "handle"> {
  onWorker(listener: (worker: SupervisedWorker) => void): () => void;
}

interface Tracked {
  readonly worker: SupervisedWorker;
  /** Its latest snapshot: from the last scrape it answered, or the one it sent after draining. */
  last: MetricsSnapshot | undefined;
  /** Its latest load report (every heartbeat period), with the rates since the one before. */
  load?: { stats: WorkerStats; at: number; requestsPerSecond: number; connectionsPerSecond: number };
}

interface Answer {
  readonly tracked: Tracked;
  readonly snapshot: MetricsSnapshot | undefined;
  readonly seconds: number;
}

const MAX_TIMEOUT_MS = 30_000;

/**
 * Cluster-wide /metrics, in the primary. A worker's scrape asks the primary (`metrics:cluster`),
 * which asks every live worker for a snapshot in parallel, each under its own timeout, and
 * merges them:
 * - counters and histograms are summed by label set; a worker that does not answer in time
 *   counts with its last snapshot (stale, never lower), and a worker that has exited stays in
 *   the totals with its last snapshot, so no total ever goes backwards;
 * - gauges and summaries get a `worker` label (the slot id), live workers only;
 * - `keelson_worker_up{worker}` is 1 for a slot whose worker answered, else 0, and
 *   `keelson_worker_scrape_duration_seconds{worker}` is how long it took to answer;
 * - `keelson_log_lines_dropped_total` adds the primary's own dropped log lines (a stalled
 *   stdout reader) to the workers'.
 * - the balance, from the workers' load reports: `keelson_worker_connections_accepted_total{worker}`
 *   and `keelson_worker_requests_started_total{worker}` (the slot's current worker, so they restart
 *   at 0 with a new worker, as any counter of a restarted process), and `keelson_balance_skew{of}`
 *   (the busiest ready worker's requests or connections per second over the mean: 1 is even).
 */
export class ClusterMetrics {
  readonly #tracked = new Map<number, Tracked>();
  /** Counters and histograms of workers that have exited, summed. */
  readonly #departed = new MetricSet();
  readonly #slots = new Set<number>();

  /** Follows every worker of `host` and serves the workers' scrape requests. */
  install(host: MetricsHost): this {
    host.onWorker((worker) => {
      this.#retireExited();
      const tracked: Tracked = { worker, last: undefined };
      this.#tracked.set(worker.pid, tracked);
      this.#slots.add(worker.id);
      worker.channel.on(workerStatsMessage, (stats) => {
        const at = performance.now();
        tracked.load = { stats, at, ...loadRates(tracked.load, stats, at) };
      });
    });
    host.handle(metricsCluster, ({ timeoutMs }) => this.readExposition(timeoutMs));
    host.handle(metricsFinal, ({ pid, snapshot }) => {
      const tracked = this.#tracked.get(pid);
      if (tracked !== undefined) tracked.last = snapshot;
      return {};
    });
    return this;
  }

  /** The merged exposition; each worker gets `timeoutMs` to answer. */
  async readExposition(timeoutMs: number): Promise<{ text: string; contentType: string }> {
    const timeout = Math.min(Math.max(1, Number(timeoutMs) || 1), MAX_TIMEOUT_MS);
    this.#retireExited();
    const live = [...this.#tracked.values()];
    const answers = await Promise.all(live.map((tracked) => this.#ask(tracked, timeout)));
    // A worker that exited while we waited is now in the departed totals: count it there only.
    this.#retireExited();
    const set = new MetricSet();
    set.add(this.#departed.toJSON(), "additive");
    const up = new Map<number, number>();
    const seconds = new Map<number, number>();
    for (const slot of this.#slots) up.set(slot, 0);
    for (const { tracked, snapshot, seconds: took } of answers) {
      if (!this.#tracked.has(tracked.worker.pid)) continue;
      const slot = tracked.worker.id;
      if (snapshot !== undefined) {
        set.add(snapshot, { worker: String(slot) });
        up.set(slot, 1);
        seconds.set(slot, Math.max(seconds.get(slot) ?? 0, took));
      } else if (tracked.last !== undefined) {
        set.add(tracked.last, "additive");
      }
    }
    set.add([logDropsMetric(), ...limitHitsMetric()], "additive");
    set.add([
      gauge("keelson_worker_up", "1 if the worker in this slot answered the last metrics scrape in time, else 0.", up),
      gauge("keelson_worker_scrape_duration_seconds", "How long the worker in this slot took to send its metrics.", seconds),
      ...this.#balance(),
    ], "as-is");
    return { text: set.render(), contentType: PROMETHEUS_CONTENT_TYPE };
  }

  /** Per-slot accepted connections and started requests, and the skew of their rates over the ready workers. */
  #balance(): MetricData[] {
    const ready = [...this.#tracked.values()].filter((tracked) => tracked.worker.state === "ready" && tracked.load !== undefined);
    const bySlot = (read: (stats: WorkerStats) => number) => new Map(ready.map((tracked) => [tracked.worker.id, read(tracked.load!.stats)]));
    return [
      { ...gauge("keelson_worker_connections_accepted_total", "Connections the current worker of this slot has accepted.",
        bySlot((stats) => stats.connections ?? 0)), type: "counter" },
      { ...gauge("keelson_worker_requests_started_total", "Requests the current worker of this slot has started.",
        bySlot((stats) => stats.requests)), type: "counter" },
      {
        name: "keelson_balance_skew", type: "gauge", aggregator: "omit",
        help: "The busiest ready worker's rate divided by the mean rate over the last report period (1 is even, N is all on one of N workers).",
        values: [
          ...skewSample("requests", ready.map((t) => t.load!.requestsPerSecond)),
          ...skewSample("connections", ready.map((t) => t.load!.connectionsPerSecond)),
        ],
      },
    ];
  }

  /** Asks one worker for its snapshot; undefined when it does not answer in time (or is gone). */
  async #ask(tracked: Tracked, timeoutMs: number): Promise<Answer> {
    const started = performance.now();
    try {
      const { snapshot } = await tracked.worker.channel.request(metricsSnapshot, {}, timeoutMs);
      if (!Array.isArray(snapshot)) return { tracked, snapshot: undefined, seconds: 0 };
      tracked.last = snapshot;
      return { tracked, snapshot, seconds: (performance.now() - started) / 1000 };
    } catch {
      return { tracked, snapshot: undefined, seconds: 0 };
    }
  }

  /** Moves exited workers' last counters and histograms into the departed totals. */
  #retireExited(): void {
    for (const [pid, tracked] of this.#tracked) {
      if (tracked.worker.state !== "exited") continue;
      if (tracked.last !== undefined) this.#departed.add(tracked.last, "additive");
      this.#tracked.delete(pid);
    }
  }
}

/** No sample with fewer than two ready workers or no load: there is no balance to judge. */
function skewSample(of: string, rates: number[]): MetricData["values"] {
  const value = balanceSkew(rates);
  return value === undefined ? [] : [{ value, labels: { of } }];
}

function gauge(name: string, help: string, bySlot: ReadonlyMap<number, number>): MetricData {
  const values = [...bySlot].toSorted(([a], [b]) => a - b).map(([slot, value]) => ({ value, labels: { worker: String(slot) } }));
  return { name, help, type: "gauge", aggregator: "sum", values };
}

/** Installs cluster-wide metrics on the primary; the primary calls this once. */
export function installClusterMetrics(host: MetricsHost): ClusterMetrics {
  return new ClusterMetrics().install(host);
}
