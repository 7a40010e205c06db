// --max-memory as a process: a worker that keeps memory is replaced like a reload replaces it.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { parseSize } from "../supervisor/size.js";
import { failedRequests, get, killAll, readyWorkers, sleep, startSupervisor, underLoad } from "./fixtures/supervisor-harness.js";
import { tempDir } from "./helpers/temp-dir.js";

afterEach(() => killAll());

describe("supervisor: memory limit", () => {
  it("reads sizes with a unit and rejects the rest", () => {
    expect(parseSize("512M")).toBe(512 * 1024 ** 2);
    expect(parseSize("1.5g")).toBe(1.5 * 1024 ** 3);
    expect(parseSize("800kb")).toBe(800 * 1024);
    expect(parseSize("1000000")).toBe(1_000_000);
    expect(() => parseSize("lots", "--max-memory")).toThrow('--max-memory expects a size such as 512M, 2G or a number of bytes, got "lots"');
    expect(() => parseSize("0M")).toThrow("maxMemory must be above 0");
  });

  it("replaces a worker whose RSS stays over --max-memory: new one ready first, old one drains and runs its hooks, 0 failed requests", async () => {
    const hookLog = join(tempDir("keelson-mem-"), "hooks.log");
    const sup = await startSupervisor(["--workers", "2", "--max-memory", "300M", "--max-memory-window", "1500"], {
      env: { SUPERVISOR_HOOK_LOG: hookLog },
    });
    await sup.waitFor(/worker\(s\) ready in/);
    const before = readyWorkers(sup);
    const mark = sup.output().length;
    let hog = { pid: 0, worker: "" };
    const result = await underLoad(sup.port, "/whoami", async () => {
      await sleep(500);
      const answer = await get(sup.port, "/hog?mb=400");
      expect(answer.status).toBe(200);
      hog = { pid: answer.body.pid, worker: String(answer.body.worker) };
      await sup.waitFor(/memory-limit restart (complete|stopped)/, 30_000, mark);
    });
    expect(failedRequests(result, 200)).toEqual({ errors: 0, timeouts: 0, non2xx: 0, enough: true });

    const log = sup.output().slice(mark).split("\n");
    const over = log.findIndex((line) => line.includes(`(pid ${hog.pid}): RSS`) && line.includes("over the limit of 300 MB: replacing it if it stays over for 1500ms"));
    const replacing = log.findIndex((line) => new RegExp(`\\(pid ${hog.pid}\\): RSS \\d+ MB over the limit of 300 MB for \\d+ms: replacing it`).test(line));
    const ready = log.findIndex((line) => new RegExp(`worker ${hog.worker} \\(pid (?!${hog.pid}\\))\\d+\\) ready`).test(line));
    const draining = log.findIndex((line) => line.includes(`(pid ${hog.pid}) draining`));
    expect(over).toBeGreaterThanOrEqual(0);
    expect(replacing).toBeGreaterThan(over);
    expect(ready).toBeGreaterThan(replacing);
    expect(draining).toBeGreaterThan(ready);
    expect(sup.output().slice(mark)).toMatch(/memory-limit restart complete: 1 worker\(s\) replaced in \d+ms/);
    expect(readFileSync(hookLog, "utf8").split("\n").filter((line) => line.startsWith(`${hog.pid} `))).toEqual([
      `${hog.pid} ${hog.worker} first`, `${hog.pid} ${hog.worker} second`,
    ]);
    // The other worker was under the limit: untouched.
    const other = before.find((w) => w.pid !== hog.pid);
    const serving = new Set<number>();
    for (let i = 0; i < 8; i++) serving.add((await get(sup.port, "/whoami")).body.pid);
    expect(serving.has(other?.pid ?? -1)).toBe(true);
    expect(serving.has(hog.pid)).toBe(false);
    process.kill(sup.pid, "SIGTERM");
    expect(await sup.exited).toEqual({ code: 0, signal: null });
  });
});
