// keelson status / keelson reload against a real supervisor over its control socket.
import { execFile } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { defaultControlSocket } from "../supervisor/control-path.js";
import { sendControl, type ControlReply } from "../supervisor/control-socket.js";
import type { StatusReport } from "../supervisor/status.js";
import { failedRequests, get, killAll, sleep, startSupervisor, underLoad, type Running } from "./fixtures/supervisor-harness.js";
import { tempDir } from "./helpers/temp-dir.js";

afterEach(() => killAll());

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const run = promisify(execFile);

/** `keelson <args>` from the repository root with PORT set, as a user would type it. */
async function keelson(args: string[], port: number): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, ["--import", "tsx", "cli/cli.ts", ...args], {
      cwd: ROOT, env: { ...process.env, PORT: String(port), KEELSON_CONTROL_SOCKET: "" }, timeout: 60_000,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

async function status(socket: string): Promise<StatusReport> {
  const reply = await sendControl(socket, { command: "status" }, 5000);
  if (!reply.ok || !("status" in reply)) throw new Error(`unexpected reply ${JSON.stringify(reply)}`);
  return reply.status;
}

/** The socket path the supervisor printed at start. */
async function socketOf(sup: Running): Promise<string> {
  const line = await sup.waitFor(/control socket /);
  return /control socket (\S+) /.exec(line)?.[1] ?? "";
}

describe("supervisor: control socket", () => {
  it("keelson status finds the supervisor of this folder and PORT; --json has every worker's figures", async () => {
    const sup = await startSupervisor(["--workers", "2"]);
    await sup.waitFor(/worker\(s\) ready in/);
    const socket = await socketOf(sup);
    expect(socket).toBe(defaultControlSocket(ROOT.replace(/\/$/, ""), sup.port));
    expect(statSync(socket).mode & 0o777).toBe(0o600);
    expect(statSync(join(socket, "..")).mode & 0o777).toBe(0o700);
    for (let i = 0; i < 10; i++) expect((await get(sup.port, "/whoami")).status).toBe(200);
    // Workers report every heartbeat period: wait until both reports count the requests.
    let report = await status(socket);
    while (report.workers.reduce((sum, w) => sum + (w.stats?.requests ?? 0), 0) < 10) {
      await sleep(200);
      report = await status(socket);
    }
    expect(report.primary).toMatchObject({ pid: sup.pid, workers: 2, reloading: false, stopping: false });
    expect(report.breaker).toEqual({ state: "closed", crashes: 0, maxCrashes: 10, windowMs: 60_000 });
    expect(report.workers.map((w) => [w.id, w.generation, w.state, w.restarts])).toEqual([[1, 1, "ready", 0], [2, 1, "ready", 0]]);
    for (const worker of report.workers) {
      expect(worker.stats?.rss).toBeGreaterThan(10 * 1024 * 1024);
      expect(worker.stats?.heapUsed).toBeGreaterThan(1024 * 1024);
      expect(worker.stats?.elu).toBeGreaterThanOrEqual(0);
      expect(worker.stats?.delayP99Ms).toBeGreaterThanOrEqual(0);
      expect(worker.stats?.inflight).toBe(0);
    }

    const json = await keelson(["status", "--json"], sup.port);
    expect(json.code).toBe(0);
    expect((JSON.parse(json.stdout) as StatusReport).workers.map((w) => w.pid).toSorted()).toEqual(report.workers.map((w) => w.pid).toSorted());
    const human = await keelson(["status"], sup.port);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/supervisor pid \d+, up .*, 2 worker\(s\) of test\/fixtures\/supervisor-app\.ts/);
    expect(human.stdout).toMatch(/breaker closed: 0 crash\(es\)/);
    expect(human.stdout).toMatch(/^worker\s+pid\s+gen\s+state\s+uptime\s+restarts\s+rss\s+heap\s+fds\s+elu\s+delay p99\s+in flight\s+req\/s\s+requests\s+conns$/m);
    expect(human.stdout).toMatch(/^primary\s+\d+\s+/m);
    for (const worker of report.workers) expect(human.stdout).toMatch(new RegExp(`^${worker.id}\\s+${worker.pid}\\s+1\\s+ready\\s+`, "m"));

    // --port names the one of this folder serving that port: none here. (PORT alone does not name
    // one: with no name, status finds the one of this folder whatever its port, test/cli-status-here.test.ts.)
    const other = await keelson(["status", "--port", String(sup.port + 1)], sup.port + 1);
    expect(other.code).toBe(1);
    expect(other.stderr).toMatch(/no supervisor at \S+\.sock: none runs from this folder with this PORT/);
    process.kill(sup.pid, "SIGTERM");
    expect(await sup.exited).toEqual({ code: 0, signal: null });
    expect(existsSync(socket)).toBe(false);
  });

  it("ten reloads on the socket and ten SIGHUPs back to back under load: two runs, never overlapping, 0 errors", async () => {
    const sup = await startSupervisor(["--workers", "2"]);
    await sup.waitFor(/worker\(s\) ready in/);
    const socket = await socketOf(sup);
    const mark = sup.output().length;
    let replies: ControlReply[] = [];
    const result = await underLoad(sup.port, "/whoami", async () => {
      await sleep(1000);
      const asked = Array.from({ length: 10 }, () => sendControl(socket, { command: "reload" }, 60_000));
      for (let i = 0; i < 10; i++) process.kill(sup.pid, "SIGHUP");
      replies = await Promise.all(asked);
    });
    expect(failedRequests(result, 500)).toEqual({ errors: 0, timeouts: 0, non2xx: 0, enough: true });
    for (const reply of replies) expect(reply).toMatchObject({ ok: true, reload: { ok: true, replaced: 2 } });
    // Every request arrived while the first run was going: one follow-up run covers them all.
    const log = sup.output().slice(mark).split("\n").filter((line) => /reload: replacing|reload complete|reload stopped/.test(line));
    expect(log.map((line) => /reload: replacing/.test(line) ? "start" : "end")).toEqual(["start", "end", "start", "end"]);

    const cli = await keelson(["reload"], sup.port);
    expect(cli.code).toBe(0);
    expect(cli.stdout).toMatch(/reload complete: 2 worker\(s\) replaced in \d.*: worker 1 \(pid \d+ → \d+\), worker 2 \(pid \d+ → \d+\)/);
    const after = await status(socket);
    expect(after.workers.map((w) => [w.id, w.generation])).toEqual([[1, 4], [2, 4]]);
    process.kill(sup.pid, "SIGTERM");
    expect(await sup.exited).toEqual({ code: 0, signal: null });
  }, 120_000);

  it("another user cannot connect: EACCES on the default socket (0700 folder) and on a chosen one (0600 socket)", async () => {
    const open = tempDir("keelson-ctl-");
    chmodSync(open, 0o777);
    const chosen = join(open, "control.sock");
    const first = await startSupervisor(["--workers", "1"]);
    const second = await startSupervisor(["--workers", "1", "--control-socket", chosen]);
    await first.waitFor(/worker\(s\) ready in/);
    await second.waitFor(/worker\(s\) ready in/);
    expect(await socketOf(second)).toBe(chosen);
    expect(statSync(chosen).mode & 0o777).toBe(0o600);
    // `nobody` runs a copy of this Node from a world-readable folder: the repository's own Node
    // (.cache/node) may sit inside a private (0700) folder, such as a home directory or `mktemp -d`.
    const probeDir = mkdtempSync(join(tmpdir(), "keelson-probe-"));
    try {
      chmodSync(probeDir, 0o755);
      const node = join(probeDir, "node");
      copyFileSync(process.execPath, node);
      chmodSync(node, 0o755);
      for (const socket of [await socketOf(first), chosen]) {
        const probe = `require("net").connect(${JSON.stringify(socket)}).on("connect", () => { console.log("CONNECTED"); process.exit(0); })`
          + `.on("error", (e) => { console.log(e.code); process.exit(0); })`;
        const { stdout } = await run("runuser", ["-u", "nobody", "--", node, "-e", probe], { cwd: probeDir, timeout: 20_000 });
        expect(stdout.trim()).toBe("EACCES");
        expect((await status(socket)).workers).toHaveLength(1);
      }
    } finally {
      rmSync(probeDir, { recursive: true, force: true });
    }
  });

  it("replaces the socket file left by a supervisor that was SIGKILLed", async () => {
    const dead = await startSupervisor(["--workers", "1"]);
    await dead.waitFor(/worker\(s\) ready in/);
    const socket = await socketOf(dead);
    process.kill(dead.pid, "SIGKILL");
    await dead.exited;
    expect(existsSync(socket)).toBe(true);
    const stale = await keelson(["status", "--socket", socket], dead.port);
    expect(stale.stderr).toMatch(/a stale socket: its supervisor is gone/);
    const next = await startSupervisor(["--workers", "1", "--control-socket", socket]);
    await next.waitFor(/worker\(s\) ready in/);
    expect(await socketOf(next)).toBe(socket);
    expect((await status(socket)).primary.pid).toBe(next.pid);
  });
});
