// The primary gone (SIGKILL), as PID 1, and driven as a library: real processes again.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { alive, get, killAll, freePort, readyWorkers, sleep, startSupervisor } from "./fixtures/supervisor-harness.js";
import { tempDir } from "./helpers/temp-dir.js";

afterEach(() => killAll());

const BUDGET_MS = 3000;
const MARGIN_MS = 1500;

describe("supervisor: orphans, PID 1, library", () => {
  it("SIGKILL the primary: each worker finishes its requests, runs its hooks and exits within its budget", async () => {
    const hookLog = join(tempDir("keelson-sup-"), "hooks.log");
    const run = await startSupervisor(["--workers", "2"], {
      env: { SUPERVISOR_HOOK_LOG: hookLog, SUPERVISOR_SHUTDOWN_TIMEOUT: String(BUDGET_MS) },
    });
    await run.waitFor(/worker\(s\) ready in/);
    const workers = readyWorkers(run);
    const slow = Array.from({ length: 4 }, () => get(run.port, "/slow?ms=1000"));
    await run.waitForLines(/slow request started/, 4);
    const killed = performance.now();
    process.kill(run.pid, "SIGKILL");
    expect((await Promise.all(slow)).map((a) => a.status)).toEqual([200, 200, 200, 200]);
    while (workers.some((w) => alive(w.pid)) && performance.now() - killed < BUDGET_MS + MARGIN_MS + 5000) await sleep(25);
    const gone = performance.now() - killed;
    expect(workers.filter((w) => alive(w.pid))).toEqual([]);
    expect(gone).toBeLessThan(BUDGET_MS + MARGIN_MS);
    await run.waitFor(/draining \(the supervisor's IPC channel closed \(primary gone\)\)/);
    const lines = readFileSync(hookLog, "utf8").trim().split("\n");
    for (const { pid } of workers) {
      expect(lines.filter((line) => line.startsWith(`${pid} `)).map((line) => line.split(" ")[2])).toEqual(["first", "second"]);
    }
  });

  it("runs as PID 1 of a PID namespace (a container's init): serves, then stops cleanly on SIGTERM", async () => {
    const run = await startSupervisor(["--workers", "2"], { wrap: ["unshare", "--pid", "--fork"] });
    await run.waitFor(/worker\(s\) ready in/);
    expect(run.output()).toMatch(/supervisor \(pid 1\) starting 2 worker\(s\)/);
    const ids = new Set<string | null>();
    for (let i = 0; i < 6; i++) ids.add((await get(run.port, "/whoami")).body.worker);
    expect(ids).toEqual(new Set(["1", "2"]));
    // The init process, as the host sees it: the only child of `unshare`.
    const init = Number(readFileSync(`/proc/${run.pid}/task/${run.pid}/children`, "utf8").trim());
    process.kill(init, "SIGTERM");
    expect(await run.exited).toEqual({ code: 0, signal: null });
    expect(run.output()).toMatch(/stopped: 2 worker\(s\) exited cleanly/);
  });

  it("library: startSupervisor() resolves when all are ready; workers, reload() and stop() report what happened", async () => {
    const port = await freePort();
    const child = spawn(process.execPath, ["--import", "tsx", "test/fixtures/supervisor-lib.ts", String(port)], {
      cwd: join(import.meta.dirname, ".."), stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    const tagged = (tag: string): unknown => {
      const line = output.split("\n").find((candidate) => candidate.startsWith(`${tag} `));
      if (line === undefined) throw new Error(`no ${tag} line in:\n${output}`);
      return JSON.parse(line.slice(tag.length + 1));
    };
    expect(code).toBe(0);
    const started = tagged("STARTED") as Array<{ id: number; pid: number; state: string }>;
    expect(started.map((w) => [w.id, w.state]).toSorted()).toEqual([[1, "ready"], [2, "ready"]]);
    const reloaded = tagged("RELOADED") as { ok: boolean; replaced: number; error?: string };
    expect(reloaded).toMatchObject({ ok: true, replaced: 2 });
    expect(reloaded.error).toBeUndefined();
    const after = tagged("AFTER") as Array<{ id: number; pid: number; state: string }>;
    expect(after).toHaveLength(2);
    for (const worker of after) expect(started.map((w) => w.pid)).not.toContain(worker.pid);
    const stopped = tagged("STOPPED") as { exitCode: number; reason: string; workers: Array<{ id: number; clean: boolean }> };
    expect(stopped.exitCode).toBe(0);
    expect(stopped.reason).toBe("stop()");
    expect(stopped.workers.toSorted((a, b) => a.id - b.id)).toEqual([{ id: 1, clean: true }, { id: 2, clean: true }]);
    expect(tagged("FINISHED")).toBe(true);
  });
});
