import type { Worker } from "node:cluster";

/** The primary's copy of an accepted connection, as node:cluster's round-robin handle passes it. */
interface ConnectionHandle {
  close(): void;
  readonly fd?: number;
}

/**
 * One worker's connections handed over and not yet known to be settled, in the order they were
 * handed, with when (performance.now()). Two parallel arrays rather than a Map keyed by the handle:
 * a Map asks V8 for each handle's identity hash and keeps a closed handle until it is swept, where
 * these are compacted at every send, so a handle the worker has taken dies young.
 */
interface InFlight {
  readonly handles: ConnectionHandle[];
  readonly times: number[];
}

/** Every guarded worker's connections in flight: a refused connection is handed on to another worker. */
const inFlight = new Set<InFlight>();

/** Connections handed to any worker so far. */
let handoffCount = 0;

/** What the supervisor learns from a worker's guard. */
export interface HandoffGuard {
  /**
   * The last connection handed to this worker: when (performance.now()), and how many
   * connections have been handed to other workers since. Undefined before the first.
   */
  lastHandoff(): { at: number; othersSince: number } | undefined;
  /** When the oldest connection handed to it and still waiting for its acknowledgement was handed; undefined if none. */
  oldestPending(): number | undefined;
}

/** For a worker that is not a node:cluster worker (a unit test's): nothing is ever handed to it. */
export const NO_HANDOFFS: HandoffGuard = { lastHandoff: () => undefined, oldestPending: () => undefined };

/**
 * Closes connections that were handed to `worker` and that it never took, once it is gone.
 *
 * node:cluster's round-robin primary accepts every connection and sends it to one worker over IPC
 * (`{cmd: "NODE_CLUSTER", act: "newconn"}` with the socket attached), keeping its own copy until
 * the worker acknowledges it; only then does it close the copy (or, if refused, hand it to another
 * worker). A worker that dies before it acknowledges (frozen, then SIGKILLed by the watchdog, a
 * kill margin or the OOM killer) never answers, and nothing in Node closes that copy: its client
 * waits for its whole timeout while the primary holds the socket in CLOSE-WAIT. Node offers no
 * public hook for this, so the guard watches the worker's `process.send` (an instance method,
 * which the round-robin handle calls to pass a connection) and remembers the connections in flight;
 * when the worker has exited and its IPC channel has reached its end (every acknowledgement it
 * sent has been read), the ones it never took, still open and not handed on to another worker,
 * are closed: the client gets a reset at once and can retry.
 *
 * The same watch shows a second loss: a worker out of file descriptors (EMFILE) cannot receive a
 * passed socket; Node's IPC then gives up on that message, the worker never acknowledges it, and
 * the round-robin handle, which waits for that acknowledgement, never hands the worker another
 * connection (while the primary queues new ones, up to its own descriptor limit). A worker that
 * is free gets its turn among the free ones, so one that got nothing for a while as many
 * connections went to the others is stuck: the watchdog reads `lastHandoff()` (see watchdog.ts)
 * and has it replaced.
 */
export function guardHandoffs(worker: Worker): HandoffGuard {
  const child = worker.process;
  const mine: InFlight = { handles: [], times: [] };
  const send = child.send as unknown as (...args: unknown[]) => boolean;
  // Two numbers rather than an object per send.
  let lastAt = -1;
  let lastCount = 0;
  const guard: HandoffGuard = {
    lastHandoff: () => lastAt < 0 ? undefined : { at: lastAt, othersSince: handoffCount - lastCount },
    oldestPending() {
      compact(mine);
      let oldest: number | undefined;
      for (let i = 0; i < mine.handles.length; i++) {
        const at = mine.times[i]!;
        if (!handedOnLater(mine, mine.handles[i]!, at)) oldest = Math.min(oldest ?? at, at);
      }
      return oldest;
    },
  };
  if (typeof send !== "function") return guard;
  inFlight.add(mine);
  // Fixed parameters rather than rest and apply: child_process's send reads a missing argument
  // and an undefined one alike, and this runs for every connection the primary hands over.
  child.send = function guardedSend(this: unknown, message: unknown, handle?: unknown, options?: unknown, callback?: unknown): boolean {
    if (isHandoff(message) && isConnection(handle)) {
      // The round-robin handle gives a worker its next connection only once the last one was
      // acknowledged (and closed) or refused (and handed on): what is settled goes now, and the
      // arrays stay at the connections really in flight, one in practice.
      if (mine.handles.length > 0) compact(mine);
      const at = performance.now();
      mine.handles.push(handle);
      mine.times.push(at);
      lastAt = at;
      lastCount = ++handoffCount;
    }
    return send.call(this, message, handle, options, callback);
  } as typeof child.send;
  const release = () => {
    inFlight.delete(mine);
    for (let i = 0; i < mine.handles.length; i++) {
      const handle = mine.handles[i]!;
      if (isOpen(handle) && !handedOnLater(mine, handle, mine.times[i]!)) {
        try {
          handle.close();
        } catch {
          // Closed meanwhile: nothing to release.
        }
      }
    }
    mine.handles.length = 0;
    mine.times.length = 0;
  };
  child.once("exit", () => {
    // `connected` turns false when the channel's end has been read, so any acknowledgement the
    // worker sent before dying has been handled. ('disconnect' itself never comes while Node
    // waits for the worker to acknowledge a passed handle.)
    if (!child.connected) return release();
    const started = performance.now();
    const poll = setInterval(() => {
      if (child.connected && performance.now() - started < CHANNEL_WAIT_MS) return;
      clearInterval(poll);
      release();
    }, 10);
    poll.unref();
  });
  return guard;
}

/** How long after a worker's exit its IPC channel may take to reach its end. */
const CHANNEL_WAIT_MS = 1000;

/** Drops, in place, the connections that are closed: the worker took them (or they were released). */
function compact(state: InFlight): void {
  const { handles, times } = state;
  let kept = 0;
  for (let i = 0; i < handles.length; i++) {
    const handle = handles[i]!;
    if (!isOpen(handle)) continue;
    handles[kept] = handle;
    times[kept++] = times[i]!;
  }
  handles.length = kept;
  times.length = kept;
}

/**
 * Whether `handle`, handed to `state`'s worker at `at`, was handed to another worker since: the
 * worker refused it (it was shutting down) and the round-robin handle passed it on. Only read
 * off the request path: by the watchdog and when a worker is gone.
 */
function handedOnLater(state: InFlight, handle: ConnectionHandle, at: number): boolean {
  for (const other of inFlight) {
    if (other === state) continue;
    const i = other.handles.lastIndexOf(handle);
    if (i >= 0 && other.times[i]! >= at) return true;
  }
  return false;
}

function isHandoff(message: unknown): boolean {
  if (typeof message !== "object" || message === null) return false;
  const { cmd, act } = message as { cmd?: unknown; act?: unknown };
  return cmd === "NODE_CLUSTER" && act === "newconn";
}

function isConnection(handle: unknown): handle is ConnectionHandle {
  return typeof handle === "object" && handle !== null && typeof (handle as ConnectionHandle).close === "function";
}

/** A closed libuv handle reports fd -1. */
function isOpen(handle: ConnectionHandle): boolean {
  return typeof handle.fd === "number" && handle.fd >= 0;
}
