import { monitorEventLoopDelay, performance, type EventLoopUtilization } from "node:perf_hooks";
import { defineIpcMessage } from "./ipc.js";
import { fdUsage, memoryUsage } from "./process-usage.js";
import type { PrimaryChannel } from "./worker-link.js";

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
      ...(fds === undefined ? {} : { fds: fds.fds, ...(fds.fdLimit === undefined ? {} : { fdLimit: fds.fdLimit }) }),
    });
  }, periodMs);
  timer.unref();
  return () => {
    clearInterval(timer);
    delay.disable();
  };
}

const RESOLUTION_MS = 20;

/** The histogram records the time between its timer's runs (ns); the delay is what exceeds the period. */
function lateness(ns: number): number {
  return Math.max(0, ns / 1e6 - RESOLUTION_MS);
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}
