import type { Exception, Span as ApiSpan } from "@opentelemetry/api";
import type { Span, SpanAttributeValue } from "../integrations.js";
import { otelApi } from "./api.js";

/**
 * keelson's Span over an OpenTelemetry span. Whether it records is read once: on a
 * non-recording span (no SDK, or sampled out) every call but `end()` returns at once.
 */
export class OtelSpan implements Span {
  /** The OpenTelemetry span, for code that uses the OpenTelemetry API directly. */
  readonly otel: ApiSpan;
  /** Empty when the span has no valid trace id (no SDK and no incoming traceparent). */
  readonly traceId: string;
  readonly recording: boolean;

  constructor(otel: ApiSpan) {
    this.otel = otel;
    const traceId = otel.spanContext().traceId;
    this.traceId = traceId === otelApi().INVALID_TRACEID ? "" : traceId;
    this.recording = otel.isRecording();
  }

  setAttribute(key: string, value: SpanAttributeValue): void {
    if (this.recording) this.otel.setAttribute(key, value);
  }

  recordException(error: unknown): void {
    if (!this.recording) return;
    const exception = toException(error);
    this.otel.recordException(exception);
    this.otel.setStatus({ code: otelApi().SpanStatusCode.ERROR, message: typeof exception === "string" ? exception : exception.message });
  }

  end(): void {
    this.otel.end();
  }
}

/** A server span also remembers its method, for the name it gets once the route is known. */
export class RequestSpan extends OtelSpan {
  /** The method as the span name spells it: a known method, or `HTTP`. */
  readonly methodName: string;

  constructor(otel: ApiSpan, methodName: string) {
    super(otel);
    this.methodName = methodName;
  }
}

/** What OpenTelemetry's `recordException` accepts: an Error as is, anything else as a string. */
export function toException(error: unknown): Exception {
  if (error instanceof Error) return error;
  if (typeof error === "string") return error;
  try {
    return JSON.stringify(error) ?? String(error);
  } catch {
    return String(error);
  }
}
