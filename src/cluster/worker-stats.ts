import { monitorEventLoopDelay, performance, type EventLoopUtilization } from "node:perf_hooks";
import { defineIpcMessage, type PrimaryChannel } from "./ipc.js";
import { fdUsage, memoryUsage } from "./process-usage.js";

/** One worker's load, sent to the primary every heartbeat period for `keelson status`. */
export interface WorkerStats {
  /** Resident set size and V8 heap used, bytes. */
  rss: number;
  heapUsed: number;
  /** Event-loop utilisation over the last period, 0..1. */
  elu: number;
  /** Event-loop delay over the last period: mean and p99, ms. */
  delayMeanMs: number;
  delayP99Ms: number;
  /** Requests being served now. */
  inflight: number;
  /** Requests started since the worker began (the primary derives requests per second). */
  requests: number;
  /** Connections its server accepted since the worker began (the balancer's share of the work). */
  connections: number;
  /** Open file descriptors and their soft limit (undefined: unlimited); absent where unknown (not Linux). */
  fds?: number;
  fdLimit?: number;
}

/** The stats message: an integration's own IPC type, not part of the core protocol. */
export const workerStatsMessage = defineIpcMessage<WorkerStats>("status:stats");

/** The request counters the App keeps anyway (two integer updates per request). */
export interface RequestLoad {
  inflight(): number;
  requests(): number;
  /** Connections accepted so far: one integer per connection, kept by the server's tracker. */
  connections(): number;
}

/**
 * Sends the worker's stats to the primary every `periodMs`. Costs a 20 ms timer inside libuv
 * (the delay histogram) and one small message per period; nothing on the request path.
 * Returns the undo.
 */
export function reportWorkerStats(primary: PrimaryChannel, load: RequestLoad, periodMs: number): () => void {
  const delay = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  delay.enable();
  let lastElu: EventLoopUtilization = performance.eventLoopUtilization();
  const timer = setInterval(() => {
    const elu = performance.eventLoopUtilization(lastElu);
    lastElu = performance.eventLoopUtilization();
    // Never throws, not even at EMFILE: a stats report must not kill the worker it describes.
    const memory = memoryUsage();
    const fds = fdUsage();
    const mean = lateness(delay.count > 0 ? delay.mean : 0);
    const p99 = lateness(delay.count > 0 ? delay.percentile(99) : 0);
    delay.reset();
    primary.send(workerStatsMessage, {
      rss: memory.rss, heapUsed: memory.heapUsed, elu: elu.utilization,
      delayMeanMs: round(mean), delayP99Ms: round(p99), inflight: load.inflight(), requests: load.requests(),
      connections: load.connections(),
      ...(fds === undefined ? {} : { fds: fds.fds, ...(fds.fdLimit === undefined ? {} : { fdLimit: fds.fdLimit }) }),
    });
  }, periodMs);
  timer.unref();
  return () => {
    clearInterval(timer);
    delay.disable();
  };
}

/** Requests and accepted connections per second between two reports of one worker (`at` in ms). */
export function loadRates(previous: { stats: WorkerStats; at: number } | undefined, stats: WorkerStats, at: number):
  { requestsPerSecond: number; connectionsPerSecond: number } {
  if (previous === undefined || at <= previous.at) return { requestsPerSecond: 0, connectionsPerSecond: 0 };
  const seconds = (at - previous.at) / 1000;
  const rate = (now: number, before: number | undefined) => Math.round(Math.max(0, now - (before ?? 0)) / seconds * 100) / 100;
  return {
    requestsPerSecond: rate(stats.requests, previous.stats.requests),
    connectionsPerSecond: rate(stats.connections, previous.stats.connections),
  };
}

/**
 * How unevenly a load is spread over the workers: the busiest worker's rate divided by the mean
 * rate. 1 is even; N (the number of workers) is everything on one worker. Undefined with fewer
 * than two workers or no load at all.
 *
 * @example
 * balanceSkew([300, 100]); // 1.5: one worker does three times the other's share
 */
export function balanceSkew(rates: readonly number[]): number | undefined {
  if (rates.length < 2) return undefined;
  const mean = rates.reduce((sum, rate) => sum + rate, 0) / rates.length;
  return mean > 0 ? Math.round(Math.max(...rates) / mean * 100) / 100 : undefined;
}

const RESOLUTION_MS = 20;

/** The histogram records the time between its timer's runs (ns); the delay is what exceeds the period. */
function lateness(ns: number): number {
  return Math.max(0, ns / 1e6 - RESOLUTION_MS);
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}
