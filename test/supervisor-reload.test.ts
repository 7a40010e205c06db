// Rolling reload as a process: SIGHUP under load, and a reload whose replacement cannot start.
import autocannon, { type Result } from "autocannon";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { get, killAll, readyWorkers, sleep, startSupervisor } from "./fixtures/supervisor-harness.js";
import { tempDir } from "./helpers/temp-dir.js";

afterEach(() => killAll());

describe("supervisor: rolling reload", () => {
  it("SIGHUP under steady load: 0 errors, 0 non-2xx, every worker pid changed", async () => {
    const run = await startSupervisor(["--workers", "2"]);
    await run.waitFor(/worker\(s\) ready in/);
    const before = readyWorkers(run);
    const mark = run.output().length;
    const result = await new Promise<Result>((resolve, reject) => {
      const load = autocannon(
        { url: `http://127.0.0.1:${run.port}/whoami`, connections: 10, pipelining: 1, duration: 30 },
        (error, outcome) => (error ? reject(error) : resolve(outcome)),
      );
      void (async () => {
        await sleep(1000);
        process.kill(run.pid, "SIGHUP");
        await run.waitFor(/reload (complete|stopped)/, 25_000, mark).catch(() => undefined);
        await sleep(1000);
        load.stop();
      })();
    });
    expect(run.output().slice(mark)).toMatch(/reload complete: 2 worker\(s\) replaced in \d+ms/);
    expect(result.errors).toBe(0);
    expect(result.timeouts).toBe(0);
    expect(result.non2xx).toBe(0);
    expect(result.requests.total).toBeGreaterThan(1000);
    const after = readyWorkers(run).slice(before.length);
    expect(after.map((w) => w.id).toSorted()).toEqual([1, 2]);
    for (const worker of after) expect(before.map((w) => w.pid)).not.toContain(worker.pid);
    const serving = new Set<number>();
    for (let i = 0; i < 8; i++) serving.add((await get(run.port, "/whoami")).body.pid);
    expect([...serving].toSorted()).toEqual(after.map((w) => w.pid).toSorted());
    process.kill(run.pid, "SIGTERM");
    expect(await run.exited).toEqual({ code: 0, signal: null });
  });

  it("keeps the old worker and stops the reload when a replacement cannot start, and a later reload succeeds", async () => {
    const flag = join(tempDir("keelson-sup-"), "broken");
    const run = await startSupervisor(["--workers", "2"], { env: { SUPERVISOR_BROKEN_FLAG: flag } });
    await run.waitFor(/worker\(s\) ready in/);
    const before = readyWorkers(run).map((w) => w.pid).toSorted();
    writeFileSync(flag, "");
    let mark = run.output().length;
    process.kill(run.pid, "SIGHUP");
    const stopped = await run.waitFor(/reload stopped/, 20_000, mark);
    expect(stopped).toMatch(/reload stopped after 0 worker\(s\) replaced in \d+ms: replacement worker 1 \(pid \d+\) for worker 1 \(pid \d+\): exited \(code 1\) before it was ready: module broken-db failed to register: database unreachable; keeping the old worker/);
    expect(run.output().slice(mark)).not.toMatch(/died unexpectedly/);
    const serving = new Set<number>();
    for (let i = 0; i < 8; i++) serving.add((await get(run.port, "/whoami")).body.pid);
    expect([...serving].toSorted()).toEqual(before);
    rmSync(flag);
    mark = run.output().length;
    process.kill(run.pid, "SIGHUP");
    await run.waitFor(/reload complete: 2 worker\(s\) replaced/, 20_000, mark);
    process.kill(run.pid, "SIGTERM");
    expect(await run.exited).toEqual({ code: 0, signal: null });
  });
});
