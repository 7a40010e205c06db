import type { Logger } from "../src/logging/logger.js";
import { describeExit, type WorkerHandle, type WorkerExit } from "./worker-handle.js";
import type { Slot, WorkerPool } from "./worker-pool.js";
import { errorMessage } from "../src/errors.js";

/** The outcome of a rolling reload. */
export interface ReloadReport {
  /** True when every slot that had a ready worker got a new one. */
  ok: boolean;
  /** Workers replaced. */
  replaced: number;
  /** Each replacement: the slot, the old worker's pid, the new one's. */
  workers: Array<{ id: number; from: number; to: number }>;
  durationMs: number;
  /** Why the reload stopped early, when `ok` is false. */
  error: string | undefined;
  /**
   * Old workers whose drain was not clean (they hit the drain cap, a hook failed, or they were
   * killed): `worker 1 (pid 10, code 1): drain cap of 5000ms reached with 2 response(s) still being written`.
   */
  unclean: string[];
}

/** What a reload needs from the supervisor. */
export interface ReloadHost {
  readonly pool: WorkerPool;
  readonly logger: Logger;
  readonly readyTimeout: number;
  /** True once the supervisor is stopping: the reload ends at the next step. */
  stopping(): boolean;
  /** Drains a worker (SIGTERM, then SIGKILL after its budget) and waits for its exit. */
  retire(handle: WorkerHandle, reason: string): Promise<WorkerExit>;
}

/**
 * Replaces the workers one slot at a time: fork the replacement, wait until it is ready, make it
 * the slot's worker, then drain the old one and wait for it to exit. The port is served
 * throughout: the old worker keeps serving until the new one listens. A replacement not ready
 * within `readyTimeout` (or that dies first) is killed, the old worker stays, and the reload stops.
 * `slots` and `what` serve replacements of single workers too (a memory limit), logged as `what`.
 */
export async function rollingReload(host: ReloadHost, slots: readonly Slot[] = host.pool.slots, what = "reload"): Promise<ReloadReport> {
  const { logger } = host;
  const started = host.pool.clock.now();
  const report: ReloadReport = { ok: true, replaced: 0, workers: [], durationMs: 0, error: undefined, unclean: [] };
  logger.info("%s: replacing %d worker(s) one at a time", what, slots.length);
  for (const slot of slots) {
    if (host.stopping()) {
      report.ok = false;
      report.error = "the supervisor is stopping";
      break;
    }
    const outcome = await replaceSlot(host, slot, what);
    if ("error" in outcome) {
      report.ok = false;
      report.error = outcome.error;
      break;
    }
    if (outcome.replaced !== undefined) {
      report.replaced++;
      report.workers.push(outcome.replaced);
    }
    if (outcome.unclean !== undefined) report.unclean.push(outcome.unclean);
  }
  report.durationMs = Math.round(host.pool.clock.now() - started);
  if (report.ok && report.unclean.length === 0) logger.info("%s complete: %d worker(s) replaced in %dms", what, report.replaced, report.durationMs);
  else if (report.ok) {
    logger.logError("%s done with errors: %d worker(s) replaced in %dms; %d old worker(s) did not drain cleanly: %s",
      what, report.replaced, report.durationMs, report.unclean.length, report.unclean.join("; "));
  } else logger.logError("%s stopped after %d worker(s) replaced in %dms: %s", what, report.replaced, report.durationMs, report.error);
  return report;
}

type SlotOutcome = { replaced: { id: number; from: number; to: number } | undefined; unclean?: string } | { error: string };

/** Why a retired worker's drain was not clean, or undefined when it was. */
function uncleanExit(handle: WorkerHandle): string | undefined {
  if (handle.exitedCleanly) return undefined;
  const exit = describeExit(handle.exit ?? { code: null, signal: null });
  const why = handle.shutdownProblems ?? handle.killedBy ?? handle.failure;
  return `${handle.name} (${exit})${why === undefined || why === "" ? "" : `: ${why}`}`;
}

async function replaceSlot(host: ReloadHost, slot: Slot, what: string): Promise<SlotOutcome> {
  const { pool, logger } = host;
  const old = slot.current;
  if (old === undefined || old.state !== "ready") {
    // Starting or restarting already: it comes up with the new code anyway.
    logger.info("%s: worker %d is not serving (being restarted): skipped", what, slot.id);
    return { replaced: undefined };
  }
  const replacement = pool.fork(slot.id);
  try {
    await replacement.waitReady(host.readyTimeout);
  } catch (error) {
    if (replacement.exit === undefined) replacement.kill(`${what}: replacement not ready`);
    await replacement.exited;
    if (host.stopping()) return { error: "the supervisor is stopping" };
    return { error: `replacement ${replacement.name} for ${old.name}: ${errorMessage(error)}; keeping the old worker` };
  }
  if (host.stopping()) return { error: "the supervisor is stopping" };
  const restarted = slot.current;
  if (restarted !== old && restarted !== undefined) {
    // The old worker died meanwhile and its slot was restarted already, with the new code.
    await host.retire(replacement, `${what}: slot ${slot.id} was restarted meanwhile`);
    return { replaced: { id: slot.id, from: old.pid, to: restarted.pid } };
  }
  pool.promote(slot, replacement);
  await host.retire(old, `${what}: replaced by ${replacement.name}`);
  return { replaced: { id: slot.id, from: old.pid, to: replacement.pid }, unclean: uncleanExit(old) };
}
