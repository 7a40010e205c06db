// A rolling reload with connections that have no request in flight: they must not hold the old workers.
import { readFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { get, killAll, readyWorkers, startSupervisor } from "./fixtures/supervisor-harness.js";
import { tempDir } from "./helpers/temp-dir.js";

afterEach(() => killAll());

const opened: Socket[] = [];
afterEach(() => {
  for (const socket of opened.splice(0)) socket.destroy();
});

/** A connection that sends `bytes` (maybe nothing) and then waits, as a preconnect or a stalled client would. */
function openRaw(port: number, bytes: string): Promise<void> {
  const socket = connect(port, "127.0.0.1");
  opened.push(socket);
  socket.on("error", () => {});
  socket.on("data", () => {});
  return new Promise((resolve) => socket.once("connect", () => {
    if (bytes !== "") socket.write(bytes);
    resolve();
  }));
}

/** Opens the 4 connections of the repro and returns once both workers hold theirs. */
async function openStalled(port: number): Promise<void> {
  for (const bytes of ["", "", "GET /who", "GET /whoami HTTP/1.1\r\nHost: x\r\nX-Partial: "]) await openRaw(port, bytes);
  // The primary hands connections out in the order it accepted them: once both workers have
  // answered a later one, each holds the raw sockets it was given.
  const answered = new Set<number>();
  for (let i = 0; i < 20 && answered.size < 2; i++) answered.add((await get(port, "/whoami")).body.pid);
  expect(answered.size).toBe(2);
}

/** The workers' `terminated cleanly in <ms>ms` durations in `text`, and how many stalled connections they closed. */
function drains(text: string): { durations: number[]; closedIdle: number } {
  const durations = [...text.matchAll(/terminated cleanly in (\d+)ms \(SIGTERM\)/g)].map((m) => Number(m[1]));
  const closedIdle = [...text.matchAll(/closed (\d+) connection\(s\) with no request in flight/g)].reduce((sum, m) => sum + Number(m[1]), 0);
  return { durations, closedIdle };
}

describe("supervisor: SIGTERM with idle and half-sent connections", () => {
  it("every worker drains in well under a second, runs its hooks once in order, and the primary exits 0", async () => {
    const hookLog = join(tempDir("keelson-drain-"), "hooks");
    const run = await startSupervisor(["--workers", "2"], { env: { SUPERVISOR_HOOK_LOG: hookLog } });
    await run.waitFor(/worker\(s\) ready in/);
    const workers = readyWorkers(run);
    await openStalled(run.port);
    const signalledAt = performance.now();
    process.kill(run.pid, "SIGTERM");
    expect(await run.exited).toEqual({ code: 0, signal: null });
    expect(performance.now() - signalledAt).toBeLessThan(3000);
    const { durations, closedIdle } = drains(run.output());
    expect(closedIdle).toBe(4);
    expect(durations, run.output()).toHaveLength(2);
    for (const ms of durations) expect(ms).toBeLessThan(1000);
    const hooks = readFileSync(hookLog, "utf8").trim().split("\n");
    for (const { pid } of workers) {
      expect(hooks.filter((line) => line.startsWith(`${pid} `)).map((line) => line.split(" ")[2])).toEqual(["first", "second"]);
    }
  });
});

describe("supervisor: reload with idle and half-sent connections", () => {
  it("SIGHUP with 4 such sockets: each old worker drains in well under a second and runs its hooks once, in order", async () => {
    const hookLog = join(tempDir("keelson-drain-"), "hooks");
    const run = await startSupervisor(["--workers", "2"], { env: { SUPERVISOR_HOOK_LOG: hookLog } });
    await run.waitFor(/worker\(s\) ready in/);
    const before = readyWorkers(run);
    await openStalled(run.port);

    const mark = run.output().length;
    process.kill(run.pid, "SIGHUP");
    await run.waitFor(/reload complete: 2 worker\(s\) replaced in \d+ms/, 30_000, mark);
    const drained = run.output().slice(mark);
    const { durations, closedIdle } = drains(drained);
    expect(closedIdle).toBe(4);
    expect(durations, drained).toHaveLength(2);
    for (const ms of durations) expect(ms).toBeLessThan(1000);
    expect(drained).not.toMatch(/deadline passed|not started before the deadline|SIGKILL/);

    const hooks = readFileSync(hookLog, "utf8").trim().split("\n");
    for (const { pid } of before) {
      expect(hooks.filter((line) => line.startsWith(`${pid} `)).map((line) => line.split(" ")[2])).toEqual(["first", "second"]);
    }
    process.kill(run.pid, "SIGTERM");
    expect(await run.exited).toEqual({ code: 0, signal: null });
  });
});
