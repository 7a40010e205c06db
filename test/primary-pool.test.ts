// The worker pool's decisions in-process (fake fork, manual clock): forking into slots, restarts
// with backoff, the crash-loop breaker, the ready timeout, the watchdog and the stop. The same
// behaviour with real processes: test/supervisor.test.ts, supervisor-crash.test.ts.
import { isAbsolute } from "node:path";
import { PassThrough } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { fakeSupervisor, stopFakeSupervisors } from "./helpers/fake-cluster.js";

afterEach(stopFakeSupervisors);

/** Gives every worker the supervisor forks an stdout pipe the test closes (by pid). */
function outputPipes(sup: ReturnType<typeof fakeSupervisor>): Map<number, PassThrough> {
  const pipes = new Map<number, PassThrough>();
  sup.cluster.onFork = (worker) => {
    const pipe = new PassThrough();
    pipes.set(worker.pid, pipe);
    worker.stdout = pipe;
  };
  return pipes;
}

describe("the worker pool (in-process)", () => {
  it("forks one worker per slot with its id, port and heartbeat period, and starts once every worker is ready", async () => {
    const sup = fakeSupervisor({ workers: 3, port: 8080, heartbeatInterval: 500, env: { EXTRA: "1" } }, { autoReady: false });
    let started = false;
    void sup.supervisor.start().then(() => (started = true));
    await sup.clock.advance(0);
    expect(sup.cluster.forks.map((worker) => worker.env)).toEqual([1, 2, 3].map((id) => ({
      EXTRA: "1", PORT: "8080", KEELSON_WORKER_ID: String(id), KEELSON_LOG_FDS: "4,5", KEELSON_HEARTBEAT_INTERVAL: "500",
      KEELSON_BALANCER: "round-robin",
    })));
    const settings = sup.cluster.settings;
    expect(isAbsolute(String(settings?.exec))).toBe(true);
    expect(settings?.execArgv?.at(-1)).toMatch(/^--import=file:.*worker-preload\.(ts|js)$/);
    expect(settings?.stdio).toEqual(["inherit", "pipe", "pipe", "ipc", 1, 2]);
    sup.cluster.slot(1).ready();
    sup.cluster.slot(2).ready();
    await sup.clock.advance(0);
    expect(started).toBe(false);
    expect(sup.supervisor.workers.map((worker) => worker.state)).toEqual(["ready", "ready", "starting"]);
    sup.cluster.slot(3).ready();
    await sup.clock.advance(0);
    expect(started).toBe(true);
    expect(sup.output()).toMatch(/3 worker\(s\) ready in 0ms: http:\/\/127\.0\.0\.1:8080/);
  });

  it("restarts a crashed worker after its backoff, doubling up to the max, back to the first delay after a stable uptime", async () => {
    const sup = fakeSupervisor({ workers: 1, backoff: { initial: 100, max: 400, resetAfter: 5000 } });
    await sup.start();
    const delays: number[] = [];
    // Each crash: the slot stays empty until its delay has passed, to the millisecond.
    const crashAndWait = async (expected: number) => {
      const before = sup.cluster.forks.length;
      sup.cluster.slot(1).exit(1);
      await sup.clock.advance(expected - 1);
      expect(sup.cluster.forks.length).toBe(before);
      await sup.clock.advance(1);
      expect(sup.cluster.forks.length).toBe(before + 1);
      delays.push(expected);
    };
    await crashAndWait(100);
    await crashAndWait(200);
    await crashAndWait(400);
    await crashAndWait(400);
    await sup.clock.advance(5000);
    await crashAndWait(100);
    expect(sup.output()).toMatch(/worker 1 \(pid \d+\) died unexpectedly \(code 1\) after 0ms up; restarting in 100ms \(crash 1 within 60000ms; giving up at 10\)/);
    expect(sup.output()).toMatch(/after 5000ms up; restarting in 100ms/);
    expect(sup.supervisor.status().workers).toMatchObject([{ id: 1, generation: 6, restarts: 5, state: "ready" }]);
    expect(sup.supervisor.stopping).toBe(false);
  });

  it("trips the crash-loop breaker at maxCrashes within the window (exit 1), not for crashes spread wider", async () => {
    const sup = fakeSupervisor({ workers: 1, backoff: { initial: 0, max: 0 }, crashLoop: { maxCrashes: 3, window: 1000 } });
    await sup.start();
    for (const gap of [0, 600, 600]) {
      await sup.clock.advance(gap);
      sup.cluster.slot(1).exit(1);
      await sup.clock.advance(0);
    }
    // Crashes at 0, 600 and 1200 ms: the first has left the window when the third happens.
    expect(sup.supervisor.stopping).toBe(false);
    expect(sup.supervisor.status().breaker).toMatchObject({ state: "closed", crashes: 2, maxCrashes: 3 });
    await sup.clock.advance(100);
    sup.cluster.slot(1).exit(1);
    await sup.clock.advance(0);
    expect(sup.supervisor.stopping).toBe(true);
    const report = await sup.supervisor.finished;
    expect(report).toMatchObject({ reason: "crash loop", exitCode: 1 });
    expect(sup.output()).toMatch(/crash loop: 3 worker crashes within 1000ms \(limit 3\), the last: worker 1 \(pid \d+\) exited \(code 1\) after 100ms up; giving up/);
    expect(sup.cluster.forks).toHaveLength(4);
  });

  it("kills a restarted worker that is not ready within readyTimeout, and counts it as a crash", async () => {
    const sup = fakeSupervisor({ workers: 1, readyTimeout: 3000, backoff: { initial: 50 } });
    await sup.start();
    sup.cluster.autoReady = false;
    sup.cluster.slot(1).exit(1);
    await sup.clock.advance(50);
    const stuck = sup.cluster.slot(1);
    await sup.clock.advance(2999);
    expect(stuck.signals).toEqual([]);
    await sup.clock.advance(1);
    expect(stuck.signals).toEqual(["SIGKILL"]);
    expect(sup.output()).toMatch(/worker 1 \(pid \d+\) died unexpectedly \(signal SIGKILL, killed: not ready after 3000ms\) before it was ready; restarting in 100ms \(crash 2/);
    sup.cluster.autoReady = true;
    await sup.clock.advance(100);
    expect(sup.supervisor.workers).toMatchObject([{ id: 1, state: "ready" }]);
  });

  it("the watchdog SIGKILLs a ready worker whose heartbeats stop, and the slot is restarted", async () => {
    const sup = fakeSupervisor({ workers: 2, heartbeatInterval: 1000, watchdogTimeout: 4000 });
    await sup.start();
    const [one, two] = sup.cluster.forks;
    // Worker 1 beats every second; worker 2 goes silent.
    for (let second = 0; second < 4; second++) {
      one?.app.send("heartbeat", { at: second });
      await sup.clock.advance(1000);
    }
    expect(two?.signals).toEqual([]);
    one?.app.send("heartbeat", { at: 4 });
    await sup.clock.advance(1000);
    expect(one?.signals).toEqual([]);
    expect(two?.signals).toEqual(["SIGKILL"]);
    expect(sup.output()).toMatch(/worker 2 \(pid \d+\): watchdog: no heartbeat for \d+ms \(limit 4000ms\), event loop blocked: sending SIGKILL/);
    await sup.clock.advance(100);
    expect(sup.cluster.slot(2)).not.toBe(two);
    expect(sup.supervisor.workers.map((worker) => worker.id).toSorted()).toEqual([1, 2]);
  });

  it("stops with one SIGTERM per worker, SIGKILLs one still running at its budget + margin, and exits 1 for it", async () => {
    const sup = fakeSupervisor({ workers: 2, killMargin: 500 });
    sup.cluster.autoReady = false;
    const started = sup.supervisor.start();
    await sup.clock.advance(0);
    sup.cluster.slot(1).ready({ shutdownTimeout: 2000 });
    sup.cluster.slot(2).ready({ shutdownTimeout: 2000 });
    await started;
    const [clean, stuck] = sup.cluster.forks;
    if (stuck !== undefined) stuck.onSignal = (signal) => signal === "SIGKILL" && queueMicrotask(() => stuck.exit(null, "SIGKILL"));
    const stopping = sup.supervisor.stop();
    await sup.clock.advance(2499);
    expect(clean?.signals).toEqual(["SIGTERM"]);
    expect(stuck?.signals).toEqual(["SIGTERM"]);
    expect(sup.supervisor.stop()).toBe(stopping);
    await sup.clock.advance(1);
    expect(stuck?.signals).toEqual(["SIGTERM", "SIGKILL"]);
    const report = await stopping;
    expect(report).toMatchObject({ reason: "stop()", exitCode: 1, durationMs: 2500 });
    expect(report.workers.map((worker) => worker.clean)).toEqual([true, false]);
    expect(sup.output()).toMatch(/still running 2500ms after SIGTERM \(budget 2000ms \+ margin 500ms\): sending SIGKILL/);
    expect(sup.output()).toMatch(/received stop\(\) while stopping: already draining, nothing to do/);
  });

  it("a worker's exit waits for its output pipe to close, at most the grace period (a grandchild may hold the pipe)", async () => {
    const sup = fakeSupervisor({ workers: 2, backoff: { initial: 0 } });
    const pipes = outputPipes(sup);
    await sup.start();
    const [held, closed] = sup.cluster.forks;
    held?.exit(1);
    closed?.exit(1);
    pipes.get(closed?.pid ?? 0)?.destroy();
    await sup.clock.advance(0);
    // The one whose pipe closed is handled at once; the other waits out the grace.
    expect(sup.output()).toMatch(new RegExp(`worker 2 \\(pid ${closed?.pid}\\) died unexpectedly`));
    expect(sup.output()).not.toMatch(new RegExp(`pid ${held?.pid}\\) died unexpectedly`));
    await sup.clock.advance(499);
    expect(sup.output()).not.toMatch(new RegExp(`pid ${held?.pid}\\) died unexpectedly`));
    await sup.clock.advance(1);
    expect(sup.output()).toMatch(new RegExp(`worker 1 \\(pid ${held?.pid}\\) died unexpectedly`));
    for (const pipe of pipes.values()) pipe.destroy();
  });

  it("a worker that crashed just before the stop (its exit seen, its output still open) is not counted as a dirty drain", async () => {
    const sup = fakeSupervisor({ workers: 2 });
    const pipes = outputPipes(sup);
    await sup.start();
    const [crashed, healthy] = sup.cluster.forks;
    crashed?.exit(null, "SIGKILL");
    await sup.clock.advance(0);
    // Its exit is known, its handle still waits for the pipe: the stop begins in that window.
    const stopping = sup.supervisor.stop("SIGTERM");
    pipes.get(healthy?.pid ?? 0)?.end();
    await sup.clock.advance(500);
    const report = await stopping;
    expect(crashed?.signals).toEqual([]);
    expect(healthy?.signals).toEqual(["SIGTERM"]);
    expect(report).toMatchObject({ exitCode: 0, workers: [{ id: 2, clean: true }] });
    expect(sup.output()).toMatch(/stopping \(SIGTERM\): draining 1 worker\(s\)/);
    expect(sup.output()).toMatch(new RegExp(`worker 1 \\(pid ${crashed?.pid}\\) exited \\(signal SIGKILL\\)`));
    expect(sup.cluster.forks).toHaveLength(2);
    for (const pipe of pipes.values()) pipe.destroy();
  });

  it("a stop where every worker drains in time exits 0, and nothing is restarted after it", async () => {
    const sup = fakeSupervisor({ workers: 2 });
    await sup.start();
    const report = await sup.stop();
    expect(report).toMatchObject({ exitCode: 0, workers: [{ id: 1, clean: true }, { id: 2, clean: true }] });
    await sup.clock.advance(60_000);
    expect(sup.cluster.forks).toHaveLength(2);
    expect(sup.clock.pending).toBe(0);
  });
});
