import type { H3Event } from "h3";

/** Receives one observation per HTTP request (every request: 404s, errors and panics included). */
export interface MetricsCollector {
  /**
   * @param route the route template (`/books/:id`), or `UNMATCHED_ROUTE` when no route matched,
   *   so a raw path never becomes a label.
   * @param durationSeconds time from the request entering the app to its response being ready.
   */
  observeRequest(method: string, route: string, status: number, durationSeconds: number): void;
  /** A request rejected by load shedding (never routed, so not observed as a request); `reason` is a ShedReason. */
  observeShed?(reason: string): void;
  /**
   * A run of a scheduled job ended (`app.schedule()`); `outcome` is `success`, `failure`,
   * `aborted` or `skipped` (then `durationSeconds` is undefined: nothing ran).
   */
  observeJob?(job: string, outcome: string, durationSeconds: number | undefined): void;
  /** An event stream (`kind` `sse`) or WebSocket (`websocket`) of `route` opened: one more open connection. */
  streamOpened?(kind: string, route: string): void;
  /**
   * What `idempotency()` did with a request of `route`: `stored`, `replayed`, `conflict` (409, the
   * key in progress), `mismatch` (422, another request), `released` (5xx or refused before the
   * handler: nothing kept), `invalid` (400), `oversize` (response kept without its body), `store_error`.
   */
  observeIdempotency?(route: string, outcome: string): void;
  /** It ended. Streams are not observed through `observeRequest`: their duration is not a request latency. */
  streamClosed?(kind: string, route: string): void;
  /**
   * keelson closed a WebSocket of `route` on its own, at a limit: `reason` is `message_too_big`
   * (closed with 1009), `backlog` (its send buffer passed maxQueuedBytes) or `ping_timeout`.
   */
  webSocketLimitClosed?(route: string, reason: string): void;
}

/** The `route` value passed to metrics collectors and tracers for requests that matched no route. */
export const UNMATCHED_ROUTE = "__unmatched__";

export type SpanAttributeValue = string | number | boolean;

/** A unit of traced work. `traceId` is empty when nothing records it (the no-op tracer). */
export interface Span {
  readonly traceId: string;
  setAttribute(key: string, value: SpanAttributeValue): void;
  /** Records an exception and marks the span as failed. */
  recordException(error: unknown): void;
  end(): void;
}

/** How a request's server span ends: what the framework knows once the response is ready. */
export interface RequestSpanEnd {
  /** Route template, `undefined` when no route matched. */
  route: string | undefined;
  status: number;
  /** The thrown value for failed requests (5xx and recovered panics). */
  error?: unknown;
}

/**
 * Request tracing (docs/tracing.md). keelson calls `startRequestSpan` when a request arrives and
 * `endRequestSpan` once its response is ready; handlers start children through `ctx.startSpan`.
 * A request whose span is `noopTracer`'s span (nothing records it) gets no `endRequestSpan` call.
 */
export interface Tracer {
  startRequestSpan(event: H3Event): Span;
  endRequestSpan(span: Span, end: RequestSpanEnd): void;
  startSpan(name: string, options?: { parent?: Span; attributes?: Record<string, SpanAttributeValue> }): Span;
}

/** Translates message keys for a language (docs/errors.md, Translator). */
export interface Translator {
  /** Languages it has, most preferred first; `ctx.lang` is picked from these by Accept-Language. */
  readonly languages: readonly string[];
  translate(lang: string, key: string, ...args: unknown[]): string;
}

/** Background work started by `listen()` and stopped by a shutdown hook (docs/reference.md). */
export interface Scheduler {
  start(): void | Promise<void>;
  stop(signal: AbortSignal): void | Promise<void>;
}

/** A dependency probe for GET /health: throwing or rejecting means DOWN. */
export interface HealthChecker {
  readonly name: string;
  check(signal: AbortSignal): void | Promise<void>;
}

/** Runs during shutdown, in registration order; `signal` aborts at the shutdown deadline. */
export type ShutdownHook = (signal: AbortSignal) => void | Promise<void>;

const NOOP_SPAN: Span = Object.freeze({
  traceId: "",
  setAttribute() {},
  recordException() {},
  end() {},
});

/**
 * A method of keelson's own tracers, true while the next request's span would record nothing and
 * `startRequestSpan` would return the no-op span without reading the request: keelson's own listener
 * may then serve the request without making the h3 event that call takes (pipeline.ts).
 * @internal
 */
export const RECORDS_NOTHING: unique symbol = Symbol("keelson.tracer.recordsNothing");

/** True when `tracer` is the no-op tracer, or one of keelson's that would record nothing now. */
export function recordsNothing(tracer: Tracer): boolean {
  return tracer === noopTracer || (tracer as { [RECORDS_NOTHING]?: () => boolean })[RECORDS_NOTHING]?.() === true;
}

/** The default tracer: records nothing and costs nothing. */
export const noopTracer: Tracer = Object.freeze({
  startRequestSpan: () => NOOP_SPAN,
  endRequestSpan() {},
  startSpan: () => NOOP_SPAN,
});
