// The supervisor as a process: real workers, real sockets, real signals.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { alive, get, killAll, readyWorkers, startSupervisor, type Running } from "./fixtures/supervisor-harness.js";
import { ROUND_ROBIN_SEMI_SPACE_MB } from "../supervisor/worker-process.js";
import { tempDir } from "./helpers/temp-dir.js";

const ALL_READY = /worker\(s\) ready in \d+ms/;

afterEach(() => killAll());

/** Hook lines `pid id name` per pid, in file order. */
function hooksByPid(file: string): Map<number, string[]> {
  const byPid = new Map<number, string[]>();
  for (const line of readFileSync(file, "utf8").trim().split("\n")) {
    const [pid, , name] = line.split(" ");
    byPid.set(Number(pid), [...(byPid.get(Number(pid)) ?? []), name ?? ""]);
  }
  return byPid;
}

async function distinctWorkers(run: Running, requests = 12): Promise<Map<string, number>> {
  const seen = new Map<string, number>();
  for (let i = 0; i < requests; i++) {
    const { status, body } = await get(run.port, "/whoami");
    expect(status).toBe(200);
    seen.set(body.worker ?? "none", body.pid);
  }
  return seen;
}

describe("supervisor: start and stop", () => {
  it("serves one port from 2 workers with distinct ids and pids, and logs one summary", async () => {
    const run = await startSupervisor(["--workers", "2"]);
    const summary = await run.waitFor(ALL_READY);
    expect(summary).toContain(`2 worker(s) ready`);
    expect(summary).toMatch(new RegExp(`http://(\\[::\\]|0\\.0\\.0\\.0):${run.port}/, docs http://(\\[::\\]|0\\.0\\.0\\.0):${run.port}/docs`));
    const seen = await distinctWorkers(run);
    expect([...seen.keys()].toSorted()).toEqual(["1", "2"]);
    expect(new Set(seen.values()).size).toBe(2);
    const ready = readyWorkers(run);
    expect(ready.map((w) => w.pid).toSorted()).toEqual([...seen.values()].toSorted());
    expect(run.lines(/worker \d \(pid \d+\) starting$/)).toHaveLength(2);
    if (process.platform === "linux") {
      // Round-robin workers run with the young generation capped and without allocation-site pretenuring
      // (worker-process.ts); Node accepted both options, or the workers would not have served.
      for (const { pid } of ready) {
        const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
        expect(argv).toContain(`--max-semi-space-size=${ROUND_ROBIN_SEMI_SPACE_MB}`);
        expect(argv).toContain("--no-allocation-site-pretenuring");
      }
    }
    process.kill(run.pid, "SIGTERM");
    expect(await run.exited).toEqual({ code: 0, signal: null });
  });

  it("SIGTERM to the primary with slow requests in flight on both workers: all complete, hooks once in order, exit 0", async () => {
    const hookLog = join(tempDir("keelson-sup-"), "hooks.log");
    const run = await startSupervisor(["--workers", "2"], { env: { SUPERVISOR_HOOK_LOG: hookLog } });
    await run.waitFor(ALL_READY);
    const slow = Array.from({ length: 6 }, () => get(run.port, "/slow?ms=1500"));
    await run.waitForLines(/slow request started/, 6);
    const signalled = performance.now();
    process.kill(run.pid, "SIGTERM");
    const answers = await Promise.all(slow);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 200]);
    expect(new Set(answers.map((a) => a.body.worker))).toEqual(new Set(["1", "2"]));
    expect(await run.exited).toEqual({ code: 0, signal: null });
    expect(performance.now() - signalled).toBeLessThan(5000);
    const hooks = hooksByPid(hookLog);
    expect([...hooks.keys()].toSorted()).toEqual(readyWorkers(run).map((w) => w.pid).toSorted());
    for (const names of hooks.values()) expect(names).toEqual(["first", "second"]);
    expect(run.output()).toMatch(/stopped: 2 worker\(s\) exited cleanly/);
    expect(run.output()).not.toMatch(/SIGKILL/);
  });

  it("SIGINT to the whole process group (Ctrl+C) stops as cleanly as SIGTERM to the primary", async () => {
    const hookLog = join(tempDir("keelson-sup-"), "hooks.log");
    const run = await startSupervisor(["--workers", "2"], { env: { SUPERVISOR_HOOK_LOG: hookLog }, detached: true });
    await run.waitFor(ALL_READY);
    const slow = Array.from({ length: 4 }, () => get(run.port, "/slow?ms=1000"));
    await run.waitForLines(/slow request started/, 4);
    process.kill(-run.pid, "SIGINT");
    expect((await Promise.all(slow)).map((a) => a.status)).toEqual([200, 200, 200, 200]);
    expect(await run.exited).toEqual({ code: 0, signal: null });
    const hooks = hooksByPid(hookLog);
    expect(hooks.size).toBe(2);
    for (const names of hooks.values()) expect(names).toEqual(["first", "second"]);
    // Each worker got two signals (SIGINT from the terminal, SIGTERM relayed by the primary) and
    // drained once. Which one its event loop sees first is not fixed (about 1 run in 5 here ends
    // with the relayed SIGTERM first): only "once, whichever comes first" is the contract. The
    // second one is logged and ignored.
    const drains = run.lines(/draining \((SIGINT|SIGTERM)\): shutdown budget/);
    expect(drains).toHaveLength(2);
    expect(run.lines(/received (SIGINT|SIGTERM) while shutting down: nothing more to do/)).toHaveLength(2);
    expect(run.output()).toMatch(/stopped: 2 worker\(s\) exited cleanly/);
  });

  it("replaces a SIGKILLed worker in the same slot while the service keeps answering", async () => {
    const run = await startSupervisor(["--workers", "2"]);
    await run.waitFor(ALL_READY);
    const victim = readyWorkers(run).find((w) => w.id === 1);
    if (victim === undefined) throw new Error("no worker 1");
    const mark = run.output().length;
    process.kill(victim.pid, "SIGKILL");
    await run.waitFor(/worker 1 \(pid \d+\) died unexpectedly \(signal SIGKILL\).*restarting in 100ms/, 10_000, mark);
    // While slot 1 is empty, worker 2 takes every connection.
    for (let i = 0; i < 5; i++) expect((await get(run.port, "/whoami")).status).toBe(200);
    await run.waitFor(/worker 1 \(pid \d+\) ready on/, 20_000, mark);
    const replacement = readyWorkers(run).filter((w) => w.id === 1).at(-1);
    expect(replacement?.pid).not.toBe(victim.pid);
    expect(alive(victim.pid)).toBe(false);
    const seen = await distinctWorkers(run);
    expect(seen.get("1")).toBe(replacement?.pid);
    process.kill(run.pid, "SIGTERM");
    expect(await run.exited).toEqual({ code: 0, signal: null });
  });
});
