import type { Span as ApiSpan } from "@opentelemetry/api";
import type { Span } from "../integrations.js";
import { otelApi } from "./api.js";
import { OtelSpan } from "./span.js";

/** The OpenTelemetry span behind a keelson span (`ctx.span`), or undefined for the no-op tracer's. */
export function getOtelSpan(span: Span): ApiSpan | undefined {
  return span instanceof OtelSpan ? span.otel : undefined;
}

/**
 * Runs `fn` with `span` as OpenTelemetry's active span, so spans started through the
 * OpenTelemetry API inside it (auto-instrumented clients, `tracer.startActiveSpan`) become its
 * children. Needs a context manager (e.g. AsyncLocalStorageContextManager) to reach async code.
 */
export function withSpan<T>(span: Span, fn: () => T): T {
  const otel = getOtelSpan(span);
  if (otel === undefined) return fn();
  const { context, trace } = otelApi();
  return context.with(trace.setSpan(context.active(), otel), fn);
}
