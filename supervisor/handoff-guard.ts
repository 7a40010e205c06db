import type { Worker } from "node:cluster";

/** The primary's copy of an accepted connection, as node:cluster's round-robin handle passes it. */
interface ConnectionHandle {
  close(): void;
  readonly fd?: number;
}

/** The last worker each connection was handed to (a refused one is handed again, to another). */
const handedTo = new Map<ConnectionHandle, Worker>();

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
  const mine = new Map<ConnectionHandle, number>();
  const send = child.send as unknown as (...args: unknown[]) => boolean;
  let last: { at: number; count: number } | undefined;
  const guard: HandoffGuard = {
    lastHandoff: () => last === undefined ? undefined : { at: last.at, othersSince: handoffCount - last.count },
    oldestPending() {
      let oldest: number | undefined;
      for (const [handle, at] of mine) {
        if (!isOpen(handle) || handedTo.get(handle) !== worker) forget(mine, handle);
        else oldest = Math.min(oldest ?? at, at);
      }
      return oldest;
    },
  };
  if (typeof send !== "function") return guard;
  // Fixed parameters rather than rest and apply: child_process's send reads a missing argument
  // and an undefined one alike, and this runs for every connection the primary hands over.
  child.send = function guardedSend(this: unknown, message: unknown, handle?: unknown, options?: unknown, callback?: unknown): boolean {
    if (isHandoff(message) && isConnection(handle)) {
      // The acknowledged ones are swept once they add up, not on every send: one scan per
      // SWEEP_AT handoffs keeps the map bounded all the same.
      if (mine.size >= SWEEP_AT) for (const done of mine.keys()) if (!isOpen(done) || handedTo.get(done) !== worker) forget(mine, done);
      const at = performance.now();
      mine.set(handle, at);
      last = { at, count: ++handoffCount };
      handedTo.set(handle, worker);
    }
    return send.call(this, message, handle, options, callback);
  } as typeof child.send;
  const release = () => {
    for (const handle of mine.keys()) {
      if (isOpen(handle) && handedTo.get(handle) === worker) {
        try {
          handle.close();
        } catch {
          // Closed meanwhile: nothing to release.
        }
      }
      forget(mine, handle);
    }
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

/** How many handed connections a worker's map holds before a send sweeps out the acknowledged ones. */
const SWEEP_AT = 64;

/** How long after a worker's exit its IPC channel may take to reach its end. */
const CHANNEL_WAIT_MS = 1000;

function forget(mine: Map<ConnectionHandle, number>, handle: ConnectionHandle): void {
  mine.delete(handle);
  if (handedTo.get(handle) !== undefined && !isOpen(handle)) handedTo.delete(handle);
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
