// A paused host as a process test: SIGSTOP of the supervisor's whole process group (what
// `docker pause`, a cgroup freezer or a VM pause do), then SIGCONT. The watchdog must not take
// the pause for blocked event loops; a worker that really blocks its loop is still killed.
import { afterEach, describe, expect, it } from "vitest";
import { get, killAll, readyWorkers, sleep, startSupervisor } from "./fixtures/supervisor-harness.js";

afterEach(() => killAll());

describe("supervisor: a paused process group", () => {
  it("kills no worker after a 5 s SIGSTOP of the group with --watchdog-timeout 3000, and still kills a blocked one", async () => {
    const run = await startSupervisor(["--workers", "2", "--watchdog-timeout", "3000"], { detached: true });
    await run.waitFor(/worker\(s\) ready in/);
    const before = readyWorkers(run).map((worker) => worker.pid).toSorted();
    const mark = run.output().length;
    process.kill(-run.pid, "SIGSTOP");
    await sleep(5000);
    process.kill(-run.pid, "SIGCONT");
    // Past the watchdog timeout after the resume, with requests going to both workers meanwhile.
    const until = performance.now() + 4000;
    const pids = new Set<number>();
    while (performance.now() < until) {
      pids.add((await get(run.port, "/whoami")).body.pid);
      await sleep(100);
    }
    expect(run.output().slice(mark)).not.toMatch(/no heartbeat|SIGKILL|died unexpectedly/);
    expect([...pids].toSorted()).toEqual(before);
    expect(run.lines(/watchdog: the primary itself did not run for \d+ms/)).toHaveLength(1);

    // A worker that blocks its own event loop while the primary runs is still killed.
    const blocked = get(run.port, "/block?ms=60000").catch((error: Error) => error);
    const line = await run.waitFor(/watchdog: no heartbeat for \d+ms \(limit 3000ms\), event loop blocked: sending SIGKILL/, 15_000, mark);
    expect(before).toContain(Number(/pid (\d+)/.exec(line)?.[1]));
    expect(await blocked).toBeInstanceOf(Error);
    await run.waitFor(/died unexpectedly \(signal SIGKILL, killed: watchdog/, 10_000, mark);
    await run.waitForLines(/ready on /, 1, mark);
    process.kill(run.pid, "SIGTERM");
    expect(await run.exited).toEqual({ code: 0, signal: null });
  }, 60_000);
});
