// A connection handed to a worker that dies before it takes it: node:cluster's round-robin
// primary accepts each connection and passes it to a worker over IPC; a worker SIGSTOPped (a
// blocked or frozen process) never acknowledges it, and when it is SIGKILLed the primary's copy
// of that socket must not stay open (CLOSE-WAIT) with its client waiting for nothing.
import { afterEach, describe, expect, it } from "vitest";
import { get, killAll, readyWorkers, sleep, startSupervisor } from "./fixtures/supervisor-harness.js";

afterEach(() => killAll());

describe("supervisor: a connection handed to a dying worker", () => {
  it("is reset at once when the worker is SIGKILLed, not left hanging for the client's timeout", async () => {
    const run = await startSupervisor(["--workers", "2", "--watchdog-timeout", "0"]);
    await run.waitFor(/worker\(s\) ready in/);
    const [first, second] = readyWorkers(run);
    if (first === undefined || second === undefined) throw new Error("two workers expected");
    process.kill(second.pid, "SIGSTOP");
    const sent = performance.now();
    const requests = Array.from({ length: 4 }, () => get(run.port, "/whoami", 20_000).then(
      (answer) => ({ ok: true as const, pid: answer.body.pid, at: performance.now() }),
      (error: Error) => ({ ok: false as const, error: error.message, at: performance.now() }),
    ));
    // The stopped worker has been handed one connection by now; the others go to the first worker.
    await sleep(1500);
    const mark = run.output().length;
    const killedAt = performance.now();
    process.kill(second.pid, "SIGKILL");
    await run.waitFor(/died unexpectedly \(signal SIGKILL\)/, 10_000, mark);
    const outcomes = await Promise.all(requests);
    const served = outcomes.filter((outcome) => outcome.ok);
    expect(served.length).toBeGreaterThanOrEqual(3);
    for (const outcome of served) expect(outcome.pid).toBe(first.pid);
    // Every request settled soon after the kill: none waited for its 20 s timeout.
    for (const outcome of outcomes) expect(outcome.at - killedAt).toBeLessThan(5000);
    expect(performance.now() - sent).toBeLessThan(10_000);
    process.kill(run.pid, "SIGTERM");
    await run.exited;
  }, 60_000);
});
