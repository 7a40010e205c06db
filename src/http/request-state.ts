import type { H3Event } from "h3";
import type { Span } from "../integrations.js";

/** Per-request bookkeeping of the framework, kept on `event.context.keelson`. */
export class RequestState {
  readonly event: H3Event;
  /** `performance.now()` when the request entered the app. */
  readonly start: number;
  readonly span: Span;
  /** The thrown value of a failed request, for the tracer and the log. */
  error: unknown;
  /**
   * Set by an event-stream or WebSocket route: settles with the status to log when the stream or
   * socket ends, and the request is logged, measured and its span ended then, not at its head.
   */
  stream: Promise<number> | undefined;

  constructor(event: H3Event, start: number, span: Span) {
    this.event = event;
    this.start = start;
    this.span = span;
    this.error = undefined;
    this.stream = undefined;
  }
}

declare module "h3" {
  interface H3EventContext {
    /** keelson's per-request state (start time, server span, error). */
    keelson?: RequestState;
  }
}
