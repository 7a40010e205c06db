import { TickClock } from "./clock.js";
import { DEFAULT_CRASH_RETRIES, tickClock, type JobSpec } from "./define.js";
import { jobsCrashed, jobsDone, jobsRegister, jobsRun } from "./ipc.js";
import type { FeatureHost, FeatureWorker } from "../cluster/feature-host.js";
import type { Logger } from "../logging/logger.js";
import { errorMessage } from "../errors.js";

/** What the dispatcher needs from the primary: its workers, and a say in which deaths the crash-loop breaker counts. */
export type JobsHost = Pick<FeatureHost, "onWorker" | "excuseCrashes">;

/** A running job clock: what `startClock` returns. */
export interface JobClock {
  stop(): void;
}

/**
 * Starts a job's clock: calls `onTick(scheduledAt)` at each tick of `nextTick` until stopped.
 * The primary uses a TickClock (real time); a unit test fires the ticks itself.
 */
export type StartJobClock = (nextTick: (after: Date) => Date, onTick: (scheduledAt: Date) => void) => JobClock;

const startTickClock: StartJobClock = (nextTick, onTick) => {
  const clock = new TickClock(nextTick, onTick);
  clock.start();
  return clock;
};

interface Schedule {
  readonly name: string;
  /** The spec as JSON: a reload that changes it restarts the clock. */
  key: string;
  clock: JobClock;
  /** Ticks due and not yet handed out (epoch ms), oldest first. */
  readonly due: number[];
  /** The tick being run and the worker running it. */
  running: { scheduledAt: number; worker: FeatureWorker } | undefined;
  /** Workers that registered the job and have not refused it. */
  readonly workers: Set<FeatureWorker>;
  /** Runs again after a crash, from the spec (the latest worker's). */
  crashRetries: number;
  /** Ticks whose runs crashed their workers, and how many times. */
  readonly crashes: Map<number, number>;
}

/** Ticks that may wait behind a running one (a slow run, a starved machine); an older one is skipped beyond that. */
const MAX_WAITING = 10;

/**
 * The primary's side of `runOn: "one"` jobs: it runs each job's clock and hands every tick to
 * exactly one ready worker, one run of a job at a time. A tick counts as run when its worker
 * reports the end of the run; a worker that exits before that (crash, SIGKILL, watchdog) gives
 * the tick back, and it runs on another worker, up to the job's `crashRetries` times: then the
 * tick is recorded failed (a poison tick must not kill worker after worker). A worker's death
 * during a run is the job's: the crash-loop breaker does not count it. Draining workers
 * (reload, shutdown) finish their run but get no new tick.
 */
export class JobDispatcher {
  readonly #logger: Logger;
  readonly #startClock: StartJobClock;
  readonly #jobs = new Map<string, Schedule>();
  #turn = 0;
  #stopped = false;
  /** Crashed ticks given up and not yet counted by a worker's metrics. */
  readonly #failedToCount: Array<{ job: string; scheduledAt: number }> = [];
  /** Workers that died during a run: the job they were running. */
  readonly #diedInRun = new WeakMap<FeatureWorker, string>();

  constructor(host: JobsHost, logger: Logger, startClock: StartJobClock = startTickClock) {
    this.#logger = logger;
    this.#startClock = startClock;
    host.excuseCrashes?.((worker) => {
      const job = this.#diedInRun.get(worker) ?? [...this.#jobs.values()].find((schedule) => schedule.running?.worker === worker)?.name;
      return job === undefined ? undefined : `it died during a run of job ${job}`;
    });
    host.onWorker((worker) => {
      worker.channel.on(jobsRegister, ({ jobs }) => this.#register(worker, jobs));
      worker.channel.handle(jobsDone, (done) => this.#done(worker, done));
      void worker.ready.then(() => this.#pumpAll(), () => {});
      void worker.exited.then(() => this.#exited(worker));
    });
  }

  /** Stops every clock: the supervisor is stopping. Runs in progress end in their draining workers. */
  stop(): void {
    this.#stopped = true;
    for (const schedule of this.#jobs.values()) schedule.clock.stop();
  }

  #register(worker: FeatureWorker, specs: readonly JobSpec[]): void {
    if (this.#stopped || !Array.isArray(specs)) return;
    for (const spec of specs) {
      const key = JSON.stringify([spec.cron, spec.timezone, spec.every]);
      let schedule = this.#jobs.get(spec.name);
      if (schedule !== undefined && schedule.key !== key) {
        this.#logger.info("job %s: its schedule changed: the clock restarts", spec.name);
        schedule.clock.stop();
        schedule.key = key;
        schedule.clock = this.#clock(spec);
      }
      if (schedule === undefined) {
        schedule = {
          name: spec.name, key, clock: this.#clock(spec), due: [], running: undefined, workers: new Set(),
          crashRetries: DEFAULT_CRASH_RETRIES, crashes: new Map(),
        };
        this.#jobs.set(spec.name, schedule);
      }
      if (Number.isInteger(spec.crashRetries) && (spec.crashRetries ?? -1) >= 0) schedule.crashRetries = spec.crashRetries ?? DEFAULT_CRASH_RETRIES;
      schedule.workers.add(worker);
    }
    this.#pumpAll();
  }

  #clock(spec: JobSpec): JobClock {
    let nextTick: (after: Date) => Date;
    try {
      nextTick = tickClock(spec);
    } catch (error) {
      this.#logger.logError("job %s: its schedule is invalid: %s", spec.name, errorMessage(error));
      nextTick = () => new Date(8.64e15);
    }
    return this.#startClock(nextTick, (at) => {
      const schedule = this.#jobs.get(spec.name);
      if (schedule !== undefined) this.#tick(schedule, at.getTime());
    });
  }

  #tick(schedule: Schedule, scheduledAt: number): void {
    schedule.due.push(scheduledAt);
    if (schedule.due.length > MAX_WAITING) {
      const skipped = schedule.due.shift() ?? 0;
      this.#logger.warn("job %s: tick %s skipped: %d later ticks wait for the run in progress", schedule.name,
        new Date(skipped).toISOString(), MAX_WAITING);
    }
    this.#pump(schedule);
  }

  #pumpAll(): void {
    for (const schedule of this.#jobs.values()) this.#pump(schedule);
    this.#countFailures();
  }

  /** Hands given-up ticks to a ready worker that has the job, for its metrics. */
  #countFailures(): void {
    for (let index = 0; index < this.#failedToCount.length;) {
      const failed = this.#failedToCount[index] as { job: string; scheduledAt: number };
      const schedule = this.#jobs.get(failed.job);
      const worker = schedule === undefined ? undefined : [...schedule.workers].find((candidate) => candidate.state === "ready");
      if (worker !== undefined && worker.channel.send(jobsCrashed, failed)) this.#failedToCount.splice(index, 1);
      else index++;
    }
  }

  /** Hands the oldest due tick to a ready worker (in turn), unless a run of the job is in progress. */
  #pump(schedule: Schedule): void {
    while (!this.#stopped && schedule.running === undefined && schedule.due.length > 0) {
      const ready = [...schedule.workers].filter((worker) => worker.state === "ready");
      const worker = ready[this.#turn++ % Math.max(1, ready.length)];
      if (worker === undefined) return;
      const scheduledAt = schedule.due.shift() ?? 0;
      schedule.running = { scheduledAt, worker };
      if (worker.channel.send(jobsRun, { job: schedule.name, scheduledAt })) return;
      // Its channel closed: it is exiting. The tick goes to another worker.
      schedule.running = undefined;
      schedule.due.unshift(scheduledAt);
      schedule.workers.delete(worker);
    }
  }

  #done(worker: FeatureWorker, done: { job: string; scheduledAt: number; refused: boolean }): Record<string, never> {
    const schedule = this.#jobs.get(done.job);
    const running = schedule?.running;
    if (schedule === undefined || running?.worker !== worker || running.scheduledAt !== done.scheduledAt) return {};
    schedule.running = undefined;
    if (done.refused !== true) schedule.crashes.delete(done.scheduledAt);
    if (done.refused === true) {
      schedule.workers.delete(worker);
      schedule.due.unshift(done.scheduledAt);
    }
    this.#pump(schedule);
    return {};
  }

  #exited(worker: FeatureWorker): void {
    for (const schedule of this.#jobs.values()) {
      schedule.workers.delete(worker);
      const running = schedule.running;
      if (running?.worker !== worker) continue;
      const tick = new Date(running.scheduledAt).toISOString();
      schedule.running = undefined;
      this.#diedInRun.set(worker, schedule.name);
      const crashes = (schedule.crashes.get(running.scheduledAt) ?? 0) + 1;
      if (crashes > schedule.crashRetries) {
        schedule.crashes.delete(running.scheduledAt);
        this.#logger.logError("job %s failed (tick %s): %s exited during its run, %d time(s) in all (crashRetries %d): the tick is given up",
          schedule.name, tick, worker.name, crashes, schedule.crashRetries);
        this.#failedToCount.push({ job: schedule.name, scheduledAt: running.scheduledAt });
        this.#countFailures();
      } else {
        schedule.crashes.set(running.scheduledAt, crashes);
        this.#logger.warn("job %s: %s exited during the run of tick %s: it runs again on another worker (re-run %d of %d after a crash)",
          schedule.name, worker.name, tick, crashes, schedule.crashRetries);
        schedule.due.unshift(running.scheduledAt);
      }
      this.#pump(schedule);
    }
  }
}

/** Installs `runOn: "one"` job dispatch on the primary; its clocks stop when the primary begins to stop. */
export function installJobs(host: Pick<FeatureHost, "onWorker" | "onStop" | "logger" | "excuseCrashes">, startClock?: StartJobClock): JobDispatcher {
  const jobs = new JobDispatcher(host, host.logger, startClock);
  host.onStop(() => jobs.stop());
  return jobs;
}
