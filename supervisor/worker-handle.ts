import type { Worker } from "node:cluster";
import { Channel, type Endpoint, type Envelope, type PrimaryMessages, type WorkerMessages } from "../src/internal/ipc.js";
import type { Logger } from "../src/logger.js";

/** starting (forked) → ready (its App listens) → draining (asked to stop, or stopping by itself) → exited. */
export type WorkerState = "starting" | "ready" | "draining" | "exited";

/** The primary's side of the typed IPC channel to one worker. */
export type WorkerChannel = Channel<PrimaryMessages, WorkerMessages>;

/** How a worker process ended. */
export interface WorkerExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** One live worker process as the supervisor exposes it. */
export interface SupervisedWorker {
  /** The slot id, 1..N: kept across restarts and reloads, given to the worker as `KEELSON_WORKER_ID`. */
  readonly id: number;
  readonly pid: number;
  readonly state: WorkerState;
  /** Typed IPC to the worker: `send`, `on`, `request(type, payload, timeoutMs)`. */
  readonly channel: WorkerChannel;
}

/** `worker.process` as an Endpoint; a failed send is dropped instead of becoming an 'error' event. */
function workerEndpoint(worker: Worker): Endpoint {
  const child = worker.process;
  return {
    send: (message: Envelope) => child.send(message, undefined, undefined, () => {}),
    on: (event, listener) => child.on(event, listener),
    off: (event, listener) => child.off(event, listener),
    get connected() {
      return child.connected;
    },
  };
}

/** A forked worker: its state, last heartbeat, and the promises of its readiness and its exit. */
export class WorkerHandle implements SupervisedWorker {
  readonly id: number;
  readonly pid: number;
  readonly channel: WorkerChannel;
  state: WorkerState = "starting";
  readonly forkedAt = performance.now();
  readyAt: number | undefined;
  /** 1 for a slot's first worker, then one more for each restart or reload replacement. */
  generation = 1;
  lastBeat = 0;
  /** What the worker said when it became ready. */
  info: WorkerMessages["ready"] | undefined;
  /** Set when the supervisor killed it (watchdog, ready timeout, kill timer): the reason. */
  killedBy: string | undefined;
  exit: WorkerExit | undefined;
  /** Resolves when ready; rejects if the worker exits first. */
  readonly ready: Promise<void>;
  readonly exited: Promise<WorkerExit>;
  readonly #worker: Worker;
  readonly #logger: Logger;
  #killTimer: NodeJS.Timeout | undefined;

  constructor(id: number, worker: Worker, logger: Logger) {
    this.id = id;
    this.#worker = worker;
    this.#logger = logger;
    this.pid = worker.process.pid ?? 0;
    this.channel = new Channel(workerEndpoint(worker));
    this.exited = new Promise((resolve) => {
      worker.once("exit", (code: number | null, signal: NodeJS.Signals | null) => {
        this.exit = { code, signal };
        this.state = "exited";
        clearTimeout(this.#killTimer);
        this.channel.close();
        resolve(this.exit);
      });
    });
    this.ready = new Promise((resolve, reject) => {
      this.channel.on("ready", (info) => {
        if (this.state !== "starting") return;
        this.info = info;
        this.readyAt = this.lastBeat = performance.now();
        this.state = "ready";
        this.#logger.info("%s ready on %s in %dms", this.name, info.url, Math.round(this.readyAt - this.forkedAt));
        resolve();
      });
      void this.exited.then((exit) => reject(new Error(`exited (${describeExit(exit)}) before it was ready`)));
    });
    this.ready.catch(() => {});
    this.channel.on("heartbeat", () => (this.lastBeat = performance.now()));
    this.channel.on("draining", ({ reason }) => this.#draining(`${reason}, by its own decision`));
    worker.on("error", (error: Error) => this.#logger.warn("%s: IPC error: %s", this.name, error.message));
    this.#logger.info("%s starting", this.name);
  }

  /** `worker 2 (pid 4242)`: how log lines name it. */
  get name(): string {
    return `worker ${this.id} (pid ${this.pid})`;
  }

  /** Milliseconds since it became ready; 0 if it never did. */
  get uptime(): number {
    return this.readyAt === undefined ? 0 : performance.now() - this.readyAt;
  }

  /** Waits for readiness at most `timeoutMs`; rejects with the reason it is not ready. */
  waitReady(timeoutMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`not ready after ${timeoutMs}ms`)), timeoutMs);
    });
    return Promise.race([this.ready, timeout]).finally(() => clearTimeout(timer));
  }

  /**
   * Sends SIGTERM once (the worker drains and runs its hooks under its own budget) and SIGKILLs
   * it if still alive at that budget plus `margin`. Resolves when it has exited.
   */
  terminate(reason: string, fallbackBudget: number, margin: number): Promise<WorkerExit> {
    if (this.exit !== undefined || this.#killTimer !== undefined) return this.exited;
    const budget = this.info?.shutdownTimeout ?? fallbackBudget;
    this.#draining(reason);
    this.#signal("SIGTERM");
    this.#killTimer = setTimeout(() => {
      this.kill(`still running ${budget + margin}ms after SIGTERM (budget ${budget}ms + margin ${margin}ms)`);
    }, budget + margin);
    return this.exited;
  }

  /** SIGKILLs it now; `reason` is kept for the exit log line. */
  kill(reason: string): void {
    if (this.exit !== undefined) return;
    this.killedBy ??= reason;
    this.#logger.warn("%s: %s: sending SIGKILL", this.name, reason);
    this.#signal("SIGKILL");
  }

  /** True for an orderly exit: code 0, or a SIGTERM that reached it before its App was listening. */
  get exitedCleanly(): boolean {
    const exit = this.exit;
    if (exit === undefined || this.killedBy !== undefined) return false;
    return exit.code === 0 || (this.readyAt === undefined && exit.signal === "SIGTERM");
  }

  #draining(reason: string): void {
    if (this.state === "draining" || this.state === "exited") return;
    this.state = "draining";
    this.#logger.info("%s draining (%s)", this.name, reason);
  }

  #signal(signal: NodeJS.Signals): void {
    // worker.process.kill, not worker.kill: the latter disconnects IPC first, and a worker whose
    // channel drops believes its primary is gone.
    try {
      this.#worker.process.kill(signal);
    } catch {
      // Already gone: its exit event follows.
    }
  }
}

/** `code 1`, `signal SIGKILL`. */
export function describeExit(exit: WorkerExit): string {
  return exit.signal !== null ? `signal ${exit.signal}` : `code ${String(exit.code)}`;
}
