// runOn "one" under the supervisor, as real processes: a worker SIGKILLed mid-run and a rolling
// reload never cause a missed or a doubled tick; with PostgreSQL, two supervisors share the ticks.
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { freePort, killAllChildren, spawnChild, type Child } from "../harness/child.js";
import { startPostgres, type TestPostgres } from "./helpers/postgres.js";

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
    const dir = mkdtempSync(join(tmpdir(), "keelson-jobs-"));
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
  let pg: TestPostgres;
  beforeAll(async () => {
    pg = await startPostgres();
  }, 60_000);
  afterAll(() => pg?.stop());

  it("two supervisors on one database: each tick runs exactly once in the deployment", async () => {
    const url = await pg.createDatabase();
    const file = join(mkdtempSync(join(tmpdir(), "keelson-jobs-")), "runs.log");
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
