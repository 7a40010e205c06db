// File-descriptor exhaustion as a process test: the supervisor runs under a real soft limit of
// 256 descriptors (prlimit) and the test opens 1,500 real connections. node:http survives
// EMFILE; nothing of keelson's may turn it into a crash, and `keelson status` shows the fds.
import { mkdtempSync, rmSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { sendControl } from "../supervisor/control-socket.js";
import type { StatusReport } from "../supervisor/status.js";
import { freePort, get, killAll, readyWorkers, sleep, startSupervisor } from "./fixtures/supervisor-harness.js";

const sockets: Socket[] = [];
const folders: string[] = [];

afterEach(() => {
  for (const socket of sockets.splice(0)) socket.destroy();
  killAll();
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

async function status(path: string): Promise<StatusReport> {
  const reply = await sendControl(path, { command: "status" }, 5000);
  if (!reply.ok || !("status" in reply)) throw new Error(`unexpected reply ${JSON.stringify(reply)}`);
  return reply.status;
}

/** Opens `count` connections and resolves once each is connected or has failed. */
async function openConnections(port: number, count: number): Promise<number> {
  const settled = await Promise.all(Array.from({ length: count }, () => new Promise<boolean>((resolve) => {
    const socket = connect(port, "127.0.0.1");
    sockets.push(socket);
    socket.once("connect", () => resolve(true));
    socket.once("error", () => resolve(false));
  })));
  return settled.filter(Boolean).length;
}

describe("supervisor: file descriptors exhausted", () => {
  it("1,500 connections under a 256-descriptor limit: no worker dies; status, /health and /metrics answer; status shows fds/limit", async () => {
    const folder = mkdtempSync(join(tmpdir(), "keelson-fds-"));
    folders.push(folder);
    const control = join(folder, "control.sock");
    const metricsPort = await freePort();
    const run = await startSupervisor(
      ["--workers", "2", "--heartbeat-interval", "200", "--control-socket", control, "--metrics-port", String(metricsPort)],
      { wrap: ["prlimit", "--nofile=256:256", "--"], detached: true, env: { SUPERVISOR_METRICS: "1" } },
    );
    await run.waitFor(/worker\(s\) ready in/);
    const before = readyWorkers(run).map((worker) => worker.pid).toSorted();
    const idle = await status(control);
    expect(idle.primary.fdLimit).toBe(256);
    expect(idle.primary.fds).toBeGreaterThan(5);
    expect(idle.primary.fds).toBeLessThan(100);

    const mark = run.output().length;
    expect(await openConnections(run.port, 1500)).toBeGreaterThan(256);
    // Several stats periods (200 ms) with every descriptor of both workers in use.
    await sleep(3000);
    // Asked while exhausted, the status answers or fails cleanly; it must not crash anything.
    const during = await status(control).catch(() => undefined);
    if (during !== undefined) {
      for (const worker of during.workers) if (worker.stats !== undefined) expect(worker.stats.fdLimit).toBe(256);
      // Far above the idle count (how close to 256 depends on how far the handoffs got).
      expect(Math.max(...during.workers.map((worker) => worker.stats?.fds ?? 0))).toBeGreaterThan(100);
    }
    await sleep(1000);
    expect(run.output().slice(mark)).not.toMatch(/died unexpectedly|EMFILE|crash loop/);

    for (const socket of sockets.splice(0)) socket.destroy();
    // Once the connections are gone the service answers again. A worker that could not receive a
    // connection at EMFILE (node:cluster then passes it no more) is restarted, not counted as a crash.
    let health = await get(run.port, "/health", 2000).catch(() => undefined);
    for (let attempt = 0; health?.status !== 200 && attempt < 60; attempt++) {
      await sleep(250);
      health = await get(run.port, "/health", 2000).catch(() => undefined);
    }
    expect(health?.status, run.output().slice(mark).split("\n").filter((line) => /primary/.test(line)).slice(-20).join("\n")).toBe(200);
    // Every slot serves again (round-robin reaches each worker on fresh connections), once a
    // worker that node:cluster stopped passing connections to has been found and replaced.
    const answered = new Set<string | null>();
    const deadline = performance.now() + 30_000;
    while (answered.size < 2 && performance.now() < deadline) {
      answered.add((await get(run.port, "/whoami", 5000)).body.worker);
      await sleep(100);
    }
    expect(answered.size, run.output().slice(mark).split("\n").filter((line) => /\[primary/.test(line)).slice(-15).join("\n")).toBe(2);
    const replaced = run.lines(/never reached it \(out of file descriptors\?\): node:cluster passes it no more \([^)]*\): restarting it/)
      .map((line) => Number(/pid (\d+)/.exec(line)?.[1]));
    // A worker that was just replaced has sent no stats yet (they come every 200 ms): wait for them.
    let after = await status(control);
    for (let attempt = 0; after.workers.some((worker) => worker.stats === undefined) && attempt < 50; attempt++) {
      await sleep(200);
      after = await status(control);
    }
    expect(after.breaker.crashes).toBe(0);
    expect(after.primary.fdLimit).toBe(256);
    for (const pid of before) {
      if (!replaced.includes(pid)) expect(after.workers.map((worker) => worker.pid)).toContain(pid);
    }
    for (const worker of after.workers) {
      expect(worker.stats?.fdLimit).toBe(256);
      expect(worker.stats?.fds).toBeGreaterThan(5);
    }
    const metrics = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
    expect(metrics.status).toBe(200);
    expect(run.output().slice(mark)).not.toMatch(/died unexpectedly|EMFILE|crash loop/);
    process.kill(run.pid, "SIGTERM");
    expect(await run.exited).toEqual({ code: 0, signal: null });
  }, 90_000);
});
