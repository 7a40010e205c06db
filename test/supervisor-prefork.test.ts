// The CLI's early fork (supervisor/prefork.ts) with real node:cluster workers, in this process as
// their primary: what a worker says and does before the supervisor adopts it reaches the
// supervisor's listeners afterwards, in order; a worker whose environment does not match is
// replaced; discard() kills what was not adopted. Through the whole CLI: every supervisor-*,
// cli-* and example-cluster suite starts this way.
import cluster from "node:cluster";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { resolveOptions, type ResolvedSupervisorOptions } from "../supervisor/options.js";
import { preforkWorkers, type PreforkedWorkers } from "../supervisor/prefork.js";
import { forkSettings, workerEnv, type WorkerProcess } from "../supervisor/worker-process.js";
import { captureLogs } from "./helpers/logs.js";
import { tempDir } from "./helpers/temp-dir.js";

const started: PreforkedWorkers[] = [];

afterEach(async () => {
  for (const early of started.splice(0)) early.discard();
  for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill("SIGKILL");
  await new Promise((resolve) => setTimeout(resolve, 50));
});

/** A worker entry written for one test (in a folder removed after it); the preload that every fork gets is loaded through tsx. */
function options(source: string, overrides: Partial<ResolvedSupervisorOptions> = {}): ResolvedSupervisorOptions {
  const entry = join(tempDir("keelson-prefork-"), "worker.mjs");
  writeFileSync(entry, source);
  return { ...resolveOptions({ entry, workers: 1, execArgv: ["--import", "tsx"], controlSocket: false, metricsPort: false, logger: captureLogs().logger }), ...overrides };
}

function prefork(resolved: ResolvedSupervisorOptions): PreforkedWorkers {
  const early = preforkWorkers(resolved);
  started.push(early);
  return early;
}

type Seen = Array<string>;

/** Attaches what WorkerHandle attaches, and records what reaches it. */
function listen(worker: WorkerProcess): { seen: Seen; exited: Promise<void> } {
  const seen: Seen = [];
  worker.on("message", (message) => seen.push(`message ${JSON.stringify(message)}`));
  worker.onceDisconnect(() => seen.push("disconnect"));
  const exited = new Promise<void>((resolve) => worker.onceExit((code, signal) => {
    seen.push(`exit ${code} ${signal}`);
    resolve();
  }));
  return { seen, exited };
}

const exitOf = (pid: number | undefined): Promise<{ code: number | null; signal: string | null }> =>
  new Promise((resolve) => {
    const onExit = (worker: { process: { pid?: number } }, code: number | null, signal: string | null): void => {
      if (worker.process.pid !== pid) return;
      cluster.off("exit", onExit);
      resolve({ code, signal });
    };
    cluster.on("exit", onExit);
  });

describe("the CLI's early fork (prefork.ts), real workers", () => {
  it("a worker that spoke and died before adoption: its messages, disconnect and exit reach the supervisor's listeners in order", async () => {
    const resolved = options(`
      process.send({ n: 1 }); process.send({ n: 2 }); process.send({ n: 3 }, () => process.exit(3));
    `);
    const early = prefork(resolved);
    const forks = Object.values(cluster.workers ?? {}).map((worker) => worker?.process.pid);
    expect(forks).toHaveLength(1);
    // Wait until node:cluster itself has seen the exit: everything happened before adoption.
    await exitOf(forks[0]);
    const worker = early.fork(forkSettings(resolved))(workerEnv(resolved, 1));
    expect(worker.pid).toBe(forks[0]);
    const { seen, exited } = listen(worker);
    expect(seen).toEqual([]);
    await exited;
    expect(seen).toEqual(['message {"n":1}', 'message {"n":2}', 'message {"n":3}', "disconnect", "exit 3 null"]);
  });

  it("a worker adopted alive is live afterwards: it answers the supervisor, and what it said first comes first", async () => {
    const resolved = options(`
      process.send({ hello: true });
      process.on("message", (message) => message.type === "bye" ? process.exit(0) : process.send({ echo: message }));
    `);
    const early = prefork(resolved);
    const worker = early.fork(forkSettings(resolved))(workerEnv(resolved, 1));
    const { seen, exited } = listen(worker);
    worker.send({ keelson: 1, type: "ping", payload: 1 });
    await expect.poll(() => seen.length, { timeout: 10_000 }).toBe(2);
    expect(seen).toEqual(['message {"hello":true}', 'message {"echo":{"keelson":1,"type":"ping","payload":1}}']);
    worker.send({ keelson: 1, type: "bye", payload: 1 });
    await exited;
    expect(seen.at(-1)).toBe("exit 0 null");
  });

  it("a supervisor asking for another environment gets a new worker; the early one is killed", async () => {
    const resolved = options(`setInterval(() => {}, 1000);`);
    const early = prefork(resolved);
    const firstPid = Object.values(cluster.workers ?? {})[0]?.process.pid;
    const firstExit = exitOf(firstPid);
    const worker = early.fork(forkSettings(resolved))({ ...workerEnv(resolved, 1), EXTRA: "1" });
    expect(worker.pid).not.toBe(firstPid);
    expect(await firstExit).toEqual({ code: null, signal: "SIGKILL" });
    worker.kill("SIGKILL");
  });

  it("discard() kills every worker not adopted", async () => {
    const resolved = options(`setInterval(() => {}, 1000);`, { workers: 2 });
    const early = prefork(resolved);
    const pids = Object.values(cluster.workers ?? {}).map((worker) => worker?.process.pid);
    expect(pids).toHaveLength(2);
    const exits = Promise.all(pids.map(exitOf));
    early.discard();
    expect(await exits).toEqual([{ code: null, signal: "SIGKILL" }, { code: null, signal: "SIGKILL" }]);
  });
});
