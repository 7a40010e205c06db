// A worker that cannot start, as real processes: at startup the supervisor stops with the reason
// (no restart loop); later, a replacement that cannot start is a crash, and a reload keeps serving.
import { rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { get, killAll, readyWorkers, startSupervisor, type Running } from "./fixtures/supervisor-harness.js";
import { tempDir } from "./helpers/temp-dir.js";

const servers: Server[] = [];
afterEach(() => {
  killAll();
  for (const server of servers.splice(0)) server.close();
});

function holdPort(): Promise<number> {
  const server = createServer();
  servers.push(server);
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "0.0.0.0", () => resolve((server.address() as { port: number }).port));
  });
}

/** Milliseconds from the first line matching `pattern` to the process's exit. */
function timeToExit(run: Running, pattern: RegExp): Promise<number> {
  const seen = run.waitFor(pattern, 60_000).then(() => performance.now());
  return Promise.all([seen, run.exited]).then(([at]) => performance.now() - at);
}

const lastLine = (run: Running) => run.output().trimEnd().split("\n").at(-1) ?? "";

/** Exit 1 once, no restart, no crash loop: each of the `workers` forked once. */
function expectNoRestart(run: Running, workers: number): void {
  expect(run.output()).not.toMatch(/died unexpectedly|restarting in|crash loop/);
  expect(run.lines(/worker \d \(pid \d+\) starting$/)).toHaveLength(workers);
}

describe("supervisor: a worker that cannot start", () => {
  it("port taken at startup: exit 1 at once with that one reason in the last line, no restart loop", async () => {
    const port = await holdPort();
    const run = await startSupervisor(["--workers", "2"], { port });
    const afterFailure = timeToExit(run, /\[w\d \d+\] startup failed: port \d+ is already in use/);
    expect(await run.exited).toEqual({ code: 1, signal: null });
    // Within 1 s on an idle machine; generous here, the box is shared.
    expect(await afterFailure).toBeLessThan(3000);
    expect(lastLine(run)).toMatch(new RegExp(
      `^\\[ERROR\\] \\S+ \\S+ \\[primary ${run.pid}\\] stopped in \\d+ms with exit 1: startup failed: worker \\d \\(pid \\d+\\) exited \\(code 1\\) before it was ready: port ${port} is already in use \\(EADDRINUSE\\)$`,
    ));
    expectNoRestart(run, 2);
    // Each worker said it once, and the primary named it once more for the other worker's exit.
    expect(run.lines(/EADDRINUSE/).length).toBeLessThanOrEqual(4);
  });

  it("a module whose register step throws at startup: exit 1 with the module's error, no restart", async () => {
    const run = await startSupervisor(["--workers", "2"], { env: { SUPERVISOR_CRASH_AT_BOOT: "1" } });
    expect(await run.exited).toEqual({ code: 1, signal: null });
    expect(lastLine(run)).toMatch(
      /stopped in \d+ms with exit 1: startup failed: worker \d \(pid \d+\) exited \(code 1\) before it was ready: module broken-db failed to register: database unreachable$/,
    );
    expectNoRestart(run, 2);
  });

  it("an entry that does not load (syntax error): exit 1 with Node's error, reported before any keelson code ran", async () => {
    const extra = join(tempDir("keelson-sup-"), "extra.mjs");
    writeFileSync(extra, "export const broken = ;\n");
    const run = await startSupervisor(["--workers", "1"], { env: { SUPERVISOR_EXTRA_MODULE: extra } });
    expect(await run.exited).toEqual({ code: 1, signal: null });
    expect(lastLine(run)).toMatch(/startup failed: worker 1 \(pid \d+\) exited \(code 1\) before it was ready: SyntaxError: Unexpected token ';'$/);
    expectNoRestart(run, 1);
  });

  it("a worker not ready within --ready-timeout at startup: killed, exit 1 with that reason, no restart", async () => {
    const run = await startSupervisor(["--workers", "1", "--ready-timeout", "1500"], { env: { SUPERVISOR_HANG_AT_BOOT: "1" } });
    expect(await run.exited).toEqual({ code: 1, signal: null });
    expect(lastLine(run)).toMatch(
      /startup failed: worker 1 \(pid \d+\) exited \(signal SIGKILL, killed: not ready after 1500ms\) before it was ready$/,
    );
    expectNoRestart(run, 1);
  });

  it("after startup, a replacement that cannot start is a crash: backoff with the reason, the other worker serves, the slot recovers", async () => {
    const flag = join(tempDir("keelson-sup-"), "broken");
    const run = await startSupervisor(["--workers", "2", "--backoff-initial", "200"], { env: { SUPERVISOR_BROKEN_FLAG: flag } });
    await run.waitFor(/worker\(s\) ready in/);
    const [victim, survivor] = readyWorkers(run);
    writeFileSync(flag, "");
    const mark = run.output().length;
    process.kill(victim?.pid ?? 0, "SIGKILL");
    await run.waitFor(new RegExp(
      `worker ${victim?.id} \\(pid \\d+\\) died unexpectedly \\(code 1\\) before it was ready: module broken-db failed to register: database unreachable; restarting in \\d+ms`,
    ), 20_000, mark);
    expect((await get(run.port, "/whoami")).body.pid).toBe(survivor?.pid);
    rmSync(flag);
    await run.waitFor(new RegExp(`worker ${victim?.id} \\(pid \\d+\\) ready on`), 30_000, mark);
    expect(run.output().slice(mark)).not.toMatch(/startup failed: worker|stopping/);
    process.kill(run.pid, "SIGTERM");
    expect(await run.exited).toEqual({ code: 0, signal: null });
  });

  it("a reload onto a bad deploy (syntax error) keeps the old workers serving and says why it stopped", async () => {
    const extra = join(tempDir("keelson-sup-"), "extra.mjs");
    writeFileSync(extra, "export const fine = 1;\n");
    const run = await startSupervisor(["--workers", "2"], { env: { SUPERVISOR_EXTRA_MODULE: extra } });
    await run.waitFor(/worker\(s\) ready in/);
    const before = readyWorkers(run).map((w) => w.pid).toSorted();
    writeFileSync(extra, "export const broken = ;\n");
    const mark = run.output().length;
    process.kill(run.pid, "SIGHUP");
    const stopped = await run.waitFor(/reload stopped/, 20_000, mark);
    expect(stopped).toMatch(
      /reload stopped after 0 worker\(s\) replaced in \d+ms: replacement worker 1 \(pid \d+\) for worker 1 \(pid \d+\): exited \(code 1\) before it was ready: SyntaxError: Unexpected token ';'; keeping the old worker/,
    );
    expect(run.output().slice(mark)).not.toMatch(/died unexpectedly|stopping/);
    const serving = new Set<number>();
    for (let i = 0; i < 8; i++) serving.add((await get(run.port, "/whoami")).body.pid);
    expect([...serving].toSorted()).toEqual(before);
    process.kill(run.pid, "SIGTERM");
    expect(await run.exited).toEqual({ code: 0, signal: null });
  });
});
