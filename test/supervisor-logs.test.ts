// Worker logs under the supervisor, as real processes: every line names its process, and long
// lines written by two workers at once come out whole.
import { afterEach, describe, expect, it } from "vitest";
import { get, killAll, readyWorkers, startSupervisor } from "./fixtures/supervisor-harness.js";

afterEach(() => killAll());

const LINE_BYTES = 64 * 1024;
const LINES = 64;

describe("supervisor: worker log lines", () => {
  it("JSON: 2 workers writing 64 KiB lines at once: every line parses and carries its worker and pid", async () => {
    // 16 MiB written in about one second: a burst the default 1 MiB log buffer deliberately does
    // not hold (lines past it are dropped, see docs/logging.md). With a buffer that holds it,
    // nothing may be lost or cut.
    const run = await startSupervisor(["--workers", "2"], { env: { NODE_ENV: "production", KEELSON_LOG_BUFFER_BYTES: String(32 * 1024 * 1024) } });
    await run.waitFor(/worker\(s\) ready in/);
    const workers = readyWorkers(run);
    // Round-robin hands the two connections to the two workers; a repeat only adds lines.
    const bursts = await Promise.all([0, 1, 2, 3].map(() => get(run.port, `/burst?count=${LINES}&bytes=${LINE_BYTES}`)));
    expect(new Set(bursts.map((b) => b.body.pid)).size).toBe(2);
    process.kill(run.pid, "SIGTERM");
    expect(await run.exited).toEqual({ code: 0, signal: null });

    const lines = run.output().trimEnd().split("\n");
    const entries = lines.map((line) => {
      try {
        return JSON.parse(line) as { worker?: string; pid?: number; message?: string };
      } catch {
        throw new Error(`not one JSON line (${line.length} chars): ${line.slice(0, 120)}…`);
      }
    });
    const burstLines = entries.filter((e) => e.message !== undefined && e.message.length === LINE_BYTES);
    expect(burstLines).toHaveLength(LINES * bursts.length);
    for (const entry of burstLines) {
      // The line's own text says which worker wrote it; its fields must say the same.
      expect(entry.worker).toBe(entry.message?.split(":")[0]);
      expect(entry.pid).toBe(workers.find((w) => String(w.id) === entry.worker)?.pid);
    }
    for (const entry of entries) {
      if (entry.worker === "primary") expect(entry.pid).toBe(run.pid);
      else expect(workers.map((w) => w.pid)).toContain(entry.pid);
    }
    expect(entries.filter((e) => e.worker === "primary").length).toBeGreaterThan(4);
  });

  it("text: worker lines start with [w<id> <pid>] after the time, the primary's with [primary <pid>]", async () => {
    const run = await startSupervisor(["--workers", "2"]);
    await run.waitFor(/worker\(s\) ready in/);
    process.kill(run.pid, "SIGTERM");
    expect(await run.exited).toEqual({ code: 0, signal: null });
    for (const { id, pid } of readyWorkers(run)) {
      expect(run.lines(new RegExp(`^\\[INFO\\] \\S+ \\S+ \\[w${id} ${pid}\\] supervisor-fixture listening on `))).toHaveLength(1);
    }
    expect(run.lines(/ready on /).every((line) => line.includes(` [primary ${run.pid}] worker `))).toBe(true);
    const logLines = run.output().trimEnd().split("\n");
    expect(logLines.every((line) => /^\[(INFO|WARN|ERROR|DEBUG)\] \S+ \S+ \[(w\d \d+|primary \d+)\] /.test(line))).toBe(true);
  });
});
