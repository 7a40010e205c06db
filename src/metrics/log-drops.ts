import { droppedLogLines } from "../logging/sink.js";
import type { MetricData } from "./request-histogram.js";
import { LIMIT_HITS, LIMIT_HITS_HELP, limitHits } from "../limit-hits.js";

/** Same name in the workers' registries and in the primary's merge, so the cluster total sums them. */
export const LOG_LINES_DROPPED = "keelson_log_lines_dropped_total";
export const LOG_LINES_DROPPED_HELP = "Log lines dropped because the reader of stdout or stderr did not keep up (the log buffer was full).";

/** This process's dropped log lines (see logging/sink.ts) as a counter sample. */
export function logDropsMetric(): MetricData {
  return {
    name: LOG_LINES_DROPPED, help: LOG_LINES_DROPPED_HELP, type: "counter", aggregator: "sum",
    values: [{ value: droppedLogLines(), labels: {} }],
  };
}

/** This process's limit hits (see limit-hits.ts) as a counter sample, the primary's own added to the workers'; none before the first. */
export function limitHitsMetric(): MetricData[] {
  if (limitHits().size === 0) return [];
  return [{
    name: LIMIT_HITS, help: LIMIT_HITS_HELP, type: "counter", aggregator: "sum",
    values: [...limitHits()].map(([limit, value]) => ({ value, labels: { limit } })),
  }];
}
