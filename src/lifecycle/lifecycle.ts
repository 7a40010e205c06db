import type { IncomingMessage, Server as NodeServer, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { Server as NetServer } from "node:net";
import { serve, type Server, type ServerHandler } from "srvx";
import { PORT_RULE, checkNumber } from "../checks.js";
import type { ShutdownHook } from "../integrations.js";
import type { Logger } from "../logging/logger.js";
import { Connections, type Abandoned } from "./connections.js";
import { StandardReasonResponse } from "../http/status-line.js";
import { KeelsonIncomingMessage } from "../http/body.js";
import type { OpenStreams } from "../http/open-streams.js";
import { errorMessage } from "../errors.js";

/** A shutdown hook that takes this share of `shutdownTimeout` or more is logged with its duration. */
const SLOW_HOOK_SHARE = 0.1;

/** What happened during a shutdown; `clean` decides the exit code (0 or 1). */
export interface ShutdownReport {
  clean: boolean;
  /** What started it: a signal name or `close()`. */
  reason: string;
  durationMs: number;
  /** True when the budget ran out before everything finished. */
  deadlinePassed: boolean;
  failedHooks: string[];
  /** The hook still running when the deadline passed, if any. */
  timedOutHook: string | undefined;
  /** Hooks never started because the deadline had passed. */
  skippedHooks: string[];
  /** Requests still in flight (running, or their response still being written) at the drain cap or the deadline; their connections were destroyed. */
  abandonedRequests: number;
  /** Set when the drain hit its cap: `drain cap of 5000ms reached with 1 response(s) still being written`. */
  drainCap: string | undefined;
}

export interface NamedHook {
  name: string;
  hook: ShutdownHook;
}

export interface LifecycleOptions {
  logger: Logger;
  shutdownTimeout: number;
  shutdownDelay: number;
  hooks: readonly NamedHook[];
  inflight: () => number;
  /** The App's event streams and WebSockets: ended on purpose when the drain starts. */
  streams?: OpenStreams;
  /** Serves a WebSocket upgrade request (the server's `upgrade` event); without it, none is served. */
  upgrade?: (request: IncomingMessage, socket: Duplex, head: Buffer) => void;
}

/** What takes node's requests in place of srvx's listener (`RequestPipeline.serveNode`); srvx's is its fallback. */
export interface NodeLane {
  serveNode(req: IncomingMessage, res: ServerResponse, fallback: (req: IncomingMessage, res: ServerResponse) => void, waitUntil: ((promise: Promise<unknown>) => void) | undefined): void;
}

export type LifecycleState = "created" | "serving" | "draining" | "terminated";

const DEADLINE = Symbol("deadline");
const DRAIN_CAP = Symbol("drain cap");
type Deadline = Promise<typeof DEADLINE>;
// While draining, sockets whose response head went out before the signal (so without
// `Connection: close`) turn idle when that response ends; close them as soon as they do.
const IDLE_SWEEP_MS = 20;
// ...but only after this grace: a keep-alive client may be sending its next request on a socket
// that looks idle, and destroying it fails that request (autocannon under a rolling reload counted
// them). A request that arrives meanwhile gets `Connection: close`, so busy sockets close cleanly.
const IDLE_GRACE_MS = 100;

// The drain may use at most this share of the budget left when it starts; the hooks keep the rest,
// so a slow reader or a request that never ends cannot make them miss the deadline.
const DRAIN_SHARE = 0.5;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A hook's failure with its stack, where it has one. */
function describe(error: unknown): string {
  return error instanceof Error && error.stack !== undefined ? error.stack : errorMessage(error);
}

function isWebSocketUpgrade(request: IncomingMessage): boolean {
  return request.headers.upgrade?.toLowerCase() === "websocket";
}

/**
 * The process lifecycle of one App: created → serving → draining → terminated, with one
 * shutdown budget shared by the delay, the drain and the hooks. `shutdown()` is idempotent:
 * a second signal gets the same promise and changes nothing.
 */
export class Lifecycle {
  state: LifecycleState = "created";
  /** True from the first signal or `close()`: /health answers 503, responses carry `Connection: close`. */
  shuttingDown = false;
  server: Server | undefined;
  readonly #options: LifecycleOptions;
  #connections: Connections | undefined;
  #starting: Promise<unknown> | undefined;
  #shutdown: Promise<ShutdownReport> | undefined;
  #reason: string | undefined;
  #finish!: (report: ShutdownReport) => void;
  /** Settles when a shutdown, whatever started it, has completed. */
  readonly finished = new Promise<ShutdownReport>((resolve) => (this.#finish = resolve));

  constructor(options: LifecycleOptions) {
    this.#options = options;
  }

  get shutdownStarted(): boolean {
    return this.#shutdown !== undefined;
  }

  get logger(): Logger {
    return this.#options.logger;
  }

  /** The whole shutdown budget in ms. */
  get budget(): number {
    return this.#options.shutdownTimeout;
  }

  /**
   * Starts listening; rejects with a one-line reason when the port is taken or invalid. With
   * `reusePort` it binds its own SO_REUSEPORT listener, even in a cluster worker.
   */
  start(fetch: ServerHandler, port: number, host: string | undefined, reusePort = false, lane?: NodeLane): Promise<string> {
    if (this.#starting) return Promise.reject(new Error("the server was already started"));
    const starting = this.#bind(fetch, port, host, reusePort, lane);
    // A shutdown that begins meanwhile waits for the bind, whatever its outcome, then drains.
    this.#starting = starting.catch(() => undefined);
    return starting;
  }

  async #bind(fetch: ServerHandler, port: number, host: string | undefined, reusePort: boolean, lane: NodeLane | undefined): Promise<string> {
    checkNumber(port, "port", PORT_RULE);
    // exclusive: false lets cluster workers share the primary's handle (round-robin); with reusePort
    // each worker has a listener of its own (node makes it exclusive); gracefulShutdown: false
    // keeps srvx from installing signal handlers of its own (it does so only outside CI).
    // srvx directly, not h3's serve(): it serves the App's fetch (which logs and measures), not the H3's.
    // StandardReasonResponse: the status line carries its reason phrase (`200 OK`, not `200 `).
    // KeelsonIncomingMessage: the body reader's field is on every request from the start (http/body.ts).
    // shouldUpgradeCallback: only a WebSocket upgrade leaves the HTTP path (Node ≥ 22.21; before it,
    // any Upgrade request goes to the upgrade handler, which answers it through the App all the same).
    const upgrade = this.#options.upgrade;
    const server = serve({
      fetch, port, hostname: host, silent: true, gracefulShutdown: false, reusePort,
      // host again in node's own options: srvx would read HOST itself when it is undefined, and
      // whether HOST applies is the config's decision (resolveConfig), not the server's.
      node: { host, exclusive: reusePort, IncomingMessage: KeelsonIncomingMessage, ServerResponse: StandardReasonResponse, ...(upgrade && { shouldUpgradeCallback: isWebSocketUpgrade }) },
    });
    const node = server.node?.server as NodeServer | undefined;
    // Swapped in this same turn: serve() may have bound already, but node hands over a connection only on a later turn.
    const srvxListener = server.node?.handler as ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
    if (node && srvxListener && lane) {
      node.removeListener("request", srvxListener);
      const waitUntil = server.waitUntil;
      node.on("request", (req: IncomingMessage, res: ServerResponse) => lane.serveNode(req, res, srvxListener, waitUntil));
    }
    if (node) this.#connections = new Connections(node, upgrade !== undefined);
    if (node && upgrade) node.on("upgrade", upgrade);
    try {
      await server.ready();
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      const where = host ? `${host}:${port}` : `port ${port}`;
      if (code === "EADDRINUSE") throw new Error(`${where} is already in use (EADDRINUSE)`, { cause: error });
      if (code === "EACCES") throw new Error(`no permission to listen on ${where} (EACCES)`, { cause: error });
      throw new Error(`cannot listen on ${where}: ${errorMessage(error)}`, { cause: error });
    }
    this.server = server;
    this.state = "serving";
    // The address actually bound (`http://[::]:3000/` on every interface): where it listens, so
    // an operator reading the log knows whether it is reachable from outside.
    return server.url ?? `http://${host ?? "localhost"}:${port}/`;
  }

  /** Connections the server accepted so far. */
  get acceptedConnections(): number {
    return this.#connections?.accepted ?? 0;
  }

  /** The port actually bound (useful with port 0). */
  get port(): number | undefined {
    const address = (this.server?.node?.server as NodeServer | undefined)?.address();
    return address && typeof address === "object" ? address.port : undefined;
  }

  shutdown(reason: string): Promise<ShutdownReport> {
    this.#reason ??= reason;
    return (this.#shutdown ??= this.#run(reason));
  }

  async #run(reason: string): Promise<ShutdownReport> {
    const { logger, shutdownTimeout, shutdownDelay, hooks } = this.#options;
    const started = performance.now();
    const report: ShutdownReport = {
      clean: true, reason, durationMs: 0, deadlinePassed: false, failedHooks: [], timedOutHook: undefined,
      skippedHooks: [], abandonedRequests: 0, drainCap: undefined,
    };
    this.shuttingDown = true;
    const controller = new AbortController();
    let onDeadline!: () => void;
    const deadline: Deadline = new Promise((resolve) => (onDeadline = () => resolve(DEADLINE)));
    const timer = setTimeout(() => {
      report.deadlinePassed = true;
      // Deadline first: a hook that rejects on abort is then reported as timed out, not failed.
      onDeadline();
      controller.abort(new DOMException(`shutdown deadline of ${shutdownTimeout}ms passed`, "TimeoutError"));
    }, shutdownTimeout);
    logger.info("draining (%s): shutdown budget %dms", reason, shutdownTimeout);
    try {
      if (this.#starting) await Promise.race([this.#starting, deadline]);
      const serving = this.state === "serving";
      this.state = "draining";
      if (serving && shutdownDelay > 0 && !report.deadlinePassed) {
        logger.info("waiting %dms before closing the listener; /health answers 503 meanwhile", shutdownDelay);
        await Promise.race([sleep(shutdownDelay), deadline]);
      }
      if (serving) await this.#drain(deadline, report, shutdownTimeout - (performance.now() - started));
      // Without a listener (streams served through app.request()): they end all the same.
      else await this.#options.streams?.endAll(reason, IDLE_GRACE_MS);
      await this.#runHooks(hooks, controller.signal, deadline, report);
    } finally {
      clearTimeout(timer);
    }
    report.durationMs = Math.round(performance.now() - started);
    report.clean = !report.deadlinePassed && report.failedHooks.length === 0 && report.abandonedRequests === 0;
    this.state = "terminated";
    if (report.clean) logger.info("terminated cleanly in %dms (%s)", report.durationMs, reason);
    else logger.logError("terminated with errors in %dms (%s): %s", report.durationMs, reason, summarize(report));
    this.#finish(report);
    return report;
  }

  /**
   * Closes the listener, then (after the grace) every connection with no request in flight, and
   * waits for the requests in flight, at most until the drain cap: what is still open then is
   * destroyed, so that the hooks always start.
   */
  async #drain(deadline: Deadline, report: ShutdownReport, remaining: number): Promise<void> {
    const node = this.server?.node?.server as NodeServer | undefined;
    const connections = this.#connections;
    if (!node || !connections) return;
    const { logger, inflight } = this.#options;
    const started = performance.now();
    // Counted on the connections, not by the pipeline: a response whose head is out (an event
    // stream, a streamed body) is still in flight until its last byte is written.
    const { writing, running } = connections.inFlight();
    const requests = Math.max(inflight(), writing + running);
    if (writing > 0) logger.info("closing the listener: %d request(s) in flight, %d of them response(s) still being written", requests, writing);
    else logger.info("closing the listener: %d request(s) in flight", requests);
    const closed = new Promise<void>((resolve) => node.once("close", () => resolve()));
    // Stop accepting before closing idle sockets. http's close() does it the other way round, so a
    // client that sees its idle socket close can reconnect into the backlog of a listener that is
    // about to close, and that connection is then reset instead of refused.
    NetServer.prototype.close.call(node);
    connections.mark();
    const capMs = Math.max(IDLE_GRACE_MS, Math.round(remaining * DRAIN_SHARE));
    // Event streams get their final event and WebSockets their close frame now; a WebSocket that has
    // not answered within half the cap is terminated. The drain then goes on as for any response.
    const ending = this.#options.streams?.endAll(this.#reason ?? "shutdown", Math.round(capMs / 2));
    let sweep: NodeJS.Timeout | undefined;
    // Not node's close() or closeIdleConnections(): they skip a connection that is still sending its
    // request (or never sent one), and destroy one whose response has ended but is still being
    // written to a slow reader.
    // Each look runs in setImmediate, after the event loop's poll phase: on a busy process the timer
    // fires before the sockets are read, and a request already in the kernel's buffer would be
    // taken for an idle connection (the client sees a reset).
    const look = (log: boolean) => setImmediate(() => {
      const idle = connections.closeIdle();
      if (log && idle > 0) logger.info("closed %d connection(s) with no request in flight", idle);
    });
    const grace = setTimeout(() => {
      look(true);
      sweep = setInterval(() => look(false), IDLE_SWEEP_MS);
    }, IDLE_GRACE_MS);
    let capTimer: NodeJS.Timeout | undefined;
    const cap = new Promise<typeof DRAIN_CAP>((resolve) => (capTimer = setTimeout(() => resolve(DRAIN_CAP), capMs)));
    const outcome = await Promise.race([closed, cap, deadline]);
    clearTimeout(grace);
    clearTimeout(capTimer);
    clearInterval(sweep);
    if (outcome === undefined) {
      // A WebSocket's socket can close before its close event has run the application's hook: let it.
      if (ending !== undefined) await Promise.race([ending, deadline]);
      logger.info("listener closed, in-flight requests done in %dms", Math.round(performance.now() - started));
      return;
    }
    const abandoned = connections.destroyAll();
    node.closeAllConnections();
    report.abandonedRequests = abandoned.writing + abandoned.running;
    if (outcome === DEADLINE) {
      logger.logError("deadline passed with %s: their connections were destroyed", describeAbandoned(abandoned));
    } else {
      report.drainCap = `drain cap of ${capMs}ms reached with ${describeAbandoned(abandoned)}`;
      logger.logError("%s: their connections were destroyed; running the hooks", report.drainCap);
    }
  }

  async #runHooks(hooks: readonly NamedHook[], signal: AbortSignal, deadline: Deadline, report: ShutdownReport): Promise<void> {
    const { logger } = this.#options;
    if (hooks.length > 0) logger.info("running %d shutdown hook(s): %s", hooks.length, hooks.map((h) => h.name).join(", "));
    for (const [index, { name, hook }] of hooks.entries()) {
      if (report.deadlinePassed) {
        report.skippedHooks = hooks.slice(index).map((h) => h.name);
        logger.logError("shutdown hook(s) not started before the deadline: %s", report.skippedHooks.join(", "));
        return;
      }
      const started = performance.now();
      try {
        const outcome = await Promise.race([Promise.resolve().then(() => hook(signal)), deadline]);
        if (outcome === DEADLINE) {
          report.timedOutHook = name;
          logger.logError("shutdown hook %s was still running at the deadline", name);
        } else {
          // Only a hook that used a real share of the budget is worth a line (N workers × M hooks
          // of "done in 0ms" drowned the shutdown): the one to look at when a shutdown runs late.
          const ms = performance.now() - started;
          if (ms >= this.#options.shutdownTimeout * SLOW_HOOK_SHARE) {
            logger.info("shutdown hook %s took %dms of the %dms budget", name, Math.round(ms), this.#options.shutdownTimeout);
          }
        }
      } catch (error) {
        report.failedHooks.push(name);
        logger.logError("shutdown hook %s failed: %s", name, describe(error));
      }
    }
  }
}

/** `1 response(s) still being written, 2 request(s) still running`, naming only what there was. */
function describeAbandoned({ writing, running }: Abandoned): string {
  const parts: string[] = [];
  if (writing > 0) parts.push(`${writing} response(s) still being written`);
  if (running > 0 || writing === 0) parts.push(`${running} request(s) still running`);
  return parts.join(", ");
}

/** What made a shutdown unclean, in one line (empty for a clean one): the drain cap first, when it was reached. */
export function shutdownProblems(report: ShutdownReport): string {
  if (report.clean) return "";
  return report.drainCap === undefined ? summarize(report) : `${report.drainCap}; ${summarize(report)}`;
}

function summarize(report: ShutdownReport): string {
  const parts: string[] = [];
  if (report.failedHooks.length) parts.push(`failed hooks: ${report.failedHooks.join(", ")}`);
  if (report.timedOutHook) parts.push(`hook still running at the deadline: ${report.timedOutHook}`);
  if (report.skippedHooks.length) parts.push(`skipped hooks: ${report.skippedHooks.join(", ")}`);
  if (report.abandonedRequests) parts.push(`${report.abandonedRequests} request(s) abandoned`);
  if (report.deadlinePassed && parts.length === 0) parts.push("the deadline passed");
  return parts.join("; ");
}
