import cluster, { type ClusterSettings } from "node:cluster";
import { isDeepStrictEqual } from "node:util";
import type { ResolvedSupervisorOptions } from "./options.js";
import { clusterFork, clusterWorker, forkSettings, workerEnv, type ForkSetup, type WorkerProcess } from "./worker-process.js";

/** Workers forked before the supervisor was loaded, waiting for it to adopt them. */
export interface PreforkedWorkers {
  /** The supervisor's fork (its `fork` seam): adopts the waiting workers, then forks as usual. */
  readonly fork: ForkSetup;
  /** Kills the workers not adopted yet (the supervisor could not be made). */
  discard(): void;
}

/**
 * Forks a start's first workers at once, before the supervisor's own modules load, so that the
 * workers' start-up (the longer part) runs while the primary loads. They get the settings and the
 * environment the supervisor's own forks would give them (the same functions make both).
 * Everything a worker says or does until the supervisor adopts it (IPC messages, disconnect, exit,
 * errors) is held and replayed in order to the supervisor's listeners; output waits in its pipes.
 *
 * @example
 * const options = resolveOptions(cli.options);
 * const early = preforkWorkers(options);
 * const { Supervisor } = await import("./primary.js");
 * await new Supervisor(options, { fork: early.fork }).start();
 */
export function preforkWorkers(options: ResolvedSupervisorOptions): PreforkedWorkers {
  const settings = forkSettings(options);
  cluster.setupPrimary(settings);
  const waiting = new Map<string, { env: Record<string, string>; worker: HeldWorker }>();
  for (let id = 1; id <= options.workers; id++) {
    const env = workerEnv(options, id);
    const forkedAt = performance.now();
    waiting.set(String(id), { env, worker: holdWorker(clusterWorker(cluster.fork(env)), forkedAt) });
  }
  const discard = (): void => {
    for (const { worker } of waiting.values()) worker.discard();
    waiting.clear();
  };
  // The supervisor asks with forkSettings() of the options it was given, resolved once: the
  // settings the waiting workers were forked with.
  const fork: ForkSetup = (asked: ClusterSettings) => {
    const forkAnew = clusterFork(asked);
    return (env) => {
      const id = env.KEELSON_WORKER_ID ?? "";
      const early = waiting.get(id);
      waiting.delete(id);
      if (early !== undefined && isDeepStrictEqual(early.env, env)) return early.worker.adopt();
      early?.worker.discard();
      return forkAnew(env);
    };
  };
  return { fork, discard };
}

interface HeldWorker {
  /** The worker as the supervisor uses it; what it held is replayed on the next turn. */
  adopt(): WorkerProcess;
  discard(): void;
}

type Held =
  | { event: "message"; message: unknown }
  | { event: "exit"; code: number | null; signal: NodeJS.Signals | null }
  | { event: "disconnect" }
  | { event: "error"; error: Error };

/**
 * A worker whose IPC messages, disconnect, exit and errors are recorded until `adopt()`: an
 * EventEmitter drops what happens while nobody listens, and a worker can be ready, or dead, before
 * the supervisor has loaded. The recorded events are dispatched in the order they happened, on the
 * turn after adoption (once the supervisor has attached its listeners), then everything is live.
 */
function holdWorker(inner: WorkerProcess, forkedAt: number): HeldWorker {
  let held: Held[] | undefined = [];
  const messageListeners = new Set<(message: unknown) => void>();
  const exitListeners: Array<(code: number | null, signal: NodeJS.Signals | null) => void> = [];
  const disconnectListeners: Array<() => void> = [];
  const errorListeners: Array<(error: Error) => void> = [];
  const dispatch = (happened: Held): void => {
    if (held !== undefined) {
      held.push(happened);
      return;
    }
    if (happened.event === "message") for (const listener of messageListeners) listener(happened.message);
    else if (happened.event === "exit") for (const listener of exitListeners.splice(0)) listener(happened.code, happened.signal);
    else if (happened.event === "disconnect") for (const listener of disconnectListeners.splice(0)) listener();
    else for (const listener of errorListeners) listener(happened.error);
  };
  inner.on("message", (message) => dispatch({ event: "message", message }));
  inner.onceExit((code, signal) => dispatch({ event: "exit", code, signal }));
  inner.onceDisconnect(() => dispatch({ event: "disconnect" }));
  inner.onError((error) => dispatch({ event: "error", error }));
  const adopted: WorkerProcess = {
    handoffs: inner.handoffs,
    forkedAt,
    pid: inner.pid,
    stdout: inner.stdout,
    stderr: inner.stderr,
    get connected() {
      return inner.connected;
    },
    send: (message) => inner.send(message),
    on: (_event, listener) => void messageListeners.add(listener),
    off: (_event, listener) => void messageListeners.delete(listener),
    onceDisconnect: (listener) => void disconnectListeners.push(listener),
    onceExit: (listener) => void exitListeners.push(listener),
    onError: (listener) => void errorListeners.push(listener),
    kill: (signal) => inner.kill(signal),
  };
  return {
    adopt() {
      setImmediate(() => {
        const replay = held ?? [];
        held = undefined;
        for (const happened of replay) dispatch(happened);
      });
      return adopted;
    },
    discard() {
      held = undefined;
      try {
        inner.kill("SIGKILL");
      } catch {
        // Already gone.
      }
    },
  };
}
