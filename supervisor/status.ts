import { performance, type EventLoopUtilization } from "node:perf_hooks";
import { balanceSkew, loadRates, workerStatsMessage, type WorkerStats } from "../src/cluster/worker-stats.js";
import { fdUsage, memoryUsage } from "../src/cluster/process-usage.js";
import type { ResolvedSupervisorOptions } from "./options.js";
import type { WorkerHandle, WorkerState } from "./worker-handle.js";
import type { WorkerPool } from "./worker-pool.js";

/** One worker's row of `keelson status`. Figures are from its last report (every heartbeat period). */
export interface WorkerStatus {
  /** The slot id, 1..N. */
  id: number;
  pid: number;
  /** 1 for the slot's first worker, one more per restart or reload replacement. */
  generation: number;
  state: Exclude<WorkerState, "exited">;
  /** Since it became ready; 0 while starting. */
  uptimeMs: number;
  /** Crash restarts of its slot. */
  restarts: number;
  /** Undefined until the worker's first report. */
  stats: (WorkerStats & { requestsPerSecond: number; connectionsPerSecond: number; ageMs: number }) | undefined;
}

/** What `keelson status` shows: the primary, the crash-loop breaker, every live worker. */
export interface StatusReport {
  primary: {
    pid: number; uptimeMs: number; rss: number; heapUsed: number; elu: number; entry: string; workers: number; reloading: boolean; stopping: boolean;
    /** The folder it was started from (entry paths are relative to it). */
    cwd: string;
    /** The port its workers serve, once one is ready; undefined before. */
    port: number | undefined;
    /** Where its workers serve (the address bound, `http://[::]:3000/` on every interface), once one is ready. */
    url?: string;
    /** Its control socket, if it has one. */
    controlSocket: string | undefined;
    /** Open file descriptors and their soft limit (absent: unlimited); absent where unknown (not Linux). */
    fds?: number;
    fdLimit?: number;
  };
  /**
   * What the cluster features report (FeatureHost.addStatus), by name: `metrics` is where the
   * cluster-wide metrics are served (`{ url, note }`, `note` saying why not on the port asked).
   */
  features: Record<string, unknown>;
  breaker: { state: "closed" | "tripped"; crashes: number; maxCrashes: number; windowMs: number };
  workers: WorkerStatus[];
  /**
   * How evenly the ready workers share the load over their last report period: the busiest one's
   * requests (connections) per second divided by the mean; 1 is even, N is all on one of N workers.
   * Null with fewer than two ready workers or no load.
   */
  balance: { requestsSkew: number | null; connectionsSkew: number | null };
}

interface Latest {
  stats: WorkerStats;
  at: number;
  requestsPerSecond: number;
  connectionsPerSecond: number;
}

/** What the board reads from the supervisor besides the pool. */
export interface StatusHost {
  reloading(): boolean;
  stopping(): boolean;
  crashLoop(): boolean;
  sections(): Record<string, unknown>;
}

/**
 * Keeps each worker's latest `stats` report (requests per second from the difference between
 * two reports) and assembles the StatusReport on demand.
 */
export class StatusBoard {
  readonly #pool: WorkerPool;
  readonly #options: ResolvedSupervisorOptions;
  readonly #host: StatusHost;
  readonly #latest = new WeakMap<WorkerHandle, Latest>();
  readonly #startedAt = performance.now();
  #lastElu: EventLoopUtilization = performance.eventLoopUtilization();

  constructor(pool: WorkerPool, options: ResolvedSupervisorOptions, host: StatusHost) {
    this.#pool = pool;
    this.#options = options;
    this.#host = host;
    pool.onWorker((handle) => handle.channel.on(workerStatsMessage, (stats) => this.#record(handle, stats)));
  }

  /** The latest report of a worker, if it sent one. */
  statsOf(handle: WorkerHandle): WorkerStats | undefined {
    return this.#latest.get(handle)?.stats;
  }

  read(): StatusReport {
    const now = performance.now();
    // Neither throws at EMFILE: `keelson status` is what one runs when descriptors are short.
    const memory = memoryUsage();
    const fds = fdUsage();
    // The primary's utilisation since the previous read (or its start): a `--watch` refresh period.
    const elu = performance.eventLoopUtilization(this.#lastElu).utilization;
    this.#lastElu = performance.eventLoopUtilization();
    const { crashLoop, entry, workers } = this.#options;
    const live = [...this.#pool.live].filter((handle) => handle.state !== "exited");
    const ready = live.filter((handle) => handle.state === "ready").map((handle) => this.#latest.get(handle))
      .filter((latest) => latest !== undefined);
    const serving = live.find((handle) => handle.info !== undefined)?.info;
    return {
      primary: {
        pid: process.pid, uptimeMs: Math.round(now - this.#startedAt), rss: memory.rss, heapUsed: memory.heapUsed,
        elu: round(elu), entry, workers, reloading: this.#host.reloading(), stopping: this.#host.stopping(),
        cwd: process.cwd(), port: serving?.port, ...(serving?.url === undefined ? {} : { url: serving.url }),
        controlSocket: this.#options.controlSocket === false ? undefined : this.#options.controlSocket,
        ...(fds === undefined ? {} : { fds: fds.fds, ...(fds.fdLimit === undefined ? {} : { fdLimit: fds.fdLimit }) }),
      },
      breaker: {
        state: this.#host.crashLoop() ? "tripped" : "closed", crashes: this.#pool.crashesNow(),
        maxCrashes: crashLoop.maxCrashes, windowMs: crashLoop.window,
      },
      workers: live.toSorted((a, b) => a.id - b.id || a.generation - b.generation).map((handle) => this.#row(handle, now)),
      features: this.#host.sections(),
      balance: {
        requestsSkew: balanceSkew(ready.map((latest) => latest.requestsPerSecond)) ?? null,
        connectionsSkew: balanceSkew(ready.map((latest) => latest.connectionsPerSecond)) ?? null,
      },
    };
  }

  #row(handle: WorkerHandle, now: number): WorkerStatus {
    const latest = this.#latest.get(handle);
    return {
      id: handle.id, pid: handle.pid, generation: handle.generation, state: handle.state as WorkerStatus["state"],
      uptimeMs: Math.round(handle.uptime), restarts: this.#pool.slots[handle.id - 1]?.restarts ?? 0,
      stats: latest === undefined ? undefined : {
        ...latest.stats, elu: round(latest.stats.elu), requestsPerSecond: latest.requestsPerSecond,
        connectionsPerSecond: latest.connectionsPerSecond, ageMs: Math.round(now - latest.at),
      },
    };
  }

  #record(handle: WorkerHandle, stats: WorkerStats): void {
    const at = performance.now();
    this.#latest.set(handle, { stats, at, ...loadRates(this.#latest.get(handle), stats, at) });
  }
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}
