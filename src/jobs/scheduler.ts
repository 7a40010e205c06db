import { randomUUID } from "node:crypto";
import type { MetricsCollector, Scheduler } from "../integrations.js";
import { getPrimaryChannel, type PrimaryChannel } from "../cluster/worker-link.js";
import type { Logger } from "../logging/logger.js";
import { TickClock } from "./clock.js";
import { jobSpec, type Job, type JobSpec } from "./define.js";
import { jobsDone, jobsRegister, jobsRun } from "./ipc.js";

/** What the scheduler needs from its App. */
export interface JobHost {
  readonly logger: Logger;
  /** The App's collector when the run ends (it may be set after `schedule()`). */
  metrics(): MetricsCollector | undefined;
}

const DONE_TIMEOUT_MS = 5000;

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
  /** Identifies this process to a JobStore when it runs its own clock. */
  readonly #owner = randomUUID();
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
    // Only the keelson supervisor sets KEELSON_WORKER_ID: a plain node:cluster primary would never grant a tick.
    const primary = process.env.KEELSON_WORKER_ID === undefined ? undefined : getPrimaryChannel();
    const granted: JobSpec[] = [];
    for (const job of this.#jobs.values()) {
      if (job.runOn === "one" && primary !== undefined) granted.push(jobSpec(job));
      else this.#startClock(job);
    }
    if (primary !== undefined && granted.length > 0) {
      primary.on(jobsRun, ({ job, scheduledAt, owner }) => this.#granted(primary, job, scheduledAt, owner));
      primary.send(jobsRegister, { jobs: granted });
    }
  }

  /** No new run starts; runs in progress get `signal` (the shutdown deadline) and are awaited. */
  async stop(signal: AbortSignal): Promise<void> {
    this.#stopped = true;
    for (const clock of this.#clocks) clock.stop();
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
      this.#track(this.#run(job, scheduledAt, this.#owner).finally(() => this.#next(job)));
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
  #granted(primary: PrimaryChannel, name: string, at: number, owner: string): void {
    const job = this.#jobs.get(name);
    const refused = job === undefined || this.#stopped;
    const run = refused ? Promise.resolve() : this.#run(job, new Date(at), owner);
    // Best effort: a primary that does not answer in time still sees the tick end when this worker exits.
    this.#track(run.then(() => primary.request(jobsDone, { job: name, scheduledAt: at, refused }, DONE_TIMEOUT_MS)).then(() => {}, () => {}));
  }

  #track(run: Promise<void>): void {
    this.#runs.add(run);
    void run.finally(() => this.#runs.delete(run));
  }

  /** One run of one tick; never rejects: its outcome is logged and counted. */
  async #run(job: Job, scheduledAt: Date, owner: string): Promise<void> {
    const { logger } = this.#host;
    const { name } = job;
    const tick = scheduledAt.toISOString();
    const signal = this.#abort.signal;
    const started = performance.now();
    try {
      if (job.store !== undefined && !(await job.store.claim(name, scheduledAt, owner, signal))) {
        logger.info("job %s: tick %s is claimed by another instance: not run here", name, tick);
        this.#observe(name, "skipped", undefined);
        return;
      }
      // One line per run at info, its end; the start is for debugging a run that never ends.
      logger.debug("job %s started (tick %s)", name, tick);
      await job.run({ name, scheduledAt, signal, logger });
      const ms = performance.now() - started;
      logger.info("job %s succeeded in %dms (tick %s)", name, Math.round(ms), tick);
      this.#observe(name, "success", ms);
    } catch (error) {
      const ms = performance.now() - started;
      const outcome: JobOutcome = signal.aborted ? "aborted" : "failure";
      const detail = error instanceof Error ? (error.stack ?? error.message) : String(error);
      logger.logError("job %s %s after %dms (tick %s): %s", name, outcome === "aborted" ? "aborted by the shutdown" : "failed",
        Math.round(ms), tick, detail);
      this.#observe(name, outcome, ms);
    }
  }

  #observe(job: string, outcome: JobOutcome, ms: number | undefined): void {
    try {
      this.#host.metrics()?.observeJob?.(job, outcome, ms === undefined ? undefined : ms / 1000);
    } catch (error) {
      console.error("keelson: recording the job run failed:", error);
    }
  }
}
