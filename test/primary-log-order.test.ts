// The primary's lines about a worker that says it drains, in-process (fake fork, manual clock): the
// worker's word waits for the primary's own decision about the same signal. The same with real
// processes and a process-group SIGTERM: test/supervisor-log-order.test.ts.
import { afterEach, describe, expect, it } from "vitest";
import { fakeSupervisor, settle, stopFakeSupervisors } from "./helpers/fake-cluster.js";

afterEach(stopFakeSupervisors);

describe("a worker's own word that it drains", () => {
  it("waits for the primary's stop: 'stopping' first, then the worker's line with the primary's cause", async () => {
    const sup = fakeSupervisor({ workers: 2 });
    await sup.start();
    sup.cluster.slot(1).app.send("draining", { reason: "SIGTERM" });
    await settle();
    expect(sup.output()).not.toMatch(/draining/);
    // The worker is draining at once all the same: no new work is given to it meanwhile.
    expect(sup.supervisor.workers.map((worker) => worker.state)).toEqual(["draining", "ready"]);
    await sup.stop();
    const lines = sup.logs.lines();
    const stopping = lines.findIndex((line) => line.includes("stopping (stop()): draining 2 worker(s)"));
    const first = lines.findIndex((line) => line.includes("worker 1 (pid 1001) draining (stop())"));
    expect([stopping >= 0, first > stopping], sup.output()).toEqual([true, true]);
    expect(sup.output()).not.toMatch(/by its own decision/);
  });

  it("alone, it is the worker's own decision, logged once the wait is over", async () => {
    const sup = fakeSupervisor({ workers: 1 });
    await sup.start();
    sup.cluster.slot(1).app.send("draining", { reason: "SIGTERM" });
    await settle();
    await sup.clock.advance(249);
    expect(sup.output()).not.toMatch(/draining/);
    await sup.clock.advance(1);
    expect(sup.logs.lines().filter((line) => line.includes("draining"))).toEqual([expect.stringMatching(/worker 1 \(pid 1001\) draining \(SIGTERM, by its own decision\)$/)]);
  });

  it("an exit before the wait is over still logs it, before the exit", async () => {
    const sup = fakeSupervisor({ workers: 1 });
    await sup.start();
    const worker = sup.cluster.slot(1);
    worker.app.send("draining", { reason: "SIGTERM" });
    await settle();
    worker.exit(0);
    await sup.clock.advance(0);
    const lines = sup.logs.lines();
    const draining = lines.findIndex((line) => line.endsWith("worker 1 (pid 1001) draining (SIGTERM, by its own decision)"));
    const exited = lines.findIndex((line) => /worker 1 \(pid 1001\) (exited|died)/.test(line));
    expect([draining >= 0, exited > draining], sup.output()).toEqual([true, true]);
  });
});
