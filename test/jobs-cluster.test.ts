// runOn "one" under the supervisor, as real processes: a worker SIGKILLed mid-run and a rolling
// reload never cause a missed or a doubled tick; with PostgreSQL, two supervisors share the ticks.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { delay, freePort, killAllChildren, spawnChild, type Child } from "../harness/child.js";
import { usePostgres } from "./helpers/postgres.js";
import { startTcpProxy } from "./helpers/tcp-proxy.js";
import { tempDir } from "./helpers/temp-dir.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

afterEach(() => killAllChildren());

async function startJobs(workers: number, env: Record<string, string>): Promise<Child & { port: number }> {
  const port = await freePort();
  const run = spawnChild([process.execPath, "--import", "tsx", "cli/cli.ts", "start", "test/fixtures/jobs-app.ts",
    "--port", String(port), "--workers", String(workers), "--metrics-port", "0",
    // A loaded machine may need long to start a worker: a reload must not stop for that.
    "--ready-timeout", "120000"],
    { cwd: ROOT, env: { NODE_ENV: "development", ...env }, group: true });
  await run.waitFor(/worker\(s\) ready in/, { timeoutMs: 120_000 });
  return Object.assign(run, { port });
}

/** Ticks in the file, as epoch ms, in the order they were run. */
function runTicks(file: string): number[] {
  return readFileSync(file, "utf8").split("\n").filter(Boolean).map((line) => Date.parse(line.split(" ")[0] ?? ""));
}

/** Every tick from the first to the last ran, each once. */
function expectEachTickOnce(ticks: number[], minimum: number): void {
  const sorted = ticks.toSorted((a, b) => a - b);
  expect(sorted.length).toBeGreaterThanOrEqual(minimum);
  const first = sorted[0] ?? 0;
  const expected = Array.from({ length: ((sorted.at(-1) ?? 0) - first) / 1000 + 1 }, (_, i) => first + i * 1000);
  expect(sorted.map((tick) => new Date(tick).toISOString())).toEqual(expected.map((tick) => new Date(tick).toISOString()));
}

/** Resolves once `count` lines after `from` match `pattern`. */
function waitForLines(run: Child, pattern: RegExp, count: number, from: number, timeoutMs = 60_000): Promise<void> {
  return run.waitUntil((output) => output.slice(from).split("\n").filter((line) => pattern.test(line)).length >= count,
    { timeoutMs, what: `${count} lines matching ${pattern}` });
}

describe("jobs under the supervisor", () => {
  it("4 workers, every second, a worker SIGKILLed mid-run and a rolling reload: each tick runs exactly once", async () => {
    const dir = tempDir("keelson-jobs-");
    const file = join(dir, "runs.log");
    const eachFile = join(dir, "each.log");
    const run = await startJobs(4, { JOBS_FILE: file, JOBS_HANG_FLAG: join(dir, "hung"), JOBS_EACH_FILE: eachFile });
    // The first run hangs: kill its worker while it runs.
    const hanging = await run.waitFor(/JOB hanging \S+ pid \d+/, { timeoutMs: 60_000 });
    const [, tick, pid] = /JOB hanging (\S+) pid (\d+)/.exec(hanging) ?? [];
    process.kill(Number(pid), "SIGKILL");
    // The reload starts while the killed worker's tick is being given back.
    const mark = run.output().length;
    process.kill(run.pid, "SIGHUP");
    await run.waitFor(new RegExp(`job tick: worker \\d \\(pid ${pid}\\) exited during the run of tick ${tick}: it runs again on another worker`), { timeoutMs: 60_000 });
    const rerun = await run.waitFor(new RegExp(`JOB started ${tick} pid \\d+`), { timeoutMs: 60_000 });
    expect(rerun).not.toContain(`pid ${pid}`);
    // The killed worker's slot is replaced too, or skipped if it is already restarting.
    await run.waitFor(/reload complete: [34] worker\(s\) replaced/, { from: mark, timeoutMs: 240_000 });
    // About 20 s of ticks in all, the last few on the new workers only.
    await waitForLines(run, /JOB started/, 20, 0);
    // Runs are counted in each worker's registry and summed by the primary: at least every run of
    // the live workers (departed ones count through their final snapshot, best effort).
    const runs = readFileSync(file, "utf8").split("\n").filter(Boolean);
    // Each slot's worker is the last one that got ready in it.
    const slots = new Map(run.lines(/ready on /).map((line) => /worker (\d+) \(pid (\d+)\)/.exec(line)?.slice(1) ?? []).map(([id, p]) => [id, p]));
    const live = [...slots.values()];
    expect(live).toHaveLength(4);
    const metrics = await (await fetch(`http://127.0.0.1:${run.port}/metrics`)).text();
    const counted = Number(/^keelson_job_runs_total\{job="tick",outcome="success"\} (\d+)$/m.exec(metrics)?.[1]);
    expect(counted).toBeGreaterThanOrEqual(runs.filter((line) => live.includes(line.split(" ")[1])).length);
    expect(counted).toBeLessThanOrEqual(runTicks(file).length);
    expect(metrics).toMatch(/^keelson_job_duration_seconds_count\{job="tick",outcome="success"\} \d+$/m);
    run.kill("SIGTERM");
    expect(await run.exited).toMatchObject({ code: 0, signal: null });
    const ticks = runTicks(file);
    expect(ticks).toContain(Date.parse(tick ?? ""));
    expectEachTickOnce(ticks, 18);
    // runOn "each": every worker runs each tick, once.
    const each = readFileSync(eachFile, "utf8").split("\n").filter(Boolean);
    expect(new Set(each).size).toBe(each.length);
    const perTick = new Map<string, number>();
    for (const line of each) perTick.set(line.split(" ")[0] ?? "", (perTick.get(line.split(" ")[0] ?? "") ?? 0) + 1);
    expect(Math.max(...perTick.values())).toBeGreaterThanOrEqual(4);
    // The reload replaced workers while ticks kept coming: runs happened on old and new workers.
    expect(new Set(readFileSync(file, "utf8").split("\n").filter(Boolean).map((line) => line.split(" ")[1])).size).toBeGreaterThan(2);
  }, 400_000);
});

describe("jobs across supervisors, with PostgreSQL", () => {
  const pg = usePostgres();

  it("two supervisors on one database: each tick runs exactly once in the deployment", async () => {
    const url = await pg.createDatabase();
    const file = join(tempDir("keelson-jobs-"), "runs.log");
    const env = { JOBS_FILE: file, JOBS_DATABASE_URL: url };
    const [a, b] = await Promise.all([startJobs(2, env), startJobs(2, env)]);
    const mark = [a!.output().length, b!.output().length];
    // Both are up: the next ticks are contended, and one of them sees the other's claims.
    await waitForLines(a!, /JOB started|claimed by another instance/, 6, mark[0] ?? 0);
    await waitForLines(b!, /JOB started|claimed by another instance/, 6, mark[1] ?? 0);
    a!.kill("SIGTERM");
    b!.kill("SIGTERM");
    expect(await a!.exited).toMatchObject({ code: 0 });
    expect(await b!.exited).toMatchObject({ code: 0 });
    const skipped = a!.lines(/claimed by another instance/).length + b!.lines(/claimed by another instance/).length;
    expect(skipped).toBeGreaterThanOrEqual(5);
    expectEachTickOnce(runTicks(file), 6);
  }, 180_000);
});

/** `JOB <what> <tick> pid <pid> at <ms>` lines: the wall-clock ms each process printed. */
const printedAt = (line: string) => Number(/ at (\d+)$/.exec(line)?.[1]);

describe("jobs across pods: a tick leased by a pod that is gone runs on another", () => {
  const pg = usePostgres();

  it("a pod SIGKILLed whole (primary and workers) mid-run: the other pod re-runs its tick within 30 s (default lease)", async () => {
    const url = await pg.createDatabase();
    const dir = tempDir("keelson-jobs-");
    const file = join(dir, "runs.log");
    const env = { JOBS_FILE: file, JOBS_DATABASE_URL: url, JOBS_HANG_FLAG: join(dir, "hung") };
    const pods = await Promise.all([startJobs(2, env), startJobs(2, env)]);
    const hanging = await Promise.any(pods.map((pod) => pod.waitFor(/JOB hanging \S+ pid \d+/, { timeoutMs: 60_000 })));
    const [, tick] = /JOB hanging (\S+)/.exec(hanging) ?? [];
    const victim = pods.find((pod) => pod.output().includes(hanging))!;
    const survivor = pods.find((pod) => pod !== victim)!;
    // Mid-run: its lease has been renewed at least once.
    await delay(6000);
    const killedAt = Date.now();
    victim.kill("SIGKILL", { all: true });
    await victim.exited;
    const rerun = await survivor.waitFor(new RegExp(`JOB started ${tick} pid \\d+`), { timeoutMs: 60_000 });
    // The fixture prints JOB lines itself; the worker's log line goes through its logger, which may
    // flush a moment later: wait for it rather than read the output at this instant.
    await survivor.waitFor(new RegExp(`job tick: tick ${(tick ?? "").replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}: its lease ran out before its run finished: it runs here`), { timeoutMs: 10_000 });
    const late = printedAt(rerun) - killedAt;
    expect(late).toBeGreaterThan(0);
    expect(late).toBeLessThan(30_000);
    await waitForLines(survivor, /JOB started/, 3, survivor.output().indexOf(rerun) + rerun.length);
    survivor.kill("SIGTERM");
    expect(await survivor.exited).toMatchObject({ code: 0 });
    const ticks = runTicks(file);
    expect(ticks).toContain(Date.parse(tick ?? ""));
    expectEachTickOnce(ticks, 10);
  }, 240_000);

  it("a pod cut off from the database stops its run before its lease runs out; the other pod runs the tick only after", async () => {
    const url = await pg.createDatabase();
    const port = Number(new URL(url).port);
    const proxy = await startTcpProxy(port);
    try {
      const dir = tempDir("keelson-jobs-");
      const file = join(dir, "runs.log");
      const env = { JOBS_FILE: file, JOBS_LEASE_MS: "4000" };
      const proxied = new URL(url);
      proxied.port = String(proxy.port);
      // Only pod A's run hangs (the first one it gets), and only pod A goes through the proxy.
      const a = await startJobs(2, { ...env, JOBS_DATABASE_URL: proxied.href, JOBS_HANG_FLAG: join(dir, "hung") });
      const b = await startJobs(2, { ...env, JOBS_DATABASE_URL: url });
      const hanging = await a.waitFor(/JOB hanging \S+ pid \d+/, { timeoutMs: 60_000 });
      const [, tick] = /JOB hanging (\S+)/.exec(hanging) ?? [];
      await delay(1500);
      const cutAt = Date.now();
      proxy.cut();
      const aborted = await a.waitFor(new RegExp(`JOB aborted ${tick} pid \\d+`), { timeoutMs: 30_000 });
      await a.waitFor(new RegExp(`job tick: tick ${tick}: its lease could not be kept \\(no renewal succeeded for 3000ms\\): the run is aborted`), { timeoutMs: 10_000 });
      const rerun = await b.waitFor(new RegExp(`JOB started ${tick} pid \\d+`), { timeoutMs: 30_000 });
      // A stopped within three quarters of the lease of its cut; B started only after A stopped.
      expect(printedAt(aborted) - cutAt).toBeLessThanOrEqual(3000 + 2000);
      expect(printedAt(rerun)).toBeGreaterThan(printedAt(aborted));
      await waitForLines(b, /JOB started/, 2, b.output().indexOf(rerun) + rerun.length);
      a.kill("SIGTERM");
      b.kill("SIGTERM");
      await Promise.all([a.exited, b.exited]);
      expect(runTicks(file).filter((at) => at === Date.parse(tick ?? ""))).toHaveLength(1);
    } finally {
      await proxy.close();
    }
  }, 240_000);
});
