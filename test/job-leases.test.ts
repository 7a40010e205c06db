// Leases of job ticks in one process, on a fake clock: the scheduler renews a running tick's lease,
// aborts the run when it cannot, finishes the tick at the end, and takes over a tick whose lease ran
// out elsewhere. The stores themselves (SQLite, PostgreSQL) pass the same contract in jobs-store-sql.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { defineJob, type JobContext, type JobLeases, type JobStore } from "../src/index.js";
import { JobScheduler } from "../src/jobs/scheduler.js";
import { describeJobStoreContract, MemoryJobStore } from "./helpers/job-store.js";
import { captureLogs } from "./helpers/logs.js";

const MINUTE = 60_000;
/** One second before a full minute: the job (every minute) ticks at START + 1000. */
const START = Date.UTC(2026, 10, 24, 12, 0, 59);
const TICK = START + 1000;

beforeEach(() => {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval", "Date", "performance"], now: START });
});
afterEach(() => {
  vi.useRealTimers();
});

interface Pod {
  scheduler: JobScheduler;
  lines: () => string[];
  /** When each run started and ended (fake ms), with how it ended. */
  runs: Array<{ at: number; started: number; ended?: number; how?: string }>;
}

/** A scheduler (one pod's worth of jobs) with a job every minute whose run `work` decides. */
function pod(store: JobStore, work: (ctx: JobContext) => Promise<void>): Pod {
  const logs = captureLogs();
  const scheduler = new JobScheduler({ logger: logs.logger, metrics: () => undefined });
  const runs: Pod["runs"] = [];
  scheduler.add(defineJob({
    name: "report", every: MINUTE, store,
    async run(ctx) {
      const run: Pod["runs"][number] = { at: ctx.scheduledAt.getTime(), started: Date.now() };
      runs.push(run);
      try {
        await work(ctx);
        run.how = "done";
      } catch (error) {
        run.how = ctx.signal.aborted ? "aborted" : "failed";
        throw error;
      } finally {
        run.ended = Date.now();
      }
    },
  }));
  scheduler.start();
  return { scheduler, lines: logs.lines, runs };
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
/** Runs until its signal aborts (as a job should), then throws the reason. */
const untilAborted = ({ signal }: JobContext) => new Promise<void>((_, reject) => signal.addEventListener("abort", () => reject(signal.reason as Error), { once: true }));
const stop = (p: Pod) => p.scheduler.stop(AbortSignal.abort());

describe("a job with a store runs each tick under a lease", () => {
  it("a run three leases long keeps its lease: renewed every quarter, finished at the end", async () => {
    const store = new MemoryJobStore(4000);
    const a = pod(store, () => sleep(12_000));
    await vi.advanceTimersByTimeAsync(1000 + 12_500);
    expect(a.runs).toEqual([{ at: TICK, started: TICK, ended: TICK + 12_000, how: "done" }]);
    const mine = store.calls.filter((call) => call !== "unfinished -");
    expect(mine[0]).toMatch(/^claim /);
    expect(mine.filter((call) => call.startsWith("renew ")).length).toBe(12);
    expect(mine.at(-1)).toMatch(/^finish /);
    expect(new Set(mine.map((call) => call.split(" ")[1])).size).toBe(1);
    expect([...store.rows.values()][0]?.finished).toBe(true);
    await stop(a);
  });

  it("a store that cannot be reached: the run is aborted before its lease could run out, and not finished", async () => {
    const store = new MemoryJobStore(4000);
    const a = pod(store, untilAborted);
    await vi.advanceTimersByTimeAsync(1000);
    expect(a.runs).toHaveLength(1);
    store.down = true;
    await vi.advanceTimersByTimeAsync(5000);
    const [run] = a.runs;
    expect(run?.how).toBe("aborted");
    // Three quarters of the lease after the claim: a quarter is left for the run to stop.
    expect(run!.ended! - TICK).toBe(3000);
    expect(store.calls.filter((call) => call.startsWith("finish"))).toEqual([]);
    expect(a.lines().join("\n")).toMatch(/job report: tick 2026-11-24T12:01:00.000Z: its lease could not be kept \(no renewal succeeded for 3000ms\): the run is aborted/);
    expect(a.lines().join("\n")).toMatch(/job report aborted: its lease was lost after 3000ms/);
    await stop(a);
  });

  it("a renewal that hangs does not hold the next ones back; one that answers in time keeps the run", async () => {
    const store = new MemoryJobStore(4000);
    const renew = store.renew.bind(store);
    let hang = true;
    store.renew = (...args) => (hang ? (hang = false, new Promise<boolean>(() => {})) : renew(...args));
    const a = pod(store, () => sleep(6000));
    await vi.advanceTimersByTimeAsync(8000);
    expect(a.runs[0]?.how).toBe("done");
    await stop(a);
  });

  it("the store says the lease is someone else's: the run is aborted at the next beat", async () => {
    const store = new MemoryJobStore(4000);
    const a = pod(store, untilAborted);
    await vi.advanceTimersByTimeAsync(1000);
    for (const row of store.rows.values()) row.owner = "thief";
    await vi.advanceTimersByTimeAsync(1000);
    expect(a.runs[0]).toMatchObject({ how: "aborted", ended: TICK + 1000 });
    expect(a.lines().join("\n")).toMatch(/another instance holds it, or it is finished/);
    await stop(a);
  });

  it("a failed run is finished too (not retried elsewhere); an aborted one is left to its lease", async () => {
    const store = new MemoryJobStore(4000);
    const a = pod(store, () => Promise.reject(new Error("boom")));
    await vi.advanceTimersByTimeAsync(1000);
    expect(a.runs[0]?.how).toBe("failed");
    expect([...store.rows.values()][0]?.finished).toBe(true);
    await stop(a);
  });
});

describe("two pods on one store", () => {
  it("only one runs the tick; when its runner stops renewing (a dead pod), the other takes it over once the lease ran out, never before", async () => {
    const store: JobStore = new MemoryJobStore(4000);
    // Pod A's connection to the store goes dead mid-run: nothing it sends arrives any more.
    let cut = false;
    const viaA: JobStore = {
      leaseMs: store.leaseMs,
      claim: (...args) => (cut ? new Promise(() => {}) : store.claim(...args)),
      renew: (...args) => (cut ? new Promise(() => {}) : store.renew(...args)),
      finish: (...args) => (cut ? new Promise(() => {}) : store.finish(...args)),
      unfinished: (...args): Promise<JobLeases> => (cut ? new Promise(() => {}) : store.unfinished(...args)),
    };
    const a = pod(viaA, untilAborted);
    await vi.advanceTimersByTimeAsync(500);
    const b = pod(store, () => sleep(100));
    await vi.advanceTimersByTimeAsync(500);
    expect(a.runs.map((run) => run.at)).toEqual([TICK]);
    expect(b.runs).toEqual([]);
    expect(b.lines().join("\n")).toMatch(/tick 2026-11-24T12:01:00.000Z is claimed by another instance: not run here/);
    await vi.advanceTimersByTimeAsync(2000);
    cut = true;
    // A's last renewal was at +2 s: its lease runs out at +6 s; A aborts its run at +5 s.
    await vi.advanceTimersByTimeAsync(6000);
    expect(a.runs[0]).toMatchObject({ how: "aborted", ended: TICK + 5000 });
    expect(b.runs).toHaveLength(1);
    const [taken] = b.runs;
    expect(taken?.at).toBe(TICK);
    expect(taken!.started).toBeGreaterThanOrEqual(TICK + 6000);
    expect(taken!.started).toBeLessThanOrEqual(TICK + 6000 + 500);
    expect(b.lines().join("\n")).toMatch(/job report: tick 2026-11-24T12:01:00.000Z: its lease ran out before its run finished: it runs here/);
    expect([...(store as MemoryJobStore).rows.values()][0]).toMatchObject({ finished: true });
    await Promise.all([stop(a), stop(b)]);
  });

  it("a pod that started after a tick was leased (and its runner died) finds it at its own next tick", async () => {
    const store = new MemoryJobStore(4000);
    // The previous minute's tick, claimed by a pod that is gone: its lease runs out at TICK + 3 s.
    await store.claim("report", new Date(TICK - MINUTE), "a-dead-pod");
    const late = pod(store, () => sleep(100));
    await vi.advanceTimersByTimeAsync(1000);
    expect(late.runs.map((run) => run.at)).toEqual([TICK]);
    await vi.advanceTimersByTimeAsync(2900);
    expect(late.runs).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(500);
    expect(late.runs.map((run) => [run.at, run.started])).toEqual([[TICK, TICK], [TICK - MINUTE, TICK + 3250]]);
    expect([...store.rows.values()].every((row) => row.finished)).toBe(true);
    await stop(late);
  });
});

describeJobStoreContract("memory (the test double)", async () => {
  vi.useRealTimers();
  const store = new MemoryJobStore(1000);
  return [store, store];
});
