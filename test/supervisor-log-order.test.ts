// The supervisor's lines in causal order, as real processes: a SIGTERM to the whole process group
// (a terminal's Ctrl-C, `kill -- -PGID`, a container runtime) reaches the primary and the workers at
// once, yet the primary's "stopping" comes before any worker's "draining", its own or the primary's
// line about it; and "N worker(s) ready in" counts from the first fork, as each worker's own line does.
import { afterEach, describe, expect, it } from "vitest";
import { killAll, readyWorkers, startSupervisor } from "./fixtures/supervisor-harness.js";

afterEach(() => killAll());

/** Several starts: the order must hold each time, not on a lucky schedule. */
const ROUNDS = 4;

describe("supervisor: log lines in causal order", () => {
  it("on a process-group SIGTERM, stopping comes before every draining line; the ready total covers each worker's ready time", async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const run = await startSupervisor(["--workers", "2"], { detached: true });
      const total = Number(/2 worker\(s\) ready in (\d+)ms/.exec(await run.waitFor(/2 worker\(s\) ready in \d+ms/))?.[1]);
      const own = run.lines(/\] worker \d+ \(pid \d+\) ready on \S+ in \d+ms/).map((line) => Number(/ in (\d+)ms$/.exec(line)?.[1]));
      expect(own).toHaveLength(2);
      // One clock, whole milliseconds rounded on each side.
      expect(total, run.output()).toBeGreaterThanOrEqual(Math.max(...own) - 1);

      process.kill(-run.pid, "SIGTERM");
      expect(await run.exited, run.output()).toEqual({ code: 0, signal: null });
      const lines = run.output().trimEnd().split("\n");
      const stopping = lines.findIndex((line) => line.includes("] stopping (SIGTERM): draining 2 worker(s)"));
      const draining = lines.map((line, index) => ({ line, index })).filter(({ line }) => / draining \(/.test(line));
      expect(stopping, run.output()).toBeGreaterThanOrEqual(0);
      // Both workers' own lines and the primary's line about each.
      expect(draining.length, run.output()).toBeGreaterThanOrEqual(4);
      for (const { line, index } of draining) expect(index, `${line}\n\n${run.output()}`).toBeGreaterThan(stopping);
      // The group's signal is the primary's decision to stop, not each worker's own.
      expect(run.lines(/by its own decision/), run.output()).toEqual([]);
    }
  }, 240_000);

  it("a SIGTERM to one worker alone is its own decision: the primary's line says so, then the worker's own lines follow", async () => {
    const run = await startSupervisor(["--workers", "2"], { detached: true });
    await run.waitFor(/2 worker\(s\) ready in \d+ms/);
    const [first] = readyWorkers(run);
    if (first === undefined) throw new Error(run.output());
    process.kill(first.pid, "SIGTERM");
    const said = `worker ${first.id} (pid ${first.pid}) draining (SIGTERM, by its own decision)`;
    await run.waitFor(new RegExp(`\\[w${first.id} ${first.pid}\\] draining \\(SIGTERM\\)`));
    const lines = run.output().split("\n");
    const own = lines.findIndex((line) => line.includes(`[w${first.id} ${first.pid}] draining (SIGTERM)`));
    expect(lines.findIndex((line) => line.endsWith(said)), run.output()).toBeGreaterThanOrEqual(0);
    expect(lines.findIndex((line) => line.endsWith(said)), run.output()).toBeLessThan(own);
    expect(run.lines(/\] stopping \(/)).toEqual([]);
    process.kill(-run.pid, "SIGTERM");
    await run.exited;
  }, 60_000);
});
