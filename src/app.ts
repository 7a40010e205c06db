import { H3, toRequest, type H3Event, type H3EventContext, type HTTPError, type HTTPResponse, type Middleware } from "h3";
import { FastResponse, type ServerRequest } from "srvx";
import {
  DEFAULT_BODY_LIMIT, DEFAULT_DOCS_PATH, DEFAULT_DOCS_VERSION, DEFAULT_HEALTH_TIMEOUT, DEFAULT_PORT,
  DEFAULT_SHUTDOWN_TIMEOUT, ENVS, checkConfig, type DocsConfig, type Env, type KConfig,
} from "./config.js";
import { PORT_RULE, envNumber } from "./checks.js";
import { defineDocsRoutes } from "./docs/index.js";
import { documentAsHealth } from "./docs/builtins.js";
import { createError } from "./errors.js";
import { Group, type Module, type Router } from "./group.js";
import { checkHealth } from "./health.js";
import {
  UNMATCHED_ROUTE, noopTracer, type HealthChecker, type MetricsCollector, type Scheduler, type ShutdownHook,
  type Tracer, type Translator,
} from "./integrations.js";
import { allowedMethods, buildAllowRouter, type AllowRouter } from "./http/allow.js";
import { createCors, type Cors } from "./http/cors.js";
import { joinPath } from "./http/path.js";
import { errorResponse, isRouteNotFound, logServerError, toKError } from "./http/error-response.js";
import { compileRoute } from "./http/handler.js";
import { JSON_HEADERS, addNodeResponseHeader, readRequestHeader, setResponseHeader } from "./http/headers.js";
import { ATTR_REQUEST_ID, generateRequestId, isValidRequestId, resolveRequestIdHeader } from "./http/request-id.js";
import { Lifecycle, type NamedHook, type ShutdownReport } from "./lifecycle/lifecycle.js";
import { LoadShedder } from "./lifecycle/load-shed.js";
import { handleSignals } from "./lifecycle/signals.js";
import { defineJob, type Job, type JobOptions } from "./jobs/define.js";
import { JobScheduler } from "./jobs/scheduler.js";
import { attachWorkerLink, reportWorkerFailure } from "./cluster/worker-link.js";
import { RequestState, logThreshold } from "./http/request-state.js";
import { parseLogLevel, levelRank } from "./logging/level.js";
import { Logger } from "./logging/logger.js";
import { RequestLogger } from "./logging/request-logger.js";
import { show } from "./checks.js";
import { json } from "./http/results.js";
import { get, type Controller, type RegisteredRoute, type Route } from "./http/route.js";
import { OpenStreams, isWebSocketRoute } from "./streams/open-streams.js";

/** KConfig with every default applied. */
export interface ResolvedConfig extends Required<Pick<KConfig, "port" | "env" | "disableHealth" | "bodyLimit" | "healthTimeout" | "shutdownTimeout" | "shutdownDelay">> {
  serviceName: string;
  version: string;
  host: string | undefined;
  docs: DocsConfig & { path: string; title: string; version: string };
  /** Lower-cased. */
  requestIdHeader: string;
  trustRequestId: boolean;
}

function resolveConfig(config: KConfig): ResolvedConfig {
  const envPort = config.port === undefined ? envNumber("PORT", PORT_RULE) : undefined;
  const nodeEnv = process.env.NODE_ENV as Env | undefined;
  const docsVersion = config.docs?.version ?? DEFAULT_DOCS_VERSION;
  const serviceName = config.serviceName ?? "keelson-service";
  const resolved: ResolvedConfig = {
    serviceName,
    version: config.version ?? docsVersion,
    port: config.port ?? envPort ?? DEFAULT_PORT,
    host: config.host,
    env: config.env ?? (nodeEnv && ENVS.includes(nodeEnv) ? nodeEnv : "development"),
    disableHealth: config.disableHealth ?? false,
    docs: {
      ...config.docs, path: joinPath(config.docs?.path ?? DEFAULT_DOCS_PATH, ""), title: config.docs?.title ?? serviceName, version: docsVersion,
    },
    bodyLimit: config.bodyLimit ?? DEFAULT_BODY_LIMIT,
    healthTimeout: config.healthTimeout ?? DEFAULT_HEALTH_TIMEOUT,
    shutdownTimeout: config.shutdownTimeout ?? DEFAULT_SHUTDOWN_TIMEOUT,
    shutdownDelay: config.shutdownDelay ?? 0,
    requestIdHeader: resolveRequestIdHeader(config.requestIdHeader),
    trustRequestId: resolveBoolean(config.trustRequestId, "trustRequestId", true),
  };
  checkConfig({ ...resolved, cors: config.cors });
  return resolved;
}

function resolveBoolean(value: unknown, name: string, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== "boolean") throw new Error(`${name} must be true or false, got ${show(value)}`);
  return value;
}

/** The App's logger: the one given, else one at `logLevel` (else LOG_LEVEL, else the spec's rule). */
function resolveLogger(config: KConfig, isProduction: boolean): Logger {
  if (config.logLevel === undefined) return config.logger ?? new Logger({ isProduction });
  const level = parseLogLevel(config.logLevel, "logLevel");
  if (config.logger !== undefined) {
    throw new Error(`logLevel ("${level}") cannot be combined with logger: give that Logger its own level (new Logger({ isProduction, level }))`);
  }
  return new Logger({ isProduction, level });
}

/**
 * The application: an h3 app with request logging, CORS, panic recovery, the KError → JSON
 * error handler, GET /health and the docs routes installed, plus the process lifecycle.
 */
export class App implements Router {
  readonly config: ResolvedConfig;
  /**
   * The logger the App uses for its own lines and request logs. **Its `error()` exits the process**
   * (fatal startup errors); inside a handler log through `ctx.logger`, whose `error()` returns.
   */
  readonly logger: Logger;
  /** The underlying h3 instance; routes added on it directly are logged and measured too. */
  readonly httpEngine: H3;
  readonly #services: { logger: Logger; tracer: Tracer; translator: Translator | undefined; streams: OpenStreams };
  readonly #routes: RegisteredRoute[] = [];
  readonly #checkers: HealthChecker[] = [];
  readonly #schedulers: Scheduler[] = [];
  readonly #hooks: NamedHook[] = [];
  readonly #startup: Promise<unknown>[] = [];
  readonly #lifecycle: Lifecycle;
  readonly #cors: Cors | undefined;
  /** Built from `#routes` when first needed and dropped when a route is added: in practice once, at listen(). */
  #allow: AllowRouter | undefined;
  #metrics: MetricsCollector | undefined;
  #jobs: JobScheduler | undefined;
  readonly #shedder: LoadShedder | undefined;
  #inflight = 0;
  #requests = 0;
  #listening: Promise<void> | undefined;

  constructor(config: KConfig = {}) {
    this.config = resolveConfig(config);
    this.logger = resolveLogger(config, this.config.env === "production");
    const streams = new OpenStreams(() => this.#metrics, this.logger);
    this.#services = { logger: this.logger, tracer: noopTracer, translator: undefined, streams };
    this.#lifecycle = new Lifecycle({
      logger: this.logger,
      shutdownTimeout: this.config.shutdownTimeout,
      shutdownDelay: this.config.shutdownDelay,
      hooks: this.#hooks,
      inflight: () => this.#inflight,
      streams,
      websockets: () => this.#routes.some(({ route }) => isWebSocketRoute(route)),
    });
    // Steps 1–4 of the construction order in docs/routing.md: request logging and CORS start in onRequest, panic
    // recovery and the error handler are onError, the log line is written by fetch() once h3 has
    // the Response. Not h3's onResponse: that option costs every request four promises, and
    // each of them runs the async hooks of an OpenTelemetry context manager.
    this.#cors = config.cors === false ? undefined : createCors(config.cors ?? {});
    this.httpEngine = new H3({
      silent: true,
      onRequest: (event) => this.#onRequest(event),
      onError: (error, event) => this.#onError(error, event),
    });
    this.fetch = this.fetch.bind(this);
    const shedding = config.loadShedding ?? false;
    this.#shedder = shedding === false ? undefined : new LoadShedder(shedding === true ? {} : shedding, this.logger);
    const cors = this.#cors;
    if (cors) this.httpEngine.options("/**", (event) => cors.preflight(event));
    if (!this.config.disableHealth) this.route(this.#healthRoute());
    if (this.config.env !== "production") {
      for (const route of defineDocsRoutes(this.config.docs, () => this.#routes)) this.route(route);
    }
  }

  get app(): App {
    return this;
  }

  /** The tracer in use: the no-op tracer until `setTracer`. Never undefined. */
  get tracer(): Tracer {
    return this.#services.tracer;
  }

  /**
   * Every route registered through keelson, GET /health and the docs routes included; not the
   * routes added on `httpEngine` directly. The OpenAPI document and the 405 `Allow` header come from it.
   */
  get routes(): readonly RegisteredRoute[] {
    return this.#routes;
  }

  /** The port the server listens on (resolved when configured as 0); undefined before listen. */
  get port(): number | undefined {
    return this.#lifecycle.port;
  }

  route(route: Route): this {
    return this.addRoute(route, "", []);
  }

  /** @internal Groups call this with their prefix and middleware. */
  addRoute(route: Route, prefix: string, middleware: readonly Middleware[]): this {
    const path = joinPath(prefix, route.path);
    // As h3's own serve() does: the routes (and the OpenAPI document built from them) are fixed
    // once the server is up; a route added later is almost always a bug.
    if (this.#lifecycle.state !== "created") throw new Error(`cannot add ${route.method} ${path}: the server has started (add routes before listen())`);
    const handler = compileRoute(route, this.#services, this.config.bodyLimit);
    const all = [...middleware, ...(route.options.middleware ?? [])];
    const logLevel = route.options.logLevel;
    // The request line is written after h3 is done with the route: its threshold travels on the match.
    const meta = logLevel === undefined ? undefined : { keelsonLogRank: levelRank(logLevel) };
    this.httpEngine.on(route.method, path, handler, all.length > 0 || meta ? { middleware: all.length > 0 ? all : undefined, meta } : undefined);
    this.#routes.push({ method: route.method, path, route, middleware: all });
    this.#allow = undefined;
    return this;
  }

  registerController(controller: Controller): this {
    for (const route of controller.routes()) this.route(route);
    return this;
  }

  /** Installs a module; an h3 middleware function is added as global middleware instead. */
  use(module: Module | Middleware): this {
    if (typeof module === "function") this.httpEngine.use(module);
    else this.installModule(module, this);
    return this;
  }

  /** @internal A failing register step is kept and makes `listen()` reject. */
  installModule(module: Module, router: Router): void {
    // A plain object literal would otherwise be reported as "module Object".
    const name = module.name ?? (module.constructor === Object ? undefined : module.constructor?.name) ?? "(unnamed)";
    const fail = (error: unknown) => new Error(`module ${name} failed to register: ${(error as Error)?.message ?? String(error)}`, { cause: error });
    let step: Promise<unknown>;
    try {
      const result = module.register(router);
      step = result instanceof Promise ? result.catch((error: unknown) => Promise.reject(fail(error))) : Promise.resolve();
    } catch (error) {
      step = Promise.reject(fail(error));
    }
    // Observed here so a rejection before listen() is not an unhandled rejection; listen() still sees it.
    step.catch(() => {});
    this.#startup.push(step);
  }

  group(prefix: string, ...middleware: Middleware[]): Group {
    return new Group(this, prefix, middleware);
  }

  /** Registers a shutdown hook; hooks run once each, in registration order. */
  onShutdown(hook: ShutdownHook, name?: string): this {
    this.#hooks.push({ name: name ?? (hook.name || `hook #${this.#hooks.length + 1}`), hook });
    return this;
  }

  setMetricsCollector(collector: MetricsCollector): this {
    this.#metrics = collector;
    return this;
  }

  setTracer(tracer: Tracer): this {
    this.#services.tracer = tracer;
    return this;
  }

  setTranslator(translator: Translator): this {
    this.#services.translator = translator;
    return this;
  }

  /** Starts the scheduler with `listen()` and stops it from a shutdown hook. */
  registerScheduler(scheduler: Scheduler): this {
    this.#schedulers.push(scheduler);
    return this.onShutdown((signal) => scheduler.stop(signal), `scheduler #${this.#schedulers.length}`);
  }

  /**
   * Runs `run` on a schedule (`cron` or `every`) from `listen()` to the shutdown, which aborts
   * and awaits a run in progress within its budget. Under the supervisor, `runOn: "one"`
   * (default) runs each tick on one worker, `"each"` on every worker (docs/jobs.md).
   *
   * @example
   * app.schedule({ name: "purge-sessions", cron: "0 * * * *", run: ({ signal }) => sessions.purgeExpired(signal) });
   */
  schedule(options: JobOptions | Job): this {
    const job = defineJob(options);
    if (this.#lifecycle.state !== "created") throw new Error(`cannot schedule job ${job.name}: the server has started (schedule jobs before listen())`);
    if (this.#jobs === undefined) {
      const jobs = (this.#jobs = new JobScheduler({ logger: this.logger, metrics: () => this.#metrics }));
      this.#schedulers.push(jobs);
      // First of the hooks, whenever scheduled: runs in progress are work in flight, like requests in
      // the drain, and need what later hooks close (the database) or report (the final metrics).
      this.#hooks.unshift({ name: "scheduled jobs: finish the runs in progress", hook: (signal) => jobs.stop(signal) });
    }
    this.#jobs.add(job);
    return this;
  }

  registerHealthChecker(checker: HealthChecker): this {
    this.#checkers.push(checker);
    return this;
  }

  /** Sends a request through the app in-process, with no socket (for tests). */
  async request(input: string | URL | Request, init?: RequestInit): Promise<Response> {
    await Promise.all(this.#startup);
    return this.fetch(toRequest(input, init));
  }

  /**
   * The app as a web fetch handler, bound: what `listen()` serves and `request()` calls. Mount
   * the app elsewhere through this (h3's `mount("/api", app)` takes it), not through
   * `httpEngine.fetch`, which skips the request log line, the metrics and the server span's end.
   */
  fetch(request: ServerRequest): Response | Promise<Response> {
    if (this.#shedder !== undefined) {
      const rejected = this.#shed(this.#shedder, request);
      if (rejected !== undefined) return rejected;
    }
    const response = this.httpEngine.fetch(request);
    return response instanceof Promise ? response.then((res) => this.#finish(res, request)) : this.#finish(response, request);
  }

  /** A 503 when the process is saturated, before any routing or logging; /health's liveness is never shed. */
  #shed(shedder: LoadShedder, request: ServerRequest): Response | undefined {
    const reason = shedder.check(this.#inflight);
    if (reason === undefined || (!this.config.disableHealth && new URL(request.url).pathname === "/health")) return undefined;
    shedder.record(reason, this.#inflight);
    this.#metrics?.observeShed?.(reason);
    // srvx's FastResponse, as h3's own responses: written to the socket in this step. A web Response's
    // body is read through a stream, promise by promise, at about ten times the cost.
    return new FastResponse(OVERLOADED_BODY, { status: 503, headers: { ...JSON_HEADERS, "retry-after": shedder.retryAfter } });
  }

  /**
   * Starts the server and resolves once it has shut down (by a signal or `close()`). The first
   * SIGINT/SIGTERM drains it, runs the hooks and exits the process (0 clean, 1 otherwise).
   * Rejects with a one-line reason if startup fails. A second call returns the same promise.
   */
  listen(): Promise<void> {
    if (this.#listening === undefined && this.#lifecycle.shutdownStarted) {
      return Promise.reject(new Error("cannot listen: the app was closed"));
    }
    return (this.#listening ??= this.#listen());
  }

  /** The same drain and hooks as a signal, without exiting the process; resolves `listen()` too. */
  close(): Promise<ShutdownReport> {
    return this.#lifecycle.shutdown("close()");
  }

  async #listen(): Promise<void> {
    // Installed first: a signal during startup still drains and runs the hooks, never kills outright.
    const releaseSignals = handleSignals(this.#lifecycle);
    let releaseWorker: () => void = doNothing;
    try {
      await Promise.all(this.#startup);
      this.#allow ??= buildAllowRouter(this.#routes);
      if (!this.#lifecycle.shutdownStarted) {
        const url = await this.#lifecycle.start(this.fetch, this.config.port, this.config.host);
        this.logger.info("%s listening on %s (%s)", this.config.serviceName, url, this.config.env);
        if (!this.#lifecycle.shutdownStarted) await this.#startSchedulers();
        // Under the supervisor: report ready, heartbeat, and drain by itself if the primary dies.
        if (!this.#lifecycle.shutdownStarted) {
          const { env, docs, port, shutdownTimeout } = this.config;
          releaseWorker = attachWorkerLink({
            port: this.port ?? port, url, docsUrl: env === "production" ? undefined : new URL(docs.path, url).href,
            shutdownTimeout, shutdown: (reason) => this.#lifecycle.shutdown(reason),
            load: { inflight: () => this.#inflight, requests: () => this.#requests },
          });
        }
      }
      await this.#lifecycle.finished;
    } catch (error) {
      // Not ready yet: under the supervisor, the primary learns why this worker could not start.
      if (releaseWorker === doNothing) reportWorkerFailure(error);
      throw error;
    } finally {
      releaseWorker();
      releaseSignals();
      this.#shedder?.stop();
    }
  }

  /** A scheduler that fails to start fails `listen()`: the listener, already open, is shut down first. */
  async #startSchedulers(): Promise<void> {
    for (const scheduler of this.#schedulers) {
      try {
        await scheduler.start();
      } catch (error) {
        await this.#lifecycle.shutdown("a scheduler failed to start");
        throw new Error(`scheduler failed to start: ${(error as Error)?.message ?? String(error)}`, { cause: error });
      }
    }
  }

  #healthRoute(): Route {
    const { serviceName, version, healthTimeout } = this.config;
    return documentAsHealth(get("/health", async (ctx) => {
      const report = await checkHealth(this.#checkers, {
        service: serviceName, version, timeoutMs: healthTimeout, forceDown: this.#lifecycle.shuttingDown,
      });
      setResponseHeader(ctx.event, "cache-control", "no-store");
      return json(report, report.status === "UP" ? 200 : 503);
    }));
  }

  #onRequest(event: H3Event): void {
    const start = performance.now();
    const tracer = this.#services.tracer;
    const span = tracer === noopTracer ? noopSpan : tracer.startRequestSpan(event);
    const { requestIdHeader, trustRequestId } = this.config;
    const incoming = trustRequestId ? readRequestHeader(event, requestIdHeader) : null;
    // Anything but a well-formed id is dropped unseen: it is neither echoed nor logged.
    const requestId = incoming !== null && isValidRequestId(incoming) ? incoming : generateRequestId();
    event.context.keelson = new RequestState(event, start, span, requestId);
    // On Node the id is added once the response is made (#finish): setting it on the ServerResponse
    // now would put every response on Node's slow header path.
    if (event.runtime?.node?.res === undefined) setResponseHeader(event, requestIdHeader, requestId);
    if (span !== noopSpan) span.setAttribute(ATTR_REQUEST_ID, requestId);
    this.#inflight++;
    this.#requests++;
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
      if (state !== undefined) this.#inflight--;
      // An event stream or a WebSocket: logged and its span ended when it ends, with its whole duration.
      if (state?.stream !== undefined) {
        void state.stream.then((status) => this.#recordStream(request, state, status));
        const streamRes = request.runtime?.node?.res;
        if (streamRes !== undefined) addNodeResponseHeader(response, streamRes, this.config.requestIdHeader, state.requestId);
        return response;
      }
      const durationMs = state === undefined ? 0 : performance.now() - state.start;
      const route = context?.matchedRoute?.route;
      const method = request.method;
      const status = response.status;
      const traceId = state?.span.traceId ?? "";
      const path = state === undefined ? new URL(request.url).pathname : state.event.url.pathname;
      const requestId = state?.requestId ?? generateRequestId();
      this.logger.request({ method, path, status, durationMs, requestId, traceId: traceId === "" ? undefined : traceId }, context?.matchedRoute?.meta?.keelsonLogRank);
      this.#metrics?.observeRequest(method, route ?? UNMATCHED_ROUTE, status, durationMs / 1000);
      // The no-op span (no tracer, or one with nothing to record) has nothing to end.
      if (state !== undefined && state.span !== noopSpan) this.#services.tracer.endRequestSpan(state.span, { route, status, error: state.error });
      const nodeRes = request.runtime?.node?.res;
      if (nodeRes !== undefined) addNodeResponseHeader(response, nodeRes, this.config.requestIdHeader, requestId);
      // In-process, onRequest put the id on the event; a request answered before onRequest gets it here.
      else if (state === undefined && !response.headers.has(this.config.requestIdHeader)) response.headers.set(this.config.requestIdHeader, requestId);
    } catch (error) {
      // A collector or tracer that throws loses its own record; the response still goes out.
      console.error("keelson: recording the request failed:", error);
    }
    return response;
  }

  #recordStream(request: ServerRequest, state: RequestState, status: number): void {
    try {
      const durationMs = performance.now() - state.start;
      const traceId = state.span.traceId;
      this.logger.request(
        { method: request.method, path: state.event.url.pathname, status, durationMs, requestId: state.requestId, traceId: traceId === "" ? undefined : traceId },
        state.event.context.matchedRoute?.meta?.keelsonLogRank,
      );
      if (state.span !== noopSpan) this.#services.tracer.endRequestSpan(state.span, { route: state.event.context.matchedRoute?.route, status });
    } catch (error) {
      console.error("keelson: recording the request failed:", error);
    }
  }

  #onError(error: HTTPError, event: H3Event): HTTPResponse {
    if (isRouteNotFound(error, event)) {
      const allow = allowedMethods(this.#allow ??= buildAllowRouter(this.#routes), event.url.pathname);
      return allow.length > 0
        ? errorResponse(createError("METHOD_NOT_ALLOWED"), { allow: allow.join(", ") })
        : errorResponse(createError("NOT_FOUND"));
    }
    const { kerror, original } = toKError(error);
    const state = event.context.keelson;
    if (kerror.statusCode >= 500) {
      if (state) state.error = original;
      const requestId = state?.requestId ?? generateRequestId();
      logServerError(state ? state.logger(this.logger) : RequestLogger.forRequest(this.logger, logThreshold(event, this.logger), requestId, ""), event, original);
      return errorResponse(kerror, kerror.headers, requestId);
    }
    // An oversized body is left unread: close the connection rather than read it to the end.
    const extra = kerror.statusCode === 413 ? { ...kerror.headers, connection: "close" } : kerror.headers;
    return errorResponse(kerror, extra);
  }
}

const noopSpan = noopTracer.startSpan("noop");
const OVERLOADED_BODY = JSON.stringify(createError("SERVICE_UNAVAILABLE", "the service is overloaded: retry later"));
const doNothing = (): void => {};
