import type { Counter, Gauge, Histogram, Metric, Registry } from "prom-client";
import { MS_ABOVE_0, PORT_RULE, checkNumber, checkOptionalNumber } from "../checks.js";
import type { Module, Router } from "../app.js";
import type { MetricsCollector } from "../integrations.js";
import { removeResponseHeaders } from "../http/headers.js";
import type { PrimaryChannel } from "../cluster/ipc.js";
import { getPrimaryChannel } from "../cluster/worker-link.js";
import { get } from "../http/route.js";
import { metricsCluster, metricsFinal, metricsHello, metricsSnapshot, type MetricsSnapshot } from "./ipc.js";
import { openMetricsListener, type MetricsListener } from "./listener.js";
import { MetricSet, PROMETHEUS_CONTENT_TYPE } from "./metric-set.js";
import { HTTP_SERVER_DURATION_BUCKETS, RequestHistogram } from "./request-histogram.js";
import { LOG_LINES_DROPPED, LOG_LINES_DROPPED_HELP } from "./log-drops.js";
import { droppedLogLines } from "../logging/sink.js";
import { uploadStorageFailures } from "../http/upload-folders.js";
import { BREAKER_STATES, breakerStates } from "../breaker-states.js";
import { LIMIT_HITS, LIMIT_HITS_HELP, limitHits } from "../limit-hits.js";
import { lazyPackage } from "../lazy-package.js";
import { errorMessage } from "../errors.js";

/** Settings of `createPrometheus`; every field is optional. */
export interface PrometheusOptions {
  /** Path of the scrape endpoint (relative to the group it is installed on). Default `/metrics`. */
  path?: string;
  /** Prepended to every metric name this module creates (`myapp_`). Default none. */
  prefix?: string;
  /** prom-client's default process and Node.js metrics, and `keelson_log_lines_dropped_total`. Default true. */
  defaultMetrics?: boolean;
  /** Bucket bounds in seconds. Default: OpenTelemetry's HTTP server advice, `0.005` to `10` (docs/metrics.md). */
  buckets?: readonly number[];
  /** Where metrics are registered; pass prom-client's global `register` to share it. Default: a new Registry. */
  registry?: Registry;
  /**
   * Under the keelson supervisor: how long the primary waits for each worker's snapshot, and
   * this worker for the primary's answer (plus one second). Default 2000.
   */
  clusterTimeoutMs?: number;
  /** Aggregate across the supervisor's workers. Default true; false serves this process's registry only. */
  cluster?: boolean;
  /**
   * Serve `path` on a listener of its own on this port (0: any free port), opened by `listen()`
   * and closed by the shutdown. Under the keelson supervisor the primary serves the cluster-wide
   * metrics on its own metrics port (`--metrics-port`, default 9464) instead, and this is unused.
   * Default: none.
   */
  port?: number;
  /** Address of that listener. Default: all interfaces, like the service port. */
  host?: string;
  /**
   * Serve `path` on the App's own (public) port too. Default: true, except when the App's `env`
   * is `production`. The response never carries CORS headers: no web page may read it.
   */
  serveOnAppPort?: boolean;
}

/** The module `createPrometheus` returns: install it with `app.use()`. */
export interface PrometheusModule extends Module {
  /** The registry served at `path`: register your own prom-client metrics on it. */
  readonly registry: Registry;
  /** The request histogram (and the load-shedding counter), set as the App's metrics collector on `use()`. */
  readonly collector: MetricsCollector;
  /** The exposition a scrape would get (cluster-wide under the supervisor). */
  readExposition(): Promise<string>;
  /** The listener of `port` while it is open (after `listen()`, before the shutdown). */
  readonly listener: MetricsListener | undefined;
}

type PromClient = typeof import("prom-client");

// prom-client (~35 modules, and @opentelemetry/api which it requires for exemplars) is loaded when
// a registry is first needed, not when keelson/metrics is imported: see `createPrometheus`.
const loadPromClient = lazyPackage<PromClient>("prom-client");

const FINAL_SNAPSHOT_TIMEOUT_MS = 1000;
const PRIMARY_REPLY_MARGIN_MS = 1000;

/**
 * prom-client's default gauges whose names end in `_total` (reserved for counters). Their values
 * remain as `sum without (type) (nodejs_active_handles)` and likewise for requests and resources.
 */
const MISNAMED_DEFAULT_GAUGES = ["nodejs_active_handles_total", "nodejs_active_requests_total", "nodejs_active_resources_total"] as const;

/**
 * Prometheus metrics as a keelson Module: `http_request_duration_seconds` for every request,
 * prom-client's default metrics, and `GET /metrics` (hidden from the OpenAPI document).
 * Under the keelson supervisor a scrape returns the totals of all workers.
 *
 * The request histogram is keelson's own and counts from the first request. prom-client, the
 * registry and the default metrics are set up at the first of: reading `registry`, a scrape, a
 * load-shedding, job or stream metric, or the turn of the event loop after the first request was
 * answered; so neither the start-up nor the first response waits for them.
 */
export function createPrometheus(options: PrometheusOptions = {}): PrometheusModule {
  const prefix = options.prefix ?? "";
  const path = options.path ?? "/metrics";
  const timeoutMs = checkNumber(options.clusterTimeoutMs ?? 2000, "clusterTimeoutMs", MS_ABOVE_0);
  const port = checkOptionalNumber(options.port, "port", PORT_RULE);
  const buckets = options.buckets ?? HTTP_SERVER_DURATION_BUCKETS;
  if (!buckets.every((bound, i) => Number.isFinite(bound) && (i === 0 || bound > buckets[i - 1]!))) {
    throw new Error(`buckets must be finite numbers in increasing order, got [${buckets.join(",")}]`);
  }
  loadPromClient.check("createPrometheus()");
  const histogram = new RequestHistogram(`${prefix}http_request_duration_seconds`, buckets);
  let registry: Registry | undefined;
  const getRegistry = (): Registry => {
    if (registry !== undefined) return registry;
    const client = loadPromClient();
    const created = options.registry ?? new client.Registry();
    // Registry only reads name/type and calls get() and reset(): the fast histogram stands in for prom-client's.
    created.registerMetric(histogram as unknown as Metric);
    if (options.defaultMetrics ?? true) {
      client.collectDefaultMetrics({ register: created, prefix });
      // prom-client also exports these three sums as gauges named like counters, which promtool and
      // Prometheus' naming rules refuse; the same numbers are the sum over `type` of the gauges kept.
      for (const name of MISNAMED_DEFAULT_GAUGES) created.removeSingleMetric(`${prefix}${name}`);
      // A process metric like prom-client's: left out with them.
      registerLogDrops(client, created, prefix);
      registerUploadStorageErrors(client, created, prefix);
      registerBreakerStates(client, created, prefix);
    }
    return (registry = created);
  };
  // A registry passed in belongs to code that has loaded prom-client already: nothing to defer.
  if (options.registry !== undefined) getRegistry();
  // Like the shed counter: a process that never reached a limit exposes no such metric.
  let limitCounter: Counter | undefined;
  const registryForScrape = (): Registry => {
    const current = getRegistry();
    if (limitCounter === undefined && limitHits().size > 0) limitCounter = registerLimitHits(loadPromClient(), current, prefix);
    return current;
  };
  const collector = withShedCounter(histogram, getRegistry, prefix);
  const primary = (options.cluster ?? true) ? getPrimaryChannel() : undefined;
  const worker = process.env.KEELSON_WORKER_ID ?? "";

  const readLocal = async (): Promise<string> => {
    // Rendered like the cluster exposition (prom-client itself writes NaN as "Nan").
    const set = new MetricSet();
    set.add(await readSnapshot(registryForScrape()), "as-is");
    return set.render();
  };
  const readExposition = async (): Promise<string> => {
    if (primary === undefined) return readLocal();
    try {
      const { text } = await primary.request(metricsCluster, { timeoutMs }, timeoutMs + PRIMARY_REPLY_MARGIN_MS);
      return text;
    } catch (error) {
      const reason = errorMessage(error).replace(/\s+/g, " ");
      return `# keelson: cluster aggregation failed (${reason}); worker ${worker} serves its own metrics only\n${await readLocal()}`;
    }
  };

  let listener: MetricsListener | undefined;
  return {
    name: "prometheus",
    get registry() {
      return getRegistry();
    },
    collector,
    readExposition,
    get listener() {
      return listener;
    },
    register(router: Router) {
      const { app } = router;
      app.setMetricsCollector(registry === undefined ? setUpAfterFirstRequest(collector, getRegistry) : collector);
      if (options.serveOnAppPort ?? app.config.env !== "production") {
        router.route(
          get(path, async (ctx) => {
            removeResponseHeaders(ctx.event, CORS_HEADERS);
            return new Response(await readExposition(), {
              headers: { "content-type": PROMETHEUS_CONTENT_TYPE, "cache-control": "no-store" },
            });
          })
            .hide()
            .describe("Prometheus metrics", "The Prometheus text exposition format; cluster-wide under the supervisor."),
        );
      }
      if (primary !== undefined) {
        linkToPrimary(router, primary, registryForScrape);
        primary.send(metricsHello, { pid: process.pid, timeoutMs });
      } else if (port !== undefined) {
        app.registerScheduler({
          start: async () => {
            listener = await openMetricsListener({
              port, host: options.host, path, read: readExposition,
              onError: (error) => app.logger.logError("metrics: reading the registry failed: %s", errorMessage(error)),
            });
            app.logger.info("metrics on %s", listener.url);
          },
          stop: async () => {
            await listener?.close();
            listener = undefined;
          },
        });
      }
    },
  };
}

// A scraper is not a browser: no web page may read the metrics, whatever the App's CORS policy.
const CORS_HEADERS = ["access-control-allow-origin", "access-control-allow-credentials", "access-control-expose-headers"];

/**
 * The histogram as the App's collector, plus `keelson_requests_shed_total{reason}` for load
 * shedding's rejections, registered at the first one (an App without shedding exposes no such metric).
 */
function withShedCounter(histogram: RequestHistogram, registry: () => Registry, prefix: string): MetricsCollector {
  let shed: Counter | undefined;
  return {
    observeRequest: histogram.observeRequest.bind(histogram),
    observeShed: (reason) => {
      shed ??= new (loadPromClient().Counter)({
        name: `${prefix}keelson_requests_shed_total`, help: "Requests rejected with 503 by load shedding, by reason.",
        labelNames: ["reason"], registers: [registry()],
      });
      shed.inc({ reason });
    },
    observeJob: jobMetrics(registry, prefix),
    observeIdempotency: idempotencyMetrics(registry, prefix),
    ...streamMetrics(registry, prefix),
  };
}

/**
 * `keelson_idempotency_requests_total{route,outcome}`: what `idempotency()` did (stored, replayed,
 * conflict, mismatch, released, invalid, oversize, store_error), registered at the first one.
 */
function idempotencyMetrics(registry: () => Registry, prefix: string): NonNullable<MetricsCollector["observeIdempotency"]> {
  let counter: Counter | undefined;
  return (route, outcome) => {
    counter ??= new (loadPromClient().Counter)({
      name: `${prefix}keelson_idempotency_requests_total`, help: "Requests with an Idempotency-Key, by route and outcome (stored, replayed, conflict, mismatch, released, invalid, oversize, store_error).",
      labelNames: ["route", "outcome"], registers: [registry()],
    });
    counter.inc({ route, outcome });
  };
}

/**
 * `keelson_open_streams{kind,route}`: event streams (`sse`) and WebSockets open now, registered at
 * the first one. A gauge: under the supervisor it is kept per worker (a `worker` label), not summed.
 */
function streamMetrics(registry: () => Registry, prefix: string): Pick<MetricsCollector, "streamOpened" | "streamClosed" | "webSocketLimitClosed"> {
  let open: Gauge | undefined;
  let limitCloses: Counter | undefined;
  const gauge = () => (open ??= new (loadPromClient().Gauge)({
    name: `${prefix}keelson_open_streams`, help: "Event streams (kind sse) and WebSockets (kind websocket) open now, by route.",
    labelNames: ["kind", "route"], registers: [registry()],
  }));
  return {
    streamOpened: (kind, route) => gauge().inc({ kind, route }),
    streamClosed: (kind, route) => gauge().dec({ kind, route }),
    webSocketLimitClosed: (route, reason) => (limitCloses ??= new (loadPromClient().Counter)({
      name: `${prefix}keelson_websocket_limit_closes_total`,
      help: "WebSockets keelson closed at a limit, by route and reason (message_too_big, backlog, ping_timeout).",
      labelNames: ["route", "reason"], registers: [registry()],
    })).inc({ route, reason }),
  };
}

/** `keelson_log_lines_dropped_total`: this process's log lines lost to a reader that did not keep up. */
function registerLimitHits(client: PromClient, registry: Registry, prefix: string): Counter {
  return new client.Counter({
    name: `${prefix}${LIMIT_HITS}`, help: LIMIT_HITS_HELP, labelNames: ["limit"], registers: [registry],
    // The counts live outside the metrics package (features count without it): read at each scrape.
    collect() {
      this.reset();
      for (const [limit, count] of limitHits()) this.inc({ limit }, count);
    },
  });
}

/**
 * A counter whose count lives where it is counted (the log sink, http/: modules that cannot depend
 * on prom-client), read at each scrape.
 */
function registerReadCounter(client: PromClient, registry: Registry, name: string, help: string, read: () => number): Counter {
  return new client.Counter({
    name, help, registers: [registry],
    collect() {
      this.reset();
      this.inc(read());
    },
  });
}

function registerLogDrops(client: PromClient, registry: Registry, prefix: string): Counter {
  return registerReadCounter(client, registry, `${prefix}${LOG_LINES_DROPPED}`, LOG_LINES_DROPPED_HELP, droppedLogLines);
}

/** `keelson_upload_storage_errors_total`: uploads answered 507 because the temporary folder failed a write. */
function registerUploadStorageErrors(client: PromClient, registry: Registry, prefix: string): Counter {
  return registerReadCounter(client, registry, `${prefix}keelson_upload_storage_errors_total`,
    "Form uploads answered 507 because the temporary folder failed a write (full disk, quota, I/O error, permissions).", uploadStorageFailures);
}

/**
 * `keelson_rate_limit_breaker_state{limiter,state}`: 1 for the state each rate-limit store's circuit
 * breaker is in (`closed`, `open`, `half_open`), 0 for the others. A gauge: per worker under the supervisor.
 */
function registerBreakerStates(client: PromClient, registry: Registry, prefix: string): Gauge {
  return new client.Gauge({
    name: `${prefix}keelson_rate_limit_breaker_state`,
    help: "The state of each rate-limit store's circuit breaker: 1 for the current state (closed, open, half_open), 0 for the others.",
    labelNames: ["limiter", "state"], registers: [registry],
    collect() {
      this.reset();
      for (const [limiter, current] of breakerStates()) {
        for (const state of BREAKER_STATES) this.set({ limiter, state }, state === current ? 1 : 0);
      }
    },
  });
}

/** Upper bounds in seconds of `keelson_job_duration_seconds`: jobs take from milliseconds to an hour. */
const JOB_DURATION_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600];

/**
 * `keelson_job_runs_total{job,outcome}` and `keelson_job_duration_seconds{job,outcome}`, registered
 * at the first run (an App without jobs exposes neither).
 */
function jobMetrics(registry: () => Registry, prefix: string): NonNullable<MetricsCollector["observeJob"]> {
  let runs: Counter | undefined;
  let duration: Histogram | undefined;
  return (job, outcome, seconds) => {
    runs ??= new (loadPromClient().Counter)({
      name: `${prefix}keelson_job_runs_total`, help: "Runs of scheduled jobs, by job and outcome (success, failure, aborted, skipped).",
      labelNames: ["job", "outcome"], registers: [registry()],
    });
    runs.inc({ job, outcome });
    if (seconds === undefined) return;
    duration ??= new (loadPromClient().Histogram)({
      name: `${prefix}keelson_job_duration_seconds`, help: "How long runs of scheduled jobs took, by job and outcome.",
      labelNames: ["job", "outcome"], buckets: JOB_DURATION_BUCKETS, registers: [registry()],
    });
    duration.observe({ job, outcome }, seconds);
  };
}

/** Answers the primary's snapshot requests, and hands it the final counts once the App has drained. */
function linkToPrimary(router: Router, primary: PrimaryChannel, registry: () => Registry): void {
  primary.handle(metricsSnapshot, async () => ({ snapshot: await readSnapshot(registry()) }));
  router.app.onShutdown(async function sendFinalMetrics() {
    // Hooks run after the drain: every request this worker served is counted. Best effort:
    // if the primary does not answer in time, it keeps the snapshot of the last scrape.
    const snapshot = await readSnapshot(registry());
    await primary.request(metricsFinal, { pid: process.pid, snapshot }, FINAL_SNAPSHOT_TIMEOUT_MS).catch(() => {});
  }, "metrics: final snapshot to the supervisor");
}

/**
 * The collector, which also sets up prom-client (`setUp`) on the turn of the event loop after the
 * first request was recorded, once its response has been handed to the server.
 */
function setUpAfterFirstRequest(collector: MetricsCollector, setUp: () => unknown): MetricsCollector {
  const observe = collector.observeRequest;
  const first: MetricsCollector = {
    ...collector,
    observeRequest(method, route, status, durationSeconds) {
      // Only the first request goes through here: every later one calls the histogram directly.
      first.observeRequest = observe;
      observe(method, route, status, durationSeconds);
      setImmediate(setUp);
    },
  };
  return first;
}

/** prom-client's JSON form of the registry: plain data, sent as is over IPC. */
async function readSnapshot(registry: Registry): Promise<MetricsSnapshot> {
  return (await registry.getMetricsAsJSON()) as unknown as MetricsSnapshot;
}
