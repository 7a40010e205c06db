import cluster from "node:cluster";
import { flushAllLoggers } from "../logging/logger.js";
import { bypassRelay } from "../logging/sink.js";
import { primaryShutdown, workerDraining, workerHeartbeat, workerReady, workerStopped, type PrimaryChannel } from "./ipc.js";
import { clusterChannel } from "./worker-failure.js";
import { reportWorkerStats, type RequestLoad } from "./worker-stats.js";

/**
 * The worker side of the supervisor protocol. When the process is a node:cluster worker,
 * `App.listen()` attaches the link once its server listens: it reports `ready`, beats a
 * heartbeat from the event loop, drains on the primary's `shutdown` message, and drains by
 * itself when the primary is gone (even SIGKILLed), so an orphan never outlives its budget.
 */


/** What the link needs from the App it reports on. */
export interface LinkedApp {
  port: number;
  url: string;
  docsUrl: string | undefined;
  shutdownTimeout: number;
  /** The App's idempotent shutdown (drain + hooks). */
  shutdown(reason: string): Promise<{ clean: boolean }>;
  /** Settles when the App has shut down, whatever started it: reported to the primary before the exit. */
  finished: Promise<{ clean: boolean; problems: string }>;
  /** Its request counters, reported with the worker's stats. */
  load: RequestLoad;
}

/** Heartbeat period when the supervisor does not say (it passes `KEELSON_HEARTBEAT_INTERVAL`). */
const DEFAULT_HEARTBEAT_MS = 1000;
const SIGNALS = ["SIGINT", "SIGTERM"] as const;

// SIGHUP is the primary's (rolling reload); one that reaches the whole group must not kill workers.
const onHangup = () => {};

/**
 * True in a worker of a supervisor whose balancer is `reuseport`: the worker binds the port itself
 * with SO_REUSEPORT (the kernel spreads connections) instead of sharing the primary's listener.
 */
export function listensWithReusePort(): boolean {
  return cluster.isWorker && process.env.KEELSON_BALANCER === "reuseport";
}

/**
 * The channel to the keelson supervisor, or undefined when this process is not one of its workers:
 * the one answer to "am I under the supervisor?" for every feature.
 */
export function getPrimaryChannel(): PrimaryChannel | undefined {
  // Only the keelson supervisor sets KEELSON_WORKER_ID: a plain node:cluster primary (PM2's
  // cluster mode) would never answer a feature's request, so its workers work alone.
  return process.env.KEELSON_WORKER_ID === undefined ? undefined : clusterChannel();
}

function heartbeatInterval(): number {
  const value = Number(process.env.KEELSON_HEARTBEAT_INTERVAL);
  return Number.isFinite(value) && value > 0 ? value : DEFAULT_HEARTBEAT_MS;
}

/**
 * Connects a listening App to the supervisor; a no-op outside a cluster worker. Returns the
 * undo, called when the App's `listen()` settles.
 */
export function attachWorkerLink(app: LinkedApp): () => void {
  const primary = clusterChannel();
  const worker = cluster.worker;
  if (primary === undefined || worker === undefined) return () => {};
  // Node's cluster worker exits at once when the IPC channel drops unless it counts the
  // disconnect as requested: claim so, and drain instead.
  worker.exitedAfterDisconnect = true;
  let draining = false;
  const drain = (reason: string, exitAfter: boolean) => {
    if (!draining) primary.send(workerDraining, { reason });
    draining = true;
    if (!exitAfter) return;
    void app.shutdown(reason).then((report) => {
      flushAllLoggers();
      process.exit(report.clean ? 0 : 1);
    });
  };
  // The App's own SIGINT/SIGTERM handler drains and exits; this one only tells the primary.
  const onSignal = (signal: NodeJS.Signals) => drain(signal, false);
  const onDisconnect = () => {
    bypassRelay();
    // console output went through the primary too: lost now, and its EPIPE must not end the drain.
    for (const stream of [process.stdout, process.stderr]) stream.on("error", () => {});
    drain("the supervisor's IPC channel closed (primary gone)", true);
  };
  // Ahead of the App's own handler, which logs its draining line: the primary must have the word
  // on its IPC channel before the line is on the worker's pipe (see the supervisor's output relay).
  for (const signal of SIGNALS) process.prependListener(signal, onSignal);
  process.on("SIGHUP", onHangup);
  process.on("disconnect", onDisconnect);
  const offShutdown = primary.on(primaryShutdown, ({ reason }) => drain(reason, true));
  // Before the exit (signals.ts exits once the same promise settles): the primary names why a worker's drain was not clean.
  void app.finished.then(({ clean, problems }) => primary.send(workerStopped, { clean, problems }));
  const period = heartbeatInterval();
  const beat = setInterval(() => primary.send(workerHeartbeat, { at: Date.now() }), period);
  beat.unref();
  const stopStats = reportWorkerStats(primary, app.load, period);
  primary.send(workerReady, {
    pid: process.pid, port: app.port, url: app.url, docsUrl: app.docsUrl, shutdownTimeout: app.shutdownTimeout,
  });
  if (!process.connected) onDisconnect();
  return () => {
    clearInterval(beat);
    stopStats();
    offShutdown();
    for (const signal of SIGNALS) process.off(signal, onSignal);
    process.off("SIGHUP", onHangup);
    process.off("disconnect", onDisconnect);
  };
}
