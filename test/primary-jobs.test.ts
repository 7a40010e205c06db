// Job dispatch (src/jobs/primary.ts) in-process: the dispatcher installed through the feature
// list on a Supervisor with a fake fork, and job clocks whose ticks the test fires. With real
// workers and real clocks: test/jobs-cluster.test.ts.
import { afterEach, describe, expect, it } from "vitest";
import type { JobSpec } from "../src/jobs/define.js";
import { jobsDone, jobsRegister, jobsRun } from "../src/jobs/ipc.js";
import { installJobs, type StartJobClock } from "../src/jobs/primary.js";
import { fakeSupervisor, settle, stopFakeSupervisors, type FakeSupervisor, type FakeWorkerProcess } from "./helpers/fake-cluster.js";

afterEach(stopFakeSupervisors);

/** Job clocks started by the dispatcher; the test fires their ticks. */
class ManualTicks {
  readonly clocks: Array<{ nextTick: (after: Date) => Date; onTick: (at: Date) => void; stopped: boolean }> = [];
  readonly start: StartJobClock = (nextTick, onTick) => {
    const clock = { nextTick, onTick, stopped: false };
    this.clocks.push(clock);
    return { stop: () => (clock.stopped = true) };
  };

  /** Fires tick `at` (epoch ms) of the newest clock, as its timer would; a stopped clock fires nothing. */
  async fire(at: number): Promise<void> {
    const clock = this.clocks.at(-1);
    if (clock !== undefined && !clock.stopped) clock.onTick(new Date(at));
    await settle();
  }
}

type Run = { job: string; scheduledAt: number };

/** A supervisor with job dispatch only; each worker registers `specs` and records the runs it is given. */
async function jobsSupervisor(workers: number, specs: JobSpec[] = [{ name: "sweep", every: 60_000 }]) {
  const ticks = new ManualTicks();
  const sup = fakeSupervisor({ workers }, { features: [(host) => installJobs(host, ticks.start)] });
  const runs = new Map<FakeWorkerProcess, Run[]>();
  const join = (worker: FakeWorkerProcess) => {
    const list: Run[] = [];
    runs.set(worker, list);
    worker.app.on(jobsRun, (run) => list.push(run));
    worker.app.send(jobsRegister, { jobs: specs });
  };
  await sup.start();
  for (const worker of sup.cluster.forks) join(worker);
  await settle();
  return { sup, ticks, runs, join, ran: (worker: FakeWorkerProcess | undefined) => (worker === undefined ? [] : runs.get(worker) ?? []).map((run) => run.scheduledAt) };
}

function done(worker: FakeWorkerProcess | undefined, scheduledAt: number, refused = false) {
  return worker?.app.request(jobsDone, { job: "sweep", scheduledAt, refused }, 1000);
}

function workersOf(sup: FakeSupervisor) {
  return sup.cluster.forks;
}

describe("job dispatch in the primary (in-process)", () => {
  it("hands each tick to exactly one ready worker, one run at a time, in turn", async () => {
    const { sup, ticks, ran } = await jobsSupervisor(2);
    const [one, two] = workersOf(sup);
    expect(ticks.clocks).toHaveLength(1);
    await ticks.fire(1000);
    expect([ran(one), ran(two)]).toEqual([[1000], []]);
    // The next tick waits for the run in progress.
    await ticks.fire(2000);
    expect([ran(one), ran(two)]).toEqual([[1000], []]);
    await done(one, 1000);
    await settle();
    expect([ran(one), ran(two)]).toEqual([[1000], [2000]]);
    await done(two, 2000);
    await ticks.fire(3000);
    expect([ran(one), ran(two)]).toEqual([[1000, 3000], [2000]]);
  });

  it("a worker that dies during a run gives its tick back: it runs again, with its own time, on another worker", async () => {
    const { sup, ticks, ran } = await jobsSupervisor(2);
    const [one, two] = workersOf(sup);
    await ticks.fire(1000);
    expect(ran(one)).toEqual([1000]);
    one?.exit(null, "SIGKILL");
    await sup.clock.advance(0);
    expect(ran(two)).toEqual([1000]);
    expect(sup.output()).toMatch(/job sweep: worker 1 \(pid \d+\) exited during the run of tick 1970-01-01T00:00:01\.000Z: it runs again on another worker/);
    // A late report from the dead worker changes nothing.
    await done(two, 1000);
    await ticks.fire(2000);
    expect(ran(two)).toEqual([1000, 2000]);
  });

  it("a tick whose only worker dies mid-run waits for the restarted worker to be ready and register", async () => {
    const { sup, ticks, ran, join } = await jobsSupervisor(1);
    const first = sup.cluster.slot(1);
    await ticks.fire(1000);
    first.exit(1);
    await sup.clock.advance(0);
    expect(sup.cluster.forks).toHaveLength(1);
    await sup.clock.advance(100);
    const restarted = sup.cluster.slot(1);
    expect(restarted).not.toBe(first);
    join(restarted);
    await settle();
    expect(ran(restarted)).toEqual([1000]);
  });

  it("a worker that refuses a tick (its jobs stopped) gets no more; the tick goes to another worker", async () => {
    const { sup, ticks, ran } = await jobsSupervisor(2);
    const [one, two] = workersOf(sup);
    await ticks.fire(1000);
    await done(one, 1000, true);
    await settle();
    expect(ran(two)).toEqual([1000]);
    await done(two, 1000);
    await ticks.fire(2000);
    await done(two, 2000);
    await ticks.fire(3000);
    expect([ran(one), ran(two)]).toEqual([[1000], [1000, 2000, 3000]]);
  });

  it("a draining worker finishes its run but gets no new tick", async () => {
    const { sup, ticks, ran } = await jobsSupervisor(2);
    const [one, two] = workersOf(sup);
    await ticks.fire(1000);
    one?.app.send("draining", { reason: "SIGTERM" });
    await done(one, 1000);
    await ticks.fire(2000);
    await done(two, 2000);
    await ticks.fire(3000);
    expect([ran(one), ran(two)]).toEqual([[1000], [2000, 3000]]);
  });

  it("at most ten ticks wait behind a slow run; an older one is skipped with a warning", async () => {
    const { sup, ticks, ran } = await jobsSupervisor(1);
    const one = sup.cluster.slot(1);
    for (let tick = 1; tick <= 12; tick++) await ticks.fire(tick * 1000);
    expect(sup.output()).toMatch(/job sweep: tick 1970-01-01T00:00:02\.000Z skipped: 10 later ticks wait for the run in progress/);
    await done(one, 1000);
    await settle();
    expect(ran(one)).toEqual([1000, 3000]);
  });

  it("stopping stops every job clock before the workers drain; a changed schedule restarts the clock", async () => {
    const { sup, ticks } = await jobsSupervisor(1);
    expect(ticks.clocks).toHaveLength(1);
    sup.cluster.slot(1).app.send(jobsRegister, { jobs: [{ name: "sweep", every: 5000 }] });
    await settle();
    expect(ticks.clocks.map((clock) => clock.stopped)).toEqual([true, false]);
    expect(sup.output()).toMatch(/job sweep: its schedule changed: the clock restarts/);
    const worker = sup.cluster.slot(1);
    worker.onSignal = () => {};
    const stopped = sup.supervisor.stop();
    await settle();
    expect(ticks.clocks.map((clock) => clock.stopped)).toEqual([true, true]);
    expect(worker.signals).toEqual(["SIGTERM"]);
    worker.exit(0);
    await stopped;
  });
});
