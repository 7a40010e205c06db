import type { SpanContext } from "@opentelemetry/api";
import { otelApi } from "./api.js";

// version "-" trace-id "-" parent-id "-" flags, then (future versions only) "-" and more.
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_TRACE_ID = "0".repeat(32);
const ZERO_SPAN_ID = "0".repeat(16);

/**
 * Reads a W3C Trace Context `traceparent` (and its `tracestate`) into a remote span context,
 * or undefined when absent or invalid: version ff, all-zero ids, upper-case hex, or extra
 * fields on version 00. Parsed here because with only `@opentelemetry/api` installed the
 * global propagator is a no-op.
 */
export function readTraceparent(traceparent: string | null, tracestate: string | null | (() => string | null)): SpanContext | undefined {
  if (traceparent === null) return undefined;
  const match = TRACEPARENT.exec(traceparent.trim());
  if (match === null) return undefined;
  const [, version, traceId, spanId, flags, rest] = match as unknown as [string, string, string, string, string, string | undefined];
  if (version === "ff" || (version === "00" && rest !== undefined)) return undefined;
  if (traceId === ZERO_TRACE_ID || spanId === ZERO_SPAN_ID) return undefined;
  // Read only for a valid traceparent: W3C Trace Context says to ignore tracestate otherwise.
  const state = typeof tracestate === "function" ? tracestate() : tracestate;
  const { TraceFlags, createTraceState } = otelApi();
  return {
    traceId,
    spanId,
    // Only the sampled bit is defined; other bits of a newer version are not ours to forward.
    traceFlags: Number.parseInt(flags, 16) & TraceFlags.SAMPLED,
    isRemote: true,
    ...(state === null || state.trim() === "" ? {} : { traceState: createTraceState(state) }),
  };
}
