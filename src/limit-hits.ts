/**
 * How often this process reached each of its bounded limits, by name (`stream_replay_request_bytes`,
 * …): exported as `keelson_limit_hits_total{limit}` by `createPrometheus()` in a worker and summed with
 * the primary's own by the supervisor's metrics. Kept here, outside any feature, so that a feature
 * counts without depending on the metrics package; the names are fixed in code, so the label's
 * cardinality is bounded.
 */
const hits = new Map<string, number>();

export const LIMIT_HITS = "keelson_limit_hits_total";
export const LIMIT_HITS_HELP = "Times a bounded limit was reached (a replay cut short, a buffer trimmed, an unplaceable id), by limit.";

/** One more time `limit` was reached. */
export function countLimitHit(limit: string): void {
  hits.set(limit, (hits.get(limit) ?? 0) + 1);
}

/** The counts so far, by limit. */
export function limitHits(): ReadonlyMap<string, number> {
  return hits;
}
