import type { H3Event, H3Route } from "h3";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { ServerRequest } from "srvx";
import type { Span } from "../integrations.js";
import type { Logger } from "../logging/logger.js";
import { RequestLogger } from "../logging/request-logger.js";

/** Set on a request that came through the server's `upgrade` event (`streams/upgrades.ts`). */
const UPGRADE = Symbol("keelson.upgrade");

/**
 * Whether any request came through the upgrade path in this process: until one does, no request is
 * looked at for the mark (a service that never gets a WebSocket pays nothing per request for them).
 */
let upgradeSeen = false;

/** Marks a request that came through the server's `upgrade` event: its line is written when its outcome is known. */
export function markUpgrade(request: object): void {
  upgradeSeen = true;
  (request as { [UPGRADE]?: true })[UPGRADE] = true;
}

/**
 * A static route without middleware that keelson's own listener serves from node's request, with
 * no h3 event until something asks for one (pipeline.ts, `serveNode`; docs/architecture.md).
 */
export interface Lane {
  /** h3's own record of the route: what `event.context.matchedRoute` is once an event is made. */
  readonly route: H3Route;
  /** The route's handler when the lane was made: one put in its place (a plugin's wrapper) turns the lane off. */
  readonly handler: H3Route["handler"];
  /** The compiled route's way from node's request to its outcome, which it hands to `state.answer`. */
  readonly run: (state: RequestState, req: IncomingMessage) => void;
  /** Makes the request's h3 event, as h3 would have made it, when something asks for it. */
  readonly makeEvent: (state: RequestState) => H3Event;
}

/** Per-request bookkeeping of the framework, kept on `event.context.keelson`. */
export class RequestState {
  #event: H3Event | undefined;
  /** `performance.now()` when the request entered the app. */
  readonly start: number;
  readonly span: Span;
  /** The request id: the client's, when well formed, else generated (docs/logging.md#request-ids). */
  readonly requestId: string;
  /** The App's logger: what a middleware without the App at hand logs through (`logger(appLogger)`). */
  readonly appLogger: Logger;
  /** The thrown value of a failed request, for the tracer and the log. */
  error: unknown;
  #logger: RequestLogger | undefined;
  /**
   * Set by an event-stream or WebSocket route: settles with the status to log when the stream or
   * socket ends, and the request is logged, measured and its span ended then, not at its head.
   */
  stream: Promise<number> | undefined;
  /**
   * Set for a request that came through the server's `upgrade` event (a WebSocket handshake):
   * settles `stream` once its outcome is known, the socket's end for one that opened
   * (`streams/upgrades.ts`).
   */
  upgraded: ((status: number) => void) | undefined;
  /**
   * The handler answered with a streamed body (`long-response.ts`): the response is looked at
   * again for an event stream to register with the drain.
   */
  streamedBody: boolean;
  /** What `idempotency()` did with the request (`replayed`, `conflict`, …): named in its log line and counted. */
  idempotency: string | undefined;
  /**
   * The promise a route that reads a body returned (handler.ts). When h3 hands the very same promise
   * back to keelson's own listener, no middleware stands between them, and the listener sets
   * `answer`: the route's continuation then answers with what it would have settled that promise
   * with, and the listener waits on nothing (pipeline.ts, `serveNode`).
   */
  routeResult: Promise<unknown> | undefined;
  /**
   * Set by keelson's own listener for a `routeResult` it does not wait on: called with this state, and
   * `failed` for a thrown or rejected outcome. One function of the pipeline's, not a closure per request:
   * what it writes to is in `nodeRequest` and `nodeResponse`.
   */
  answer: ((state: RequestState, outcome: unknown, failed: boolean) => void) | undefined;
  /** The request `answer` answers: srvx's, as keelson's own listener made it. */
  nodeRequest: ServerRequest | undefined;
  /** Node's response `answer` writes to. */
  nodeResponse: ServerResponse | undefined;
  /** The lane that serves the request (set before anything else reads this state), else undefined. */
  lane: Lane | undefined;
  /** A lane's request: its path (no query) and srvx's `waitUntil`, for the event made later (node's request is `nodeResponse.req`). */
  lanePath: string;
  waitUntil: ((promise: Promise<unknown>) => void) | undefined;
  /** A lane's route has been entered: an event made from now on carries its match, as h3's dispatch sets it. */
  laneMatched: boolean;
  /** A lane's route params, as h3's router found them (undefined on a static path). */
  laneParams: Record<string, string> | undefined;

  /** `event` undefined: a lane's request, whose event is made on first use (`lane` set right after). */
  constructor(event: H3Event | undefined, start: number, span: Span, requestId: string, appLogger: Logger) {
    this.#event = event;
    this.appLogger = appLogger;
    this.start = start;
    this.span = span;
    this.requestId = requestId;
    this.error = undefined;
    this.#logger = undefined;
    this.stream = undefined;
    this.upgraded = undefined;
    this.streamedBody = false;
    // An upgrade is logged when its outcome is known, not when the app has answered the handshake.
    if (upgradeSeen && event !== undefined && (event.req as { [UPGRADE]?: true })[UPGRADE] === true) this.stream = new Promise((resolve) => (this.upgraded = resolve));
    this.idempotency = undefined;
    this.routeResult = undefined;
    this.answer = undefined;
    this.nodeRequest = undefined;
    this.nodeResponse = undefined;
    this.lane = undefined;
    this.lanePath = "";
    this.waitUntil = undefined;
    this.laneMatched = false;
    this.laneParams = undefined;
  }

  /** The request's h3 event; a lane's request gets it made now, the first time it is asked for. */
  get event(): H3Event {
    return this.#event ?? (this.#event = this.lane!.makeEvent(this));
  }

  /** The event if there is one yet: a lane's request has none until something asked for `event`. */
  get madeEvent(): H3Event | undefined {
    return this.#event;
  }

  /** The request logger, made on first use: a request that logs nothing pays nothing for it. */
  logger(base: Logger): RequestLogger {
    const event = this.#event;
    // A lane's route has no middleware: once entered, its match is the lane's, event or not.
    const threshold = event === undefined ? ((this.laneMatched ? this.lane!.route.meta?.keelsonLogRank : undefined) ?? base.threshold) : logThreshold(event, base);
    return (this.#logger ??= RequestLogger.forRequest(base, threshold, this.requestId, this.span.traceId));
  }
}

/** The route's `logLevel` as a rank, else the logger's own threshold. */
export function logThreshold(event: H3Event, base: Logger): number {
  return event.context.matchedRoute?.meta?.keelsonLogRank ?? base.threshold;
}

declare module "h3" {
  interface H3EventContext {
    /** keelson's per-request state (start time, server span, request id, error). */
    keelson?: RequestState;
  }
  interface H3RouteMeta {
    /** The rank of the route's `logLevel` option (see logging/level.ts). */
    readonly keelsonLogRank?: number;
  }
}
