import cluster from "node:cluster";
import { resolve as resolvePath } from "node:path";
import type { FeatureHost } from "../src/cluster/feature-host.js";
import { setLogOrigin } from "../src/logging/origin.js";
import { flushAllLoggers, type Logger } from "../src/logging/logger.js";
import { systemClock, type Clock } from "./clock.js";
import { openControlSocket, type ControlServer } from "./control-socket.js";
import { FEATURES, type FeatureInstaller } from "./features.js";
import { MemoryLimit } from "./memory-limit.js";
import { typeScriptEntryHint } from "./entry-hint.js";
import { registerSupervisor } from "./registry.js";
import { probePort, type BalancerHost } from "./balancer.js";
import { askedPort, isResolved, resolveOptions, type ResolvedSupervisorOptions, type SupervisorOptions } from "./options.js";
import { rollingReload, type ReloadReport } from "./reload.js";
import { StatusBoard, type StatusReport } from "./status.js";
import { Watchdog } from "./watchdog.js";
import { describeExit, type SupervisedWorker, type WorkerExit, type WorkerHandle } from "./worker-handle.js";
import { WorkerPool, type Slot } from "./worker-pool.js";
import { clusterFork, forkSettings, type ForkSetup, type ForkWorker } from "./worker-process.js";
import { errorMessage } from "../src/errors.js";

/** How the supervisor stopped; `exitCode` is what the process exits with. */
export interface StopReport {
  /** A signal name, `stop()`, `crash loop`, or `startup failed: <why>`. */
  reason: string;
  /** 0 when every worker the stop drained exited cleanly (and no crash loop), else 1. */
  exitCode: 0 | 1;
  durationMs: number;
  /** The workers the stop drained: not one that had already exited (a crash) when it began. */
  workers: Array<{ id: number; pid: number; exit: WorkerExit; clean: boolean }>;
}

/**
 * @internal What a unit test replaces to run the primary's decisions in-process (see
 * docs/contributing.md): the fork, the clock, the list of cluster features. The CLI passes a fork
 * that adopts the workers it forked before loading the supervisor (prefork.ts).
 */
export interface SupervisorSeams {
  /** Default: node:cluster (`cluster.setupPrimary`, then `cluster.fork` per worker). */
  fork?: ForkSetup;
  /** Default: the process's clock (`performance.now()`, timers). */
  clock?: Clock;
  /** Default: FEATURES (jobs, cluster metrics and the metrics port, rate limits). */
  features?: readonly FeatureInstaller[];
  /**
   * The reuseport mode's check that no other program holds the port, resolving to the port to
   * serve (a free one for 0). Default: `probePort`; the CLI, which probed before its early fork,
   * passes the port it found.
   */
  probePort?: (port: number) => Promise<number>;
  /** Default: this machine (platform, Node version, /proc/sys), what the reuseport mode needs. */
  balancerHost?: BalancerHost;
}

// node:cluster has one primary per process, so one running supervisor.
let running = false;

/**
 * The node:cluster primary: forks N workers that each run `entry` (an App calling `listen()`)
 * behind one port, relays SIGINT/SIGTERM as one SIGTERM per worker, replaces crashed workers
 * with backoff under a crash-loop breaker, reloads them one by one on SIGHUP, and kills workers
 * whose event loop is blocked.
 *
 * keelson's cluster features (jobs, metrics, rate limits, streams) reach the workers through one
 * door: the FeatureHost each installer of `FEATURES` (features.ts) is given, which serves request
 * types, hears message types and sees every worker as it is forked. That door is not public for
 * 1.0: the IPC types, the worker's channel and the feature list are keelson's internals
 * (docs/supervisor.md, "No IPC door for 1.0").
 */
export class Supervisor {
  readonly options: ResolvedSupervisorOptions;
  readonly logger: Logger;
  /** Settles once the supervisor has stopped, whatever stopped it. */
  readonly finished: Promise<StopReport>;
  readonly #pool: WorkerPool;
  readonly #watchdog: Watchdog;
  readonly #board: StatusBoard;
  readonly #clock: Clock;
  readonly #forkSetup: ForkSetup;
  readonly #probePort: (port: number) => Promise<number>;
  #fork: ForkWorker | undefined;
  /** Features' stop listeners: called when stopping begins, before the workers drain. */
  readonly #onStop: Array<() => void> = [];
  /** The features' sections of `keelson status` (FeatureHost.addStatus), read at every status request. */
  readonly #statusSections = new Map<string, () => unknown>();
  #control: Promise<ControlServer | undefined> | undefined;
  readonly #memory: MemoryLimit | undefined;
  #finish!: (report: StopReport) => void;
  #started: Promise<void> | undefined;
  #onStarted: { resolve: () => void; reject: (error: Error) => void } | undefined;
  #startedAt = 0;
  #stopping: Promise<StopReport> | undefined;
  #crashLoop: string | undefined;
  #startupFailure: string | undefined;
  /** Why `fail()` stopped it: exit 1 whatever the workers did. */
  #failure: string | undefined;
  #reloading: Promise<ReloadReport> | undefined;
  #reloadAgain = false;
  readonly #onStopSignal = (signal: NodeJS.Signals) => void this.stop(signal);
  readonly #onReloadSignal = () => void this.reload();

  /**
   * `options` as written, or what `resolveOptions` returned (used as it is, not resolved again).
   * `seams` is for unit tests and the CLI (@internal): applications pass options alone.
   */
  constructor(options: SupervisorOptions | ResolvedSupervisorOptions, seams: SupervisorSeams = {}) {
    this.options = isResolved(options) ? options : resolveOptions(options, seams.balancerHost);
    this.logger = this.options.logger;
    this.finished = new Promise((resolve) => (this.#finish = resolve));
    this.#clock = seams.clock ?? systemClock;
    this.#forkSetup = seams.fork ?? clusterFork;
    this.#probePort = seams.probePort ?? probePort;
    const fork: ForkWorker = (env) => {
      if (this.#fork === undefined) throw new Error("the supervisor forks workers only once started");
      return this.#fork(env);
    };
    this.#pool = new WorkerPool(this.options, {
      ready: () => this.#checkAllReady(),
      crashLoop: (why) => {
        this.#crashLoop = why;
        void this.stop("crash loop");
      },
      failedToStart: (handle) => this.#failedToStart(handle),
    }, fork, this.#clock);
    this.#watchdog = new Watchdog(this.options.watchdogTimeout, () => this.#pool.live, this.#clock, this.logger,
      (handle, why) => this.#restartStuck(handle, why));
    this.#board = new StatusBoard(this.#pool, this.options, {
      reloading: () => this.#reloading !== undefined,
      stopping: () => this.stopping,
      crashLoop: () => this.#crashLoop !== undefined,
      sections: () => Object.fromEntries([...this.#statusSections].map(([name, read]) => [name, read()])),
    });
    const { maxMemory, maxMemoryWindow } = this.options;
    this.#memory = maxMemory === undefined ? undefined : new MemoryLimit({
      limit: maxMemory, windowMs: maxMemoryWindow, logger: this.logger, clock: this.#clock,
      onWorker: (listener) => this.#pool.onWorker(listener),
      replace: (handle, why) => this.#replaceOverLimit(handle, why),
    });
    this.#pool.onWorker((handle) => void handle.ready.then(() => this.#checkPort(handle), () => {}));
    const host = this.#featureHost();
    for (const install of seams.features ?? FEATURES) install(host, this.options);
  }

  /** What the cluster features (FEATURES) see of this supervisor. */
  #featureHost(): FeatureHost {
    const stopping = () => this.stopping;
    return {
      logger: this.logger,
      get stopping() {
        return stopping();
      },
      finished: this.finished,
      handle: (type, handler) => this.#pool.handle(type, handler),
      onMessage: (type, listener) => this.#pool.onMessage(type, listener),
      onWorker: (listener) => this.#pool.onWorker(listener),
      onStop: (listener) => void this.#onStop.push(listener),
      fail: (reason) => this.fail(reason),
      addStatus: (name, read) => void this.#statusSections.set(name, read),
      excuseCrashes: (judge) => this.#pool.excuseCrashes(judge),
    };
  }

  /** True from the first stop request (signal, crash loop or `stop()`). */
  get stopping(): boolean {
    return this.#stopping !== undefined;
  }

  /** Live workers (starting, ready or draining); during a reload a slot id can appear twice. */
  get workers(): readonly SupervisedWorker[] {
    return Array.from(this.#pool.live);
  }

  /** What `keelson status` prints: the primary, the crash-loop breaker, each live worker's latest figures. */
  status(): StatusReport {
    return this.#board.read();
  }

  /** Forks the workers; resolves when all are ready, rejects if the supervisor stops first (e.g. a crash loop). */
  start(): Promise<void> {
    return (this.#started ??= this.#start());
  }

  async #start(): Promise<void> {
    if (!cluster.isPrimary) throw new Error("the supervisor runs in the primary process, not in a cluster worker");
    if (running) throw new Error("a supervisor is already running in this process (node:cluster has one primary)");
    running = true;
    const { entry, workers, handleSignals, exitProcess } = this.options;
    setLogOrigin("primary", process.pid);
    this.#fork = this.#forkSetup(forkSettings(this.options));
    if (handleSignals) {
      process.on("SIGINT", this.#onStopSignal);
      process.on("SIGTERM", this.#onStopSignal);
      process.on("SIGHUP", this.#onReloadSignal);
    }
    if (exitProcess) {
      void this.finished.then((report) => {
        flushAllLoggers();
        process.exit(report.exitCode);
      });
    }
    this.#startedAt = this.#clock.now();
    this.logger.info("supervisor (pid %d) starting %d worker(s): %s", process.pid, workers, entry);
    const started = new Promise<void>((resolve, reject) => (this.#onStarted = { resolve, reject }));
    if (!(await this.#claimPort())) return started;
    for (const slot of this.#pool.slots) this.#pool.start(slot);
    this.#watchdog.start();
    this.#control = this.#openControl();
    return started;
  }

  /**
   * Replaces every worker one at a time (fork, wait until ready, drain the old one). A reload
   * asked for while one runs is queued once, so the last deployed code always ends up running.
   */
  reload(): Promise<ReloadReport> {
    if (this.#stopping) return Promise.resolve({ ok: false, replaced: 0, workers: [], durationMs: 0, error: "the supervisor is stopping", unclean: [] });
    if (this.#reloading) {
      this.logger.info("reload requested while one runs: another follows it");
      this.#reloadAgain = true;
      return this.#reloading;
    }
    return this.#replace(undefined, "reload");
  }

  /**
   * Runs a rolling replacement of `slots` (every slot when undefined) as the one replacement
   * allowed at a time; reloads asked meanwhile are folded into one full run after it.
   */
  #replace(slots: readonly Slot[] | undefined, what: string): Promise<ReloadReport> {
    const run = async (): Promise<ReloadReport> => {
      let report: ReloadReport;
      let only = slots;
      do {
        this.#reloadAgain = false;
        report = await rollingReload({
          pool: this.#pool, logger: this.logger, readyTimeout: this.options.readyTimeout,
          stopping: () => this.#stopping !== undefined,
          retire: (handle, reason) => this.#retire(handle, reason),
        }, only, only === undefined ? "reload" : what);
        only = undefined;
      } while (this.#reloadAgain && report.ok && !this.#stopping);
      this.#reloading = undefined;
      return report;
    };
    return (this.#reloading = run());
  }

  /** A worker over its memory limit: replaced alone, like a reload replaces it; after a reload that is running, if any. */
  #replaceOverLimit(handle: WorkerHandle, why: string): void {
    const slot = this.#pool.slots[handle.id - 1];
    if (this.#stopping || slot === undefined || slot.current !== handle) return;
    if (this.#reloading) {
      this.#memory?.retry(handle);
      return;
    }
    this.logger.warn("%s: %s: replacing it", handle.name, why);
    void this.#replace([slot], "memory-limit restart");
  }

  /**
   * A worker node:cluster passes no more connections to (see watchdog.ts): drained and restarted,
   * not counted as a crash. Not replaced first like a reload does: when it happens the primary is
   * usually out of descriptors itself (connections queued for the stuck workers), and a fork
   * needs some; the stuck worker's exit is what lets node:cluster release them.
   */
  #restartStuck(handle: WorkerHandle, why: string): void {
    if (this.#stopping || handle.state !== "ready") return;
    this.logger.warn("%s: %s: restarting it", handle.name, why);
    handle.restartAsked = why;
    void this.#retire(handle, why);
  }

  /**
   * Stops respawning, sends SIGTERM once to every worker, waits for all of them (SIGKILL at each
   * one's budget plus the margin) and resolves with the exit code. Idempotent.
   */
  stop(reason = "stop()"): Promise<StopReport> {
    if (this.#stopping) {
      this.logger.info("received %s while stopping: already draining, nothing to do", reason);
      return this.#stopping;
    }
    return (this.#stopping = this.#stop(reason));
  }

  /**
   * Stops like `stop()`, but exits 1 and ends with `reason` whatever the workers do: for a failure
   * the orchestrator must see (e.g. the metrics port is taken).
   */
  fail(reason: string): Promise<StopReport> {
    if (this.#stopping === undefined) {
      this.#failure = reason;
      this.logger.logError("%s", reason);
    }
    return this.stop(reason);
  }

  async #stop(reason: string): Promise<StopReport> {
    const started = this.#clock.now();
    this.#pool.close();
    for (const listener of this.#onStop) listener();
    this.#watchdog.stop();
    const live = Array.from(this.#pool.live);
    // A worker whose exit the primary had already seen (its output still draining) crashed before
    // the stop: the pool would have replaced it a moment later, and the replacement would have
    // drained. Counting it would make the exit code depend on which of two events came first.
    const handles = live.filter((handle) => handle.exit === undefined);
    this.logger.info("stopping (%s): draining %d worker(s)", reason, handles.length);
    await Promise.all(live.map((handle) => this.#retire(handle, reason)));
    const workers = handles.map((h) => ({ id: h.id, pid: h.pid, exit: h.exit ?? { code: null, signal: null }, clean: h.exitedCleanly }));
    const dirty = workers.filter((w) => !w.clean);
    const failed = this.#startupFailure ?? this.#failure ?? this.#crashLoop;
    const exitCode = failed === undefined && dirty.length === 0 ? 0 : 1;
    const durationMs = Math.round(this.#clock.now() - started);
    if (exitCode === 0) this.logger.info("stopped: %d worker(s) exited cleanly in %dms", workers.length, durationMs);
    else if (this.#startupFailure !== undefined) {
      this.logger.logError("stopped in %dms with exit 1: startup failed: %s", durationMs, this.#startupFailure);
    } else if (this.#failure !== undefined) this.logger.logError("stopped in %dms with exit 1: %s", durationMs, this.#failure);
    else if (dirty.length > 0) {
      const list = dirty.map((w) => `worker ${w.id} (pid ${w.pid}) ${describeExit(w.exit)}`).join(", ");
      this.logger.logError("stopped in %dms with exit 1: %s", durationMs, list);
    } else this.logger.logError("stopped in %dms with exit 1 after a crash loop, so that the orchestrator restarts the process", durationMs);
    const report: StopReport = {
      reason: this.#startupFailure === undefined ? reason : `startup failed: ${this.#startupFailure}`, exitCode, durationMs, workers,
    };
    this.#onStarted?.reject(new Error(`the supervisor stopped before all workers were ready: ${report.reason}`));
    await (await this.#control)?.close();
    this.#release();
    this.#finish(report);
    return report;
  }

  /**
   * A slot's worker ended before it was ready. At startup (not every worker ready yet) no restart
   * can help: the same code, config and port would fail the same way, so the supervisor stops
   * with exit 1 and the reason, and the orchestrator (which shows it) restarts with its own
   * backoff. Once the service has been up, it is a crash like any other (backoff, breaker): the
   * cause may be passing, and the workers still running keep serving meanwhile.
   */
  #failedToStart(handle: WorkerHandle): boolean {
    if (this.#onStarted === undefined) return false;
    const hint = typeScriptEntryHint("start", this.options.entry, handle.failure, this.options.execArgv, this.options.env.NODE_OPTIONS);
    this.#startupFailure ??= `${handle.name} exited ${handle.describeEnd()}${hint === undefined ? "" : `. Hint: ${hint}`}`;
    void this.stop("startup failed");
    return true;
  }

  #retire(handle: WorkerHandle, reason: string): Promise<WorkerExit> {
    return handle.terminate(reason, this.options.shutdownTimeout, this.options.killMargin);
  }

  /**
   * The reuseport mode: refuses a port another program listens on (exit 1, as a worker's
   * EADDRINUSE would at startup), and fixes port 0 to one free port for every worker.
   */
  async #claimPort(): Promise<boolean> {
    const { balancer, port } = this.options;
    if (balancer !== "reuseport" || port === undefined) return true;
    try {
      this.options.port = await this.#probePort(port);
      this.logger.info("balancer reuseport: each worker listens on port %d itself, the kernel spreads the connections", this.options.port);
      return true;
    } catch (error) {
      this.#startupFailure = errorMessage(error);
      void this.stop("startup failed");
      return false;
    }
  }

  /** The control socket, if configured; one that cannot open is logged and left out: the service still runs. */
  async #openControl(): Promise<ControlServer | undefined> {
    const path = this.options.controlSocket;
    if (path === false) return undefined;
    try {
      const server = await openControlSocket(path, { status: () => this.status(), reload: () => this.reload() }, this.logger);
      this.logger.info("control socket %s (keelson status, keelson reload)", path);
      const unregister = registerSupervisor({ socket: resolvePath(path), cwd: process.cwd(), entry: this.options.entry });
      return { path, close: () => server.close().finally(unregister) };
    } catch (error) {
      this.logger.warn("no control socket: %s", errorMessage(error));
      return undefined;
    }
  }

  /** A worker listening elsewhere than asked: the supervisor must not report a port it does not serve. */
  #checkPort(handle: WorkerHandle): void {
    const asked = askedPort(this.options);
    const port = handle.info?.port;
    if (asked === undefined || port === undefined || port === asked || this.#stopping) return;
    void this.fail(`${handle.name} listens on port ${port}, not on ${asked} (--port or PORT): its App does not take PORT `
      + `(portEnv) or the entry listens on its own; nothing is served on ${asked}`);
  }

  #checkAllReady(): void {
    if (this.#stopping !== undefined) return;
    if (this.#onStarted === undefined || !this.#pool.slots.every((slot) => slot.current?.state === "ready")) return;
    const first = this.#pool.slots[0]?.current?.info;
    const docs = first?.docsUrl === undefined ? "" : `, docs ${first.docsUrl}`;
    // From the first fork, as each worker's own "ready in" counts: under `keelson start` the workers
    // are forked before the supervisor is made (prefork.ts), so before its own start.
    const since = Math.min(this.#startedAt, ...this.#pool.slots.map((slot) => slot.current?.forkedAt ?? this.#startedAt));
    this.logger.info("%d worker(s) ready in %dms: %s%s", this.#pool.slots.length,
      Math.round(this.#clock.now() - since), first?.url ?? "", docs);
    this.#onStarted.resolve();
    this.#onStarted = undefined;
  }

  #release(): void {
    process.off("SIGINT", this.#onStopSignal);
    process.off("SIGTERM", this.#onStopSignal);
    process.off("SIGHUP", this.#onReloadSignal);
    running = false;
  }
}

/** Creates a Supervisor and starts it; resolves once every worker is ready. */
export async function startSupervisor(options: SupervisorOptions): Promise<Supervisor> {
  const supervisor = new Supervisor(options);
  await supervisor.start();
  return supervisor;
}
