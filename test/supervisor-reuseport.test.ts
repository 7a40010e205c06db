// The reuseport balancer with real workers, in a network namespace of the test's own where
// net.ipv4.tcp_migrate_req=1 (the mode refuses to start without it): each worker owns a listener
// and the primary none, a rolling reload under a connection-per-request load fails no request, a
// port another program holds is refused, a blocked worker is still replaced.
import { readFileSync } from "node:fs";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { spawnChild } from "../harness/child.js";
import { sendControl } from "../supervisor/control-socket.js";
import type { StatusReport } from "../supervisor/status.js";
import { killAll, readyWorkers, sleep, startSupervisor, type Running } from "./fixtures/supervisor-harness.js";
import { createNetns, listenersOn, type Netns } from "../harness/netns.js";

const made = createNetns(`keelson-rp-${process.pid}`, { "net.ipv4.tcp_migrate_req": "1" });
const ns: Netns | undefined = typeof made === "string" ? undefined : made;
if (typeof made === "string") console.warn(`supervisor-reuseport: skipped: ${made}`);

afterEach(() => killAll());
afterAll(() => ns?.remove());

const PORT = 4100;
const SOCKET = `/tmp/keelson-rp-${process.pid}.sock`;

function start(args: string[], env: Record<string, string> = {}): Promise<Running> {
  return startSupervisor(["--balancer", "reuseport", "--metrics-port", "off", "--control-socket", SOCKET, ...args],
    { wrap: ns?.wrap, port: PORT, env });
}

/** A connection-per-request load inside the namespace; `finish()` stops it and returns its counts. */
async function closeLoad(concurrency = 8) {
  const load = spawnChild([...(ns?.wrap ?? []), process.execPath, "--import", "tsx", "test/fixtures/close-load.ts", String(PORT), String(concurrency)]);
  await load.waitFor(/load running/, { timeoutMs: 20_000 });
  return {
    async finish(): Promise<{ ok: number; failed: number; errors: Record<string, number>; workers: Record<string, number> }> {
      load.kill("SIGTERM");
      const line = await load.waitFor(/^load result /, { timeoutMs: 30_000 });
      return JSON.parse(line.slice("load result ".length)) as never;
    },
  };
}

describe.skipIf(ns === undefined)("supervisor: the reuseport balancer", () => {
  beforeAll(() => {
    expect(ns).toBeDefined();
  });

  it("each worker owns a listener on the port and the primary none; a SIGHUP reload under a connection-per-request load fails no request", async () => {
    const sup = await start(["--workers", "2"]);
    await sup.waitFor(/2 worker\(s\) ready in/, 30_000);
    const first = readyWorkers(sup).map((w) => w.pid);
    const listeners = listenersOn(PORT, [sup.pid, ...first]);
    expect(listeners).toHaveLength(2);
    expect(listeners.map((l) => l.owners).toSorted()).toEqual(first.map((pid) => [pid]).toSorted());
    // Reuseport workers run without allocation-site pretenuring and at V8's default young generation (worker-process.ts).
    for (const pid of first) {
      const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      expect(argv).toContain("--no-allocation-site-pretenuring");
      expect(argv.some((arg) => arg.includes("semi-space"))).toBe(false);
    }

    const load = await closeLoad();
    const from = sup.output().length;
    sup.child.kill("SIGHUP");
    await sup.waitFor(/reload complete: 2 worker\(s\) replaced/, 60_000, from);
    const result = await load.finish();
    expect(result.failed, JSON.stringify(result.errors)).toBe(0);
    expect(result.ok).toBeGreaterThan(20);

    const now = readyWorkers(sup).map((w) => w.pid).filter((pid) => !first.includes(pid));
    expect(now).toHaveLength(2);
    const after = listenersOn(PORT, [sup.pid, ...now]);
    expect(after.map((l) => l.owners).toSorted()).toEqual(now.map((pid) => [pid]).toSorted());

    // The balance made visible: each worker's accepted connections and requests, one each per
    // request here, in `keelson status` (figures arrive with the next heartbeat period).
    const counted = spawnChild([...(ns?.wrap ?? []), process.execPath, "--import", "tsx", "test/fixtures/close-load.ts", String(PORT), "4"],
      { env: { LOAD_COUNT: "200" } });
    const sent = JSON.parse((await counted.waitFor(/^load result /)).slice("load result ".length)) as { ok: number; failed: number };
    expect(sent).toMatchObject({ ok: 200, failed: 0 });
    let workers: StatusReport["workers"] = [];
    for (let tries = 0; tries < 100; tries++) {
      const reply = await sendControl(SOCKET, { command: "status" }, 5000);
      workers = reply.ok && "status" in reply ? reply.status.workers.filter((w) => now.includes(w.pid)) : [];
      // A heartbeat's figures can be taken between a connection's accept and its request's start:
      // wait for one in which every connection has its request.
      const settled = workers.every((w) => w.stats?.connections === w.stats?.requests);
      if (settled && workers.reduce((sum, w) => sum + (w.stats?.connections ?? 0), 0) >= 200) break;
      await sleep(200);
    }
    expect(workers.map((w) => w.stats?.connections).reduce((a = 0, b = 0) => a + b, 0)).toBeGreaterThanOrEqual(200);
    for (const worker of workers) expect(worker.stats?.connections).toBe(worker.stats?.requests);
    const table = spawnChild([process.execPath, "--import", "tsx", "cli/cli.ts", "status", "--socket", SOCKET]);
    await table.exited;
    expect(table.output()).toMatch(/req\/s\s+requests\s+conns/);
  }, 120_000);

  it("refuses a port another program already listens on, even with SO_REUSEPORT, before forking a worker", async () => {
    const holder = spawnChild([...(ns?.wrap ?? []), process.execPath, "-e",
      `require("node:net").createServer().listen({ port: ${PORT}, reusePort: true }, () => console.log("holding"))`]);
    await holder.waitFor(/holding/);
    const sup = await start(["--workers", "2"]);
    expect((await sup.exited).code).toBe(1);
    const output = sup.output();
    expect(output).toMatch(new RegExp(`stopped in \\d+ms with exit 1: startup failed: port ${PORT} is already in use \\(EADDRINUSE\\)`));
    expect(output).not.toMatch(/worker 1 \(pid \d+\) starting/);
    expect(listenersOn(PORT, [holder.pid])).toEqual([expect.objectContaining({ owners: [holder.pid] })]);
  }, 60_000);

  it("a worker whose event loop blocks is killed by the watchdog and replaced; its queued connections are served by the other", async () => {
    const sup = await start(["--workers", "2", "--heartbeat-interval", "200", "--watchdog-timeout", "2000"]);
    await sup.waitFor(/2 worker\(s\) ready in/, 30_000);
    // Connection per request until one lands on a worker that then blocks: hashing picks the worker.
    const block = spawnChild([...(ns?.wrap ?? []), "curl", "-s", "-m", "60", `http://127.0.0.1:${PORT}/block?ms=60000`]);
    await sup.waitFor(/block started/);
    const load = await closeLoad(4);
    const killed = await sup.waitFor(/watchdog: no heartbeat for \d+ms \(limit 2000ms\), event loop blocked/, 30_000);
    const id = /worker (\d+) \(pid (\d+)\)/.exec(killed);
    expect(id).not.toBeNull();
    await sup.waitFor(new RegExp(`worker ${id?.[1]} \\(pid (?!${id?.[2]}\\))\\d+\\) ready on`), 30_000);
    const result = await load.finish();
    expect(result.failed, JSON.stringify(result.errors)).toBe(0);
    expect(result.ok).toBeGreaterThan(0);
    await block.exited;
  }, 120_000);
});
