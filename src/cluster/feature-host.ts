/**
 * What a cluster feature's primary side (metrics, rate limits, jobs, …) gets of the primary and
 * of each worker. Features depend on these interfaces only, never on `supervisor/`: the
 * supervisor implements them, and a unit test can implement them with plain objects.
 */
import type { Channel, IpcHandler, IpcMessageType, IpcRequestType, PrimaryMessages, WorkerMessages } from "./ipc.js";
import type { Logger } from "../logging/logger.js";

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

/** A worker as a feature's primary side sees it: a SupervisedWorker plus its readiness and its exit. */
export interface FeatureWorker extends SupervisedWorker {
  /** `worker 2 (pid 4242)`: how log lines name it. */
  readonly name: string;
  /** Resolves when it is ready; rejects if it exits first. */
  readonly ready: Promise<void>;
  /** Resolves once it has exited. */
  readonly exited: Promise<WorkerExit>;
}

/** What the primary offers a cluster feature's primary side. */
export interface FeatureHost {
  readonly logger: Logger;
  /** True from the first stop request (signal, crash loop, `stop()`). */
  readonly stopping: boolean;
  /** Settles once the primary has stopped, whatever stopped it. */
  readonly finished: Promise<unknown>;
  /** Serves a request type sent by any worker, present and future. */
  handle<P, R>(type: IpcRequestType<P, R>, handler: IpcHandler<P, R>): unknown;
  /** Listens to a message type from every worker, present and future. */
  onMessage<P>(type: IpcMessageType<P>, listener: (payload: P, worker: FeatureWorker) => void): unknown;
  /** Calls `listener` for every live worker now and every worker forked later; returns the undo. */
  onWorker(listener: (worker: FeatureWorker) => void): () => void;
  /** Calls `listener` once when the primary begins to stop, before it drains the workers. */
  onStop(listener: () => void): void;
  /** Stops the primary with exit 1 and `reason` as its last word: a failure the orchestrator must see. */
  fail(reason: string): unknown;
  /**
   * Adds the section `name` to `keelson status` (`features[name]` of the StatusReport): `read` is
   * called at every status request; undefined leaves the section out.
   */
  addStatus(name: string, read: () => unknown): void;
  /**
   * Adds a judge of worker deaths: a reason it returns (e.g. the worker died running a job) keeps
   * that death out of the crash-loop breaker; the worker's slot still restarts after its backoff.
   * Optional: a host without it counts every death.
   */
  excuseCrashes?(judge: (worker: FeatureWorker) => string | undefined): void;
}

/** A `keelson start` flag of a cluster feature: it takes a value (`--name VALUE`). */
export interface FeatureFlag {
  /** Without the dashes: `metrics-port`. */
  readonly name: string;
  /** Its entry in `keelson start --help`, from the flag on (the indent is added). */
  readonly usage: string;
}

/**
 * What a cluster feature with options adds to the supervisor's options, to `keelson start` (flags,
 * environment variables) and to `keelson status` (a line). Kept apart from the feature's primary
 * side, so the CLI reads it without loading that before it forks the workers.
 */
/** What the supervisor resolved of the service itself, for the features whose defaults follow it. */
export interface ServiceSettings {
  /** The service's address (`host`, `--host`, `HOST`); undefined: every interface. */
  readonly host: string | undefined;
}

export interface FeatureSettings<Options extends object, Resolved extends object> {
  /** Its section of the status report (FeatureHost.addStatus). */
  readonly name: string;
  readonly flags: readonly FeatureFlag[];
  /** The variables it reads, for the help's `Environment:` line. */
  readonly env: readonly string[];
  /** Its options from the command line (`values` by flag name) and the environment; a bad value throws naming the flag or variable. */
  fromCli(values: Readonly<Record<string, string | undefined>>, env: NodeJS.ProcessEnv): Options;
  /** Its options with their defaults applied and checked: part of the ResolvedSupervisorOptions. */
  resolve(options: Options, env: NodeJS.ProcessEnv, service: ServiceSettings): Resolved;
  /** Its line of `keelson status`, from its section of the report; undefined for none. */
  statusLine?(section: unknown): string | undefined;
}
