import { randomUUID } from "node:crypto";
import { TickClock } from "./clock.js";
import { tickClock, type JobSpec } from "./define.js";
import { jobsDone, jobsRegister, jobsRun } from "./ipc.js";
import type { FeatureHost, FeatureWorker } from "../cluster/feature-host.js";
import type { Logger } from "../logging/logger.js";

/** What the dispatcher needs from the primary. */
export type JobsHost = Pick<FeatureHost, "onWorker">;

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
}

/** Ticks that may wait behind a running one (a slow run, a starved machine); an older one is skipped beyond that. */
const MAX_WAITING = 10;

/**
 * The primary's side of `runOn: "one"` jobs: it runs each job's clock and hands every tick to
 * exactly one ready worker, one run of a job at a time. A tick counts as run when its worker
 * reports the end of the run; a worker that exits before that (crash, SIGKILL, watchdog) gives
 * the tick back, and it runs on another worker. Draining workers (reload, shutdown) finish
 * their run but get no new tick.
 */
export class JobDispatcher {
  /** Identifies this supervisor to a JobStore: a tick re-run here after a crash is still its own. */
  readonly owner = randomUUID();
  readonly #logger: Logger;
  readonly #startClock: StartJobClock;
  readonly #jobs = new Map<string, Schedule>();
  #turn = 0;
  #stopped = false;

  constructor(host: JobsHost, logger: Logger, startClock: StartJobClock = startTickClock) {
    this.#logger = logger;
    this.#startClock = startClock;
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
        schedule = { name: spec.name, key, clock: this.#clock(spec), due: [], running: undefined, workers: new Set() };
        this.#jobs.set(spec.name, schedule);
      }
      schedule.workers.add(worker);
    }
    this.#pumpAll();
  }

  #clock(spec: JobSpec): JobClock {
    let nextTick: (after: Date) => Date;
    try {
      nextTick = tickClock(spec);
    } catch (error) {
      this.#logger.logError("job %s: its schedule is invalid: %s", spec.name, (error as Error).message);
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
  }

  /** Hands the oldest due tick to a ready worker (in turn), unless a run of the job is in progress. */
  #pump(schedule: Schedule): void {
    while (!this.#stopped && schedule.running === undefined && schedule.due.length > 0) {
      const ready = [...schedule.workers].filter((worker) => worker.state === "ready");
      const worker = ready[this.#turn++ % Math.max(1, ready.length)];
      if (worker === undefined) return;
      const scheduledAt = schedule.due.shift() ?? 0;
      schedule.running = { scheduledAt, worker };
      if (worker.channel.send(jobsRun, { job: schedule.name, scheduledAt, owner: this.owner })) return;
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
      this.#logger.warn("job %s: %s exited during the run of tick %s: it runs again on another worker", schedule.name, worker.name, tick);
      schedule.running = undefined;
      schedule.due.unshift(running.scheduledAt);
      this.#pump(schedule);
    }
  }
}

/** Installs `runOn: "one"` job dispatch on the primary; its clocks stop when the primary begins to stop. */
export function installJobs(host: Pick<FeatureHost, "onWorker" | "onStop" | "logger">, startClock?: StartJobClock): JobDispatcher {
  const jobs = new JobDispatcher(host, host.logger, startClock);
  host.onStop(() => jobs.stop());
  return jobs;
}
