import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { parseExposition, type Exposition } from "./fixtures/metrics-exposition.js";
import { freePort, killAllChildren, spawnChild } from "../harness/child.js";
import { sendControl } from "../supervisor/control-socket.js";

// Two real workers under the real supervisor (CLI from source), real sockets, real signals.
const ROOT = fileURLToPath(new URL("..", import.meta.url));
const COUNT = "http_request_duration_seconds_count";
const HELLO = { method: "GET", route: "/hello", status_code: "200" };
const REPORT_IMPORTS = pathToFileURL(join(ROOT, "test/fixtures/report-primary-imports.mjs")).href;

interface Cluster {
  port: number;
  /** The primary's pid. */
  pid: number;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output(): string;
  waitFor(pattern: RegExp, count?: number, timeoutMs?: number): Promise<void>;
}

async function startCluster(env: Record<string, string> = {}, args: string[] = ["--metrics-port", "0"]): Promise<Cluster> {
  const port = await freePort();
  const child = spawnChild([process.execPath, "--import", "tsx", "cli/cli.ts", "start", "test/fixtures/metrics-cluster-app.ts",
    "--workers", "2", "--port", String(port), "--backoff-initial", "50", ...args], { cwd: ROOT, env: { NODE_ENV: "development", ...env } });
  return {
    port,
    pid: child.pid,
    exited: child.exited.then(({ code, signal }) => ({ code, signal })),
    output: child.output,
    waitFor: (pattern, count = 1, timeoutMs = 30_000) => child.waitUntil(
      (output) => output.split("\n").filter((line) => pattern.test(line)).length >= count,
      { timeoutMs, what: `${count}x ${pattern}` },
    ),
  };
}

afterEach(killAllChildren);

/** GET on a fresh connection, so the primary's round-robin spreads requests over the workers. */
function get(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, agent: false, timeout: 20_000 }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (body += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("timeout", () => req.destroy(new Error(`GET ${path} timed out`)));
    req.on("error", reject);
    req.end();
  });
}

async function hello(port: number, times: number): Promise<Map<number, number>> {
  const byPid = new Map<number, number>();
  for (let i = 0; i < times; i++) {
    const { status, body } = await get(port, "/hello");
    expect(status).toBe(200);
    const pid = (JSON.parse(body) as { pid: number }).pid;
    byPid.set(pid, (byPid.get(pid) ?? 0) + 1);
  }
  return byPid;
}

async function scrape(port: number): Promise<Exposition> {
  const { status, body } = await get(port, "/metrics");
  expect(status).toBe(200);
  return parseExposition(body);
}

function workerPids(cluster: Cluster): Map<string, number> {
  const pids = new Map<string, number>();
  for (const match of cluster.output().matchAll(/worker (\d+) \(pid (\d+)\) ready/g)) pids.set(match[1]!, Number(match[2]));
  return pids;
}

/** The primary's metrics port, from its log line (the tests ask for a free one with --metrics-port 0). */
async function metricsPortOf(cluster: Cluster): Promise<number> {
  await cluster.waitFor(/cluster-wide metrics on http:\/\/(?:\[::\]|0\.0\.0\.0):\d+\/metrics/);
  return Number(/cluster-wide metrics on http:\/\/(?:\[::\]|0\.0\.0\.0):(\d+)\/metrics/.exec(cluster.output())?.[1]);
}

/** `promtool check metrics` (Prometheus' own linter, Debian's `prometheus` package) on an exposition: its findings, one per line. */
function promtool(exposition: string): string[] {
  expect(existsSync("/usr/bin/promtool"), "/usr/bin/promtool is missing: apt-get install -y prometheus (make test does)").toBe(true);
  const run = spawnSync("/usr/bin/promtool", ["check", "metrics"], { input: exposition, encoding: "utf8" });
  return `${run.stdout}${run.stderr}`.split("\n").filter((line) => line.trim() !== "").concat(run.status === 0 ? [] : [`exit ${String(run.status)}`]);
}

describe("cluster-wide /metrics under the supervisor (2 real workers)", () => {
  it("passes promtool check metrics on the public port and on the metrics port, with prom-client's active handles kept by type", async () => {
    const cluster = await startCluster({}, ["--metrics-port", "0"]);
    await cluster.waitFor(/2 worker\(s\) ready/);
    await hello(cluster.port, 10);
    const metricsPort = await metricsPortOf(cluster);
    for (const port of [cluster.port, metricsPort]) {
      const { status, body } = await get(port, "/metrics");
      expect(status).toBe(200);
      expect(promtool(body), `port ${port}`).toEqual([]);
      const exposition = parseExposition(body);
      expect(exposition.find("nodejs_active_handles_total")).toEqual([]);
      expect(exposition.find("nodejs_active_handles").length).toBeGreaterThan(0);
      expect(exposition.types.get("nodejs_active_handles")).toBe("gauge");
    }
  });

  it("any worker's scrape returns the totals of both, and they never drop when a worker is killed and replaced", async () => {
    const cluster = await startCluster();
    await cluster.waitFor(/2 worker\(s\) ready/);
    const served = await hello(cluster.port, 60);
    expect(served.size).toBe(2);

    const first = await scrape(cluster.port);
    expect(first.value(COUNT, HELLO)).toBe(60);
    expect(first.value("keelson_worker_up", { worker: "1" })).toBe(1);
    expect(first.value("keelson_worker_up", { worker: "2" })).toBe(1);
    // Gauges per worker, counters summed (process CPU of both).
    expect(first.find("nodejs_heap_size_used_bytes").map((s) => s.labels.worker).toSorted()).toEqual(["1", "2"]);
    expect(first.find("process_cpu_user_seconds_total")).toHaveLength(1);
    // Scrapes answered by either worker agree.
    const second = await scrape(cluster.port);
    expect(second.value(COUNT, HELLO)).toBe(60);

    const victim = workerPids(cluster).get("1");
    expect(victim).toBeDefined();
    process.kill(victim!, "SIGKILL");
    await cluster.waitFor(/ready on /, 3);
    const afterKill = await scrape(cluster.port);
    expect(afterKill.value(COUNT, HELLO)).toBe(60);
    expect(afterKill.value("keelson_worker_up", { worker: "1" })).toBe(1);

    await hello(cluster.port, 20);
    expect((await scrape(cluster.port)).value(COUNT, HELLO)).toBe(80);
  });

  it("a worker that exits after SIGTERM hands over its final counts, even for requests no scrape saw", async () => {
    const cluster = await startCluster();
    await cluster.waitFor(/2 worker\(s\) ready/);
    await scrape(cluster.port);
    const served = await hello(cluster.port, 40);
    const victim = workerPids(cluster).get("2")!;
    expect(served.get(victim)).toBeGreaterThan(0);
    process.kill(victim, "SIGTERM");
    await cluster.waitFor(/ready on /, 3);
    const metrics = await scrape(cluster.port);
    expect(metrics.value(COUNT, HELLO)).toBe(40);
  });

  it("a blocked worker does not fail the scrape: the other answers within the timeout, with up 0 for the blocked one", async () => {
    const cluster = await startCluster({ METRICS_CLUSTER_TIMEOUT_MS: "1000" });
    await cluster.waitFor(/2 worker\(s\) ready/);
    await hello(cluster.port, 10);
    const before = await scrape(cluster.port);
    expect(before.value(COUNT, HELLO)).toBe(10);

    const blocked = get(cluster.port, "/block?ms=6000");
    await cluster.waitFor(/blocking its event loop/);
    const started = performance.now();
    const during = await scrape(cluster.port);
    const took = performance.now() - started;
    expect(took).toBeLessThan(4500);
    const up = during.find("keelson_worker_up").map((s) => s.value).toSorted();
    expect(up).toEqual([0, 1]);
    // The blocked worker counts with what it last reported: the total does not dip.
    expect(during.value(COUNT, HELLO)).toBe(10);
    expect((await blocked).status).toBe(200);
  });
});

describe("the primary's metrics port (2 real workers)", () => {
  it("serves the totals of all workers off the public port, answers with a worker blocked or killed, and closes on SIGTERM", async () => {
    const cluster = await startCluster({ NODE_ENV: "production", METRICS_CLUSTER_TIMEOUT_MS: "1000", NODE_OPTIONS: `--import=${REPORT_IMPORTS}` });
    await cluster.waitFor(/2 worker\(s\) ready/);
    const metricsPort = await metricsPortOf(cluster);
    expect(metricsPort).not.toBe(cluster.port);
    // Production: nothing on the public port.
    expect((await get(cluster.port, "/metrics")).status).toBe(404);
    expect((await hello(cluster.port, 30)).size).toBe(2);

    const first = await scrape(metricsPort);
    expect(first.value(COUNT, HELLO)).toBe(30);
    expect(first.find("keelson_worker_up").map((s) => s.value)).toEqual([1, 1]);

    // A blocked worker: the scrape waits for it at most its timeout, and counts its last numbers.
    const blocked = get(cluster.port, "/block?ms=5000");
    await cluster.waitFor(/blocking its event loop/);
    const started = performance.now();
    const during = await scrape(metricsPort);
    expect(performance.now() - started).toBeLessThan(4000);
    expect(during.find("keelson_worker_up").map((s) => s.value).toSorted()).toEqual([0, 1]);
    expect(during.value(COUNT, HELLO)).toBe(30);
    expect((await blocked).status).toBe(200);

    // A killed worker: the port still answers, and no total goes backwards.
    const victim = workerPids(cluster).get("1")!;
    process.kill(victim, "SIGKILL");
    const afterKill = await scrape(metricsPort);
    expect(afterKill.value(COUNT, HELLO)).toBe(30);

    process.kill(cluster.pid, "SIGTERM");
    expect(await cluster.exited, cluster.output()).toEqual({ code: 0, signal: null });
    await expect(get(metricsPort, "/metrics")).rejects.toThrow(/ECONNREFUSED/);
    // It merged and served every scrape without prom-client: only the workers load it.
    expect(cluster.output()).not.toMatch(/primary loaded/);
  });

  it("two services on one host with the default metrics port both start: one that finds it taken serves on a free port and says so", async () => {
    const env = { KEELSON_METRICS_PORT: "", KEELSON_CONTROL_SOCKET: "" };
    const first = await startCluster(env, []);
    await first.waitFor(/worker\(s\) ready in/);
    const second = await startCluster(env, []);
    await second.waitFor(/worker\(s\) ready in/);
    const reports = await Promise.all([first, second].map(async (cluster) => {
      const socket = /control socket (\S+) /.exec(cluster.output())?.[1] ?? "";
      const reply = await sendControl(socket, { command: "status" }, 5000);
      if (!reply.ok || !("status" in reply)) throw new Error(JSON.stringify(reply));
      return { cluster, metrics: reply.status.features.metrics as { url: string; note?: string } | undefined };
    }));
    // 9464 serves one of them at most (another test may hold it): the other one, at least, moved.
    expect(reports[0]!.metrics?.url).not.toBe(reports[1]!.metrics?.url);
    const moved = reports.filter(({ metrics }) => metrics?.note !== undefined);
    expect(moved.length).toBeGreaterThanOrEqual(1);
    for (const { cluster, metrics } of moved) {
      expect(metrics?.note).toBe("the default port 9464 is taken (another service on this host?): set --metrics-port (KEELSON_METRICS_PORT) to choose one");
      // Said in its first lines: before the ready line.
      const lines = cluster.output().split("\n");
      const warned = lines.findIndex((line) => line.includes(`[WARN]`) && line.includes(`cluster-wide metrics on ${metrics?.url ?? ""}: the default port 9464 is taken`));
      expect(warned).toBeGreaterThanOrEqual(0);
      expect(warned).toBeLessThan(lines.findIndex((line) => /worker\(s\) ready in/.test(line)));
      const scraped = await get(Number(new URL(metrics?.url ?? "").port), "/metrics");
      expect(scraped.status).toBe(200);
    }
    for (const { cluster } of reports) {
      process.kill(cluster.pid, "SIGTERM");
      expect((await cluster.exited).code).toBe(0);
    }
  }, 60_000);

  it("a taken metrics port stops the supervisor with exit 1 and says so in its last line", async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, resolve));
    const port = (taken.address() as AddressInfo).port;
    try {
      const cluster = await startCluster({}, ["--metrics-port", String(port)]);
      expect((await cluster.exited).code).toBe(1);
      const last = cluster.output().trim().split("\n").at(-1) ?? "";
      expect(last).toMatch(new RegExp(`exit 1: cannot serve metrics on port ${port}: already in use \\(EADDRINUSE\\); set --metrics-port`));
    } finally {
      taken.close();
    }
  });

  it("--metrics-port off opens no metrics port; the App's port still serves /metrics outside production", async () => {
    const cluster = await startCluster({}, ["--metrics-port", "off"]);
    await cluster.waitFor(/2 worker\(s\) ready/);
    await hello(cluster.port, 4);
    expect((await scrape(cluster.port)).value(COUNT, HELLO)).toBe(4);
    expect(cluster.output()).not.toMatch(/cluster-wide metrics on/);
  });
});
