import type { MetricsCollector } from "../integrations.js";
import { METHOD_LABELS, getMethodIndex } from "../http/method.js";

/**
 * Bucket bounds (seconds) advised by the OpenTelemetry semantic conventions for
 * `http.server.request.duration`.
 */
export const HTTP_SERVER_DURATION_BUCKETS: readonly number[] = Object.freeze([
  0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10,
]);

/** One exported sample, in prom-client's `getMetricsAsJSON()` shape. */
export interface Sample {
  value: number;
  labels: Record<string, string | number>;
  metricName?: string;
}

/** A metric as prom-client's registry reads it (`get()`), which is also its JSON snapshot shape. */
export interface MetricData {
  name: string;
  help: string;
  type: "counter" | "gauge" | "histogram" | "summary";
  aggregator: "sum" | "first" | "min" | "max" | "average" | "omit";
  values: Sample[];
}

/** Bucket counts of one (method, route, status) label set; counts are per bucket, not cumulative. */
class Series {
  readonly labels: Readonly<Record<string, string>>;
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(labels: Record<string, string>, buckets: number) {
    this.labels = labels;
    this.counts = new Float64Array(buckets + 1);
  }
}

/**
 * `http_request_duration_seconds` as a prom-client-compatible metric. prom-client's own
 * `histogram.labels(...).observe()` validates and hashes its label object on every call, a
 * noticeable part of a small request's cost; this keeps one series per (method, route, status) found through two
 * map lookups with no allocation, and builds prom-client's sample objects only when scraped.
 */
export class RequestHistogram implements MetricsCollector {
  readonly name: string;
  readonly help = "Duration of HTTP server requests (every request: 404s, errors and recovered panics included).";
  readonly type = "histogram";
  readonly aggregator = "sum";
  readonly #bounds: readonly number[];
  #byRoute = new Map<string, Map<number, Series>>();
  #series: Series[] = [];

  constructor(name: string, buckets: readonly number[] = HTTP_SERVER_DURATION_BUCKETS) {
    this.name = name;
    this.#bounds = buckets.toSorted((a, b) => a - b);
  }

  observeRequest(method: string, route: string, status: number, durationSeconds: number): void {
    let byKey = this.#byRoute.get(route);
    if (byKey === undefined) {
      byKey = new Map();
      this.#byRoute.set(route, byKey);
    }
    const methodIndex = getMethodIndex(method);
    const key = status * 16 + methodIndex;
    let series = byKey.get(key);
    if (series === undefined) {
      const labels = { method: METHOD_LABELS[methodIndex] ?? method, route, status_code: String(status) };
      series = new Series(labels, this.#bounds.length);
      byKey.set(key, series);
      this.#series.push(series);
    }
    const bounds = this.#bounds;
    let bucket = 0;
    while (bucket < bounds.length && durationSeconds > bounds[bucket]!) bucket++;
    series.counts[bucket]!++;
    series.sum += durationSeconds;
    series.count++;
  }

  /** The samples, as prom-client's Histogram returns them (cumulative buckets, `_sum`, `_count`). */
  async get(): Promise<MetricData> {
    const values: Sample[] = [];
    const bucketName = `${this.name}_bucket`;
    for (const series of this.#series) {
      let cumulative = 0;
      for (let i = 0; i < this.#bounds.length; i++) {
        cumulative += series.counts[i]!;
        values.push({ labels: { ...series.labels, le: this.#bounds[i]! }, value: cumulative, metricName: bucketName });
      }
      values.push(
        { labels: { ...series.labels, le: "+Inf" }, value: series.count, metricName: bucketName },
        { labels: { ...series.labels }, value: series.sum, metricName: `${this.name}_sum` },
        { labels: { ...series.labels }, value: series.count, metricName: `${this.name}_count` },
      );
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  /** Drops every series (prom-client's `registry.resetMetrics()` calls this). */
  reset(): void {
    this.#byRoute = new Map();
    this.#series = [];
  }
}
