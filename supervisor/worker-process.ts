import cluster, { type ClusterSettings, type Worker } from "node:cluster";
import { extname, resolve as resolvePath } from "node:path";
import type { Readable } from "node:stream";
import { fileURLToPath } from "node:url";
import type { Endpoint } from "../src/cluster/ipc.js";
import { guardHandoffs, type HandoffGuard } from "./handoff-guard.js";
import type { ResolvedSupervisorOptions } from "./options.js";

/**
 * One forked worker process as the primary uses it: IPC (the Endpoint), its output pipes, its
 * exit and its signals. In production a node:cluster Worker (`clusterWorker`); in unit tests an
 * object that behaves as one, so the primary's decisions run without forking.
 */
export interface WorkerProcess extends Endpoint {
  /** Undefined only if the fork failed to spawn (its exit follows: see clusterWorker). */
  readonly pid: number | undefined;
  /** The worker's stdout and stderr, relayed by the primary; null when not piped. */
  readonly stdout: Readable | null;
  readonly stderr: Readable | null;
  readonly connected: boolean;
  /** Once, when the IPC channel closes. */
  onceDisconnect(listener: () => void): void;
  /** Once, when the process has exited. */
  onceExit(listener: (code: number | null, signal: NodeJS.Signals | null) => void): void;
  onError(listener: (error: Error) => void): void;
  /** Sends a signal; throws when the process is gone. */
  kill(signal: NodeJS.Signals): void;
  /** The connections node:cluster passed it (see handoff-guard.ts); absent for a worker that gets none. */
  readonly handoffs?: HandoffGuard;
  /** `performance.now()` at its fork, for a worker forked before the supervisor took it (prefork.ts). */
  readonly forkedAt?: number;
}

/** Forks one worker with these environment variables (on top of the primary's). */
export type ForkWorker = (env: Record<string, string>) => WorkerProcess;

/**
 * Prepares this start's forks (what `cluster.setupPrimary` takes) and returns the fork; called
 * once per start, before the first worker.
 */
export type ForkSetup = (settings: ClusterSettings) => ForkWorker;

/**
 * How every worker of a start is forked: the entry with its arguments and Node options, plus the
 * preload that reports a worker dying before keelson's code runs. stdout/stderr are pipes the
 * primary relays line by line (see output-relay.ts); the real ones stay open as fds 4 and 5 for a
 * worker whose primary is gone (KEELSON_LOG_FDS).
 */
export function forkSettings(options: Pick<ResolvedSupervisorOptions, "entry" | "args" | "execArgv" | "balancer" | "env">): ClusterSettings {
  const { entry, args, execArgv } = options;
  return {
    exec: entryPath(entry), args, execArgv: [...execArgv, ...youngGenerationCap(options), ...pretenuringOff(options), `--import=${PRELOAD}`],
    stdio: ["inherit", "pipe", "pipe", "ipc", 1, 2],
  };
}

/** The young generation's cap for round-robin workers, in MiB per semi-space (see youngGenerationCap). */
export const ROUND_ROBIN_SEMI_SPACE_MB = 16;

/** A Node option that already sizes V8's young generation: the user's own choice, kept as it is. */
const YOUNG_GENERATION_OPTION = /--(?:max|min)[-_]semi[-_]space[-_]size|--max[-_]young[-_]generation[-_]size|--semi[-_]space[-_]growth[-_]factor/;

/** A Node option that already decides V8's allocation-site pretenuring, either way. */
const PRETENURING_OPTION = /--(?:no[-_])?allocation[-_]site[-_]pretenuring/;

type WorkerNodeOptions = Pick<ResolvedSupervisorOptions, "balancer" | "execArgv" | "env">;

/**
 * Whether the workers' own Node options, in their `execArgv` or in the `NODE_OPTIONS` they start
 * with (theirs, else the primary's), already set what `option` matches.
 */
function userSets(option: RegExp, { execArgv, env }: WorkerNodeOptions): boolean {
  const nodeOptions = env.NODE_OPTIONS ?? process.env.NODE_OPTIONS ?? "";
  return execArgv.some((arg) => option.test(arg)) || option.test(nodeOptions);
}

/**
 * `--max-semi-space-size=16` for a round-robin worker whose Node options do not size the young
 * generation themselves. A round-robin worker receives every connection as a handle over IPC, and
 * Node's path for a passed handle keeps each connection's objects alive across a scavenge or two;
 * V8 reads that survival as a reason to grow the young generation past the size a bare h3 worker
 * settles at, and the larger one made the worker dearer per connection, not cheaper
 * (BENCHMARKS.md, "The round-robin workers' young generation"). Part of that survival was the
 * pretenured connection state pretenuringOff() prevents; uncapped workers still grew without it. A
 * one-process server and a reuseport worker showed no such difference and keep V8's default. The
 * user's own setting, in the workers' `execArgv` or `NODE_OPTIONS`, wins.
 */
function youngGenerationCap(options: WorkerNodeOptions): string[] {
  if (options.balancer !== "round-robin" || userSets(YOUNG_GENERATION_OPTION, options)) return [];
  return [`--max-semi-space-size=${ROUND_ROBIN_SEMI_SPACE_MB}`];
}

/**
 * `--no-allocation-site-pretenuring` for every worker whose Node options do not decide it. While a
 * worker warms up, some connections live long enough to be promoted to the old generation; a
 * closed one there is garbage only a full collection finds, and until then it keeps what it points
 * to alive through every scavenge, to be promoted in turn. V8's pretenuring can read that survival
 * as a reason to allocate the state node:http makes for each connection (a literal with two arrays)
 * straight in the old generation, and from then on scavenges promote connection after connection
 * and full collections never end it. It is decided once per process, at random (bare node:cluster
 * workers hit it too); without pretenuring the first full collection ends it (BENCHMARKS.md,
 * "Connection state pretenured in the workers"). The user's own setting wins.
 */
function pretenuringOff(options: WorkerNodeOptions): string[] {
  return userSets(PRETENURING_OPTION, options) ? [] : ["--no-allocation-site-pretenuring"];
}

/** The environment of worker `id` on top of the primary's: what the worker's App and its link read. */
export function workerEnv(options: Pick<ResolvedSupervisorOptions, "env" | "port" | "host" | "heartbeatInterval" | "balancer">, id: number): Record<string, string> {
  const { env, port, host, heartbeatInterval, balancer } = options;
  return {
    ...env,
    ...(port === undefined ? {} : { PORT: String(port) }),
    ...(host === undefined ? {} : { HOST: host }),
    KEELSON_WORKER_ID: String(id),
    KEELSON_LOG_FDS: "4,5",
    KEELSON_HEARTBEAT_INTERVAL: String(heartbeatInterval),
    // Always set: a KEELSON_BALANCER the primary inherited must not override its --balancer.
    KEELSON_BALANCER: balancer,
  };
}

// Same extension as this file: .ts when run from source (through tsx), .js from dist.
const PRELOAD = new URL(`./worker-preload${extname(fileURLToPath(import.meta.url))}`, import.meta.url).href;

/** A file URL or a path relative to the working directory, as an absolute path. */
function entryPath(entry: string): string {
  return entry.startsWith("file:") ? fileURLToPath(entry) : resolvePath(entry);
}

/** node:cluster: `setupPrimary(settings)`, then every fork is a `cluster.fork(env)`. */
export const clusterFork: ForkSetup = (settings) => {
  cluster.setupPrimary(settings);
  return (env) => clusterWorker(cluster.fork(env));
};

/** A node:cluster Worker as a WorkerProcess; a failed send is dropped instead of becoming an 'error' event. */
export function clusterWorker(worker: Worker): WorkerProcess {
  const child = worker.process;
  // A fork that fails to spawn at EMFILE or ENFILE gets an 'error' and never an 'exit' from
  // child_process: the exit is given here, after the error's own listeners ran, so the slot ends
  // like a worker that exited before it was ready instead of waiting for ever.
  worker.on("error", () => {
    if (child.pid === undefined && child.exitCode === null && child.signalCode === null) {
      process.nextTick(() => worker.emit("exit", null, null));
    }
  });
  const handoffs = guardHandoffs(worker);
  return {
    handoffs,
    pid: child.pid,
    stdout: child.stdout,
    stderr: child.stderr,
    get connected() {
      return child.connected;
    },
    send: (message) => child.send(message, undefined, undefined, () => {}),
    on: (event, listener) => child.on(event, listener),
    off: (event, listener) => child.off(event, listener),
    onceDisconnect: (listener) => child.once("disconnect", listener),
    onceExit: (listener) => worker.once("exit", listener),
    onError: (listener) => worker.on("error", listener),
    // worker.process.kill, not worker.kill: the latter disconnects IPC first, and a worker whose
    // channel drops believes its primary is gone.
    kill: (signal) => child.kill(signal),
  };
}
