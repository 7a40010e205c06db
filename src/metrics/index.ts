/**
 * keelson/metrics: Prometheus metrics with prom-client. `app.use(definePrometheus())` records
 * `http_request_duration_seconds` for every request and serves `GET /metrics`, cluster-wide
 * under the keelson supervisor.
 */
export { KNOWN_METHODS, OTHER_METHOD, normalizeMethod } from "./method.js";
export { PROMETHEUS_CONTENT_TYPE } from "./metric-set.js";
export { definePrometheus, type PrometheusModule, type PrometheusOptions } from "./prometheus.js";
export { HTTP_SERVER_DURATION_BUCKETS, RequestHistogram, type MetricData, type Sample } from "./request-histogram.js";
