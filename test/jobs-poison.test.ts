// A poison job tick as real processes: every run of one tick crashes the worker running it. The
// tick re-runs after a crash at most `crashRetries` times (default 1), is then recorded failed
// (a log line, outcome="failure" in the job metrics), and the job's crashes never trip the
// crash-loop breaker that would stop the whole service.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { freePort, killAllChildren, spawnChild } from "./helpers/child.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const folders: string[] = [];

afterEach(() => {
  killAllChildren();
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

async function runPoison(retries: number | undefined): Promise<void> {
  const folder = mkdtempSync(join(tmpdir(), "keelson-poison-"));
  folders.push(folder);
  const port = await freePort();
  // --max-crashes 2: on a breaker that counted the job's crashes, the service would stop at the second.
  const run = spawnChild([process.execPath, "--import", "tsx", "cli/cli.ts", "start", "test/fixtures/jobs-app.ts",
    "--port", String(port), "--workers", "2", "--metrics-port", "off", "--max-crashes", "2", "--backoff-initial", "100"], {
    cwd: ROOT, group: true,
    env: {
      NODE_ENV: "development", JOBS_FILE: join(folder, "ticks"), JOBS_POISON_FLAG: join(folder, "poison"),
      ...(retries === undefined ? {} : { JOBS_POISON_RETRIES: String(retries) }),
    },
  });
  await run.waitFor(/worker\(s\) ready in/, { timeoutMs: 60_000 });
  const runs = (retries ?? 1) + 1;
  const failed = await run.waitFor(new RegExp(`job poison failed \\(tick (\\S+)\\): worker \\d+ \\(pid \\d+\\) exited during its run, ${runs} time\\(s\\) in all \\(crashRetries ${retries ?? 1}\\): the tick is given up`), { timeoutMs: 30_000 });
  const tick = /\(tick (\S+)\)/.exec(failed)?.[1] ?? "";
  expect(run.lines(new RegExp(`JOB poison crashing ${tick} `))).toHaveLength(runs);
  expect(run.lines(/not counted by the crash-loop breaker: it died during a run of job poison/)).toHaveLength(runs);
  // Later ticks of the same job run, and the service serves.
  await run.waitFor(/JOB poison ran /, { timeoutMs: 30_000, from: run.output().indexOf(failed) });
  expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
  const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  expect(metrics).toMatch(/^keelson_job_runs_total\{job="poison",outcome="failure"\} 1$/m);
  expect(run.output()).not.toMatch(/crash loop/);
  run.kill("SIGTERM");
  expect((await run.exited).code).toBe(0);
}

describe("jobs: a poison tick under the supervisor", () => {
  it("re-runs once after a crash (the default), then is recorded failed; the service stays up", () => runPoison(undefined), 90_000);
  it("crashRetries: 0 gives the tick up at its first crash", () => runPoison(0), 90_000);
});
