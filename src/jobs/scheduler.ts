import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { MetricsCollector, Scheduler } from "../integrations.js";
import type { PrimaryChannel } from "../cluster/ipc.js";
import { getPrimaryChannel } from "../cluster/worker-link.js";
import type { Logger } from "../logging/logger.js";
import { RequestLogger } from "../logging/request-logger.js";
import { TickClock } from "./clock.js";
import { jobSpec, type Job, type JobSpec, type JobStore } from "./define.js";
import { jobsCrashed, jobsDone, jobsRegister, jobsRun } from "./ipc.js";
import { keepLease, renewEveryMs } from "./lease.js";
import { errorMessage } from "../errors.js";

/** What the scheduler needs from its App. */
export interface JobHost {
  readonly logger: Logger;
  /** The App's collector when the run ends (it may be set after `schedule()`). */
  metrics(): MetricsCollector | undefined;
}

const DONE_TIMEOUT_MS = 5000;

/** A sweep for expired leases waits this much past the expiry it was told of (the store's clock, then a query). */
const SWEEP_MARGIN_MS = 250;

/** Per job with a store: the sweep for ticks whose lease ran out. */
interface Sweep {
  running: boolean;
  /** Asked again while running: sweep once more at the end. */
  again: boolean;
  /** The next sweep, at the expiry of the first live lease. */
  timer: NodeJS.Timeout | undefined;
}

/** How a run ended: the `outcome` label of `keelson_job_runs_total`. */
export type JobOutcome = "success" | "failure" | "aborted" | "skipped";

/**
 * The App's jobs, as the one Scheduler `app.schedule()` registers: `listen()` starts it, the
 * shutdown stops it. Ticks of `runOn: "each"` jobs, and of every job outside the supervisor,
 * come from this process's own clock; under the supervisor, ticks of `runOn: "one"` jobs come
 * from the primary, one worker per tick (jobs/primary.ts).
 */
export class JobScheduler implements Scheduler {
  readonly #host: JobHost;
  readonly #jobs = new Map<string, Job>();
  readonly #clocks: TickClock[] = [];
  readonly #runs = new Set<Promise<void>>();
  /** Per local job: the tick waiting for the running one to end, if any. */
  readonly #waiting = new Map<string, Date | undefined>();
  readonly #abort = new AbortController();
  /**
   * Identifies this process to a JobStore: the host (a pod's name), the pid and a random part.
   * Per process, not per supervisor: a tick leased by a worker that died is free for a sibling
   * only when its lease runs out, like for any other pod.
   */
  readonly #owner = `${hostname()}/${process.pid}/${randomUUID().slice(0, 8)}`;
  /** Ticks of store jobs being claimed or run by this process (`job` NUL `scheduledAt`). */
  readonly #held = new Set<string>();
  readonly #sweeps = new Map<string, Sweep>();
  #started = false;
  #stopped = false;

  constructor(host: JobHost) {
    this.#host = host;
  }

  add(job: Job): void {
    if (this.#started) throw new Error(`cannot schedule job ${job.name}: the App has started (schedule jobs before listen())`);
    if (this.#jobs.has(job.name)) throw new Error(`job ${job.name} is already scheduled: job names are unique in an App`);
    this.#jobs.set(job.name, job);
  }

  start(): void {
    this.#started = true;
    const primary = getPrimaryChannel();
    const granted: JobSpec[] = [];
    for (const job of this.#jobs.values()) {
      if (job.runOn === "one" && primary !== undefined) granted.push(jobSpec(job));
      else this.#startClock(job);
    }
    if (primary !== undefined && granted.length > 0) {
      primary.on(jobsRun, ({ job, scheduledAt }) => this.#granted(primary, job, scheduledAt));
      // A tick whose runs crashed their workers, given up by the primary: counted here, where the metrics are.
      primary.on(jobsCrashed, ({ job }) => {
        if (this.#jobs.has(job)) this.#observe(job, "failure", undefined);
      });
      primary.send(jobsRegister, { jobs: granted });
    }
  }

  /** No new run starts; runs in progress get `signal` (the shutdown deadline) and are awaited. */
  async stop(signal: AbortSignal): Promise<void> {
    this.#stopped = true;
    for (const clock of this.#clocks) clock.stop();
    for (const sweep of this.#sweeps.values()) clearTimeout(sweep.timer);
    const abort = () => this.#abort.abort(signal.reason);
    if (signal.aborted) abort();
    else signal.addEventListener("abort", abort, { once: true });
    try {
      while (this.#runs.size > 0) await Promise.allSettled(this.#runs);
    } finally {
      signal.removeEventListener("abort", abort);
    }
  }

  #startClock(job: Job): void {
    const clock = new TickClock(job.nextTick, (scheduledAt) => this.#localTick(job, scheduledAt));
    this.#clocks.push(clock);
    clock.start();
  }

  /** Runs of one job never overlap: a tick due meanwhile waits for the run; an older waiting tick is skipped. */
  #localTick(job: Job, scheduledAt: Date): void {
    if (!this.#waiting.has(job.name)) {
      this.#waiting.set(job.name, undefined);
      this.#track(this.#run(job, scheduledAt, false).finally(() => this.#next(job)));
      return;
    }
    const skipped = this.#waiting.get(job.name);
    if (skipped !== undefined) {
      this.#host.logger.warn("job %s: tick %s skipped: the previous run is still going", job.name, skipped.toISOString());
      this.#observe(job.name, "skipped", undefined);
    }
    this.#waiting.set(job.name, scheduledAt);
  }

  #next(job: Job): void {
    const waiting = this.#waiting.get(job.name);
    this.#waiting.delete(job.name);
    if (waiting !== undefined && !this.#stopped) this.#localTick(job, waiting);
  }

  /** A tick the primary gave this worker: run it and report, or refuse it once stopped. */
  #granted(primary: PrimaryChannel, name: string, at: number): void {
    const job = this.#jobs.get(name);
    const refused = job === undefined || this.#stopped;
    const run = refused ? Promise.resolve() : this.#run(job, new Date(at), false);
    // Best effort: a primary that does not answer in time still sees the tick end when this worker exits.
    this.#track(run.then(() => primary.request(jobsDone, { job: name, scheduledAt: at, refused }, DONE_TIMEOUT_MS)).then(() => {}, () => {}));
  }

  #track(run: Promise<void>): void {
    this.#runs.add(run);
    void run.finally(() => this.#runs.delete(run));
  }

  /**
   * One run of one tick; never rejects: its outcome is logged and counted. With a store the tick
   * is run under a lease: claimed first, renewed while the run lasts (the run's signal aborts if
   * that fails), marked finished at the end unless the run was aborted (then the lease runs out
   * and another instance takes the tick over). `recovering`: a tick found by the sweep, whose
   * lease ran out elsewhere; losing the race for it is not worth a log line.
   */
  async #run(job: Job, scheduledAt: Date, recovering: boolean): Promise<void> {
    const { logger } = this.#host;
    const { name, store } = job;
    const tick = scheduledAt.toISOString();
    const lease = new AbortController();
    const signal = store === undefined ? this.#abort.signal : AbortSignal.any([this.#abort.signal, lease.signal]);
    const key = `${name}\0${scheduledAt.getTime()}`;
    let stopLease: (() => void) | undefined;
    let holding = false;
    let started = performance.now();
    try {
      if (store !== undefined) {
        if (!recovering) this.#sweep(job, store);
        holding = !this.#held.has(key) && (this.#held.add(key), await this.#claim(store, job, scheduledAt, key));
        if (!holding) {
          if (recovering) return;
          logger.info("job %s: tick %s is claimed by another instance: not run here", name, tick);
          this.#observe(name, "skipped", undefined);
          return;
        }
        if (recovering) logger.warn("job %s: tick %s: its lease ran out before its run finished: it runs here", name, tick);
        stopLease = keepLease({ store, job: name, scheduledAt, owner: this.#owner }, started, (reason) => {
          logger.logError("job %s: tick %s: its lease could not be kept (%s): the run is aborted", name, tick, reason);
          lease.abort(new Error(`job ${name}: the lease of tick ${tick} was lost: ${reason}`));
        });
        started = performance.now();
      }
      // One line per run at info, its end; the start is for debugging a run that never ends.
      logger.debug("job %s started (tick %s)", name, tick);
      // Not the App's logger: its error() exits the process, the contract for fatal start-up errors.
      await job.run({ name, scheduledAt, signal, logger: RequestLogger.forJob(logger, name, tick) });
      const ms = performance.now() - started;
      logger.info("job %s succeeded in %dms (tick %s)", name, Math.round(ms), tick);
      this.#observe(name, "success", ms);
    } catch (error) {
      const ms = performance.now() - started;
      const outcome: JobOutcome = signal.aborted ? "aborted" : "failure";
      const detail = error instanceof Error ? (error.stack ?? error.message) : String(error);
      const why = lease.signal.aborted ? "aborted: its lease was lost" : this.#abort.signal.aborted ? "aborted by the shutdown" : "failed";
      logger.logError("job %s %s after %dms (tick %s): %s", name, outcome === "aborted" ? why : "failed", Math.round(ms), tick, detail);
      this.#observe(name, outcome, ms);
    } finally {
      stopLease?.();
      // A run that ended, well or badly, is finished; an aborted one is left to its lease.
      if (stopLease !== undefined && store !== undefined && !signal.aborted) await this.#finish(store, job, scheduledAt);
      if (holding) this.#held.delete(key);
    }
  }

  /** The claim; the tick is no longer held here when it fails. A claim that throws fails the run. */
  async #claim(store: JobStore, job: Job, scheduledAt: Date, key: string): Promise<boolean> {
    try {
      if (await store.claim(job.name, scheduledAt, this.#owner, this.#abort.signal)) return true;
    } catch (error) {
      this.#held.delete(key);
      throw error;
    }
    this.#held.delete(key);
    return false;
  }

  async #finish(store: JobStore, job: Job, scheduledAt: Date): Promise<void> {
    const tick = scheduledAt.toISOString();
    const late = new AbortController();
    const timer = setTimeout(() => late.abort(new Error("the store did not answer")), renewEveryMs(store));
    try {
      if (!(await store.finish(job.name, scheduledAt, this.#owner, late.signal))) {
        this.#host.logger.logError("job %s: tick %s: its lease had been taken over before the run finished: it may have run twice", job.name, tick);
      }
    } catch (error) {
      this.#host.logger.logError("job %s: tick %s could not be marked finished (%s): it runs again when its lease runs out", job.name, tick,
        errorMessage(error));
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Looks for ticks of `job` whose lease ran out unfinished (their runner died or lost the
   * database) and runs them; then sleeps until the first live lease could run out. Asked at
   * every tick of the job, so a pod that started after a tick was leased still finds it.
   */
  #sweep(job: Job, store: JobStore): void {
    let sweep = this.#sweeps.get(job.name);
    if (sweep === undefined) this.#sweeps.set(job.name, (sweep = { running: false, again: false, timer: undefined }));
    if (sweep.running) {
      sweep.again = true;
      return;
    }
    sweep.running = true;
    const state = sweep;
    this.#track((async () => {
      try {
        do {
          state.again = false;
          const { expired, nextExpiryMs } = await store.unfinished(job.name, this.#abort.signal);
          clearTimeout(state.timer);
          state.timer = undefined;
          if (this.#stopped) return;
          if (nextExpiryMs !== undefined) {
            state.timer = setTimeout(() => this.#sweep(job, store), Math.max(0, nextExpiryMs) + SWEEP_MARGIN_MS);
            state.timer.unref();
          }
          for (const at of expired) {
            if (!this.#held.has(`${job.name}\0${at.getTime()}`)) this.#track(this.#run(job, at, true));
          }
        } while (state.again && !this.#stopped);
      } catch (error) {
        if (!this.#stopped) this.#host.logger.warn("job %s: looking for ticks whose lease ran out failed: %s", job.name, errorMessage(error));
      } finally {
        state.running = false;
      }
    })());
  }

  #observe(job: string, outcome: JobOutcome, ms: number | undefined): void {
    try {
      this.#host.metrics()?.observeJob?.(job, outcome, ms === undefined ? undefined : ms / 1000);
    } catch (error) {
      console.error("keelson: recording the job run failed:", error);
    }
  }
}
