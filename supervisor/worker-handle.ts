import { Channel, workerDraining, workerFailed, workerHeartbeat, workerReady, workerStopped, type WorkerMessages } from "../src/cluster/ipc.js";
import type { FeatureWorker, WorkerChannel, WorkerExit, WorkerState } from "../src/cluster/feature-host.js";
import type { Logger } from "../src/logging/logger.js";
import type { Clock } from "./clock.js";
import { NO_HANDOFFS, type HandoffGuard } from "./handoff-guard.js";
import { relayOutput, type Relay } from "./output-relay.js";
import type { WorkerProcess } from "./worker-process.js";

export type { SupervisedWorker, WorkerChannel, WorkerExit, WorkerState } from "../src/cluster/feature-host.js";

// After its exit, a worker's last output (an uncaught error's stack) is waited for this long at
// most: a grandchild that inherited the pipe must not hold the exit up.
const OUTPUT_GRACE_MS = 500;
// How long a worker's own word that it drains (and its output) waits for the primary's decision
// about the same signal: the primary reads a signal to the process group within a loop turn or
// two of the worker's message, even on a busy machine; a worker signalled alone is only logged late.
const OWN_DECISION_WAIT_MS = 250;

/** A forked worker: its state, last heartbeat, and the promises of its readiness and its exit. */
export class WorkerHandle implements FeatureWorker {
  readonly id: number;
  readonly pid: number;
  readonly channel: WorkerChannel;
  state: WorkerState = "starting";
  readonly forkedAt: number;
  readyAt: number | undefined;
  /** 1 for a slot's first worker, then one more for each restart or reload replacement. */
  generation = 1;
  #exitedAt: number | undefined;
  lastBeat = 0;
  /** What the worker said when it became ready. */
  info: WorkerMessages["ready"] | undefined;
  /** Set when the supervisor killed it (watchdog, ready timeout, kill timer): the reason. */
  killedBy: string | undefined;
  /** Set when the supervisor asked it to stop so that its slot restarts (not a crash): the reason. */
  restartAsked: string | undefined;
  /** What the worker reported before dying: its App could not start, or an uncaught error. */
  failure: string | undefined;
  /** What its App reported made its shutdown unclean (the drain cap, a hook), if it did. */
  shutdownProblems: string | undefined;
  exit: WorkerExit | undefined;
  /** Resolves when ready; rejects if the worker exits first. */
  readonly ready: Promise<void>;
  /** Resolves once it has exited and its output has been written out (so log lines about its exit come after its own). */
  readonly exited: Promise<WorkerExit>;
  /** The connections node:cluster handed to it and it has not acknowledged yet. */
  readonly handoffs: HandoffGuard;
  readonly #process: WorkerProcess;
  readonly #logger: Logger;
  readonly #clock: Clock;
  /** Set once `terminate()` armed the SIGKILL: its cancel. */
  #cancelKill: (() => void) | undefined;
  readonly #relays: Relay[];
  /** Set while a worker's own word that it drains waits for the primary's (see #drainingOnItsOwn): the cancel of its line. */
  #ownDecision: (() => void) | undefined;
  #ownReason = "";

  constructor(id: number, child: WorkerProcess, logger: Logger, clock: Clock) {
    this.id = id;
    this.#process = child;
    this.#logger = logger;
    this.#clock = clock;
    // A worker forked before the supervisor took it (prefork.ts, only ever with the system clock)
    // counts from its real fork.
    this.forkedAt = child.forkedAt ?? clock.now();
    this.pid = child.pid ?? 0;
    this.channel = new Channel(child);
    this.handoffs = child.handoffs ?? NO_HANDOFFS;
    // Its last words: output, and IPC (a `failed` report can be read after the exit event).
    this.#relays = [];
    if (child.stdout) this.#relays.push(relayOutput(child.stdout, 1));
    if (child.stderr) this.#relays.push(relayOutput(child.stderr, 2));
    const output = Promise.all([
      ...this.#relays.map((relay) => relay.done),
      new Promise((resolve) => (child.connected ? child.onceDisconnect(() => resolve(undefined)) : resolve(undefined))),
    ]);
    this.exited = new Promise((resolve) => {
      child.onceExit((code, signal) => {
        const exit = (this.exit = { code, signal });
        this.#exitedAt = clock.now();
        if (this.#ownDecision !== undefined) this.#drainingSaid(this.#ownReason);
        this.state = "exited";
        this.#cancelKill?.();
        this.channel.close();
        const cancelGrace = clock.after(OUTPUT_GRACE_MS, () => resolve(exit));
        void output.then(() => {
          cancelGrace();
          resolve(exit);
        });
      });
    });
    this.ready = new Promise((resolve, reject) => {
      this.channel.on(workerReady, (info) => {
        if (this.state !== "starting") return;
        this.info = info;
        this.readyAt = this.lastBeat = this.#clock.now();
        this.state = "ready";
        this.#logger.info("%s ready on %s in %dms", this.name, info.url, Math.round(this.readyAt - this.forkedAt));
        resolve();
      });
      void this.exited.then(() => reject(new Error(`exited ${this.describeEnd()}`)));
    });
    this.ready.catch(() => {});
    this.channel.on(workerHeartbeat, () => (this.lastBeat = this.#clock.now()));
    this.channel.on(workerFailed, ({ reason }) => (this.failure ??= reason));
    this.channel.on(workerStopped, ({ clean, problems }) => (this.shutdownProblems = clean ? undefined : problems));
    this.channel.on(workerDraining, ({ reason }) => this.#drainingOnItsOwn(reason));
    child.onError((error) => {
      this.#logger.warn("%s: IPC error: %s", this.name, error.message);
      // The fork itself failed (EMFILE, EAGAIN: out of descriptors or processes): its exit says so.
      if (child.pid === undefined) this.failure ??= `could not start: ${error.message}`;
    });
    this.#logger.info("%s starting", this.name);
  }

  /** `worker 2 (pid 4242)`: how log lines name it. */
  get name(): string {
    return `worker ${this.id} (pid ${this.pid})`;
  }

  /** Milliseconds from ready to exit (or to now); 0 if it never got ready. */
  get uptime(): number {
    return this.readyAt === undefined ? 0 : (this.#exitedAt ?? this.#clock.now()) - this.readyAt;
  }

  /**
   * How it ended, in one line: `(code 1) before it was ready: <what it reported>`, or
   * `(signal SIGKILL, killed: <why>) after 5230ms up`.
   */
  describeEnd(): string {
    const exit = describeExit(this.exit ?? { code: null, signal: null });
    const killed = this.killedBy === undefined ? "" : `, killed: ${this.killedBy}`;
    const when = this.readyAt === undefined ? "before it was ready" : `after ${Math.round(this.uptime)}ms up`;
    const failure = this.failure === undefined ? "" : `: ${this.failure}`;
    return `(${exit}${killed}) ${when}${failure}`;
  }

  /** Waits for readiness at most `timeoutMs`; rejects with the reason it is not ready. */
  waitReady(timeoutMs: number): Promise<void> {
    let cancel: (() => void) | undefined;
    const timeout = new Promise<never>((_, reject) => {
      cancel = this.#clock.after(timeoutMs, () => reject(new Error(`not ready after ${timeoutMs}ms`)));
    });
    return Promise.race([this.ready, timeout]).finally(() => cancel?.());
  }

  /**
   * Sends SIGTERM once (the worker drains and runs its hooks under its own budget) and SIGKILLs
   * it if still alive at that budget plus `margin`. Resolves when it has exited.
   */
  terminate(reason: string, fallbackBudget: number, margin: number): Promise<WorkerExit> {
    if (this.exit !== undefined || this.#cancelKill !== undefined) return this.exited;
    const budget = this.info?.shutdownTimeout ?? fallbackBudget;
    this.#draining(reason);
    this.#signal("SIGTERM");
    this.#cancelKill = this.#clock.after(budget + margin, () => {
      this.kill(`still running ${budget + margin}ms after SIGTERM (budget ${budget}ms + margin ${margin}ms)`);
    });
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
    if (this.#ownDecision !== undefined) return this.#drainingSaid(reason);
    if (this.state === "draining" || this.state === "exited") return;
    this.state = "draining";
    this.#logger.info("%s draining (%s)", this.name, reason);
  }

  /**
   * The worker says it drains. A signal sent to the whole process group (Ctrl-C in a terminal,
   * `kill -- -PGID`) reaches it and the primary at once, and its word, or its own lines, can be
   * read before the primary has run its own handler. So its line and its output wait, at most
   * OWN_DECISION_WAIT_MS, for the primary's decision: a stop then logs "stopping" first and names
   * the cause here (terminate()); a signal to this worker alone is its own decision.
   */
  #drainingOnItsOwn(reason: string): void {
    if (this.state === "draining" || this.state === "exited") return;
    this.state = "draining";
    this.#ownReason = `${reason}, by its own decision`;
    for (const relay of this.#relays) relay.hold();
    this.#ownDecision = this.#clock.after(OWN_DECISION_WAIT_MS, () => this.#drainingSaid(this.#ownReason));
  }

  /** The draining line after a wait: the line, then the worker's own output again. */
  #drainingSaid(reason: string): void {
    this.#ownDecision?.();
    this.#ownDecision = undefined;
    this.#logger.info("%s draining (%s)", this.name, reason);
    for (const relay of this.#relays) relay.release();
  }

  #signal(signal: NodeJS.Signals): void {
    try {
      this.#process.kill(signal);
    } catch {
      // Already gone: its exit event follows.
    }
  }
}

/** `code 1`, `signal SIGKILL`. */
export function describeExit(exit: WorkerExit): string {
  return exit.signal !== null ? `signal ${exit.signal}` : `code ${String(exit.code)}`;
}
