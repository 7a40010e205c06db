import type { Worker } from "node:cluster";

/** The primary's copy of an accepted connection, as node:cluster's round-robin handle passes it. */
interface ConnectionHandle {
  close(): void;
  readonly fd?: number;
}

/** The last worker each connection was handed to (a refused one is handed again, to another). */
const handedTo = new Map<ConnectionHandle, Worker>();

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
 */
export function guardHandoffs(worker: Worker): void {
  const child = worker.process;
  const mine = new Set<ConnectionHandle>();
  const send = child.send as unknown as (...args: unknown[]) => boolean;
  if (typeof send !== "function") return;
  child.send = function guardedSend(this: unknown, ...args: unknown[]): boolean {
    const [message, handle] = args;
    if (isHandoff(message) && isConnection(handle)) {
      for (const done of mine) if (!isOpen(done) || handedTo.get(done) !== worker) forget(mine, done);
      mine.add(handle);
      handedTo.set(handle, worker);
    }
    return send.apply(this, args);
  } as typeof child.send;
  const release = () => {
    for (const handle of mine) {
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
}

/** How long after a worker's exit its IPC channel may take to reach its end. */
const CHANNEL_WAIT_MS = 1000;

function forget(mine: Set<ConnectionHandle>, handle: ConnectionHandle): void {
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
