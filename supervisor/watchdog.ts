import type { Logger } from "../src/logging/logger.js";
import type { Clock } from "./clock.js";
import type { WorkerHandle } from "./worker-handle.js";

/**
 * Kills a ready worker whose heartbeats stopped for longer than `timeout` ms. Heartbeats come
 * from a timer in the worker's event loop, so silence means the loop is blocked (a busy loop,
 * a synchronous call that never returns): such a worker answers nothing, and a signal's handler
 * would never run either, hence SIGKILL. Its exit is then a crash like any other.
 *
 * Only silence while the primary itself ran counts. When the watchdog's own timer comes late by
 * more than a check period, the primary did not run meanwhile (the host, container or process
 * group was paused: SIGSTOP, `docker pause`, a cgroup freezer, a VM pause; or the primary's loop
 * was blocked): the workers were most likely paused with it, and their heartbeats may still wait
 * unread in the IPC pipes. Their silence is then counted from the moment the primary runs again.
 *
 * It also finds a worker that node:cluster no longer hands connections to: the last connection
 * passed to it is older than `HANDOFF_STALL_MS`, it kept sending heartbeats long after (its event
 * loop ran and read the message), and the other workers got many connections meanwhile (a free
 * worker would have had its turn): the socket was lost on the way, typically at EMFILE (see
 * handoff-guard.ts). `stalled` then replaces it.
 */
/** How long a worker that runs may leave a passed connection unacknowledged before it counts as lost. */
export const HANDOFF_STALL_MS = 5000;

export class Watchdog {
  readonly #timeout: number;
  readonly #workers: () => Iterable<WorkerHandle>;
  readonly #logger: Logger | undefined;
  readonly #stalled: ((handle: WorkerHandle, why: string) => void) | undefined;
  readonly #period: number;
  readonly #clock: Clock;
  #cancel: (() => void) | undefined;
  #lastCheck = 0;
  readonly #reported = new WeakSet<WorkerHandle>();
  /** Silence before this moment (clock time) does not count: the primary was not running. */
  #countFrom = 0;

  constructor(timeout: number, workers: () => Iterable<WorkerHandle>, clock: Clock, logger?: Logger,
    stalled?: (handle: WorkerHandle, why: string) => void) {
    this.#timeout = timeout;
    this.#workers = workers;
    this.#clock = clock;
    this.#logger = logger;
    this.#stalled = stalled;
    // Check a few times per timeout so a blocked worker dies soon after the threshold.
    this.#period = Math.max(25, Math.min(1000, Math.round(timeout / 4)));
  }

  start(): void {
    // Off (0): no heartbeat kills and no check for lost connections either.
    if (this.#timeout === 0 || this.#cancel !== undefined) return;
    this.#lastCheck = this.#clock.now();
    this.#cancel = this.#clock.every(this.#period, () => this.#check());
  }

  stop(): void {
    this.#cancel?.();
    this.#cancel = undefined;
  }

  #check(): void {
    const now = this.#clock.now();
    const late = now - this.#lastCheck - this.#period;
    this.#lastCheck = now;
    // A full period late (and at least half a second: a busy but running primary is often a few ms late).
    if (late > Math.max(this.#period, 500)) {
      this.#countFrom = now;
      this.#logger?.warn("watchdog: the primary itself did not run for %dms (paused host or container, or a blocked primary): "
        + "workers' silence counts again from now", Math.round(late + this.#period));
      return;
    }
    const workers = [...this.#workers()];
    const live = workers.length;
    for (const handle of workers) {
      if (handle.state !== "ready" || handle.killedBy !== undefined) continue;
      const silent = now - Math.max(handle.lastBeat, this.#countFrom);
      if (silent > this.#timeout) {
        handle.kill(`watchdog: no heartbeat for ${Math.round(silent)}ms (limit ${this.#timeout}ms), event loop blocked`);
        continue;
      }
      const stuck = this.#stalled === undefined || this.#reported.has(handle) ? undefined : stuckHandoff(handle, now, live);
      if (stuck !== undefined) {
        this.#reported.add(handle);
        this.#stalled?.(handle, `a connection passed to it ${Math.round((now - stuck.at) / 1000)}s ago never reached it `
          + `(out of file descriptors?): node:cluster passes it no more (${stuck.why})`);
      }
    }
  }
}

/**
 * Whether node:cluster has stopped passing connections to a worker that runs (it kept beating
 * well after the handoff, so it read the message): a connection handed to it is still waiting
 * for its acknowledgement, or the others got many connections since its last one (a free worker
 * gets its turn within one round of the free workers).
 */
function stuckHandoff(handle: WorkerHandle, now: number, live: number): { at: number; why: string } | undefined {
  const ranAfter = (at: number) => now - at > HANDOFF_STALL_MS && handle.lastBeat - at > HANDOFF_STALL_MS / 2;
  const pending = handle.handoffs.oldestPending();
  if (pending !== undefined && ranAfter(pending)) return { at: pending, why: "still unacknowledged" };
  const last = handle.handoffs.lastHandoff();
  if (last !== undefined && ranAfter(last.at) && last.othersSince >= Math.max(20, 2 * live)) {
    return { at: last.at, why: `${last.othersSince} went to the others since` };
  }
  return undefined;
}
