import type { Server as NodeServer } from "node:http";
import { serve, type H3 } from "h3";
import type { Server } from "srvx";
import type { ShutdownHook } from "../integrations.js";
import type { Logger } from "../logger.js";

/** What happened during a shutdown; `clean` decides the exit code (0 or 1). */
export interface ShutdownReport {
  clean: boolean;
  /** What started it: a signal name or `close()`. */
  reason: string;
  durationMs: number;
  failedHooks: string[];
  /** The hook still running when the deadline passed, if any. */
  timedOutHook: string | undefined;
  /** Hooks never started because the deadline had passed. */
  skippedHooks: string[];
  /** Requests still in flight at the deadline; their connections were destroyed. */
  abandonedRequests: number;
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
}

export type LifecycleState = "created" | "serving" | "draining" | "terminated";

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function describe(error: unknown): string {
  return error instanceof Error ? (error.stack ?? error.message) : String(error);
}

/**
 * The process lifecycle of one App: created → serving → draining → terminated, with one
 * shutdown budget shared by the delay, the drain and the hooks. `shutdown()` is idempotent:
 * a second signal gets the same promise and changes nothing.
 */
export class Lifecycle {
  state: LifecycleState = "created";
  /** True from the first signal: /health answers 503. */
  shuttingDown = false;
  /** True once the listener closes: responses carry `Connection: close`. */
  draining = false;
  server: Server | undefined;
  readonly #options: LifecycleOptions;
  #shutdown: Promise<ShutdownReport> | undefined;
  #finish!: (report: ShutdownReport) => void;
  /** Settles when a shutdown, whatever started it, has completed. */
  readonly finished = new Promise<ShutdownReport>((resolve) => (this.#finish = resolve));

  constructor(options: LifecycleOptions) {
    this.#options = options;
  }

  get shutdownStarted(): boolean {
    return this.#shutdown !== undefined;
  }

  /** Starts listening; rejects with a one-line reason when the port is taken or invalid. */
  async start(app: H3, port: number, host: string | undefined): Promise<string> {
    if (!Number.isInteger(port) || port < 0 || port > 65535) {
      throw new Error(`invalid port ${JSON.stringify(port)}: expected an integer from 0 to 65535`);
    }
    // exclusive: false lets cluster workers share the primary's handle; gracefulShutdown: false
    // keeps srvx from installing signal handlers of its own (it does so only outside CI).
    const server = serve(app, { port, hostname: host, silent: true, gracefulShutdown: false, node: { exclusive: false } });
    try {
      await server.ready();
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "EADDRINUSE") throw new Error(`port ${port} is already in use (EADDRINUSE)`, { cause: error });
      if (code === "EACCES") throw new Error(`no permission to listen on port ${port} (EACCES)`, { cause: error });
      throw new Error(`cannot listen on port ${port}: ${(error as Error).message}`, { cause: error });
    }
    this.server = server;
    this.state = "serving";
    return server.url ?? `http://localhost:${port}`;
  }

  /** The port actually bound (useful with port 0). */
  get port(): number | undefined {
    const address = (this.server?.node?.server as NodeServer | undefined)?.address();
    return address && typeof address === "object" ? address.port : undefined;
  }

  shutdown(reason: string): Promise<ShutdownReport> {
    return (this.#shutdown ??= this.#run(reason));
  }

  async #run(reason: string): Promise<ShutdownReport> {
    const { logger, shutdownTimeout, shutdownDelay, hooks, inflight } = this.#options;
    const started = performance.now();
    const controller = new AbortController();
    let onDeadline!: () => void;
    const deadline = new Promise<"deadline">((resolve) => (onDeadline = () => resolve("deadline")));
    const timer = setTimeout(() => {
      controller.abort(new Error(`shutdown deadline of ${shutdownTimeout}ms passed`));
      onDeadline();
    }, shutdownTimeout);
    const report: ShutdownReport = {
      clean: true, reason, durationMs: 0, failedHooks: [], timedOutHook: undefined, skippedHooks: [], abandonedRequests: 0,
    };
    this.shuttingDown = true;
    const wasServing = this.state === "serving";
    this.state = "draining";
    logger.info("draining: %s, shutdown budget %dms", reason, shutdownTimeout);

    if (wasServing && shutdownDelay > 0) {
      logger.info("waiting %dms before closing the listener (health reports DOWN)", shutdownDelay);
      await Promise.race([sleep(shutdownDelay), deadline]);
    }
    if (wasServing) await this.#drain(deadline, report, inflight);
    await this.#runHooks(hooks, controller.signal, deadline, report, logger);
    clearTimeout(timer);

    report.durationMs = Math.round(performance.now() - started);
    report.clean = report.failedHooks.length === 0 && report.timedOutHook === undefined
      && report.skippedHooks.length === 0 && report.abandonedRequests === 0;
    this.state = "terminated";
    if (report.clean) logger.info("terminated cleanly in %dms", report.durationMs);
    else logger.warn("terminated with errors in %dms: %s", report.durationMs, summarize(report));
    this.#finish(report);
    return report;
  }

  async #drain(deadline: Promise<"deadline">, report: ShutdownReport, inflight: () => number): Promise<void> {
    const node = this.server?.node?.server as NodeServer | undefined;
    this.draining = true;
    if (!node) return;
    const closed = new Promise<"closed">((resolve) => node.close(() => resolve("closed")));
    // Node closes idle keep-alive sockets on close() since v19; say so explicitly for clarity.
    node.closeIdleConnections();
    const outcome = await Promise.race([closed, deadline]);
    if (outcome === "deadline") {
      report.abandonedRequests = inflight();
      node.closeAllConnections();
      this.#options.logger.warn("deadline passed with %d request(s) in flight: connections destroyed", report.abandonedRequests);
    }
  }

  async #runHooks(
    hooks: readonly NamedHook[], signal: AbortSignal, deadline: Promise<"deadline">, report: ShutdownReport, logger: Logger,
  ): Promise<void> {
    if (hooks.length > 0) logger.info("running %d shutdown hook(s)", hooks.length);
    for (const { name, hook } of hooks) {
      if (signal.aborted) {
        report.skippedHooks.push(name);
        continue;
      }
      try {
        const outcome = await Promise.race([Promise.resolve().then(() => hook(signal)), deadline]);
        if (outcome === "deadline") {
          report.timedOutHook = name;
          logger.logError("shutdown hook %s did not finish before the deadline", name);
        }
      } catch (error) {
        report.failedHooks.push(name);
        logger.logError("shutdown hook %s failed: %s", name, describe(error));
      }
    }
    if (report.skippedHooks.length > 0) logger.logError("shutdown hooks skipped after the deadline: %s", report.skippedHooks.join(", "));
  }
}

function summarize(report: ShutdownReport): string {
  const parts: string[] = [];
  if (report.failedHooks.length) parts.push(`failed hooks: ${report.failedHooks.join(", ")}`);
  if (report.timedOutHook) parts.push(`hook still running at the deadline: ${report.timedOutHook}`);
  if (report.skippedHooks.length) parts.push(`skipped hooks: ${report.skippedHooks.join(", ")}`);
  if (report.abandonedRequests) parts.push(`${report.abandonedRequests} request(s) abandoned`);
  return parts.join("; ");
}
