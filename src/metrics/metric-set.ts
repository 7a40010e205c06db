import type { MetricsSnapshot } from "./ipc.js";
import type { MetricData, Sample } from "./request-histogram.js";

interface Family {
  readonly name: string;
  readonly help: string;
  readonly type: MetricData["type"];
  readonly samples: Map<string, Sample>;
}

/** The Prometheus text format's content type (version 0.0.4). */
export const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

const TYPES = new Set<string>(["counter", "gauge", "histogram", "summary"]);

/** Counters and histograms add up across processes; gauges and summary quantiles do not. */
export function isAdditive(type: string): boolean {
  return type === "counter" || type === "histogram";
}

function sampleKey(name: string, labels: Record<string, string | number>): string {
  const keys = Object.keys(labels).toSorted();
  let key = name;
  for (const label of keys) key += `\u0000${label}\u0001${String(labels[label])}`;
  return key;
}

function readMetric(raw: Record<string, unknown>): MetricData | undefined {
  const { name, help, type, values } = raw;
  if (typeof name !== "string" || typeof type !== "string" || !Array.isArray(values)) return undefined;
  return {
    name,
    help: typeof help === "string" ? help : "",
    // An unknown type cannot be summed safely: treat it as a gauge (kept per worker).
    type: TYPES.has(type) ? (type as MetricData["type"]) : "gauge",
    aggregator: "sum",
    values: values as Sample[],
  };
}

/**
 * How `MetricSet.add` treats a snapshot's gauges and summaries: `{ worker }` keeps them under a
 * `worker` label, `"additive"` drops them (the totals kept for departed workers), `"as-is"`
 * keeps them unchanged (metrics the primary makes itself, already labelled).
 */
export type AddScope = { worker: string } | "additive" | "as-is";

/**
 * Metric families merged from several processes. Counters and histograms are summed by label
 * set; gauges and summaries are never summed (a sum of heap sizes or of quantiles would be a
 * made-up number): they stay one series per worker.
 */
export class MetricSet {
  readonly #families = new Map<string, Family>();

  add(snapshot: MetricsSnapshot | readonly MetricData[], scope: AddScope): void {
    for (const raw of snapshot) {
      const metric = readMetric(raw as Record<string, unknown>);
      if (metric === undefined) continue;
      const additive = isAdditive(metric.type);
      if (!additive && scope === "additive") continue;
      const worker = !additive && typeof scope === "object" ? scope.worker : undefined;
      const family = this.#family(metric);
      for (const sample of metric.values) {
        const value = typeof sample.value === "number" ? sample.value : Number.NaN;
        const labels = worker === undefined ? { ...sample.labels } : { ...sample.labels, worker };
        const metricName = sample.metricName ?? metric.name;
        const key = sampleKey(metricName, labels);
        const existing = family.samples.get(key);
        if (existing !== undefined && additive) existing.value += value;
        else family.samples.set(key, { value, labels, metricName });
      }
    }
  }

  /** The merged families in prom-client's JSON shape (what `add` accepts back). */
  toJSON(): MetricData[] {
    return [...this.#families.values()].map((family) => ({
      name: family.name, help: family.help, type: family.type, aggregator: "sum",
      values: [...family.samples.values()].map((sample) => ({ ...sample, labels: { ...sample.labels } })),
    }));
  }

  /** The Prometheus text exposition format (version 0.0.4). */
  render(): string {
    let text = "";
    for (const family of this.#families.values()) {
      text += `# HELP ${family.name} ${escapeHelp(family.help)}\n# TYPE ${family.name} ${family.type}\n`;
      for (const sample of family.samples.values()) {
        text += `${sample.metricName ?? family.name}${renderLabels(sample.labels)} ${renderValue(sample.value)}\n`;
      }
    }
    return text;
  }

  #family(metric: MetricData): Family {
    let family = this.#families.get(metric.name);
    if (family === undefined) {
      family = { name: metric.name, help: metric.help, type: metric.type, samples: new Map() };
      this.#families.set(metric.name, family);
    }
    return family;
  }
}

function escapeHelp(help: string): string {
  return help.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");
}

function renderLabels(labels: Record<string, string | number>): string {
  const parts: string[] = [];
  for (const [name, value] of Object.entries(labels)) {
    const text = typeof value === "number" ? renderValue(value) : String(value);
    parts.push(`${name}="${text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"')}"`);
  }
  return parts.length === 0 ? "" : `{${parts.join(",")}}`;
}

function renderValue(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Number.POSITIVE_INFINITY) return "+Inf";
  if (value === Number.NEGATIVE_INFINITY) return "-Inf";
  return String(value);
}
