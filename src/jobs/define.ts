import type { Cron as CronClass } from "croner";
import type { RequestLogger } from "../logging/request-logger.js";
import { lazyPackage } from "../lazy-package.js";
import { errorMessage } from "../errors.js";

/** Where a job runs under the supervisor: on one worker per tick, or on every worker. */
export type JobRunOn = "one" | "each";

/** What a job's `run` gets for one tick. */
export interface JobContext {
  /** The job's name. */
  readonly name: string;
  /** The time this tick was due: the tick's identity (the same on every worker and every pod). */
  readonly scheduledAt: Date;
  /**
   * Aborts when the App's shutdown budget runs out while the run is still going, or (a job with
   * a `store`) when the tick's lease could not be renewed: stop there, another pod may run the tick.
   */
  readonly signal: AbortSignal;
  /**
   * Logs for this run: every line carries `job` (the name) and `tick` (`scheduledAt`, ISO 8601), in
   * text and JSON, at the App logger's level. Its `error()` writes the line and returns; it **never
   * exits the process**, unlike the App's `Logger.error()`. The same kind of logger as a handler's
   * `ctx.logger`, `child()` included.
   *
   * @example
   * app.schedule({ name: "sync", every: 60_000, async run({ logger }) {
   *   logger.error("sync failed: %s", "upstream down"); // logged with job=sync tick=…; the worker goes on
   * } });
   */
  readonly logger: RequestLogger;
}

/**
 * A store shared by several supervisors (pods) that grants each tick of a `runOn: "one"` job as a
 * **lease**: the first `claim` of `(job, scheduledAt)` wins it for `leaseMs`, the runner renews
 * it while the run lasts and marks it finished at the end. A lease that runs out before its tick
 * is finished (the pod died, or lost the database) can be claimed again by anyone: so a tick
 * runs to its end once, and is re-run when its runner disappears. Times are the store's own
 * clock (the database's), never the callers'. keelson/sql's `createSQLJobStore(db)` is one.
 */
export interface JobStore {
  /** How long a claim or a renewal holds the tick, ms (the scheduler renews at a quarter of it). */
  readonly leaseMs: number;
  /**
   * Takes the tick for `owner` if nobody holds it: never claimed, or claimed and its lease ran
   * out before it was finished. False when it is finished or another lease is still live.
   */
  claim(job: string, scheduledAt: Date, owner: string, signal: AbortSignal): Promise<boolean>;
  /** Extends `owner`'s lease by `leaseMs` from now; false when it is no longer `owner`'s (taken over, or finished). */
  renew(job: string, scheduledAt: Date, owner: string, signal: AbortSignal): Promise<boolean>;
  /** Marks the tick finished (it is never claimed again); false when the lease was no longer `owner`'s. */
  finish(job: string, scheduledAt: Date, owner: string, signal: AbortSignal): Promise<boolean>;
  /**
   * The unfinished ticks of `job`: those whose lease ran out (`expired`, oldest first, a few at a
   * time) and, when other leases are live, the milliseconds until the first of them runs out.
   */
  unfinished(job: string, signal: AbortSignal): Promise<JobLeases>;
}

/** What `JobStore.unfinished()` reports. */
export interface JobLeases {
  /** Ticks whose lease ran out before they were finished: free to claim. */
  readonly expired: readonly Date[];
  /** Milliseconds until the next live lease runs out, if there is one. */
  readonly nextExpiryMs?: number;
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
  /** Makes `runOn: "one"` once per deployment: the tick runs where this store's lease is granted, and again elsewhere if its runner dies. */
  store?: JobStore;
  /**
   * Under the supervisor (`runOn: "one"`): how many times a tick runs again on another worker
   * after its worker died during the run (a crash, an out-of-memory kill, the watchdog). Past
   * that the tick is recorded failed and not run again. A whole number from 0 to 10; default 1
   * (like BullMQ's `maxStalledCount`). A job's crashes never count toward the crash-loop breaker.
   */
  crashRetries?: number;
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
  /** See `JobOptions.crashRetries`; absent from workers of an older version: the default. */
  crashRetries?: number;
}

/** `JobOptions.crashRetries` when not given. */
export const DEFAULT_CRASH_RETRIES = 1;
const MAX_CRASH_RETRIES = 10;

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

/** croner, loaded at the first cron job: an App (or a supervisor) without one never loads it. */
const croner = lazyPackage<{ Cron: typeof CronClass }>("croner");
const loadCron = (): typeof CronClass => croner().Cron;

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
  if (store !== undefined) checkStore(name, store);
  const { crashRetries } = options;
  if (crashRetries !== undefined && !(Number.isInteger(crashRetries) && crashRetries >= 0 && crashRetries <= MAX_CRASH_RETRIES)) {
    throw new Error(`job ${name}: crashRetries must be a whole number from 0 to ${MAX_CRASH_RETRIES}; got ${String(crashRetries)}`);
  }
  let nextTick: (after: Date) => Date;
  try {
    nextTick = tickClock({ name, cron, every, timezone });
    nextTick(new Date());
  } catch (error) {
    throw new Error(`job ${name}: invalid cron pattern or timezone: ${errorMessage(error)}`, { cause: error });
  }
  return Object.freeze({ ...options, runOn, nextTick });
}

const STORE_METHODS = ["claim", "renew", "finish", "unfinished"] as const;

function checkStore(name: string, store: JobStore): void {
  const missing = STORE_METHODS.filter((method) => typeof (store as unknown as Record<string, unknown>)[method] !== "function");
  if (missing.length > 0) throw new Error(`job ${name}: store must have ${STORE_METHODS.join(", ")} methods (a JobStore); missing ${missing.join(", ")}`);
  if (!Number.isInteger(store.leaseMs) || store.leaseMs < 1000) {
    throw new Error(`job ${name}: store.leaseMs must be a whole number of milliseconds, at least 1000; got ${String(store.leaseMs)}`);
  }
}

/** The part of a job the primary needs to run its clock. */
export function jobSpec(job: Job): JobSpec {
  return { name: job.name, cron: job.cron, timezone: job.timezone, every: job.every, crashRetries: job.crashRetries ?? DEFAULT_CRASH_RETRIES };
}
