/**
 * Which process of a supervised service wrote a log line. Under the supervisor every line says
 * it: a worker's `[w2 4242]` / `"worker":"2","pid":4242`, the primary's `[primary 4240]` /
 * `"worker":"primary","pid":4240`. Both pieces are built once per process, so a request line
 * only concatenates a string that already exists. Empty outside the supervisor.
 */
import cluster from "node:cluster";

/** Inserted after the text line's timestamp: ` [w2 4242]`, or empty. */
export let textOrigin = "";
/** Inserted after the JSON line's `time` member: `,"worker":"2","pid":4242`, or empty. */
export let jsonOrigin = "";

/**
 * Names this process in every log line from now on. `worker` is the slot id, or `primary`.
 * A string in JSON either way, so a log index keeps one type for the field.
 */
export function setLogOrigin(worker: string, pid: number): void {
  const tag = /^\d+$/.test(worker) ? `w${worker}` : worker;
  textOrigin = ` [${tag} ${pid}]`;
  jsonOrigin = `,"worker":${JSON.stringify(worker)},"pid":${pid}`;
}

// The supervisor forks its workers with their slot id in KEELSON_WORKER_ID. (Node deletes
// NODE_UNIQUE_ID, which marks a cluster worker, during startup: ask node:cluster.)
const slot = process.env.KEELSON_WORKER_ID;
if (cluster.isWorker && slot !== undefined && /^\d+$/.test(slot)) setLogOrigin(slot, process.pid);
