import { Counter, Gauge, Histogram, Registry, Summary } from "prom-client";
import { describe, expect, it, vi } from "vitest";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { IpcMessageType, IpcRequestType } from "../src/cluster/ipc.js";
import { metricsCluster, metricsFinal, metricsHello, type MetricsSnapshot } from "../src/metrics/ipc.js";
import { MetricSet } from "../src/metrics/metric-set.js";
import { ClusterMetrics } from "../src/metrics/primary.js";
import { serveMetricsPort } from "../src/metrics/metrics-port.js";
import { captureLogs } from "./helpers/logs.js";
import type { SupervisedWorker, WorkerState } from "../src/cluster/feature-host.js";
import { parseExposition } from "./fixtures/metrics-exposition.js";
import { workerStatsMessage, type WorkerStats } from "../src/cluster/worker-stats.js";

/** One worker's registry: a counter, a gauge, a histogram and a summary. */
function workerRegistry(requests: number, heap: number) {
  const registry = new Registry();
  new Counter({ name: "jobs_total", help: "Jobs.", labelNames: ["kind"], registers: [registry] }).inc({ kind: "a" }, requests);
  new Gauge({ name: "heap_bytes", help: "Heap.", registers: [registry] }).set(heap);
  const histogram = new Histogram({ name: "latency_seconds", help: "Latency.", buckets: [0.1, 1], registers: [registry] });
  for (let i = 0; i < requests; i++) histogram.observe(i % 2 === 0 ? 0.05 : 0.5);
  const summary = new Summary({ name: "size_bytes", help: "Size.", percentiles: [0.5], registers: [registry] });
  summary.observe(heap / 1000);
  return registry;
}

/** What crosses IPC: JSON (Infinity and NaN become null). */
async function snapshotOf(registry: Registry): Promise<MetricsSnapshot> {
  return JSON.parse(JSON.stringify(await registry.getMetricsAsJSON())) as MetricsSnapshot;
}

describe("MetricSet", () => {
  it("sums counters and histograms by label set, keeps gauges and summaries per worker", async () => {
    const set = new MetricSet();
    set.add(await snapshotOf(workerRegistry(4, 1000)), { worker: "1" });
    set.add(await snapshotOf(workerRegistry(6, 3000)), { worker: "2" });
    const metrics = parseExposition(set.render());
    expect(metrics.value("jobs_total", { kind: "a" })).toBe(10);
    expect(metrics.find("jobs_total")[0]?.labels.worker).toBeUndefined();
    expect(metrics.value("latency_seconds_count")).toBe(10);
    expect(metrics.value("latency_seconds_bucket", { le: "0.1" })).toBe(5);
    expect(metrics.value("latency_seconds_bucket", { le: "+Inf" })).toBe(10);
    expect(metrics.value("heap_bytes", { worker: "1" })).toBe(1000);
    expect(metrics.value("heap_bytes", { worker: "2" })).toBe(3000);
    // Quantiles cannot be added: a summary stays per worker, its quantiles included.
    expect(metrics.value("size_bytes", { worker: "1", quantile: "0.5" })).toBe(1);
    expect(metrics.value("size_bytes", { worker: "2", quantile: "0.5" })).toBe(3);
    expect(metrics.value("size_bytes_count", { worker: "2" })).toBe(1);
    expect(metrics.types.get("size_bytes")).toBe("summary");
  });

  it("keeps only counters and histograms in additive scope", async () => {
    const set = new MetricSet();
    set.add(await snapshotOf(workerRegistry(2, 1000)), "additive");
    const metrics = parseExposition(set.render());
    expect([...metrics.types.keys()].toSorted()).toEqual(["jobs_total", "latency_seconds"]);
  });

  it("escapes label values and help text, and writes NaN and infinities as Prometheus reads them", () => {
    const set = new MetricSet();
    set.add([
      { name: "odd", help: "Line one\nback\\slash", type: "gauge", aggregator: "sum", values: [
        { value: null, labels: { path: 'a"b\\c\nd' } },
        { value: Number.POSITIVE_INFINITY, labels: { path: "inf" } },
      ] },
    ], "as-is");
    const text = set.render();
    expect(text).toContain("# HELP odd Line one\\nback\\\\slash\n");
    expect(text).toContain('odd{path="a\\"b\\\\c\\nd"} NaN\n');
    expect(text).toContain('odd{path="inf"} +Inf\n');
    expect(parseExposition(text).find("odd")[0]?.labels.path).toBe('a"b\\c\nd');
  });

  it("ignores malformed entries instead of failing the scrape", () => {
    const set = new MetricSet();
    set.add([{ name: 42 }, { name: "x", type: "counter" }, { name: "ok_total", help: "ok", type: "counter", values: [{ value: 1, labels: {} }] }], "as-is");
    expect(parseExposition(set.render()).value("ok_total")).toBe(1);
  });
});

/** A worker whose channel answers snapshot requests with `snapshot`, or never when it is null. */
class FakeWorker implements SupervisedWorker {
  state: WorkerState = "ready";
  snapshot: MetricsSnapshot | null;
  /** Snapshot requests received. */
  asked = 0;
  readonly channel: SupervisedWorker["channel"];
  readonly #statsListeners: Array<(stats: WorkerStats) => void> = [];
  constructor(readonly id: number, readonly pid: number, snapshot: MetricsSnapshot | null) {
    this.snapshot = snapshot;
    this.channel = {
      on: (type: IpcMessageType<unknown>, listener: (stats: WorkerStats) => void) => {
        if (type === workerStatsMessage) this.#statsListeners.push(listener);
        return () => {};
      },
      request: (_type: string, _payload: unknown, timeoutMs: number) => new Promise((resolve, reject) => {
        this.asked++;
        // Answers on a later turn, as over IPC: scrapes that arrive meanwhile overlap this one.
        if (this.snapshot !== null) setTimeout(resolve, 20, { snapshot: this.snapshot });
        else setTimeout(() => reject(new Error(`timed out after ${timeoutMs}ms`)), timeoutMs);
      }),
    } as unknown as SupervisedWorker["channel"];
  }

  /** Sends a stats report, as the worker does every heartbeat period. */
  report(stats: WorkerStats): void {
    for (const listener of this.#statsListeners) listener(stats);
  }
}

/** What a worker's stats report says of its load; the rest is irrelevant to the balance. */
function loadReport(requests: number, connections: number): WorkerStats {
  return { rss: 0, heapUsed: 0, elu: 0, delayMeanMs: 0, delayP99Ms: 0, inflight: 0, requests, connections };
}

class FakeHost {
  readonly handlers = new Map<IpcRequestType<unknown, unknown>, (payload: never) => unknown>();
  readonly listeners: Array<(worker: SupervisedWorker) => void> = [];
  handle<P, R>(type: IpcRequestType<P, R>, handler: (payload: P) => unknown): void {
    this.handlers.set(type as IpcRequestType<unknown, unknown>, handler as (payload: never) => unknown);
  }
  onWorker(listener: (worker: SupervisedWorker) => void): () => void {
    this.listeners.push(listener);
    return () => {};
  }
  fork(worker: FakeWorker): FakeWorker {
    for (const listener of this.listeners) listener(worker);
    return worker;
  }
  async scrape(timeoutMs = 100) {
    const handler = this.handlers.get(metricsCluster as IpcRequestType<unknown, unknown>) as (p: { timeoutMs: number }) => Promise<{ text: string }>;
    const { text } = await handler({ timeoutMs });
    return parseExposition(text);
  }
  final(pid: number, snapshot: MetricsSnapshot): void {
    (this.handlers.get(metricsFinal as IpcRequestType<unknown, unknown>) as (p: { pid: number; snapshot: MetricsSnapshot }) => unknown)({ pid, snapshot });
  }
}

describe("ClusterMetrics (the supervisor's side)", () => {
  it("shows each slot's accepted connections and started requests, and the skew of their rates over the ready workers", async () => {
    const host = new FakeHost();
    new ClusterMetrics().install(host);
    const one = host.fork(new FakeWorker(1, 101, await snapshotOf(workerRegistry(1, 1))));
    const two = host.fork(new FakeWorker(2, 102, await snapshotOf(workerRegistry(1, 1))));
    const now = vi.spyOn(performance, "now");
    try {
      now.mockReturnValue(1000);
      one.report(loadReport(0, 0));
      two.report(loadReport(0, 0));
      let metrics = await host.scrape();
      expect(metrics.find("keelson_balance_skew")).toHaveLength(0);
      // One second later: worker 1 took 300 connections with 300 requests, worker 2 100 connections with 900 requests.
      now.mockReturnValue(2000);
      one.report(loadReport(300, 300));
      two.report(loadReport(900, 100));
      metrics = await host.scrape();
      expect(metrics.value("keelson_worker_connections_accepted_total", { worker: "1" })).toBe(300);
      expect(metrics.value("keelson_worker_connections_accepted_total", { worker: "2" })).toBe(100);
      expect(metrics.value("keelson_worker_requests_started_total", { worker: "2" })).toBe(900);
      expect(metrics.value("keelson_balance_skew", { of: "connections" })).toBe(1.5);
      expect(metrics.value("keelson_balance_skew", { of: "requests" })).toBe(1.5);
      // A draining worker is no longer judged: one ready worker has no balance.
      two.state = "draining";
      metrics = await host.scrape();
      expect(metrics.find("keelson_balance_skew")).toHaveLength(0);
    } finally {
      now.mockRestore();
    }
  });

  it("sums all workers and reports each slot up", async () => {
    const host = new FakeHost();
    new ClusterMetrics().install(host);
    host.fork(new FakeWorker(1, 101, await snapshotOf(workerRegistry(3, 10))));
    host.fork(new FakeWorker(2, 102, await snapshotOf(workerRegistry(5, 20))));
    const metrics = await host.scrape();
    expect(metrics.value("jobs_total", { kind: "a" })).toBe(8);
    expect(metrics.value("keelson_worker_up", { worker: "1" })).toBe(1);
    expect(metrics.value("keelson_worker_up", { worker: "2" })).toBe(1);
    expect(metrics.find("keelson_worker_scrape_duration_seconds")).toHaveLength(2);
  });

  it("answers within the per-worker timeout when a worker is busy, counting it with its last snapshot and up 0", async () => {
    const host = new FakeHost();
    new ClusterMetrics().install(host);
    const busy = host.fork(new FakeWorker(1, 101, await snapshotOf(workerRegistry(3, 10))));
    host.fork(new FakeWorker(2, 102, await snapshotOf(workerRegistry(5, 20))));
    expect((await host.scrape()).value("jobs_total", { kind: "a" })).toBe(8);
    busy.snapshot = null;
    const started = performance.now();
    const metrics = await host.scrape(300);
    expect(performance.now() - started).toBeLessThan(2000);
    expect(metrics.value("keelson_worker_up", { worker: "1" })).toBe(0);
    expect(metrics.value("keelson_worker_up", { worker: "2" })).toBe(1);
    expect(metrics.value("jobs_total", { kind: "a" })).toBe(8);
    // Its gauges are not reported stale.
    expect(metrics.find("heap_bytes", { worker: "1" })).toHaveLength(0);
    expect(metrics.value("heap_bytes", { worker: "2" })).toBe(20);
  });

  it("keeps a departed worker's counters, so totals never go backwards when it is replaced", async () => {
    const host = new FakeHost();
    new ClusterMetrics().install(host);
    const first = host.fork(new FakeWorker(1, 101, await snapshotOf(workerRegistry(3, 10))));
    host.fork(new FakeWorker(2, 102, await snapshotOf(workerRegistry(5, 20))));
    expect((await host.scrape()).value("latency_seconds_count")).toBe(8);
    first.state = "exited";
    host.fork(new FakeWorker(1, 103, await snapshotOf(workerRegistry(1, 30))));
    const metrics = await host.scrape();
    expect(metrics.value("jobs_total", { kind: "a" })).toBe(3 + 5 + 1);
    expect(metrics.value("latency_seconds_count")).toBe(9);
    expect(metrics.value("heap_bytes", { worker: "1" })).toBe(30);
    expect(metrics.value("keelson_worker_up", { worker: "1" })).toBe(1);
    // Still there on the next scrape, and not counted twice.
    expect((await host.scrape()).value("jobs_total", { kind: "a" })).toBe(9);
  });

  it("uses the final snapshot a worker sends after draining, not the older one of the last scrape", async () => {
    const host = new FakeHost();
    new ClusterMetrics().install(host);
    const worker = host.fork(new FakeWorker(1, 101, await snapshotOf(workerRegistry(3, 10))));
    expect((await host.scrape()).value("jobs_total", { kind: "a" })).toBe(3);
    host.final(101, await snapshotOf(workerRegistry(7, 10)));
    worker.state = "exited";
    const metrics = await host.scrape();
    expect(metrics.value("jobs_total", { kind: "a" })).toBe(7);
    expect(metrics.value("keelson_worker_up", { worker: "1" })).toBe(0);
  });

  it("keeps a slot's up gauge at 0 while it has no worker, and shows each family once", async () => {
    const host = new FakeHost();
    new ClusterMetrics().install(host);
    const worker = host.fork(new FakeWorker(1, 101, await snapshotOf(workerRegistry(2, 10))));
    host.fork(new FakeWorker(2, 102, await snapshotOf(workerRegistry(2, 10))));
    worker.state = "exited";
    const metrics = await host.scrape();
    expect(metrics.value("keelson_worker_up", { worker: "1" })).toBe(0);
    expect(metrics.value("jobs_total", { kind: "a" })).toBe(2);
  });
});

/** A FakeHost with what the metrics port needs: its settings, messages from workers, fail() and finished. */
class PortHost extends FakeHost {
  readonly logs = captureLogs();
  readonly logger = this.logs.logger;
  readonly options: { metricsPort: number | false; metricsHost: string | undefined };
  readonly failures: string[] = [];
  stopping = false;
  readonly finished: Promise<void>;
  stop!: () => void;
  readonly messageListeners: Array<(payload: never, worker: SupervisedWorker) => void> = [];
  constructor(metricsPort: number | false) {
    super();
    this.options = { metricsPort, metricsHost: "127.0.0.1" };
    this.finished = new Promise((resolve) => (this.stop = resolve));
  }
  onMessage<P>(_type: IpcMessageType<P>, listener: (payload: P, worker: SupervisedWorker) => void): void {
    this.messageListeners.push(listener as (payload: never, worker: SupervisedWorker) => void);
  }
  fail(reason: string): void {
    this.failures.push(reason);
  }
  hello(worker: SupervisedWorker): void {
    for (const listener of this.messageListeners) listener({ pid: worker.pid, timeoutMs: 500 } as never, worker);
  }
  async url(): Promise<string> {
    const deadline = performance.now() + 5000;
    for (;;) {
      const line = this.logs.lines().find((l) => l.includes("cluster-wide metrics on"));
      if (line !== undefined) return /http:\/\/\S+\/metrics/.exec(line)?.[0] ?? "";
      if (performance.now() > deadline) throw new Error("the metrics port did not open");
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }
}

describe("the primary's metrics port (in-process, real socket)", () => {
  it("opens on the first worker's hello, lets concurrent scrapes share one merge, and closes when the supervisor stops", async () => {
    const host = new PortHost(0);
    serveMetricsPort(host, new ClusterMetrics().install(host), host.options);
    expect(metricsHello.name).toBe("metrics:hello");
    const worker = host.fork(new FakeWorker(1, 101, await snapshotOf(workerRegistry(3, 10))));
    expect(host.logs.lines().join("\n")).not.toMatch(/cluster-wide metrics/);
    host.hello(worker);
    const url = await host.url();
    const scrapes = await Promise.all([fetch(url), fetch(url), fetch(url)]);
    for (const res of scrapes) expect(parseExposition(await res.text()).value("jobs_total", { kind: "a" })).toBe(3);
    expect(worker.asked).toBe(1);
    host.stop();
    await expect.poll(() => fetch(url).then(() => "open", () => "closed")).toBe("closed");
    expect(host.failures).toEqual([]);
  });

  it("a taken port fails the supervisor with the port and what to set; off opens nothing", async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    const port = (taken.address() as AddressInfo).port;
    try {
      const host = new PortHost(port);
      serveMetricsPort(host, new ClusterMetrics().install(host), host.options);
      host.hello(host.fork(new FakeWorker(1, 101, [])));
      await expect.poll(() => host.failures).toEqual([
        `cannot serve metrics on 127.0.0.1:${port}: already in use (EADDRINUSE); set --metrics-port (KEELSON_METRICS_PORT) to a free port, or off`,
      ]);
    } finally {
      taken.close();
    }
    const off = new PortHost(false);
    serveMetricsPort(off, new ClusterMetrics().install(off), off.options);
    expect(off.messageListeners).toHaveLength(0);
  });
});
