// A SIGTERM to the command that started a supervisor stops it, whatever that command is: npm start,
// npx, a wrapper script or node itself; its workers go and the port is free. One meant to outlive
// its parent (nohup, setsid) keeps serving when the parent dies.
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { detachedFrom } from "../cli/parent-watch.js";
import { killAllChildren, spawnChild, type Child } from "../harness/child.js";
import { freePort, get, sleep } from "./fixtures/supervisor-harness.js";

const ROOT = join(import.meta.dirname, "..");
const TSX = pathToFileURL(join(ROOT, "node_modules/tsx/dist/loader.mjs")).href;
const NODE = process.execPath;
const project = mkdtempSync(join(tmpdir(), "keelson-signals-"));
/** Pids to SIGKILL after each test: supervisors in a session of their own, out of the harness's groups. */
const strays = new Set<number>();

afterEach(() => {
  for (const pid of strays) kill(pid, "SIGKILL");
  strays.clear();
  killAllChildren();
});
afterAll(() => rmSync(project, { recursive: true, force: true }));

function kill(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // Already gone.
  }
}

/** A process that exists and is not a zombie waiting for its new parent to reap it. */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

async function until(test: () => boolean | Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await test())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

const refused = (port: number) => get(port, "/whoami", 2000).then(() => false, (error: Error) => /ECONNREFUSED/.test(error.message));

/** `keelson start` of the fixture App on `port`, as a command line. */
const keelsonStart = (port: number) =>
  `${NODE} --import ${TSX} ${join(ROOT, "cli/cli.ts")} start ${join(ROOT, "test/fixtures/supervisor-app.ts")} --port ${port} --workers 2 --metrics-port off`;

/** Where the supervisor writes its lines: the outer command's pipes, or a file when it is detached. */
interface Started {
  outer: Child;
  log: () => string;
}

/** The supervisor's pid and its workers', from its lines, once it is ready. */
async function readyPids(started: Started): Promise<{ supervisor: number; workers: number[] }> {
  await until(() => /worker\(s\) ready in/.test(started.log()), "the ready line");
  const supervisor = Number(/supervisor \(pid (\d+)\) starting/.exec(started.log())?.[1]);
  const workers = [...started.log().matchAll(/worker \d+ \(pid (\d+)\) ready on/g)].map((match) => Number(match[1]));
  expect(workers).toHaveLength(2);
  return { supervisor, workers };
}

/** Runs `argv` in its own process group (so that afterEach reaches what it leaves), with node and npm on PATH. */
function outer(argv: string[], cwd = project): Started {
  const child = spawnChild(argv, { cwd, group: true, env: { NODE_ENV: "development", PATH: `${dirname(NODE)}:${process.env.PATH ?? ""}` } });
  return { outer: child, log: child.output };
}

/** SIGTERM to the outer command only; then the supervisor, its workers and the port must all be gone. */
async function expectStoppedWith(started: Started, port: number, parentLine: boolean): Promise<void> {
  const { supervisor, workers } = await readyPids(started);
  expect((await get(port, "/whoami")).status).toBe(200);
  const outerExit = new Promise((resolve) => started.outer.process.once("exit", resolve));
  started.outer.process.kill("SIGTERM");
  await outerExit;
  await until(() => !running(supervisor) && workers.every((pid) => !running(pid)), "the supervisor and its workers to exit");
  expect(await refused(port)).toBe(true);
  if (parentLine) expect(started.log()).toMatch(/parent process \(pid \d+\) exited: stopping as on SIGTERM/);
  expect(started.log()).toMatch(/stopped: 2 worker\(s\) exited cleanly/);
}

describe("keelson start: a SIGTERM to the command that started it", () => {
  it("npm start (npm, then sh -c, then keelson): the supervisor stops, its workers go, the port is free", async () => {
    const port = await freePort();
    const dir = join(project, "npm-start");
    mkdirSync(dir);
    writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "signals", private: true, scripts: { start: keelsonStart(port) } }));
    await expectStoppedWith(outer(["npm", "start", "--silent"], dir), port, true);
  }, 90_000);

  it("npx keelson start: the same", async () => {
    const port = await freePort();
    const dir = join(project, "npx");
    mkdirSync(join(dir, "node_modules/.bin"), { recursive: true });
    writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "signals-npx", private: true }));
    // keelson's bin is a node script; this one execs node on the sources, so the tree is the same.
    const bin = join(dir, "node_modules/.bin/keelson");
    writeFileSync(bin, `#!/bin/sh\nexec ${NODE} --import ${TSX} ${join(ROOT, "cli/cli.ts")} "$@"\n`);
    chmodSync(bin, 0o755);
    const args = ["start", join(ROOT, "test/fixtures/supervisor-app.ts"), "--port", String(port), "--workers", "2", "--metrics-port", "off"];
    await expectStoppedWith(outer(["npx", "--no-install", "keelson", ...args], dir), port, true);
  }, 90_000);

  it("a wrapper script that runs keelson without exec: the shell dies of the signal, the supervisor stops", async () => {
    const port = await freePort();
    const script = join(project, "run.sh");
    writeFileSync(script, `#!/bin/sh\n${keelsonStart(port)}\necho "after keelson"\n`);
    await expectStoppedWith(outer(["sh", script]), port, true);
  }, 90_000);

  it("node directly: its own SIGTERM, as before", async () => {
    const port = await freePort();
    await expectStoppedWith(outer(keelsonStart(port).split(" "), ROOT), port, false);
  }, 90_000);
});

/** `bash -c '<prefix> keelson start … & wait'`: bash stays the parent until it is killed. */
async function detachedUnderBash(prefix: string): Promise<{ started: Started; supervisor: number; workers: number[]; port: number }> {
  const port = await freePort();
  const logFile = join(project, `${prefix.replaceAll(/\W/g, "") || "plain"}-${port}.log`);
  // bash, not sh: nohup's trace is the `$_` bash puts in the command's environment.
  const started = outer(["bash", "-c", `${prefix} ${keelsonStart(port)} > ${logFile} 2>&1 & wait`]);
  const log = () => {
    try {
      return readFileSync(logFile, "utf8");
    } catch {
      return "";
    }
  };
  const pids = await readyPids({ outer: started.outer, log });
  strays.add(pids.supervisor);
  return { started: { outer: started.outer, log }, ...pids, port };
}

describe("keelson start meant to outlive its parent", () => {
  it.each(["nohup", "setsid"])("%s: the parent shell dies, the supervisor keeps serving until signalled itself", async (prefix) => {
    const { started, supervisor, workers, port } = await detachedUnderBash(prefix);
    const outerExit = new Promise((resolve) => started.outer.process.once("exit", resolve));
    started.outer.process.kill("SIGTERM");
    await outerExit;
    // Several of the watch's periods: it would have stopped by now.
    await sleep(2000);
    expect(running(supervisor)).toBe(true);
    expect((await get(port, "/whoami")).status).toBe(200);
    expect(started.log()).not.toMatch(/parent process/);
    kill(supervisor, "SIGTERM");
    await until(() => !running(supervisor) && workers.every((pid) => !running(pid)), "the supervisor and its workers to exit");
    expect(await refused(port)).toBe(true);
  }, 90_000);

  it("the same supervisor without nohup or setsid stops with the shell: what the two above are compared with", async () => {
    const { started, supervisor, workers, port } = await detachedUnderBash("");
    started.outer.process.kill("SIGTERM");
    await until(() => !running(supervisor) && workers.every((pid) => !running(pid)), "the supervisor and its workers to exit");
    expect(started.log()).toMatch(/parent process \(pid \d+\) exited: stopping as on SIGTERM/);
    expect(await refused(port)).toBe(true);
  }, 90_000);
});

/** A /proc/self/stat of this process in `session` (the command name holds spaces and parentheses, as it may). */
function fakeStat(session: number): string {
  const path = join(project, `stat-${session}`);
  writeFileSync(path, `${process.pid} (node (a b)) S 4120 4120 ${session} 0 -1\n`);
  return path;
}

describe("detachedFrom: who is meant to outlive its parent", () => {
  it("init as the parent, a session of its own, nohup from bash; else undefined (watched)", () => {
    expect(detachedFrom(1, {}, fakeStat(1))).toBe("init");
    expect(detachedFrom(4120, {}, fakeStat(process.pid))).toBe("session");
    expect(detachedFrom(4120, { _: "/usr/bin/nohup" }, fakeStat(1))).toBe("nohup");
    expect(detachedFrom(4120, { _: "/usr/bin/node" }, fakeStat(1))).toBeUndefined();
    expect(detachedFrom(4120, {}, join(project, "no-such-stat"))).toBeUndefined();
  });
});
