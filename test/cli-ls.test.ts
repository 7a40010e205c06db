// keelson ls, and status/reload naming one supervisor by pid, port or folder from any folder;
// what a killed supervisor left (its record, its socket) is cleaned up and shown as stale.
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { controlSocketFolder } from "../supervisor/control-path.js";
import type { FoundSupervisor } from "../supervisor/registry.js";
import type { StatusReport } from "../supervisor/status.js";
import { killAll, startSupervisor, type Running } from "./fixtures/supervisor-harness.js";

const ROOT = resolve(import.meta.dirname, "..");
const TSX = import.meta.resolve("tsx");
const run = promisify(execFile);
const elsewhere = mkdtempSync(join(tmpdir(), "keelson-ls-"));
// A control folder of this file's own ($XDG_RUNTIME_DIR/keelson): the cleanup `keelson ls` does
// never reaches the sockets other test files (running at the same time) look at.
const runtimeDir = mkdtempSync(join(tmpdir(), "keelson-ls-runtime-"));
const ENV = { XDG_RUNTIME_DIR: runtimeDir };
const start = (args: string[]) => startSupervisor(args, { env: ENV });

afterEach(() => killAll());
afterAll(() => {
  rmSync(elsewhere, { recursive: true, force: true });
  rmSync(runtimeDir, { recursive: true, force: true });
});

/** `keelson <args>` from a folder that has nothing to do with the services, without PORT. */
async function keelson(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, ["--import", TSX, join(ROOT, "cli/cli.ts"), ...args], {
      cwd: elsewhere, env: { ...process.env, ...ENV, PORT: "", KEELSON_CONTROL_SOCKET: "" }, timeout: 60_000,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

async function socketOf(sup: Running): Promise<string> {
  return /control socket (\S+) /.exec(await sup.waitFor(/control socket /))?.[1] ?? "";
}

describe("keelson ls", () => {
  it("lists every supervisor of this user (default and chosen sockets) and cleans up after a killed one", async () => {
    const chosen = join(elsewhere, "chosen.sock");
    const first = await start(["--workers", "2"]);
    const second = await start(["--workers", "1", "--control-socket", chosen]);
    const killed = await start(["--workers", "1"]);
    for (const sup of [first, second, killed]) await sup.waitFor(/worker\(s\) ready in/);
    const firstSocket = await socketOf(first);
    const killedSocket = await socketOf(killed);
    process.kill(killed.pid, "SIGKILL");
    await killed.exited;
    const record = join(controlSocketFolder(ENV), `${killed.pid}.json`);
    expect(existsSync(killedSocket) && existsSync(record)).toBe(true);

    const json = await keelson(["ls", "--json"]);
    expect(json.code, json.stderr).toBe(0);
    const found = JSON.parse(json.stdout) as FoundSupervisor[];
    const byPid = (pid: number) => found.find((entry) => entry.pid === pid);
    expect(byPid(first.pid)).toMatchObject({ state: "running", socket: firstSocket, status: { primary: { cwd: ROOT, port: first.port, workers: 2, entry: "test/fixtures/supervisor-app.ts" } } });
    expect(byPid(second.pid)).toMatchObject({ state: "running", socket: chosen, status: { primary: { port: second.port, workers: 1 } } });
    expect(byPid(killed.pid)).toEqual({ state: "stale", pid: killed.pid, socket: killedSocket, removed: true });
    expect(existsSync(killedSocket) || existsSync(record)).toBe(false);

    const table = await keelson(["ls"]);
    expect(table.stdout).toMatch(/^pid\s+folder\s+entry\s+port\s+workers\s+uptime\s+socket$/m);
    expect(table.stdout).toMatch(new RegExp(`^${first.pid}\\s+${ROOT}\\s+test/fixtures/supervisor-app\\.ts\\s+${first.port}\\s+2/2\\s+\\S+\\s+${firstSocket}$`, "m"));
    expect(table.stdout).toMatch(new RegExp(`^${second.pid}\\s+.*\\s+${second.port}\\s+1/1\\s+\\S+\\s+${chosen}$`, "m"));

    process.kill(second.pid, "SIGTERM");
    expect(await second.exited).toEqual({ code: 0, signal: null });
    // A clean stop takes its record and its socket along.
    expect(existsSync(join(controlSocketFolder(ENV), `${second.pid}.json`)) || existsSync(chosen)).toBe(false);
  }, 90_000);
});

describe("keelson status / reload <pid|port|folder>, from any folder", () => {
  it("finds the supervisor by the port it serves, by its pid, or by its folder, and says what runs when none matches", async () => {
    const sup = await start(["--workers", "1"]);
    await sup.waitFor(/worker\(s\) ready in/);

    const byPort = await keelson(["status", String(sup.port), "--json"]);
    expect(byPort.code, byPort.stderr).toBe(0);
    expect((JSON.parse(byPort.stdout) as StatusReport).primary.pid).toBe(sup.pid);

    const reload = await keelson(["reload", String(sup.pid)]);
    expect(reload.code, reload.stderr).toBe(0);
    expect(reload.stdout).toMatch(/reload complete: 1 worker\(s\) replaced/);

    const other = await start(["--workers", "1"]);
    await other.waitFor(/worker\(s\) ready in/);
    const byFolder = await keelson(["status", ROOT]);
    expect(byFolder.code).toBe(1);
    expect(byFolder.stderr).toMatch(/2 supervisors match ".*": pid \d+ .*, pid \d+ .*; name one by its pid/);
    process.kill(other.pid, "SIGTERM");
    await other.exited;
    const alone = await keelson(["status", ROOT, "--json"]);
    expect(alone.code, alone.stderr).toBe(0);
    expect((JSON.parse(alone.stdout) as StatusReport).primary.pid).toBe(sup.pid);

    const none = await keelson(["status", join(elsewhere, "nothing-here")]);
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/no running supervisor started from .*nothing-here; running: .*pid \d+/);
    // From an unrelated folder without a name: the default socket is not there, and the message says how to find one.
    const here = await keelson(["status"]);
    expect(here.code).toBe(1);
    expect(here.stderr).toMatch(/keelson ls lists every supervisor; name one: keelson status <pid\|port\|folder>/);
  }, 90_000);
});
