// The module's binding, not the global: node defines globalThis.performance as an accessor, which
// optimised code reads through an inline cache on every request.
import { performance } from "node:perf_hooks";
import { H3, H3Event, HTTPError, toResponse, type H3Config, type H3Route, type H3RouteMeta, type H3EventContext, type HTTPResponse, type Middleware } from "h3";
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from "node:http";
import { FastResponse, type ServerRequest } from "srvx";
import { NodeRequest, sendNodeResponse } from "srvx/node";
import { addRoute, createRouter, findRoute, type RouterContext } from "rou3";
import { createError } from "../errors.js";
import { UNMATCHED_ROUTE, noopTracer, recordsNothing, type MetricsCollector } from "../integrations.js";
import type { LoadShedder } from "./load-shed.js";
import type { Logger } from "../logging/logger.js";
import { allowedMethods, buildAllowRouter, type AllowRouter } from "./allow.js";
import type { ContextServices } from "./context.js";
import type { Cors } from "./cors.js";
import { errorResponse, isRouteNotFound, logServerError, toKError } from "./error-response.js";
import { JSON_HEADERS, nodeRequestHeaders, setCheckedResponseHeader, setHeaderBeforeHead } from "./headers.js";
import { ATTR_REQUEST_ID, generateRequestId, isValidRequestId } from "./request-id.js";
import { RequestState, logThreshold, type Lane } from "./request-state.js";
import { RequestLogger } from "../logging/request-logger.js";
import type { RegisteredRoute } from "./route.js";
import { drainableEventStream, noteStreamedBody } from "./long-response.js";
import { frozenHeaderList, JSONValueResponse } from "./results.js";
import { EVENT_RES, laneOf } from "./handler.js";
import { StandardReasonResponse, setCheckedPendingHeader, writeHeadWithLength } from "./status-line.js";

/** What the pipeline reads from its App; `services.tracer` and the routes may change until `listen()`. */
export interface PipelineOptions {
  logger: Logger;
  services: ContextServices;
  cors: Cors | undefined;
  shedder: LoadShedder | undefined;
  /** False when `disableHealth`: then GET /health is an ordinary path for load shedding too. */
  health: boolean;
  /** The App's lifecycle: while it is shutting down, responses carry `Connection: close`. */
  lifecycle: { readonly shuttingDown: boolean };
  /** The App's route list (the live array): the 405 `Allow` header is built from it. */
  routes: readonly RegisteredRoute[];
  /** The request-id header (lower-cased), and whether a well-formed incoming one is kept. */
  requestIdHeader: string;
  trustRequestId: boolean;
}

/**
 * A request's way through the App (docs/architecture.md): load shedding, then h3 with keelson's
 * onRequest (state, span, CORS) and onError (405/404, KError → JSON), then one log line, one
 * metrics observation and the end of the server span once h3 has the Response (or, on keelson's
 * own server, once `serveNode` has a JSON answer to write). Not h3's
 * onResponse: that option costs every request extra promises, and each of them runs the async
 * hooks of an OpenTelemetry context manager.
 */
export class RequestPipeline {
  /** The h3 instance routes are registered on (`app.httpEngine`). */
  readonly engine: H3;
  /** Requests entered and not yet answered; the drain waits for them. */
  inflight = 0;
  /** Requests started since the App was created (a worker reports it to `keelson status`). */
  requests = 0;
  /** Of those, the requests a lane served (`#serveLane`): what tests look at to know the lanes are taken. */
  laneRequests = 0;
  metrics: MetricsCollector | undefined;
  // The options' fields one by one: the request path reads them without a hop through the options object.
  readonly #logger: Logger;
  readonly #services: ContextServices;
  readonly #cors: Cors | undefined;
  readonly #shedder: LoadShedder | undefined;
  readonly #health: boolean;
  readonly #lifecycle: { readonly shuttingDown: boolean };
  readonly #routes: readonly RegisteredRoute[];
  readonly #requestIdHeader: string;
  readonly #trustRequestId: boolean;
  /** Built from the routes when first needed and dropped when a route is added: in practice once, at listen(). */
  #allow: AllowRouter | undefined;
  /** The lanes of static paths, by path, then method (`prepare()`), as the router copy's matches are; undefined: none. */
  #lanes: Map<string, Map<string, LaneFound>> | undefined;
  /**
   * A copy of h3's router (every route of h3's, in h3's order, with rou3 as h3 uses it) whose matches
   * carry the lanes of routes with params; undefined when no such route has one.
   */
  #laneRouter: RouterContext<LaneMatch> | undefined;
  /** h3's route list the lanes were taken from, and its length: a route removed (`removeRoute` replaces the list) or added since, and they no longer hold. */
  #laneSource: readonly H3Route[] | undefined;
  #laneSourceLength = 0;
  /** keelson's own `onRequest` as h3's config holds it: one set in its place turns the lanes off. */
  readonly #onRequestHook: H3Config["onRequest"];
  /** `makeEvent` of every lane: one function of the pipeline's, not a closure per request. */
  readonly #makeEvent = (state: RequestState): H3Event => this.#laneEvent(state);

  constructor(options: PipelineOptions) {
    this.#logger = options.logger;
    this.#services = options.services;
    this.#cors = options.cors;
    this.#shedder = options.shedder;
    this.#health = options.health;
    this.#lifecycle = options.lifecycle;
    this.#routes = options.routes;
    this.#requestIdHeader = options.requestIdHeader;
    this.#trustRequestId = options.trustRequestId;
    this.engine = new H3(this.#config());
    this.#onRequestHook = this.engine.config.onRequest;
    this.#guardMiddleware();
    this.addRoute = this.engine.on.bind(this.engine);
    this.#noteEngineRoutes();
    this.fetch = this.fetch.bind(this);
    const cors = this.#cors;
    if (cors) this.engine.options("/**", (event) => cors.preflight(event));
  }

  /** h3's own `on`, for keelson's compiled routes: they note a streamed body themselves (handler.ts). */
  readonly addRoute: H3["on"];

  /** A route was added: the `Allow` lookup is rebuilt when next needed. */
  routesChanged(): void {
    this.#allow = undefined;
  }

  /** Builds the `Allow` lookup and the lanes now rather than on the first request (at `listen()`). */
  prepare(): void {
    this.#allow ??= buildAllowRouter(this.#routes);
    this.#buildLanes();
  }

  /**
   * The lanes: every route of h3's whose handler `compileRoute` made with a lane (`laneOf`), with a
   * method (not HEAD), no middleware of its own and no wildcard. All of h3's routes go into a copy of
   * h3's rou3 router, in h3's order, so that a lookup there finds what h3's router finds; a lane on a
   * plain static path also goes into a map by exact path and method, when the copy answers that path
   * with it (not a route registered before it for the same path and method, say). A request is served
   * by its lane (`#serveLane`) while nothing else could come between it and the route (`#laneFor`).
   */
  #buildLanes(): void {
    const source = this.engine["~routes"];
    const router = createRouter<LaneMatch>();
    const candidates: Lane[] = [];
    let withParams = 0;
    for (const route of source) {
      const method = route.method ?? "";
      const path = route.route ?? "";
      const run = laneOf(route.handler);
      // A method-less route, HEAD (answered without a body) and a wildcard are h3's to serve.
      const lane: Lane | undefined = run === undefined || method === "" || method === "HEAD" || route.middleware?.length || path.includes("*")
        ? undefined
        : { route, handler: route.handler, run, makeEvent: this.#makeEvent };
      addRoute(router, method, path, { lane });
      if (lane === undefined) continue;
      if (path.includes(":")) withParams++;
      else candidates.push(lane);
    }
    const lanes = new Map<string, Map<string, LaneFound>>();
    for (const lane of candidates) {
      const method = lane.route.method!;
      const path = lane.route.route!;
      // Looked up as is: a path URL parsing would keep as it is, which h3's router answers with this lane.
      if (!PLAIN_PATH.test(path) || findRoute(router, method, path)?.data.lane !== lane) continue;
      let byMethod = lanes.get(path);
      if (byMethod === undefined) lanes.set(path, (byMethod = new Map()));
      byMethod.set(method, { data: { lane }, params: undefined });
    }
    this.#lanes = lanes.size > 0 ? lanes : undefined;
    this.#laneRouter = withParams > 0 ? router : undefined;
    this.#laneSource = source;
    this.#laneSourceLength = source.length;
  }

  /**
   * The lane for a request, or undefined when it must take h3's way: no lane for its method and
   * path, or something that would come between it and the route (middleware added on h3, h3's
   * `onRequest` or `onResponse` set, a route added or removed or its handler replaced, a tracer
   * that records, load being shed).
   */
  #laneFor(method: string, path: string): LaneFound | undefined {
    let found = this.#lanes?.get(path)?.get(method);
    if (found === undefined) {
      const router = this.#laneRouter;
      // The router copy matches the path as h3 gets it from srvx's URL only when no normalising
      // (dot segments, percent-decoding, characters URL parsing escapes) would change it.
      if (router === undefined || method === "HEAD" || !PLAIN_PATH.test(path)) return undefined;
      found = findRoute(router, method, path);
      if (found === undefined) return undefined;
    }
    const lane = found.data.lane;
    if (lane === undefined) return undefined;
    const engine = this.engine;
    const config = engine.config;
    const routes = engine["~routes"];
    if (routes !== this.#laneSource || routes.length !== this.#laneSourceLength || engine["~middleware"].length > 0 || lane.route.handler !== lane.handler) return undefined;
    if (config.onRequest !== this.#onRequestHook || config.onResponse !== undefined || !recordsNothing(this.#services.tracer)) return undefined;
    const shedder = this.#shedder;
    if (shedder !== undefined && shedder.check(this.inflight) !== undefined) return undefined;
    return found;
  }

  /** The web fetch handler (bound): what `app.fetch` is, and what `listen()` serves through `serveNode`. */
  fetch(request: ServerRequest): Response | Promise<Response> {
    const shedder = this.#shedder;
    if (shedder !== undefined) {
      const rejected = this.#shed(shedder, request);
      if (rejected !== undefined) return rejected;
    }
    return this.#settle(this.engine.fetch(request), request);
  }

  /**
   * node:http's request listener on keelson's own server, in place of srvx's (`fallback`, which
   * answers what this does not take: a target that is not a path, as srvx checks it). It does what
   * srvx's listener and `fetch` do, with h3's own steps for one request (its `fetch`: the event,
   * `onRequest`, `handler`; then `toResponse`) taken one by one through its public API, except that
   * a JSON answer (a plain value, json(), created()) is written to node's response here rather
   * than made into a Response for srvx to take apart again. Every other answer (errors, streams,
   * `onResponse`, HEAD, a status without a body, headers set on `event.res`) becomes the Response
   * h3 makes of it, and srvx's `sendNodeResponse` writes it.
   */
  serveNode(req: IncomingMessage, res: ServerResponse, fallback: (req: IncomingMessage, res: ServerResponse) => void, waitUntil: ServerRequest["waitUntil"]): void {
    const url = req.url;
    if (url === undefined || url.charCodeAt(0) !== SLASH || !(res instanceof StandardReasonResponse)) {
      fallback(req, res);
      return;
    }
    if (this.#lanes !== undefined || this.#laneRouter !== undefined) {
      const queryAt = url.indexOf("?");
      const path = queryAt === -1 ? url : url.slice(0, queryAt);
      const found = this.#laneFor(req.method!, path);
      if (found !== undefined) {
        this.#serveLane(found.data.lane!, found.params, req, res, path, waitUntil);
        return;
      }
    }
    try {
      const request = new NodeRequest({ req, res }) as ServerRequest;
      request.waitUntil = waitUntil;
      const shedder = this.#shedder;
      if (shedder !== undefined) {
        const rejected = this.#shed(shedder, request);
        if (rejected !== undefined) {
          send(res, rejected);
          return;
        }
      }
      const engine = this.engine;
      const config = engine.config;
      const event = new H3Event(request, undefined, engine);
      let value: unknown;
      // As h3's fetch: a malformed URL and a throwing onRequest are answered as errors.
      try {
        if ((event as unknown as Record<symbol, unknown>)[MALFORMED_URL] === true && config.allowMalformedURL !== true) {
          throw new HTTPError({ status: 400, message: "Bad Request" });
        }
        const hook = config.onRequest;
        const hooked = hook === undefined ? undefined : (hook(event) as unknown);
        // As h3 tells a hook's promise: by its `then`, so a thenable waits too.
        value = typeof (hooked as PromiseLike<unknown> | undefined)?.then === "function"
          ? (hooked as PromiseLike<unknown>).then(() => engine.handler(event))
          : engine.handler(event);
      } catch (error) {
        value = Promise.reject(error);
      }
      if (value instanceof Promise) {
        const state = event.context.keelson;
        // The route's own promise, back from h3 unwrapped (no middleware between): the route's
        // continuation answers through `answer`, and nothing waits on the promise (RequestState.routeResult).
        if (state !== undefined && value === state.routeResult) {
          state.nodeRequest = request;
          state.nodeResponse = res;
          state.answer = this.#answer;
          return;
        }
        const pending = value;
        pending.then(
          (resolved) => this.#respond(resolved, event, request, res),
          // The rejected promise itself: h3's toResponse turns its reason into the error response.
          () => this.#respondWithH3(pending, event, request, res),
        );
        return;
      }
      this.#respond(value, event, request, res);
    } catch {
      // What srvx does when its fetch throws: nothing here should, and the client still gets an answer.
      failResponse(res);
    }
  }

  /**
   * A lane's request (`#laneFor`), as `serveNode` and h3 would take it up to the route: the id, the
   * state, CORS, then the route's match and its lane, which answers through `#answerLane`. The
   * state's `event` is made only if something asks for it.
   */
  #serveLane(lane: Lane, params: Record<string, string> | undefined, req: IncomingMessage, res: StandardReasonResponse, path: string, waitUntil: ServerRequest["waitUntil"]): void {
    try {
      const start = performance.now();
      const requestIdHeader = this.#requestIdHeader;
      let incoming: unknown = null;
      if (this.#trustRequestId) incoming = req.headers[requestIdHeader];
      // As #onRequest: anything but a well-formed id is dropped unseen.
      const requestId = typeof incoming === "string" && isValidRequestId(incoming) ? incoming : generateRequestId();
      const state = new RequestState(undefined, start, noopSpan, requestId, this.#logger);
      state.lane = lane;
      state.nodeResponse = res;
      state.lanePath = path;
      state.laneParams = params;
      state.waitUntil = waitUntil;
      state.answer = this.#answerLane;
      setCheckedPendingHeader(res, requestIdHeader, requestId);
      this.inflight++;
      this.requests++;
      this.laneRequests++;
      const cors = this.#cors;
      if (cors !== undefined) {
        try {
          cors.applyToNode(req.headers.origin, res);
        } catch (error) {
          // As a throwing onRequest in h3: answered as an error, before any route matched.
          this.#answerLane(state, error, true);
          return;
        }
      }
      state.laneMatched = true;
      lane.run(state, req);
    } catch {
      failResponse(res);
    }
  }

  /**
   * RequestState.answer for a lane's request: a JSON answer with no event made is written here, as
   * #writeJSON writes one; anything else is answered as `#answer` answers, with the event made now.
   */
  readonly #answerLane = (state: RequestState, outcome: unknown, failed: boolean): void => {
    if (!failed && state.madeEvent === undefined && outcome instanceof JSONValueResponse) {
      try {
        const res = state.nodeResponse as StandardReasonResponse;
        if (this.#writeAnswer(outcome, res.req.method!, state, res)) return;
      } catch {
        // A body JSON.stringify refuses: answered below through h3, as #respond does.
      }
    }
    this.#answer(state, outcome, failed);
  };

  /** The h3 event of a lane's request (`Lane.makeEvent`), as h3's fetch and dispatch would have left it. */
  #laneEvent(state: RequestState): H3Event {
    const res = state.nodeResponse!;
    const request = new NodeRequest({ req: res.req, res }) as ServerRequest;
    request.waitUntil = state.waitUntil;
    const event = new H3Event(request, undefined, this.engine);
    const context = event.context;
    context.keelson = state;
    if (state.laneMatched) {
      // As h3's handler sets them: a static route's match has no params (undefined).
      context.params = state.laneParams;
      context.matchedRoute = state.lane!.route;
    }
    state.nodeRequest = request;
    return event;
  }

  /** RequestState.answer, for every request that `serveNode` does not wait on; never throws. */
  readonly #answer = (state: RequestState, outcome: unknown, failed: boolean): void => {
    const event = state.event;
    const request = state.nodeRequest!;
    const res = state.nodeResponse as StandardReasonResponse;
    if (failed) this.#respondWithH3(Promise.reject(outcome), event, request, res);
    else this.#respond(outcome, event, request, res);
  };

  /** Never throws: it runs in promise reactions, where a throw would be an unhandled rejection. */
  #respond(value: unknown, event: H3Event, request: ServerRequest, res: StandardReasonResponse): void {
    try {
      if (value instanceof JSONValueResponse && this.#writeJSON(value, event, request, res)) return;
    } catch {
      // A body nothing wrote yet that JSON.stringify refuses (a json() from a middleware): h3 answers
      // it with an error response, as below. Nothing was recorded or written before the throw.
    }
    this.#respondWithH3(value, event, request, res);
  }

  /** h3's Response for `value` (a promise of one too), recorded and written by srvx; never throws. */
  #respondWithH3(value: unknown, event: H3Event, request: ServerRequest, res: StandardReasonResponse): void {
    try {
      send(res, this.#settle(toResponse(value, event, this.engine.config), request));
    } catch {
      failResponse(res);
    }
  }

  #settle(response: Response | Promise<Response>, request: ServerRequest): Response | Promise<Response> {
    return response instanceof Promise ? response.then((res) => this.#finish(res, request)) : this.#finish(response, request);
  }

  /**
   * Writes a JSON answer to node's response as srvx would write the FastResponse h3 makes of it
   * (the same status, reason phrase, headers and body), after the request's line, observation and
   * span. False, with nothing done, when h3 would make more of it than that: an `onResponse` hook,
   * `event.res` touched (a status or headers set through it), `onDispose` callbacks, a HEAD
   * request, a status without a body or out of range, headers beyond the shared JSON ones.
   */
  #writeJSON(value: JSONValueResponse, event: H3Event, request: ServerRequest, res: StandardReasonResponse): boolean {
    const state = event.context.keelson;
    const fields = event as unknown as Record<symbol, unknown>;
    if (state === undefined || fields[EVENT_RES] !== undefined || fields[EVENT_DISPOSE] !== undefined) return false;
    const method = request.method;
    if (method === "HEAD") return false;
    return this.#writeAnswer(value, method, state, res);
  }

  /** #writeJSON's write, and a lane's (which has no event to look at): false, with nothing done, as there. */
  #writeAnswer(value: JSONValueResponse, method: string, state: RequestState, res: StandardReasonResponse): boolean {
    if (state.stream !== undefined || state.streamedBody || res.headersSent || this.engine.config.onResponse !== undefined) return false;
    const status = value.status;
    // A status without a reason phrase of node's own is written with an empty one (status-line.ts): h3's way.
    if (typeof status !== "number" || STATUS_CODES[status] === undefined || status < 200 || status === 204 || status === 205 || status === 304) return false;
    const list = frozenHeaderList(value.headers);
    if (list === undefined) return false;
    const body = value.body;
    if (typeof body !== "string") return false;
    this.inflight--;
    if (this.#lifecycle.shuttingDown) setHeaderBeforeHead(res, "connection", "close");
    this.#record(method, state, status);
    writeHeadWithLength(res, status, list, String(Buffer.byteLength(body)));
    res.end(body);
    return true;
  }

  /** A 503 when the process is saturated, before any routing or logging; /health's liveness is never shed. */
  #shed(shedder: LoadShedder, request: ServerRequest): Response | undefined {
    const reason = shedder.check(this.inflight);
    if (reason === undefined || (this.#health && new URL(request.url).pathname === "/health")) return undefined;
    shedder.record(reason, this.inflight);
    this.metrics?.observeShed?.(reason);
    // srvx's FastResponse, as h3's own responses: written to the socket in this step. A web Response's
    // body is read through a stream, promise by promise, which costs far more.
    return new FastResponse(OVERLOADED_BODY, { status: 503, headers: { ...JSON_HEADERS, "retry-after": shedder.retryAfter } });
  }

  #onRequest(event: H3Event): void {
    const start = performance.now();
    const tracer = this.#services.tracer;
    const span = tracer === noopTracer ? noopSpan : tracer.startRequestSpan(event);
    const requestIdHeader = this.#requestIdHeader;
    let incoming: string | null = null;
    if (this.#trustRequestId) {
      const headers = nodeRequestHeaders(event);
      const value = headers === undefined ? event.req.headers.get(requestIdHeader) : headers[requestIdHeader];
      if (typeof value === "string") incoming = value;
    }
    // Anything but a well-formed id is dropped unseen: it is neither echoed nor logged.
    const requestId = incoming !== null && isValidRequestId(incoming) ? incoming : generateRequestId();
    event.context.keelson = new RequestState(event, start, span, requestId, this.#logger);
    // The name was checked by resolveRequestIdHeader, the id by isValidRequestId or made here.
    setCheckedResponseHeader(event, requestIdHeader, requestId);
    if (span !== noopSpan) span.setAttribute(ATTR_REQUEST_ID, requestId);
    this.inflight++;
    this.requests++;
    this.#cors?.apply(event);
  }

  /** One log line, one observation and the end of the server span, for every request; never throws. */
  #finish(response: Response, request: ServerRequest): Response {
    try {
      // h3 shares the event's context with the request (srvx's `request.context`).
      const context = request.context as H3EventContext | undefined;
      const state = context?.keelson;
      // Also covers requests already running when shutdown began: the head is not written yet.
      if (this.#lifecycle.shuttingDown) request.runtime?.node?.res?.setHeader("connection", "close");
      // No state means h3 answered before onRequest ran (a malformed URL gets 400 there):
      // still one log line and one observation, as for every other request.
      if (state !== undefined) {
        this.inflight--;
        const dispose = (state.event as unknown as Record<symbol, DisposeState | undefined>)[EVENT_DISPOSE];
        if (dispose !== undefined && dispose.disposed !== true) this.#hearDisposeCallbacks(dispose, state.event);
      }
      // An event stream keelson did not make (h3's createEventStream): ended at the drain as sse()'s are.
      if (state?.streamedBody === true && state.stream === undefined) {
        const drainable = drainableEventStream(response, context?.matchedRoute?.route ?? state.event.url.pathname, this.#services.streams);
        if (drainable !== undefined) {
          response = drainable.response;
          state.stream = drainable.ended;
        }
      }
      // An event stream or a WebSocket: logged and its span ended when it ends, with its whole duration.
      if (state?.stream !== undefined) {
        void state.stream.then((status) => this.#recordStream(request, state, status));
        return response;
      }
      if (state !== undefined) {
        this.#record(request.method, state, response.status);
        return response;
      }
      // h3 answered before onRequest ran: no event, no span; the id is made and echoed here.
      const status = response.status;
      const requestId = generateRequestId();
      const matched = context?.matchedRoute;
      this.#logger.request({ method: request.method, path: new URL(request.url).pathname, status, durationMs: 0, requestId, traceId: undefined, idempotency: undefined }, matched?.meta?.keelsonLogRank);
      this.metrics?.observeRequest(request.method, matched?.route ?? UNMATCHED_ROUTE, status, 0);
      this.#echoLate(request, response, requestId);
    } catch (error) {
      // A collector or tracer that throws loses its own record; the response still goes out.
      console.error("keelson: recording the request failed:", error);
    }
    return response;
  }

  /** The request's one log line, one observation and the end of its server span; never throws. */
  #record(method: string, state: RequestState, status: number): void {
    try {
      const durationMs = performance.now() - state.start;
      // A lane's request without an event: the lane's match and path, as h3 would have found them.
      const event = state.madeEvent;
      const matched = event === undefined ? (state.laneMatched ? state.lane!.route : undefined) : event.context.matchedRoute;
      const route = matched?.route;
      const traceId = state.span.traceId;
      const idempotency = state.idempotency;
      this.#logger.request({ method, path: event === undefined ? state.lanePath : event.url.pathname, status, durationMs, requestId: state.requestId, traceId: traceId === "" ? undefined : traceId, idempotency }, matched?.meta?.keelsonLogRank);
      this.metrics?.observeRequest(method, route ?? UNMATCHED_ROUTE, status, durationMs / 1000);
      if (idempotency !== undefined) this.metrics?.observeIdempotency?.(route ?? UNMATCHED_ROUTE, idempotency);
      // The no-op span (no tracer, or one with nothing to record) has nothing to end.
      if (state.span !== noopSpan) this.#services.tracer.endRequestSpan(state.span, { route, status, error: state.error });
    } catch (error) {
      // A collector or tracer that throws loses its own record; the response still goes out.
      console.error("keelson: recording the request failed:", error);
    }
  }

  /** The id for a response h3 made before onRequest ran: to the head not written yet, or onto the Response. */
  #echoLate(request: ServerRequest, response: Response, requestId: string): void {
    const name = this.#requestIdHeader;
    const nodeRes = request.runtime?.node?.res;
    if (nodeRes !== undefined && setHeaderBeforeHead(nodeRes, name, requestId)) return;
    if (!response.headers.has(name)) response.headers.set(name, requestId);
  }

  #recordStream(request: ServerRequest, state: RequestState, status: number): void {
    try {
      const durationMs = performance.now() - state.start;
      const traceId = state.span.traceId;
      this.#logger.request(
        { method: request.method, path: state.event.url.pathname, status, durationMs, requestId: state.requestId, traceId: traceId === "" ? undefined : traceId },
        state.event.context.matchedRoute?.meta?.keelsonLogRank,
      );
      if (state.span !== noopSpan) this.#services.tracer.endRequestSpan(state.span, { route: state.event.context.matchedRoute?.route, status });
    } catch (error) {
      console.error("keelson: recording the request failed:", error);
    }
  }

  /**
   * h3's options. `silent`: keelson logs what h3 would print, through its own logger, so a hook
   * that h3 would report to the console (`config.onResponse`, which an application may set on
   * `httpEngine.config`) is wrapped to log its failure as h3 would, with the request's ids.
   */
  #config(): H3Config {
    const config: H3Config = {
      silent: true,
      onRequest: (event) => this.#onRequest(event),
      onError: (error, event) => this.#onError(error, event),
    };
    let hook: H3Config["onResponse"];
    const report = (event: H3Event, error: unknown) => this.#logFailure(event, error, "failed in an onResponse hook");
    Object.defineProperty(config, "onResponse", {
      enumerable: true,
      get: () => hook,
      set: (given: H3Config["onResponse"]) => {
        hook = given === undefined ? undefined : (response, event) => {
          try {
            const result = given(response, event);
            return result instanceof Promise ? result.catch((error: unknown) => report(event, error)) : result;
          } catch (error) {
            report(event, error);
          }
        };
      },
    });
    return config;
  }

  /**
   * h3 runs `onDispose` callbacks once the response is done and, `silent`, says nothing of one that
   * throws: each pending callback (and each added later) is wrapped so that its failure is one ERROR
   * line with the request's ids. Callbacks h3 ran before the response reached keelson (in-process,
   * a body that is not streamed) are out of reach: docs/h3.md says so.
   */
  #hearDisposeCallbacks(dispose: DisposeState, event: H3Event): void {
    const report = (error: unknown) => this.#logFailure(event, error, "failed in an onDispose callback");
    const wrap = (callback: DisposeCallback): DisposeCallback => (reason) => {
      try {
        const result = callback(reason);
        return result instanceof Promise ? result.catch(report) : result;
      } catch (error) {
        report(error);
      }
    };
    const callbacks = dispose.callbacks.map(wrap);
    callbacks.push = (...added: DisposeCallback[]) => Array.prototype.push.apply(callbacks, added.map(wrap));
    dispose.callbacks = callbacks;
  }

  /** One ERROR line with the request's ids for a failure that does not change the response. */
  #logFailure(event: H3Event, error: unknown, what: string): void {
    const state = event.context.keelson;
    const logger = state ? state.logger(this.#logger) : RequestLogger.forRequest(this.#logger, logThreshold(event, this.#logger), generateRequestId(), "");
    logServerError(logger, event, error, what);
  }

  /** keelson's answer to a request no route matched: 405 with `Allow` when the path has other methods, else 404. */
  #unmatched(event: H3Event): HTTPResponse {
    const allow = allowedMethods(this.#allow ??= buildAllowRouter(this.#routes), event.url.pathname);
    return allow.length > 0
      ? errorResponse(createError("METHOD_NOT_ALLOWED"), { allow: allow.join(", ") })
      : errorResponse(createError("NOT_FOUND"));
  }

  /**
   * Middleware added with `engine.use` (and so `app.use`) that calls `next()` gets keelson's
   * 404/405 from it when no route matched, rather than h3's not-found marker: h3's `onResponse`
   * turns that marker into h3's own 404 body (the full URL, query string included) without
   * passing through onError, and never into a 405.
   */
  #guardMiddleware(): void {
    const engine = this.engine;
    const use = engine.use.bind(engine) as (...args: unknown[]) => H3;
    const guard = (fn: unknown): unknown => {
      // One that declares no `next` cannot call it; a mounted h3 app keeps h3's own handling.
      if (typeof fn !== "function" || fn.length < 2) return fn;
      const middleware = fn as Middleware;
      const settle = (value: unknown, event: H3Event) =>
        value === NOT_FOUND && event.context.matchedRoute === undefined ? this.#unmatched(event) : value;
      return function keelsonGuarded(event: H3Event, next: () => unknown) {
        return middleware(event, () => {
          const value = next();
          return value instanceof Promise ? value.then((resolved) => settle(resolved, event)) : settle(value, event);
        });
      };
    };
    engine.use = ((...args: unknown[]) => {
      if (typeof args[0] === "string") args[1] = guard(args[1]);
      else args[0] = guard(args[0]);
      use(...args);
      return engine;
    }) as H3["use"];
  }

  /**
   * A handler added on `httpEngine` (`get`, `post`, `on`, `all`) has its result looked at as a
   * keelson route's is: an event stream it answers with is registered with the drain. Its `meta`
   * is kept; a `{ fetch }` handler (a mounted web app) answers for itself.
   */
  #noteEngineRoutes(): void {
    const engine = this.engine;
    const on = this.addRoute;
    engine.on = ((method: string, route: string, handler: unknown, options?: unknown) => {
      if (typeof handler === "function") {
        const given = handler as ((event: H3Event) => unknown) & { meta?: H3RouteMeta };
        const noted = Object.assign(function keelsonEngineRoute(event: H3Event): unknown {
          const value = given(event);
          if (value instanceof Promise) {
            return value.then((resolved: unknown) => {
              noteStreamedBody(resolved, event);
              return resolved;
            });
          }
          noteStreamedBody(value, event);
          return value;
        }, given.meta === undefined ? {} : { meta: given.meta });
        return on(method as Parameters<H3["on"]>[0], route, noted, options as Parameters<H3["on"]>[3]);
      }
      return on(method as Parameters<H3["on"]>[0], route, handler as Parameters<H3["on"]>[2], options as Parameters<H3["on"]>[3]);
    }) as H3["on"];
  }

  #onError(error: HTTPError, event: H3Event): HTTPResponse {
    if (isRouteNotFound(error, event)) return this.#unmatched(event);
    const { kerror, original, headers, unhandled } = toKError(error);
    const state = event.context.keelson;
    if (kerror.statusCode >= 500 || unhandled) {
      if (state) state.error = original;
      const requestId = state?.requestId ?? generateRequestId();
      logServerError(state ? state.logger(this.#logger) : RequestLogger.forRequest(this.#logger, logThreshold(event, this.#logger), requestId, ""), event, original);
      return errorResponse(kerror, kerror.headers, requestId, headers);
    }
    // An oversized body is left unread: close the connection rather than read it to the end.
    const extra = kerror.statusCode === 413 ? { ...kerror.headers, connection: "close" } : kerror.headers;
    return errorResponse(kerror, extra, undefined, headers);
  }
}

const noopSpan = noopTracer.startSpan("noop");
/**
 * Where h3 keeps an event's `onDispose` callbacks until the response is done (`Symbol.for`: the same
 * in every copy of h3); test/h3-compat-hooks.test.ts notices if h3 moves them.
 */
const EVENT_DISPOSE = Symbol.for("h3.internal.event.dispose");
type DisposeCallback = (reason?: unknown) => unknown;
interface DisposeState {
  callbacks: DisposeCallback[];
  disposed?: boolean;
}
/** What h3's router answers when no route matched (`Symbol.for`: the same symbol in every copy of h3). */
const NOT_FOUND = Symbol.for("h3.notFound");
/** Where h3's event marks a URL it could not decode (its fetch answers 400 unless `allowMalformedURL`). */
const MALFORMED_URL = Symbol.for("h3.internal.event.malformed");
const SLASH = 0x2f;

/** What the lanes' router copy carries: the route's lane, if it has one. */
interface LaneMatch {
  readonly lane: Lane | undefined;
}

/** A lane found for a request, the way rou3 answers a lookup: its match and the params (none on a static path). */
interface LaneFound {
  readonly data: LaneMatch;
  readonly params?: Record<string, string> | undefined;
}

/**
 * A path srvx's URL keeps as it is and h3's event does not decode: characters that need no
 * escaping, and no segment that starts with a `.` (so no `.` or `..` segment; `/.well-known/…` is
 * left to h3 too).
 */
const PLAIN_PATH = /^(?:\/(?!\.)[\w\-.~!$&'()*+,;=:@]*)+$/;

/** A Response (or the promise of one) written to node's response by srvx; never throws. */
function send(res: ServerResponse, response: Response | Promise<Response>): void {
  if (response instanceof Promise) {
    response.then((resolved) => send(res, resolved), () => failResponse(res));
    return;
  }
  sendNodeResponse(res, response).catch(() => failResponse(res));
}

/** srvx's answer when a response cannot be sent: an empty 500 while the head is not out, else the socket closed. */
function failResponse(res: ServerResponse): void {
  if (res.writableEnded) return;
  if (res.headersSent) res.destroy();
  else {
    res.statusCode = 500;
    res.end();
  }
}
const OVERLOADED_BODY = JSON.stringify(createError("SERVICE_UNAVAILABLE", "the service is overloaded: retry later"));
