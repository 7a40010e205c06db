// `keelson status` and `keelson reload` with no name: the one supervisor started from this folder,
// whatever port it was started on (PORT unset), said by pid and port; with two, both are listed
// and one is asked for (exit 1). Real supervisors, their own control folder and project folder.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { killAllChildren, spawnChild } from "../harness/child.js";
import { freePort } from "./fixtures/supervisor-harness.js";

const ROOT = join(import.meta.dirname, "..");
const TSX = pathToFileURL(join(ROOT, "node_modules/tsx/dist/loader.mjs")).href;
const CLI = join(ROOT, "cli/cli.ts");
const runtime = mkdtempSync(join(tmpdir(), "keelson-status-run-"));
const folder = mkdtempSync(join(tmpdir(), "keelson-status-here-"));
// PORT unset: the folder is what names the supervisor, not the port.
const env = { XDG_RUNTIME_DIR: runtime, KEELSON_CONTROL_SOCKET: "", PORT: "", NODE_ENV: "development" };

afterEach(() => killAllChildren());
afterAll(() => {
  rmSync(runtime, { recursive: true, force: true });
  rmSync(folder, { recursive: true, force: true });
});

async function supervisorOn(port: number) {
  const child = spawnChild([process.execPath, "--import", TSX, CLI, "start", join(ROOT, "test/fixtures/supervisor-app.ts"),
    "--port", String(port), "--workers", "1", "--metrics-port", "off"], { cwd: folder, env, group: true });
  await child.waitFor(/control socket /, { timeoutMs: 30_000 });
  await child.waitFor(/worker\(s\) ready in/, { timeoutMs: 30_000 });
  return { child, pid: Number(/supervisor \(pid (\d+)\) starting/.exec(child.output())?.[1]) };
}

function keelson(...args: string[]) {
  return spawnSync(process.execPath, ["--import", TSX, CLI, ...args], { cwd: folder, env: { ...process.env, ...env }, encoding: "utf8", timeout: 60_000 });
}

describe("keelson status and reload with no name", () => {
  it("find the one supervisor of this folder on any port and say which; with two, list both and ask for one", async () => {
    const [first, second] = [await freePort(), await freePort()];
    const one = await supervisorOn(first);
    const said = `the supervisor of ${folder}: pid ${one.pid} (port ${first})`;

    const status = keelson("status");
    expect(status.status, status.stderr).toBe(0);
    expect(status.stdout).toContain(said);
    expect(status.stdout).toContain(`supervisor pid ${one.pid}`);
    // --json: stdout stays one JSON line, the line saying which goes to stderr.
    const json = keelson("status", "--json");
    expect(json.status, json.stderr).toBe(0);
    expect((JSON.parse(json.stdout) as { primary: { pid: number; port: number } }).primary).toMatchObject({ pid: one.pid, port: first });
    expect(json.stderr).toContain(said);
    const reload = keelson("reload");
    expect(reload.status, reload.stderr).toBe(0);
    expect(reload.stdout).toContain(said);
    expect(reload.stdout).toMatch(/reload complete: 1 worker\(s\) replaced/);

    const two = await supervisorOn(second);
    for (const verb of ["status", "reload"]) {
      const ambiguous = keelson(verb);
      expect(ambiguous.status, verb).toBe(1);
      const output = ambiguous.stdout + ambiguous.stderr;
      expect(output, verb).toContain(`2 supervisors run from ${folder}`);
      expect(output, verb).toContain(`pid ${one.pid} (port ${first})`);
      expect(output, verb).toContain(`pid ${two.pid} (port ${second})`);
      expect(output, verb).toContain(`name one: keelson ${verb} <pid|port>`);
    }
    // Named, each is found: by its port (argument or --port) or its pid.
    expect(keelson("status", String(second)).stdout).toContain(`supervisor pid ${two.pid}`);
    expect(keelson("status", "--port", String(first)).stdout).toContain(`supervisor pid ${one.pid}`);
    expect(keelson("status", String(two.pid), "--json").status).toBe(0);
    // PORT in the environment picks among them, as `keelson start` would have read it.
    const byEnv = spawnSync(process.execPath, ["--import", TSX, CLI, "status"], { cwd: folder, env: { ...process.env, ...env, PORT: String(second) }, encoding: "utf8", timeout: 60_000 });
    expect(byEnv.status, byEnv.stderr).toBe(0);
    expect(byEnv.stdout).toContain(`the supervisor of ${folder}: pid ${two.pid} (port ${second})`);
  }, 120_000);
});
