// app.schedule() in one process: option checks, ticks, metrics, the shutdown, a shared store.
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { App, defineJob, type JobContext, type JobOptions, type JobStore } from "../src/index.js";
import { Logger } from "../src/logging/logger.js";
import { createPrometheus } from "../src/entries/metrics.js";
import { createSQLJobStore, openSQLite } from "../src/entries/sql.js";
import { MemoryJobStore } from "./helpers/job-store.js";
import { captureLogs } from "./helpers/logs.js";
import { tempDir } from "./helpers/temp-dir.js";

const apps: App[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

function newApp(shutdownTimeout = 5000): { app: App; lines: () => string[] } {
  const logs = captureLogs();
  const app = new App({ port: 0, logger: logs.logger, shutdownTimeout });
  apps.push(app);
  return { app, lines: logs.lines };
}

/** Resolves once `test()` holds, checking every 20 ms; rejects after `timeoutMs`. */
async function until(test: () => boolean, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!test()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const noop = () => {};

describe("defineJob / app.schedule: misuse fails at once", () => {
  const cases: Array<[string, Partial<JobOptions>, RegExp]> = [
    ["no name", { name: "", every: 1000 }, /job name must be/],
    ["a name with a space", { name: "a b", every: 1000 }, /job name must be/],
    ["neither cron nor every", { name: "x" }, /exactly one of cron or every/],
    ["both cron and every", { name: "x", cron: "* * * * *", every: 1000 }, /exactly one of cron or every/],
    ["every under a second", { name: "x", every: 10 }, /at least 1000/],
    ["every not a whole number", { name: "x", every: 1500.5 }, /whole number/],
    ["an invalid cron pattern", { name: "x", cron: "every day" }, /job x: invalid cron pattern/],
    ["an unknown time zone", { name: "x", cron: "0 3 * * *", timezone: "Mars/Olympus" }, /job x: invalid cron pattern or timezone/],
    ["an unknown runOn", { name: "x", every: 1000, runOn: "all" as "one" }, /runOn must be "one" or "each"/],
    ["a store with runOn each", { name: "x", every: 1000, runOn: "each", store: new MemoryJobStore() }, /needs runOn "one"/],
    ["a store without its methods", { name: "x", every: 1000, store: { claim: async () => true } as unknown as JobStore }, /store must have claim, renew, finish, unfinished methods \(a JobStore\); missing renew, finish, unfinished/],
    ["a store with a short lease", { name: "x", every: 1000, store: new MemoryJobStore(10) }, /store.leaseMs must be a whole number of milliseconds, at least 1000; got 10/],
    ["negative crashRetries", { name: "x", every: 1000, crashRetries: -1 }, /job x: crashRetries must be a whole number from 0 to 10; got -1/],
    ["crashRetries not a whole number", { name: "x", every: 1000, crashRetries: 1.5 }, /crashRetries must be a whole number from 0 to 10; got 1.5/],
    ["crashRetries NaN", { name: "x", every: 1000, crashRetries: Number.NaN }, /crashRetries must be a whole number from 0 to 10; got NaN/],
    ["crashRetries over 10", { name: "x", every: 1000, crashRetries: 11 }, /crashRetries must be a whole number from 0 to 10; got 11/],
  ];
  for (const [what, options, message] of cases) {
    it(what, () => {
      expect(() => defineJob({ run: noop, ...options } as JobOptions)).toThrow(message);
      expect(() => newApp().app.schedule({ run: noop, ...options } as JobOptions)).toThrow(message);
    });
  }

  it("no run function", () => {
    expect(() => defineJob({ name: "x", every: 1000 } as JobOptions)).toThrow("job x: run must be a function");
  });

  it("a duplicate name, and a job scheduled after listen()", async () => {
    const { app } = newApp();
    app.schedule({ name: "x", every: 1000, run: noop });
    expect(() => app.schedule({ name: "x", cron: "0 * * * *", run: noop })).toThrow("job x is already scheduled");
    await new Promise<void>((resolve) => {
      void app.listen();
      const check = () => (app.port === undefined ? setTimeout(check, 10) : resolve());
      check();
    });
    expect(() => app.schedule({ name: "y", every: 1000, run: noop })).toThrow("cannot schedule job y: the server has started");
  });
});

describe("app.schedule: runs in the process", () => {
  it("runs each tick once, at its aligned time, logs its end at info (start at debug), and counts runs and failures in /metrics", async () => {
    const { app, lines } = newApp();
    const metrics = createPrometheus({ defaultMetrics: false });
    app.use(metrics);
    const ticks: JobContext[] = [];
    app.schedule({ name: "tick", every: 1000, run: (ctx) => void ticks.push(ctx) });
    app.schedule({ name: "broken", every: 1000, runOn: "each", run: () => Promise.reject(new Error("disk full")) });
    void app.listen();
    await until(() => ticks.length >= 2);
    const [first, second] = ticks;
    expect(first!.scheduledAt.getTime() % 1000).toBe(0);
    expect(second!.scheduledAt.getTime() - first!.scheduledAt.getTime()).toBe(1000);
    expect(first?.name).toBe("tick");
    expect(first?.signal.aborted).toBe(false);
    await until(() => lines().some((line) => line.includes("job broken failed")));
    const text = await (await app.request("/metrics")).text();
    expect(text).toMatch(/keelson_job_runs_total\{job="tick",outcome="success"\} [2-9]/);
    expect(text).toMatch(/keelson_job_runs_total\{job="broken",outcome="failure"\} [1-9]/);
    expect(text).toMatch(/keelson_job_duration_seconds_count\{job="tick",outcome="success"\} [2-9]/);
    const tick = first!.scheduledAt.toISOString();
    // One line at info per run (its end, with outcome and duration); the start at debug.
    const ofTick = lines().filter((line) => line.includes(`(tick ${tick})`) && line.includes("job tick "));
    expect(ofTick.filter((line) => line.startsWith("[INFO]"))).toHaveLength(1);
    expect(ofTick.find((line) => line.startsWith("[INFO]"))).toMatch(/job tick succeeded in \d+ms \(tick /);
    expect(ofTick.find((line) => line.startsWith("[DEBUG]"))).toContain(`job tick started (tick ${tick})`);
    expect(lines().find((line) => line.includes("job broken failed"))).toMatch(/\[ERROR\].*failed after \d+ms \(tick .*\): Error: disk full/);
  });

  it("a run in progress at shutdown is awaited: close() resolves after it ends, cleanly", async () => {
    const { app } = newApp(10_000);
    let started = false;
    let ended = false;
    let aborted = false;
    app.schedule({
      name: "finishing", every: 1000,
      run: async ({ signal }) => {
        started = true;
        await new Promise((resolve) => setTimeout(resolve, 800));
        aborted = signal.aborted;
        ended = true;
      },
    });
    void app.listen();
    await until(() => started);
    const report = await app.close();
    expect(ended).toBe(true);
    expect(aborted).toBe(false);
    expect(report.clean).toBe(true);
  });

  it("runs in progress are awaited before every shutdown hook, also those registered before schedule()", async () => {
    const { app } = newApp(10_000);
    const events: string[] = [];
    app.onShutdown(() => void events.push("database closed"), "database: close");
    let started = false;
    app.schedule({
      name: "uses-db", every: 1000,
      run: async () => {
        started = true;
        await new Promise((resolve) => setTimeout(resolve, 500));
        events.push("run ended");
      },
    });
    void app.listen();
    await until(() => started);
    await app.close();
    expect(events).toEqual(["run ended", "database closed"]);
  });

  it("a run still going at the shutdown deadline gets the abort, and is logged and counted as aborted", async () => {
    const { app, lines } = newApp(1000);
    const metrics = createPrometheus({ defaultMetrics: false });
    app.use(metrics);
    let started = false;
    app.schedule({
      name: "endless", every: 1000, runOn: "each",
      run: async ({ signal }) => {
        started = true;
        await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
        throw signal.reason;
      },
    });
    void app.listen();
    await until(() => started);
    const report = await app.close();
    expect(report.deadlinePassed).toBe(true);
    await until(() => lines().some((line) => /job endless aborted by the shutdown after \d+ms/.test(line)));
    expect(await metrics.readExposition()).toMatch(/keelson_job_runs_total\{job="endless",outcome="aborted"\} 1/);
  });

  it("runs of one job never overlap: a tick due during a run waits for it", async () => {
    const { app } = newApp();
    let running = 0;
    let overlapped = false;
    const runs: number[] = [];
    app.schedule({
      name: "slow", every: 1000,
      run: async ({ scheduledAt }) => {
        overlapped ||= running > 0;
        running++;
        await new Promise((resolve) => setTimeout(resolve, 1300));
        running--;
        runs.push(scheduledAt.getTime());
      },
    });
    void app.listen();
    await until(() => runs.length >= 3, 20_000);
    expect(overlapped).toBe(false);
    expect(runs[1]! - runs[0]!).toBe(1000);
  });
});

describe("a job's ctx.logger", () => {
  for (const format of ["text", "json"] as const) {
    it(`error() logs with the job's name and tick and returns; the process goes on; the App's level holds (${format})`, async () => {
      const chunks: string[] = [];
      const logger = new Logger({ isProduction: format === "json", format, level: "warn", output: { write: (chunk: string) => chunks.push(chunk) } });
      const lines = () => {
        logger.flush();
        return chunks.join("").split("\n").filter((line) => line.length > 0);
      };
      const app = new App({ port: 0, logger });
      apps.push(app);
      // The App logger's error() exits: a job logger that did would call this.
      const exit = vi.spyOn(process, "exit").mockImplementation((code) => {
        throw new Error(`process.exit(${String(code)}) called`);
      });
      const returned: string[] = [];
      app.schedule({
        name: "sync", every: 1000,
        run({ scheduledAt, logger: log }) {
          log.info("below the level");
          log.warn("retrying %d", 2);
          log.error("sync failed: %s", "upstream down");
          log.child({ attempt: 3 }).error("gave up");
          returned.push(scheduledAt.toISOString());
        },
      });
      try {
        void app.listen();
        await until(() => returned.length >= 2);
      } finally {
        await app.close();
        exit.mockRestore();
      }
      expect(exit).not.toHaveBeenCalled();
      const tick = returned[0]!;
      const ofTick = lines().filter((line) => line.includes(tick) && !line.includes("job sync"));
      if (format === "text") {
        expect(ofTick).toEqual([
          expect.stringMatching(new RegExp(`^\\[WARN\\] .* retrying 2 job=sync tick=${tick}$`)),
          expect.stringMatching(new RegExp(`^\\[ERROR\\] .* sync failed: upstream down job=sync tick=${tick}$`)),
          expect.stringMatching(new RegExp(`^\\[ERROR\\] .* gave up job=sync tick=${tick} attempt=3$`)),
        ]);
      } else {
        expect(ofTick.map((line) => JSON.parse(line) as Record<string, unknown>)).toEqual([
          expect.objectContaining({ level: "warn", message: "retrying 2", job: "sync", tick }),
          expect.objectContaining({ level: "error", message: "sync failed: upstream down", job: "sync", tick }),
          expect.objectContaining({ level: "error", message: "gave up", job: "sync", tick, attempt: 3 }),
        ]);
      }
      expect(lines().join("\n")).not.toContain("below the level");
      // The run went on past error() and was not a failure.
      expect(lines().join("\n")).not.toMatch(/job sync failed/);
    });
  }
});

describe("a shared store: once per deployment", () => {
  it("two Apps on one SQLite file: each tick runs in exactly one of them", async () => {
    const file = join(tempDir("keelson-jobs-"), "claims.db");
    const ran: Array<{ app: number; at: number }> = [];
    for (const id of [1, 2]) {
      const db = openSQLite({ file });
      const { app } = newApp();
      app.schedule({ name: "report", every: 1000, store: createSQLJobStore(db), run: ({ scheduledAt }) => void ran.push({ app: id, at: scheduledAt.getTime() }) });
      app.onShutdown(() => db.close());
      void app.listen();
    }
    await until(() => ran.length >= 4);
    const ticks = ran.map((run) => run.at);
    expect(new Set(ticks).size).toBe(ticks.length);
  });
});
