import cluster from "node:cluster";
import { errorMessage } from "../errors.js";
import { Channel, workerFailed, type Endpoint, type Envelope, type PrimaryChannel } from "./ipc.js";

/**
 * A worker's channel to its node:cluster primary and its last words. Apart from the link
 * (worker-link.ts) because the supervisor preloads it into every worker (supervisor/worker-preload.ts)
 * before the entry: a preload that loaded the whole link (the logger, the stats, their modules)
 * left Node's `process.nextTick` compiled in a slower form in the worker (BENCHMARKS.md, "A reuseport
 * worker against one process"), so this module imports no more than the channel needs.
 */

let channel: PrimaryChannel | undefined;

/** The channel to any node:cluster primary: the link reports and drains under any of them. */
export function clusterChannel(): PrimaryChannel | undefined {
  if (channel === undefined && cluster.isWorker) channel = new Channel(processEndpoint());
  return channel;
}

/** `process` as an Endpoint; a failed send is dropped (the callback keeps it from becoming an 'error' event). */
function processEndpoint(): Endpoint {
  return {
    send: (message: Envelope) => process.send?.(message, undefined, undefined, () => {}),
    on: (event, listener) => process.on(event, listener),
    off: (event, listener) => process.off(event, listener),
    get connected() {
      return process.connected;
    },
  };
}

let failureReported = false;

/**
 * Tells the supervisor why this worker is about to die (its App could not start, or an uncaught
 * error), so the primary's verdict names the cause instead of only an exit code. The first
 * report wins: it is the cause, later ones are its echoes. A no-op outside a cluster worker.
 */
export function reportWorkerFailure(error: unknown): void {
  if (failureReported || !cluster.isWorker) return;
  failureReported = true;
  clusterChannel()?.send(workerFailed, { reason: describeFailure(error) });
}

/** `SyntaxError: Unexpected token`, `Error [ERR_MODULE_NOT_FOUND]: Cannot find …`, or the message alone for a plain Error; one line. */
function describeFailure(error: unknown): string {
  let text: string;
  if (error instanceof Error) {
    const code = (error as NodeJS.ErrnoException).code;
    const label = typeof code === "string" ? `${error.name} [${code}]` : error.name === "Error" ? "" : error.name;
    text = label === "" ? error.message : `${label}: ${error.message}`;
  } else text = errorMessage(error);
  return text.replace(/\s*\n\s*/g, " ").slice(0, 1000);
}
