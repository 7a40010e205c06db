// The supervisor's seams filled in-process: a clock moved by hand, a fork that makes fake worker
// processes, and a Supervisor wired to both. Unit tests of the primary's decisions use these; the
// real-cluster tests (test/supervisor*.test.ts) prove the node:cluster wiring.
import type { ClusterSettings } from "node:cluster";
import type { Readable } from "node:stream";
import { Channel, type Envelope, type PrimaryMessages, type WorkerMessages } from "../../src/cluster/ipc.js";
import type { Clock } from "../../supervisor/clock.js";
import type { FeatureInstaller } from "../../supervisor/features.js";
import type { SupervisorOptions } from "../../supervisor/options.js";
import { Supervisor, type SupervisorSeams } from "../../supervisor/primary.js";
import type { ForkSetup, WorkerProcess } from "../../supervisor/worker-process.js";
import { captureLogs, type LogCapture } from "./logs.js";

/** Lets every pending promise job and queued IPC message run. */
export async function settle(): Promise<void> {
  for (let round = 0; round < 5; round++) await new Promise((resolve) => setImmediate(resolve));
}

interface Timer {
  at: number;
  seq: number;
  fn: () => void;
  /** Set for `every`: the period. */
  period: number | undefined;
}

/** A Clock that stands still until `advance()` moves it, firing due timers in order. */
export class ManualClock implements Clock {
  #now = 0;
  #seq = 0;
  readonly #timers = new Set<Timer>();

  now(): number {
    return this.#now;
  }

  after(ms: number, fn: () => void): () => void {
    return this.#add(ms, fn, undefined);
  }

  every(ms: number, fn: () => void): () => void {
    return this.#add(ms, fn, ms);
  }

  /** Timers waiting to fire. */
  get pending(): number {
    return this.#timers.size;
  }

  /**
   * Moves time forward by `ms`: each due timer fires at its own time, in order, and the promise
   * jobs and IPC messages it causes run before the next one.
   */
  async advance(ms: number): Promise<void> {
    const end = this.#now + ms;
    await settle();
    for (;;) {
      const next = [...this.#timers].filter((timer) => timer.at <= end).toSorted((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (next === undefined) break;
      this.#now = next.at;
      if (next.period === undefined) this.#timers.delete(next);
      else next.at += Math.max(1, next.period);
      next.fn();
      await settle();
    }
    this.#now = end;
    await settle();
  }

  #add(ms: number, fn: () => void, period: number | undefined): () => void {
    const timer: Timer = { at: this.#now + Math.max(0, ms), seq: this.#seq++, fn, period };
    this.#timers.add(timer);
    return () => this.#timers.delete(timer);
  }
}

type MessageListener = (message: unknown) => void;

/** Hands a copy of `message` to `listeners` on a later microtask, as a pipe would (serialised, not shared). */
function deliver(listeners: Set<MessageListener>, message: unknown): void {
  const copy: unknown = JSON.parse(JSON.stringify(message));
  queueMicrotask(() => {
    for (const listener of listeners) listener(copy);
  });
}

/**
 * A worker process that exists only in this test process. The primary talks to it through the
 * WorkerProcess seam; the test plays its App through `app` (the worker's end of the IPC channel)
 * and `exit()`. Messages cross on a later microtask, as over a real pipe. By default SIGTERM makes
 * it exit 0 and SIGKILL kills it; `onSignal` replaces that (e.g. a worker that ignores SIGTERM).
 */
export class FakeWorkerProcess implements WorkerProcess {
  readonly pid: number;
  readonly env: Record<string, string>;
  /** Its output pipes: none unless a test gives it one (FakeCluster.onFork). */
  stdout: Readable | null = null;
  stderr: Readable | null = null;
  connected = true;
  /** Every signal the primary sent, in order. */
  readonly signals: NodeJS.Signals[] = [];
  /** The worker's own end of the IPC channel: what its App sends and serves. */
  readonly app: Channel<WorkerMessages, PrimaryMessages>;
  /** What it does on a signal. */
  onSignal: (signal: NodeJS.Signals) => void = (signal) => {
    queueMicrotask(() => (signal === "SIGTERM" ? this.exit(0) : this.exit(null, signal)));
  };
  #exited = false;
  readonly #toPrimary = new Set<MessageListener>();
  readonly #toApp = new Set<MessageListener>();
  readonly #onDisconnect: Array<() => void> = [];
  readonly #onExit: Array<(code: number | null, signal: NodeJS.Signals | null) => void> = [];

  constructor(pid: number, env: Record<string, string>) {
    this.pid = pid;
    this.env = env;
    const exited = () => this.#exited;
    this.app = new Channel({
      send: (message: Envelope) => {
        if (exited()) throw new Error("channel closed");
        deliver(this.#toPrimary, message);
      },
      on: (_event, listener) => this.#toApp.add(listener),
      off: (_event, listener) => this.#toApp.delete(listener),
      get connected() {
        return !exited();
      },
    });
  }

  /** The slot id the primary gave it. */
  get slot(): number {
    return Number(this.env.KEELSON_WORKER_ID);
  }

  get exited(): boolean {
    return this.#exited;
  }

  send(message: Envelope): void {
    if (!this.connected) throw new Error("channel closed");
    deliver(this.#toApp, message);
  }

  on(_event: "message", listener: MessageListener): void {
    this.#toPrimary.add(listener);
  }

  off(_event: "message", listener: MessageListener): void {
    this.#toPrimary.delete(listener);
  }

  onceDisconnect(listener: () => void): void {
    this.#onDisconnect.push(listener);
  }

  onceExit(listener: (code: number | null, signal: NodeJS.Signals | null) => void): void {
    this.#onExit.push(listener);
  }

  onError(): void {}

  kill(signal: NodeJS.Signals): void {
    if (this.#exited) throw new Error("kill ESRCH");
    this.signals.push(signal);
    this.onSignal(signal);
  }

  /** Its App listens (on the PORT it was forked with, else 3000, as an App does): the `ready` message a worker sends. */
  ready(info: Partial<WorkerMessages["ready"]> = {}): void {
    const port = Number(this.env.PORT || 3000);
    this.app.send("ready", { pid: this.pid, port, url: `http://127.0.0.1:${port}`, shutdownTimeout: 1000, ...info });
  }

  /** The process ends: the IPC channel closes, then the exit event. */
  exit(code: number | null, signal: NodeJS.Signals | null = null): void {
    if (this.#exited) return;
    this.#exited = true;
    this.connected = false;
    this.app.close();
    for (const listener of this.#onDisconnect.splice(0)) listener();
    for (const listener of this.#onExit.splice(0)) listener(code, signal);
  }
}

/** The fork seam: records the cluster settings and every worker it forks. */
export class FakeCluster {
  /** Every worker forked, in order. */
  readonly forks: FakeWorkerProcess[] = [];
  settings: ClusterSettings | undefined;
  /** Each new worker reports ready on its own (as a healthy App does). */
  autoReady: boolean;
  /** Called with each new worker before the primary sees it (e.g. to give it output pipes). */
  onFork: ((worker: FakeWorkerProcess) => void) | undefined;
  #nextPid = 1001;

  constructor(options: { autoReady?: boolean } = {}) {
    this.autoReady = options.autoReady ?? true;
  }

  readonly setup: ForkSetup = (settings) => {
    this.settings = settings;
    return (env) => {
      const worker = new FakeWorkerProcess(this.#nextPid++, env);
      this.onFork?.(worker);
      this.forks.push(worker);
      if (this.autoReady) worker.ready();
      return worker;
    };
  };

  /** Workers not yet exited. */
  get live(): FakeWorkerProcess[] {
    return this.forks.filter((worker) => !worker.exited);
  }

  /** The newest worker forked for slot `id`. */
  slot(id: number): FakeWorkerProcess {
    const worker = this.forks.findLast((fork) => fork.slot === id);
    if (worker === undefined) throw new Error(`no worker forked for slot ${id}`);
    return worker;
  }
}

/** A Supervisor on the fake seams, its log lines, and a stop that lets kill timers fire. */
export interface FakeSupervisor {
  readonly supervisor: Supervisor;
  readonly cluster: FakeCluster;
  readonly clock: ManualClock;
  readonly logs: LogCapture;
  /** Log lines so far, joined. */
  output(): string;
  /** Starts and waits until every worker is ready (they are, by default, at once). */
  start(): Promise<void>;
  /** Stops it, letting time pass for any kill timer; resolves with the report. */
  stop(): ReturnType<Supervisor["stop"]>;
}

const running = new Set<FakeSupervisor>();

/** Stops every fake supervisor a test left running (node:cluster allows one per process): call in afterEach. */
export async function stopFakeSupervisors(): Promise<void> {
  for (const fake of running) await fake.stop();
  running.clear();
}

/**
 * A Supervisor whose workers are FakeWorkerProcesses and whose time is a ManualClock: no signal
 * handlers, no process exit, no control socket, no metrics port. `features` defaults to none, so
 * each test installs only what it exercises (pass FEATURES for the real list).
 */
export function fakeSupervisor(options: Partial<SupervisorOptions> = {}, seams: {
  features?: readonly FeatureInstaller[]; autoReady?: boolean; probePort?: SupervisorSeams["probePort"]; balancerHost?: SupervisorSeams["balancerHost"];
} = {}): FakeSupervisor {
  const logs = captureLogs();
  const clock = new ManualClock();
  const cluster = new FakeCluster({ autoReady: seams.autoReady });
  const supervisor = new Supervisor({
    entry: "test/fixtures/supervisor-app.ts", workers: 2, handleSignals: false, exitProcess: false, controlSocket: false,
    metricsPort: false, watchdogTimeout: 0, logger: logs.logger, ...options,
  }, { fork: cluster.setup, clock, features: seams.features ?? [], probePort: seams.probePort, balancerHost: seams.balancerHost });
  const fake: FakeSupervisor = {
    supervisor, cluster, clock, logs,
    output: () => logs.lines().join("\n"),
    async start() {
      const started = supervisor.start();
      await clock.advance(0);
      await started;
    },
    async stop() {
      const stopped = supervisor.stop();
      // Past any budget + margin: a worker that ignores SIGTERM is SIGKILLed, as in production.
      for (let i = 0; i < 3 && cluster.live.length > 0; i++) await clock.advance(60_000);
      // A fake told to ignore even SIGKILL (a test that failed half-way) must not hang the cleanup.
      for (const worker of cluster.live) worker.exit(null, "SIGKILL");
      running.delete(fake);
      return stopped;
    },
  };
  running.add(fake);
  return fake;
}
