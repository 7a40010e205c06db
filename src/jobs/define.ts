import { createRequire } from "node:module";
import type { Cron as CronClass } from "croner";
import type { Logger } from "../logging/logger.js";

/** Where a job runs under the supervisor: on one worker per tick, or on every worker. */
export type JobRunOn = "one" | "each";

/** What a job's `run` gets for one tick. */
export interface JobContext {
  /** The job's name. */
  readonly name: string;
  /** The time this tick was due: the tick's identity (the same on every worker and every pod). */
  readonly scheduledAt: Date;
  /** Aborts when the App's shutdown budget runs out while the run is still going. */
  readonly signal: AbortSignal;
  readonly logger: Logger;
}

/**
 * A store shared by several supervisors (pods) that lets one of them claim a tick, so a
 * `runOn: "one"` job runs once per deployment. `claim` resolves true for the first owner of
 * `(job, scheduledAt)`, and again for that same owner (a tick re-run after its worker died).
 * keelson/sql's `defineSQLJobStore(db)` is one.
 */
export interface JobStore {
  claim(job: string, scheduledAt: Date, owner: string, signal: AbortSignal): Promise<boolean>;
}

/** Settings of `app.schedule()`: a name, exactly one of `cron` or `every`, and `run`. */
export interface JobOptions {
  /** Unique in the App; a metrics label and the key of a claimed tick. Letters, digits, `.`, `_`, `-`. */
  name: string;
  /** A cron pattern (5 fields, or 6 with seconds first), parsed by croner: `"0 3 * * *"`. */
  cron?: string;
  /** Time zone of `cron` (IANA name). Default: the process's. */
  timezone?: string;
  /** Milliseconds between ticks, aligned to the epoch (every 60000: at each full minute). */
  every?: number;
  /** `"one"` (default): each tick on one worker of the supervisor; `"each"`: on every worker. */
  runOn?: JobRunOn;
  /** Makes `runOn: "one"` once per deployment: the tick runs where this store's claim succeeds. */
  store?: JobStore;
  run(ctx: JobContext): void | Promise<void>;
}

/** A validated job. */
export interface Job extends Readonly<Omit<JobOptions, "runOn">> {
  readonly runOn: JobRunOn;
  /** The first tick strictly after `after`. */
  nextTick(after: Date): Date;
}

/** What a worker tells the primary about a `runOn: "one"` job, so the primary can run its clock. */
export interface JobSpec {
  name: string;
  cron?: string;
  timezone?: string;
  every?: number;
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

let Cron: typeof CronClass | undefined;

/** croner, loaded at the first cron job: an App (or a supervisor) without one never loads it. */
function loadCron(): typeof CronClass {
  Cron ??= (createRequire(import.meta.url)("croner") as { Cron: typeof CronClass }).Cron;
  return Cron;
}

/** The first tick of `spec` strictly after `after`; throws on a pattern croner rejects. */
export function tickClock(spec: JobSpec): (after: Date) => Date {
  const { every, cron } = spec;
  if (every !== undefined) return (after) => new Date((Math.floor(after.getTime() / every) + 1) * every);
  // paused: croner only computes dates here; keelson's own clock decides when to run.
  const pattern = new (loadCron())(cron ?? "", { paused: true, timezone: spec.timezone });
  return (after) => {
    const next = pattern.nextRun(after);
    if (next === null) throw new Error(`cron pattern "${cron}" has no next run`);
    return next;
  };
}

/**
 * Validates job options; misuse throws at once (at `app.schedule()`), never at the first tick.
 *
 * @example
 * const job = defineJob({ name: "cleanup", cron: "0 3 * * *", run: ({ signal }) => purgeExpired(signal) });
 * app.schedule(job);
 */
export function defineJob(options: JobOptions): Job {
  const { name, cron, every, timezone, run, store } = options;
  const runOn = options.runOn ?? "one";
  if (typeof name !== "string" || !NAME.test(name)) {
    throw new Error(`job name must be 1-100 letters, digits, ".", "_" or "-", starting with a letter or digit; got ${JSON.stringify(name)}`);
  }
  if (typeof run !== "function") throw new Error(`job ${name}: run must be a function`);
  if ((cron === undefined) === (every === undefined)) throw new Error(`job ${name}: give exactly one of cron or every`);
  if (every !== undefined && !(Number.isSafeInteger(every) && every >= 1000)) {
    throw new Error(`job ${name}: every must be a whole number of milliseconds, at least 1000; got ${String(every)}`);
  }
  if (runOn !== "one" && runOn !== "each") throw new Error(`job ${name}: runOn must be "one" or "each"; got ${JSON.stringify(runOn)}`);
  if (store !== undefined && runOn !== "one") throw new Error(`job ${name}: a store decides which instance runs a tick, so it needs runOn "one"`);
  if (store !== undefined && typeof store.claim !== "function") throw new Error(`job ${name}: store must have a claim() method`);
  let nextTick: (after: Date) => Date;
  try {
    nextTick = tickClock({ name, cron, every, timezone });
    nextTick(new Date());
  } catch (error) {
    throw new Error(`job ${name}: invalid cron pattern or timezone: ${(error as Error).message}`, { cause: error });
  }
  return Object.freeze({ ...options, runOn, nextTick });
}

/** The part of a job the primary needs to run its clock. */
export function jobSpec(job: Job): JobSpec {
  return { name: job.name, cron: job.cron, timezone: job.timezone, every: job.every };
}
