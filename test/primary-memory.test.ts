// The memory limit's decisions in-process (fake fork, manual clock): over the limit for the whole
// window replaces the worker like a reload does, a spike does not, and a replacement asked for
// during a reload waits for it. With a real leaking worker: test/supervisor-memory.test.ts.
import { afterEach, describe, expect, it } from "vitest";
import { workerStatsMessage, type WorkerStats } from "../src/cluster/worker-stats.js";
import { fakeSupervisor, stopFakeSupervisors, type FakeWorkerProcess } from "./helpers/fake-cluster.js";

afterEach(stopFakeSupervisors);

const MB = 1024 ** 2;

function report(worker: FakeWorkerProcess | undefined, rss: number): void {
  const stats: WorkerStats = { rss, heapUsed: 0, elu: 0, delayMeanMs: 0, delayP99Ms: 0, inflight: 0, requests: 0, connections: 0 };
  worker?.app.send(workerStatsMessage, stats);
}

describe("the memory limit (in-process)", () => {
  it("replaces a worker whose RSS stays over the limit for the window, ready replacement first; the other slot is left alone", async () => {
    const sup = fakeSupervisor({ workers: 2, maxMemory: "100M", maxMemoryWindow: 3000 });
    await sup.start();
    const [one, two] = sup.cluster.forks;
    report(one, 150 * MB);
    report(two, 50 * MB);
    await sup.clock.advance(2999);
    report(one, 160 * MB);
    await sup.clock.advance(0);
    expect(sup.cluster.forks).toHaveLength(2);
    await sup.clock.advance(1);
    report(one, 170 * MB);
    await sup.clock.advance(0);
    expect(sup.cluster.forks).toHaveLength(3);
    expect(sup.cluster.slot(1)).not.toBe(one);
    expect(one?.signals).toEqual(["SIGTERM"]);
    expect(two?.signals).toEqual([]);
    const output = sup.output();
    expect(output).toMatch(/worker 1 \(pid \d+\): RSS 150 MB over the limit of 100 MB: replacing it if it stays over for 3000ms/);
    expect(output).toMatch(/worker 1 \(pid \d+\): RSS 170 MB over the limit of 100 MB for 3000ms: replacing it/);
    expect(output).toMatch(/memory-limit restart complete: 1 worker\(s\) replaced in 0ms/);
    // Asked once: more reports from the old worker while it drains ask nothing more.
    expect(output.match(/: replacing it$/gm)).toHaveLength(1);
  });

  it("a spike that falls back under the limit starts the window over", async () => {
    const sup = fakeSupervisor({ workers: 1, maxMemory: 100 * MB, maxMemoryWindow: 3000 });
    await sup.start();
    const one = sup.cluster.slot(1);
    report(one, 150 * MB);
    await sup.clock.advance(2000);
    report(one, 90 * MB);
    await sup.clock.advance(1000);
    report(one, 150 * MB);
    await sup.clock.advance(2999);
    report(one, 150 * MB);
    await sup.clock.advance(0);
    expect(sup.cluster.forks).toHaveLength(1);
    await sup.clock.advance(1);
    report(one, 150 * MB);
    await sup.clock.advance(0);
    expect(sup.cluster.forks).toHaveLength(2);
  });

  it("a worker over the limit during a reload that stops early is replaced at its next report after the reload", async () => {
    const sup = fakeSupervisor({ workers: 2, maxMemory: 100 * MB, maxMemoryWindow: 1000 });
    await sup.start();
    const two = sup.cluster.slot(2);
    sup.cluster.autoReady = false;
    const reloading = sup.supervisor.reload();
    await sup.clock.advance(0);
    report(two, 150 * MB);
    await sup.clock.advance(1000);
    report(two, 150 * MB);
    await sup.clock.advance(0);
    // The reload owns the one replacement allowed at a time: nothing forked for slot 2.
    expect(sup.cluster.forks.filter((worker) => worker.slot === 2)).toHaveLength(1);
    sup.cluster.slot(1).exit(1);
    expect(await reloading).toMatchObject({ ok: false });
    sup.cluster.autoReady = true;
    report(two, 150 * MB);
    await sup.clock.advance(0);
    expect(sup.cluster.forks.filter((worker) => worker.slot === 2)).toHaveLength(2);
    expect(two.signals).toEqual(["SIGTERM"]);
    expect(sup.output()).toMatch(/memory-limit restart: replacing 1 worker\(s\) one at a time/);
  });

  it("a worker still starting is not judged, and without maxMemory nothing is", async () => {
    const sup = fakeSupervisor({ workers: 1, maxMemory: 100 * MB, maxMemoryWindow: 0 }, { autoReady: false });
    const started = sup.supervisor.start();
    await sup.clock.advance(0);
    report(sup.cluster.slot(1), 500 * MB);
    await sup.clock.advance(10);
    sup.cluster.slot(1).ready();
    await started;
    expect(sup.output()).not.toMatch(/over the limit/);
    await sup.stop();

    const free = fakeSupervisor({ workers: 1 });
    await free.start();
    report(free.cluster.slot(1), 50_000 * MB);
    await free.clock.advance(60_000);
    report(free.cluster.slot(1), 50_000 * MB);
    await free.clock.advance(0);
    expect(free.cluster.forks).toHaveLength(1);
  });
});
