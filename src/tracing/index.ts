/**
 * keelson/tracing: keelson's `Tracer` (docs/tracing.md) on the OpenTelemetry API. `app.setTracer(otelTracer())`
 * gives every request a SERVER span following the stable HTTP semantic conventions; without an
 * SDK registered it costs next to nothing.
 */
export { getOtelSpan, withSpan } from "./context.js";
export { otelTracer, type OtelTracerOptions } from "./otel-tracer.js";
export {
  ATTR_ERROR_TYPE, ATTR_HTTP_REQUEST_METHOD, ATTR_HTTP_REQUEST_METHOD_ORIGINAL, ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE, ATTR_SERVER_ADDRESS, ATTR_SERVER_PORT, ATTR_URL_PATH, ATTR_URL_SCHEME, ATTR_USER_AGENT_ORIGINAL,
} from "./semconv.js";
export { readTraceparent } from "./traceparent.js";
export { OtelSpan } from "./span.js";
