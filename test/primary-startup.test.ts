// The startup-failure rule in-process (fake fork, manual clock): a worker that ends before it is
// ready stops the supervisor at startup, and is a crash like any other once the service has been
// up. With real processes: test/supervisor-startup.test.ts.
import { afterEach, describe, expect, it } from "vitest";
import { fakeSupervisor, stopFakeSupervisors } from "./helpers/fake-cluster.js";

afterEach(stopFakeSupervisors);

describe("the startup-failure rule (in-process)", () => {
  it("a worker that dies before it is ready at startup stops the supervisor with exit 1 and its reason; nothing is restarted", async () => {
    const sup = fakeSupervisor({ workers: 2 }, { autoReady: false });
    const started = sup.supervisor.start();
    const rejected = started.then(() => "started", (error: Error) => error.message);
    await sup.clock.advance(0);
    const [one, two] = sup.cluster.forks;
    one?.ready();
    two?.app.send("failed", { reason: "cannot listen on port 3000: already in use (EADDRINUSE)" });
    await sup.clock.advance(0);
    two?.exit(1);
    const report = await sup.supervisor.finished;
    const reason = `startup failed: worker 2 (pid ${two?.pid}) exited (code 1) before it was ready: cannot listen on port 3000: already in use (EADDRINUSE)`;
    expect(report).toMatchObject({ reason, exitCode: 1 });
    expect(await rejected).toBe(`the supervisor stopped before all workers were ready: ${reason}`);
    expect(one?.signals).toEqual(["SIGTERM"]);
    await sup.clock.advance(60_000);
    expect(sup.cluster.forks).toHaveLength(2);
    expect(sup.output()).toMatch(/stopped in \d+ms with exit 1: startup failed: worker 2/);
  });

  it("a worker not ready within readyTimeout at startup is killed, and that is the startup failure", async () => {
    const sup = fakeSupervisor({ workers: 1, readyTimeout: 5000 }, { autoReady: false });
    const started = sup.supervisor.start().catch(() => {});
    await sup.clock.advance(4999);
    expect(sup.supervisor.stopping).toBe(false);
    await sup.clock.advance(1);
    await started;
    expect(await sup.supervisor.finished).toMatchObject({
      exitCode: 1, reason: expect.stringMatching(/^startup failed: worker 1 \(pid \d+\) exited \(signal SIGKILL, killed: not ready after 5000ms\) before it was ready$/),
    });
    expect(sup.cluster.forks).toHaveLength(1);
  });

  it("a stop during startup (SIGTERM before any worker listens) is clean: exit 0", async () => {
    const sup = fakeSupervisor({ workers: 2 }, { autoReady: false });
    const started = sup.supervisor.start().then(() => "started", (error: Error) => error.message);
    await sup.clock.advance(0);
    for (const worker of sup.cluster.forks) worker.onSignal = (signal) => queueMicrotask(() => worker.exit(null, signal));
    const report = await sup.stop();
    expect(report).toMatchObject({ reason: "stop()", exitCode: 0, workers: [{ clean: true }, { clean: true }] });
    expect(await started).toBe("the supervisor stopped before all workers were ready: stop()");
  });

  it("once the service has been up, a restarted worker that dies before it is ready is a crash: backoff, the other worker serves", async () => {
    const sup = fakeSupervisor({ workers: 2, backoff: { initial: 100 } });
    await sup.start();
    sup.cluster.autoReady = false;
    sup.cluster.slot(1).exit(1);
    await sup.clock.advance(100);
    const restarted = sup.cluster.slot(1);
    restarted.app.send("failed", { reason: "boom" });
    await sup.clock.advance(0);
    restarted.exit(1);
    await sup.clock.advance(0);
    expect(sup.supervisor.stopping).toBe(false);
    expect(sup.output()).toMatch(new RegExp(`worker 1 \\(pid ${restarted.pid}\\) died unexpectedly \\(code 1\\) before it was ready: boom; restarting in 200ms`));
    expect(sup.supervisor.workers.map((worker) => [worker.id, worker.state])).toEqual([[2, "ready"]]);
    sup.cluster.autoReady = true;
    await sup.clock.advance(200);
    expect(sup.supervisor.workers.map((worker) => worker.id).toSorted()).toEqual([1, 2]);
  });
});
