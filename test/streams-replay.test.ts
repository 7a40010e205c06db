/**
 * Issue 32, defect 1, with real processes: a garbage Last-Event-ID must not stall the pod. The
 * supervisor with 2 workers, a channel filled past its replay bounds with 60 KB events, then 40
 * clients resuming with `Last-Event-ID: garbage` and 10 with an id long gone from the buffer, all at
 * once: the garbage ones get one `missed` event and no backlog, the stale ones a bounded replay,
 * every one the next live event once; meanwhile /health answers every time, the primary's RSS stays
 * within 100 MiB of where it was, and no worker is replaced. The full-size run with its numbers is
 * `make scenarios ONLY=replay-garbage`.
 */
import { afterEach, describe, expect, it } from "vitest";
import { killAll, startSupervisor } from "./fixtures/supervisor-harness.js";
import { replayAttack } from "./helpers/replay-attack.js";

afterEach(() => killAll());

describe("a hostile resume under the supervisor", () => {
  it("answers 40 garbage Last-Event-IDs against a full channel with a missed event each, /health answering, the primary's RSS bounded, no worker replaced", async () => {
    const run = await startSupervisor(["--workers", "2"], { entry: "test/fixtures/streams-app.ts" });
    await run.waitFor(/2 worker\(s\) ready in/);
    const mark = run.output().length;
    const result = await replayAttack({
      port: run.port, primaryPid: run.pid, room: "full", fill: { count: 300, bytes: 60_000 }, garbageClients: 40, staleClients: 10, timeoutMs: 30_000,
    });
    expect(result.garbageClean).toBe(40);
    expect(result.staleClean).toBe(10);
    expect(result.gotLive).toBe(50);
    // The stale clients got at most replayRequestBytes (1 MiB) of 60 KB events.
    expect(result.staleReplayed).toBeGreaterThan(0);
    expect(result.staleReplayed).toBeLessThanOrEqual(17);
    expect(result.health.failed).toBe(0);
    expect(result.health.count).toBeGreaterThan(10);
    // Generous for a loaded machine: the stall this guards against lasted seconds.
    expect(result.health.max).toBeLessThan(2000);
    expect(result.rssPeakMiB - result.rssBeforeMiB).toBeLessThan(100);
    expect(result.workersAfter).toEqual(result.workersBefore);
    expect(run.output().slice(mark)).not.toMatch(/replac|watchdog|restart|dropped/i);
    process.kill(run.pid, "SIGTERM");
    expect((await run.exited).code).toBe(0);
  }, 120_000);
});
