import { AsyncLocalStorage } from "node:async_hooks";
import { toRequest, type H3, type Middleware } from "h3";
import type { ServerRequest } from "srvx";
import { resolveConfig, type KConfig, type ResolvedConfig } from "./config.js";
import { defineDocsRoutes } from "./docs/index.js";
import { documentAsHealth } from "./docs/builtins.js";
import { checkHealth } from "./health.js";
import {
  noopTracer, type HealthChecker, type MetricsCollector, type Scheduler, type ShutdownHook, type Tracer, type Translator,
} from "./integrations.js";
import { joinPath } from "./http/path.js";
import { compileRoute } from "./http/handler.js";
import { sweepUploadFolders } from "./http/upload-folders.js";
import { setResponseHeader } from "./http/headers.js";
import { RequestPipeline } from "./http/pipeline.js";
import { Lifecycle, shutdownProblems, type NamedHook, type ShutdownReport } from "./lifecycle/lifecycle.js";
import { LoadShedder } from "./http/load-shed.js";
import { handleSignals } from "./lifecycle/signals.js";
import { defineJob, type Job, type JobOptions } from "./jobs/define.js";
import { JobScheduler } from "./jobs/scheduler.js";
import { attachWorkerLink, listensWithReusePort } from "./cluster/worker-link.js";
import { reportWorkerFailure } from "./cluster/worker-failure.js";
import { levelRank } from "./logging/level.js";
import type { Logger } from "./logging/logger.js";
import { json } from "./http/results.js";
import { getMiddlewareContract } from "./http/middleware-contract.js";
import { get, type Controller, type RegisteredRoute, type Route } from "./http/route.js";
import { OpenStreams } from "./http/open-streams.js";
import { hub } from "./streams/hub.js";
import { DEFAULT_WS_MAX_QUEUED_BYTES, DEFAULT_WS_PING_INTERVAL_MS, Upgrades } from "./streams/upgrades.js";
import { errorMessage } from "./errors.js";

export type { ResolvedConfig } from "./config.js";

/** What both an App and a Group can register routes on. */
export interface Router {
  /** The App this router belongs to (itself for an App). */
  readonly app: App;
  route(route: Route): this;
  registerController(controller: Controller): this;
  use(module: Module): this;
  group(prefix: string, ...middleware: Middleware[]): Group;
}

/** A unit of features installed with `use()` (a module: docs/routing.md). */
export interface Module {
  /** Optional name, used in startup error messages. */
  readonly name?: string;
  /** Receives the App (or the Group it is installed on) and registers what it needs. */
  register(router: Router): void | Promise<void>;
}

/**
 * What a Group registers through: the App's route table and module installer, and nothing else of
 * the App. The App hands each Group this object, so registering stays the App's own business.
 */
export interface RouteTable {
  readonly app: App;
  add(route: Route, prefix: string, middleware: readonly Middleware[]): void;
  install(module: Module, router: Router): void;
}

let readPipeline: (app: App) => RequestPipeline;

/** @internal The App's request pipeline, for tests that look at how its requests were served. */
export function pipelineOf(app: App): RequestPipeline {
  return readPipeline(app);
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
  /**
   * The app as a web fetch handler, bound: what `listen()` serves and `request()` calls. Mount
   * the app elsewhere through this (h3's `mount("/api", app)` takes it), not through
   * `httpEngine.fetch`, which skips the request log line, the metrics and the server span's end.
   */
  readonly fetch: (request: ServerRequest) => Response | Promise<Response>;
  readonly #services: { logger: Logger; tracer: Tracer; translator: Translator | undefined; streams: OpenStreams };
  readonly #routes: RegisteredRoute[] = [];
  readonly #checkers: HealthChecker[] = [];
  readonly #schedulers: Scheduler[] = [];
  readonly #hooks: NamedHook[] = [];
  readonly #startup: Promise<unknown>[] = [];
  readonly #lifecycle: Lifecycle;
  readonly #pipeline: RequestPipeline;
  static {
    readPipeline = (app) => app.#pipeline;
  }
  readonly #table: RouteTable;
  #jobs: JobScheduler | undefined;
  readonly #shedder: LoadShedder | undefined;
  /** `app.use(fn)` middleware, in order: every route runs it (see RegisteredRoute.appMiddleware). */
  readonly #appMiddleware: Middleware[] = [];
  #listening: Promise<void> | undefined;

  constructor(config: KConfig = {}) {
    const settings = resolveConfig(config);
    this.config = settings.config;
    this.logger = settings.logger;
    hub.useLogger(this.logger);
    const streams = new OpenStreams(() => this.#pipeline.metrics, this.logger);
    let upgrades: Upgrades | undefined;
    this.#services = { logger: this.logger, tracer: noopTracer, translator: undefined, streams };
    this.#lifecycle = new Lifecycle({
      logger: this.logger,
      shutdownTimeout: this.config.shutdownTimeout,
      shutdownDelay: this.config.shutdownDelay,
      hooks: this.#hooks,
      inflight: () => this.#pipeline.inflight,
      streams,
      // Every WebSocket upgrade, keelson's websocket() routes and h3's own handlers alike.
      upgrade: (req, socket, head) => (upgrades ??= new Upgrades({
        fetch: this.fetch, streams, logger: this.logger, metrics: () => this.#pipeline.metrics,
        defaults: {
          // ws reads a maxPayload of 0 as no limit: a bodyLimit of 0 still bounds messages.
          maxMessageBytes: Math.max(1, this.config.bodyLimit),
          maxQueuedBytes: DEFAULT_WS_MAX_QUEUED_BYTES,
          pingIntervalMs: DEFAULT_WS_PING_INTERVAL_MS,
        },
      })).handle(req, socket, head),
    });
    // Steps 1–4 of the construction order in docs/routing.md: the pipeline starts request logging
    // and CORS in onRequest, panic recovery and the error handler are onError, and the log line is
    // written once h3 has the Response (src/http/pipeline.ts).
    this.#shedder = settings.loadShedding === undefined ? undefined : new LoadShedder(settings.loadShedding, this.logger);
    this.#pipeline = new RequestPipeline({
      logger: this.logger,
      services: this.#services,
      cors: settings.cors,
      shedder: this.#shedder,
      health: !this.config.disableHealth,
      lifecycle: this.#lifecycle,
      routes: this.#routes,
      requestIdHeader: this.config.requestIdHeader,
      trustRequestId: this.config.trustRequestId,
    });
    this.httpEngine = this.#pipeline.engine;
    this.fetch = this.#pipeline.fetch;
    this.#table = {
      app: this,
      add: (route, prefix, middleware) => this.#addRoute(route, prefix, middleware),
      install: (module, router) => this.#installModule(module, router),
    };
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
    this.#addRoute(route, "", []);
    return this;
  }

  #addRoute(route: Route, prefix: string, middleware: readonly Middleware[]): void {
    const path = joinPath(prefix, route.path);
    // As h3's own serve() does: the routes (and the OpenAPI document built from them) are fixed
    // once the server is up; a route added later is almost always a bug.
    if (this.#lifecycle.state !== "created") throw new Error(`cannot add ${route.method} ${path}: the server has started (add routes before listen())`);
    const handler = compileRoute(route, this.#services, this.config.bodyLimit, { path, checkResponses: this.config.env !== "production" });
    for (const own of route.options.middleware ?? []) {
      const refused = getMiddlewareContract(own)?.checkRoute?.(route.method);
      if (refused !== undefined) throw new Error(`${route.method} ${path}: ${own.name || "middleware"}: ${refused}`);
    }
    const all = [...middleware, ...(route.options.middleware ?? [])];
    const logLevel = route.options.logLevel;
    // The request line is written after h3 is done with the route: its threshold travels on the match.
    const meta = logLevel === undefined ? undefined : { keelsonLogRank: levelRank(logLevel) };
    this.#pipeline.addRoute(route.method, path, handler, all.length > 0 || meta ? { middleware: all.length > 0 ? all : undefined, meta } : undefined);
    this.#routes.push({ method: route.method, path, route, middleware: all, appMiddleware: this.#appMiddleware });
    this.#pipeline.routesChanged();
  }

  registerController(controller: Controller): this {
    for (const route of controller.routes()) this.route(route);
    return this;
  }

  /** Installs a module; an h3 middleware function is added as global middleware instead. */
  use(module: Module | Middleware): this {
    if (typeof module === "function") {
      this.httpEngine.use(module);
      this.#appMiddleware.push(module);
    }
    else this.#installModule(module, this);
    return this;
  }

  /** A failing register step is kept and makes `listen()` reject. */
  #installModule(module: Module, router: Router): void {
    // A plain object literal would otherwise be reported as "module Object".
    const name = module.name ?? (module.constructor === Object ? undefined : module.constructor?.name) ?? "(unnamed)";
    const fail = (error: unknown) => new Error(`module ${name} failed to register: ${errorMessage(error)}`, { cause: error });
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
    return new Group(this.#table, prefix, middleware);
  }

  /** Registers a shutdown hook; hooks run once each, in registration order. */
  onShutdown(hook: ShutdownHook, name?: string): this {
    this.#hooks.push({ name: name ?? (hook.name || `hook #${this.#hooks.length + 1}`), hook });
    return this;
  }

  setMetricsCollector(collector: MetricsCollector): this {
    this.#pipeline.metrics = collector;
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
      const jobs = (this.#jobs = new JobScheduler({ logger: this.logger, metrics: () => this.#pipeline.metrics }));
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
   * Starts the server and resolves once it has shut down (by a signal or `close()`). The first
   * SIGINT/SIGTERM drains it, runs the hooks and exits the process (0 clean, 1 otherwise).
   * Rejects with a one-line reason if startup fails. A second call returns the same promise.
   * Inside `keelson client` it starts nothing: it hands the App to the command and never settles.
   */
  listen(): Promise<void> {
    const documentOnly = (globalThis as Record<symbol, unknown>)[DOCUMENT_ONLY];
    if (typeof documentOnly === "function") {
      (documentOnly as (app: App) => void)(this);
      return new Promise<void>(doNothing);
    }
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
    settleAsyncContextFrame();
    // Installed first: a signal during startup still drains and runs the hooks, never kills outright.
    const releaseSignals = handleSignals(this.#lifecycle);
    let releaseWorker: () => void = doNothing;
    try {
      await Promise.all(this.#startup);
      this.#pipeline.prepare();
      if (!this.#lifecycle.shutdownStarted) {
        // Listening is the last step before ready: in the reuseport mode the kernel sends a worker
        // connections from its bind on, so nothing may come between the two.
        const url = await this.#lifecycle.start(this.fetch, this.config.port, this.config.host, listensWithReusePort(), this.#pipeline);
        this.logger.info("%s listening on %s (%s)", this.config.serviceName, url, this.config.env);
        this.#sweepUploads();
        if (!this.#lifecycle.shutdownStarted) await this.#startSchedulers();
        // Under the supervisor: report ready, heartbeat, and drain by itself if the primary dies.
        if (!this.#lifecycle.shutdownStarted) {
          const { env, docs, port, shutdownTimeout } = this.config;
          const pipeline = this.#pipeline;
          releaseWorker = attachWorkerLink({
            port: this.port ?? port, url, docsUrl: env === "production" ? undefined : new URL(docs.path, url).href,
            shutdownTimeout, shutdown: (reason) => this.#lifecycle.shutdown(reason),
            finished: this.#lifecycle.finished.then((report) => ({ clean: report.clean, problems: shutdownProblems(report) })),
            load: {
              inflight: () => pipeline.inflight, requests: () => pipeline.requests, connections: () => this.#lifecycle.acceptedConnections,
            },
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

  /** Upload folders of processes killed before they could remove them; off the start's path. */
  #sweepUploads(): void {
    void sweepUploadFolders().then(({ removed, parents }) => {
      if (removed > 0) this.logger.info("removed %d upload folder(s) left by exited processes in %s", removed, parents.join(", "));
    }, (error: unknown) => this.logger.warn("sweeping upload folders failed: %s", String(error)));
  }

  /** A scheduler that fails to start fails `listen()`: the listener, already open, is shut down first. */
  async #startSchedulers(): Promise<void> {
    for (const scheduler of this.#schedulers) {
      try {
        await scheduler.start();
      } catch (error) {
        await this.#lifecycle.shutdown("a scheduler failed to start");
        throw new Error(`scheduler failed to start: ${errorMessage(error)}`, { cause: error });
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
}

/**
 * Routes under a common prefix and middleware. Groups nest: the prefixes join and group
 * middleware runs outermost first, then the route's own middleware.
 */
export class Group implements Router {
  readonly app: App;
  readonly prefix: string;
  readonly middleware: readonly Middleware[];
  readonly #table: RouteTable;

  /** Made by `app.group()` or `group.group()`. */
  constructor(table: RouteTable, prefix: string, middleware: readonly Middleware[]) {
    this.#table = table;
    this.app = table.app;
    this.prefix = joinPath(prefix, "");
    this.middleware = middleware;
  }

  route(route: Route): this {
    this.#table.add(route, this.prefix, this.middleware);
    return this;
  }

  registerController(controller: Controller): this {
    for (const route of controller.routes()) this.route(route);
    return this;
  }

  use(module: Module): this {
    this.#table.install(module, this);
    return this;
  }

  group(prefix: string, ...middleware: Middleware[]): Group {
    return new Group(this.#table, joinPath(this.prefix, prefix), [...this.middleware, ...middleware]);
  }
}

const doNothing = (): void => {};
/**
 * Set by `keelson client` before it imports an entry: an entry that calls listen() at import hands
 * its App to the command instead of serving. A registered symbol: the entry may load its own copy of keelson.
 */
const DOCUMENT_ONLY = Symbol.for("keelson.client.documentOnly");

/**
 * Node 24 runs with its inactive AsyncContextFrame class until something first reads
 * `AsyncContextFrame.enabled` (reading `AsyncLocalStorage` from node:async_hooks does, as do some
 * timers), and then swaps in the active class for good. V8 optimises `nextTick` and the tick
 * queue against whichever class is in place when they get hot, and the inactive one leaves them with
 * generic property loads on every tick. A worker under the supervisor, or any process where nothing
 * else triggers the check first, would serve with those; settling it before serving makes every
 * process run the same, cheaper code. Behaviour is unchanged: the swap is the one Node makes on the
 * first AsyncLocalStorage anyway, and with `--no-async-context-frame` there is nothing to swap.
 */
function settleAsyncContextFrame(): void {
  if (typeof AsyncLocalStorage !== "function") throw new Error("node:async_hooks has no AsyncLocalStorage");
}
