// A stalled reader of the supervisor's stdout (a stuck log shipper, a paused `docker logs`): a real
// FIFO whose reader, a real `cat`, is SIGSTOPped. The service must go on serving, answer its
// health and metrics, stop on SIGTERM, and say how many lines it dropped once the reader is back.
import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, mkdtempSync, openSync, rmSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { adopt, freePort, killAllChildren, spawnChild } from "./helpers/child.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const folders: string[] = [];

afterEach(() => {
  killAllChildren();
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

/** GET with a deadline; resolves with the status and body. */
function fetchText(port: number, path: string, timeoutMs = 5000): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, agent: false, timeout: timeoutMs }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (body += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("timeout", () => req.destroy(new Error(`GET ${path} got no answer within ${timeoutMs}ms`)));
    req.on("error", reject);
    req.end();
  });
}

function droppedTotal(exposition: string): number {
  const match = /^keelson_log_lines_dropped_total (\d+)/m.exec(exposition);
  if (match === null) throw new Error(`no keelson_log_lines_dropped_total in:\n${exposition.slice(0, 400)}`);
  return Number(match[1]);
}

describe("supervisor: a stalled stdout reader", () => {
  it("keeps serving, answers /health and /metrics, stops on SIGTERM with exit 0, and reports the dropped lines", async () => {
    const folder = mkdtempSync(join(tmpdir(), "keelson-stall-"));
    folders.push(folder);
    const fifo = join(folder, "stdout.fifo");
    const mkfifo = spawnChild(["mkfifo", fifo]);
    expect((await mkfifo.exited).code).toBe(0);
    // The reader: cat copies the FIFO to the test. SIGSTOP on cat is the stalled log shipper.
    const reader = spawnChild(["cat", fifo]);
    // O_RDWR opens a FIFO without waiting for the other end; the supervisor inherits it as stdout.
    const writeEnd = openSync(fifo, "r+");
    const [port, metricsPort] = [await freePort(), await freePort()];
    let supervisor: ChildProcess;
    try {
      supervisor = spawn(process.execPath, ["--import", "tsx", "cli/cli.ts", "start", "test/fixtures/supervisor-app.ts",
        "--port", String(port), "--workers", "2", "--metrics-port", String(metricsPort)], {
        cwd: ROOT, stdio: ["ignore", writeEnd, "pipe"], detached: true,
        env: { ...process.env, NODE_ENV: "development", SUPERVISOR_METRICS: "1" },
      });
    } finally {
      closeSync(writeEnd);
    }
    adopt(supervisor, { group: true });
    let stderr = "";
    supervisor.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
    const exited = new Promise<number | null>((resolve) => supervisor.once("exit", (code) => resolve(code)));
    await reader.waitFor(/worker\(s\) ready in/);

    reader.kill("SIGSTOP");
    // 4 × 16 lines of 64 KiB from the workers (4 MiB) plus a request line each: far past the
    // FIFO (64 KiB) and the 1 MiB log buffers.
    for (let round = 0; round < 4; round++) {
      const burst = await fetchText(port, "/burst?count=16&bytes=65536");
      expect(burst.status).toBe(200);
    }
    for (let i = 0; i < 20; i++) expect((await fetchText(port, "/health")).status).toBe(200);
    const metrics = await fetchText(metricsPort, "/metrics");
    expect(metrics.status).toBe(200);
    expect(droppedTotal(metrics.body)).toBeGreaterThan(0);
    expect((await fetchText(port, "/metrics")).status).toBe(200);

    // The reader is back: the backlog goes out, then a line says how many lines were lost.
    const mark = reader.output().length;
    reader.kill("SIGCONT");
    const report = await reader.waitFor(/log line\(s\) dropped over [\d.]+s: the reader of this output/, { from: mark, timeoutMs: 15_000 });
    expect(report).toMatch(/^\[WARN\] .* \d+ log line\(s\) dropped/);
    expect((await fetchText(port, "/health")).status).toBe(200);

    // Stalled again, then SIGTERM: the supervisor drains its workers and exits 0 (the exit
    // flush waits for the reader a bounded time, then gives up).
    reader.kill("SIGSTOP");
    for (let round = 0; round < 2; round++) expect((await fetchText(port, "/burst?count=16&bytes=65536")).status).toBe(200);
    const stopAt = performance.now();
    process.kill(supervisor.pid ?? 0, "SIGTERM");
    expect(await exited).toBe(0);
    expect(performance.now() - stopAt).toBeLessThan(15_000);
    expect(stderr).not.toMatch(/watchdog/);
    reader.kill("SIGCONT");
  }, 60_000);
});
