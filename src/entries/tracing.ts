/**
 * keelson/tracing: keelson's `Tracer` (docs/tracing.md) on the OpenTelemetry API. `app.setTracer(createOtelTracer())`
 * gives every request a SERVER span following the stable HTTP semantic conventions; without an
 * SDK registered it costs next to nothing.
 */
export { getOtelSpan, withSpan } from "../tracing/context.js";
export { createOtelTracer, type OtelTracerOptions } from "../tracing/otel-tracer.js";
