// Crash handling as a process: backoff, the crash-loop breaker, and the event-loop watchdog.
import { afterEach, describe, expect, it } from "vitest";
import { alive, get, killAll, readyWorkers, startSupervisor } from "./fixtures/supervisor-harness.js";

afterEach(() => killAll());

describe("supervisor: crashes", () => {
  it("restarts a worker that crashes after it was ready with doubling delays, then trips the breaker and exits 1", async () => {
    const run = await startSupervisor(
      ["--workers", "1", "--backoff-initial", "300", "--max-crashes", "4", "--crash-window", "60000"],
      { env: { SUPERVISOR_CRASH_AFTER_READY_MS: "200" } },
    );
    // Arrival times of each crash line and of the next fork, as seen from here.
    const crashes: number[] = [];
    const starts: number[] = [];
    run.child.stdout?.on("data", (chunk: Buffer) => {
      const now = performance.now();
      for (const line of chunk.toString().split("\n")) {
        if (/died unexpectedly/.test(line)) crashes.push(now);
        if (/worker 1 \(pid \d+\) starting$/.test(line)) starts.push(now);
      }
    });
    const exit = await run.exited;
    expect(exit).toEqual({ code: 1, signal: null });
    // Node's own report of the uncaught error, relayed from each worker's stderr.
    expect(run.lines(/^Error: boom after ready$/)).toHaveLength(4);
    const delays = run.lines(/died unexpectedly/).map((line) => Number(/restarting in (\d+)ms/.exec(line)?.[1]));
    expect(delays).toEqual([300, 600, 1200]);
    for (const line of run.lines(/died unexpectedly/)) expect(line).toMatch(/\(code 1\) after \d+ms up: boom after ready; restarting/);
    // The gap between a crash and the next fork is at least that crash's delay.
    for (const [index, delay] of delays.entries()) {
      const gap = (starts[index + 1] ?? Infinity) - (crashes[index] ?? 0);
      expect(gap).toBeGreaterThanOrEqual(delay * 0.8);
    }
    const verdict = run.lines(/crash loop:/);
    expect(verdict[0]).toMatch(/crash loop: 4 worker crashes within 60000ms \(limit 4\), the last: worker 1 \(pid \d+\) exited \(code 1\) after \d+ms up: boom after ready; giving up/);
    expect(run.output()).toMatch(/stopped in \d+ms with exit 1 after a crash loop/);
    expect(run.lines(/ready on /)).toHaveLength(4);
  });

  it("kills a worker whose event loop stays blocked past the watchdog timeout and replaces it", async () => {
    const run = await startSupervisor(["--workers", "2", "--watchdog-timeout", "1500", "--heartbeat-interval", "200"]);
    await run.waitFor(/worker\(s\) ready in/);
    const mark = run.output().length;
    // This request blocks whichever worker takes it, for a minute.
    const blocked = get(run.port, "/block?ms=60000").catch((error: Error) => error);
    const line = await run.waitFor(/watchdog: no heartbeat for \d+ms \(limit 1500ms\), event loop blocked: sending SIGKILL/, 15_000, mark);
    const victim = Number(/pid (\d+)/.exec(line)?.[1]);
    const silent = Number(/no heartbeat for (\d+)ms/.exec(line)?.[1]);
    expect(silent).toBeGreaterThan(1500);
    expect(silent).toBeLessThan(6000);
    expect(await blocked).toBeInstanceOf(Error);
    await run.waitFor(/died unexpectedly \(signal SIGKILL, killed: watchdog/, 10_000, mark);
    const id = readyWorkers(run).find((w) => w.pid === victim)?.id;
    await run.waitFor(new RegExp(`worker ${id} \\(pid \\d+\\) ready on`), 20_000, mark);
    expect(alive(victim)).toBe(false);
    const pids = new Set<number>();
    for (let i = 0; i < 8; i++) pids.add((await get(run.port, "/whoami")).body.pid);
    expect(pids.has(victim)).toBe(false);
    expect(pids.size).toBe(2);
    process.kill(run.pid, "SIGTERM");
    expect(await run.exited).toEqual({ code: 0, signal: null });
  });

  it("SIGKILLs a worker still running at its budget + margin after SIGTERM, and exits 1", async () => {
    const run = await startSupervisor(["--workers", "2", "--kill-margin", "1000", "--watchdog-timeout", "0"], {
      env: { SUPERVISOR_SHUTDOWN_TIMEOUT: "2000" },
    });
    await run.waitFor(/worker\(s\) ready in/);
    const blocked = get(run.port, "/block?ms=60000").catch((error: Error) => error);
    await run.waitFor(/block started/);
    const signalled = performance.now();
    process.kill(run.pid, "SIGTERM");
    expect(await run.exited).toEqual({ code: 1, signal: null });
    const elapsed = performance.now() - signalled;
    expect(elapsed).toBeGreaterThan(2800);
    expect(elapsed).toBeLessThan(8000);
    expect(await blocked).toBeInstanceOf(Error);
    expect(run.output()).toMatch(/worker \d \(pid \d+\): still running 3000ms after SIGTERM \(budget 2000ms \+ margin 1000ms\): sending SIGKILL/);
    expect(run.output()).toMatch(/stopped in \d+ms with exit 1: worker \d \(pid \d+\) signal SIGKILL/);
  });
});
