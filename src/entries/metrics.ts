/**
 * keelson/metrics: Prometheus metrics with prom-client. `app.use(createPrometheus())` records
 * `http_request_duration_seconds` for every request and serves `GET /metrics`, cluster-wide
 * under the keelson supervisor.
 */
export { PROMETHEUS_CONTENT_TYPE } from "../metrics/metric-set.js";
export { createPrometheus, type PrometheusModule, type PrometheusOptions } from "../metrics/prometheus.js";
