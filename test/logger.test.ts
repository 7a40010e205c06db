import { spawn } from "node:child_process";
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it, vi } from "vitest";
import { formatDuration, formatMessage, jsonString } from "../src/logging/format.js";
import { pendingSinkCount, writeAvailable, type FdWrite } from "../src/logging/sink.js";
import {
  LogFormatJSON,
  LogFormatText,
  Logger,
  flushAllLoggers,
  newLogger,
  newLoggerWithFormat,
  type LogWriter,
  type RequestLogEntry,
} from "../src/logging/logger.js";

const FROZEN = new Date("2026-11-22T05:30:33.123Z");
const TEXT_TIME = "2026-11-22 05:30:33";
const ISO_TIME = "2026-11-22T05:30:33.123Z";

interface Capture {
  writer: LogWriter;
  chunks: string[];
  text(): string;
}

function capture(): Capture {
  const chunks: string[] = [];
  return { writer: { write: (chunk: string) => chunks.push(chunk) }, chunks, text: () => chunks.join("") };
}

/** A logger writing to a fresh capture; returns everything it wrote after flushing. */
function logged(isProduction: boolean, use: (log: Logger) => void, format?: "text" | "json"): string {
  const out = capture();
  const log = new Logger({ isProduction, format, output: out.writer });
  use(log);
  log.flush();
  return out.text();
}

function freezeTime(): void {
  // Only Date is faked: the logger's flush still runs on a real setImmediate.
  vi.useFakeTimers({ now: FROZEN, toFake: ["Date"] });
}

afterEach(() => {
  vi.useRealTimers();
});

describe("text format", () => {
  it("writes one pinned line per call", () => {
    expect(logged(false, (log) => log.info("hello world"))).toMatch(
      /^\[INFO\] \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} hello world\n$/,
    );
  });

  it.each([
    ["debug", "DEBUG"],
    ["info", "INFO"],
    ["warn", "WARN"],
    ["logError", "ERROR"],
  ] as const)("%s writes an exact %s line in UTC", (method, tag) => {
    freezeTime();
    expect(logged(false, (log) => log[method]("hello world"))).toBe(`[${tag}] ${TEXT_TIME} hello world\n`);
  });

  it("recomputes the cached timestamp when the second changes", () => {
    freezeTime();
    const out = logged(false, (log) => {
      log.info("a");
      vi.setSystemTime(new Date("2026-11-22T05:30:33.999Z"));
      log.info("b");
      vi.setSystemTime(new Date("2026-11-22T05:30:34.000Z"));
      log.info("c");
    });
    expect(out).toBe(`[INFO] ${TEXT_TIME} a\n[INFO] ${TEXT_TIME} b\n[INFO] 2026-11-22 05:30:34 c\n`);
  });

  it("keeps a message with line breaks on one line", () => {
    freezeTime();
    expect(logged(false, (log) => log.warn("first\nsecond\r\nthird %s", "x\ny"))).toBe(
      `[WARN] ${TEXT_TIME} first\\nsecond\\r\\nthird x\\ny\n`,
    );
  });
});

describe("JSON format", () => {
  it.each([
    ["debug", "debug"],
    ["info", "info"],
    ["warn", "warn"],
    ["logError", "error"],
  ] as const)("%s writes an exact JSON line with keys in order", (method, level) => {
    freezeTime();
    const out = logged(false, (log) => log[method]("hello %s", "world"), "json");
    expect(out).toBe(`{"level":"${level}","time":"${ISO_TIME}","message":"hello world"}\n`);
    expect(Object.keys(JSON.parse(out) as object)).toEqual(["level", "time", "message"]);
  });

  it("uses the real clock with millisecond ISO time", () => {
    const out = logged(true, (log) => log.info("now"));
    expect(out).toMatch(/^\{"level":"info","time":"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z","message":"now"\}\n$/);
  });

  it("escapes quotes, backslashes, newlines and unicode in the message", () => {
    const message = 'say "hi"\\ \n tab\t é 😀 \u0001';
    const out = logged(true, (log) => log.info("%s", message));
    expect(out.split("\n")).toHaveLength(2);
    expect((JSON.parse(out) as { message: string }).message).toBe(message);
  });
});

describe("request lines", () => {
  const statuses = [
    [200, "info"],
    [201, "info"],
    [302, "info"],
    [404, "warn"],
    [422, "warn"],
    [500, "error"],
  ] as const;

  it.each(statuses)("text line for status %i is at %s level", (status, level) => {
    freezeTime();
    const out = logged(false, (log) => log.request({ method: "GET", path: "/nope", status, durationMs: 0.42 }));
    expect(out).toBe(`[${level.toUpperCase()}] ${TEXT_TIME} GET /nope ${status} 0.42ms\n`);
  });

  it.each(statuses)("JSON line for status %i is at %s level", (status, level) => {
    freezeTime();
    const out = logged(true, (log) => log.request({ method: "GET", path: "/nope", status, durationMs: 0.42 }));
    expect(out).toBe(
      `{"level":"${level}","time":"${ISO_TIME}","method":"GET","path":"/nope","status":${status},"duration":"0.42ms"}\n`,
    );
    const parsed = JSON.parse(out) as Record<string, unknown>;
    expect(Object.keys(parsed)).toEqual(["level", "time", "method", "path", "status", "duration"]);
    expect(parsed["status"]).toBe(status);
  });

  it.each([
    [{}, []],
    [{ requestId: "req-1" }, ["request_id"]],
    [{ traceId: "4bf92f3577b34da6a3ce929d0e0e4736" }, ["trace_id"]],
    [{ requestId: "req-1", traceId: "4bf92f3577b34da6a3ce929d0e0e4736" }, ["request_id", "trace_id"]],
  ] as const)("JSON line appends ids only when present: %j", (ids, extraKeys) => {
    const entry: RequestLogEntry = { method: "POST", path: "/items", status: 201, durationMs: 12.34, ...ids };
    const parsed = JSON.parse(logged(true, (log) => log.request(entry))) as Record<string, unknown>;
    expect(Object.keys(parsed)).toEqual(["level", "time", "method", "path", "status", "duration", ...extraKeys]);
    expect(parsed["duration"]).toBe("12.3ms");
    expect(parsed["request_id"]).toBe(entry.requestId);
    expect(parsed["trace_id"]).toBe(entry.traceId);
  });

  it("text line: the documented shape, then the ids as key=value fields, escaped like every field", () => {
    freezeTime();
    const entry = { method: "GET", path: "/x", status: 200, durationMs: 1500, requestId: "r", traceId: "t" };
    expect(logged(false, (log) => log.request(entry))).toBe(`[INFO] ${TEXT_TIME} GET /x 200 1.50s request_id=r trace_id=t\n`);
    expect(logged(false, (log) => log.request({ ...entry, requestId: "a\nb", traceId: undefined }))).toBe(`[INFO] ${TEXT_TIME} GET /x 200 1.50s request_id=a\\nb\n`);
    expect(logged(false, (log) => log.request({ method: "GET", path: "/x", status: 200, durationMs: 1500 }))).toBe(`[INFO] ${TEXT_TIME} GET /x 200 1.50s\n`);
  });

  it("JSON-escapes quotes and unicode in path and ids", () => {
    const entry = { method: "GET", path: '/q?a="b"&c=\\é😀\n', status: 400, durationMs: 3, requestId: 'id"1' };
    const out = logged(true, (log) => log.request(entry));
    expect(out.split("\n")).toHaveLength(2);
    const parsed = JSON.parse(out) as Record<string, unknown>;
    expect(parsed["path"]).toBe(entry.path);
    expect(parsed["request_id"]).toBe('id"1');
  });

  it("never writes a non-integer status into JSON", () => {
    const out = logged(true, (log) => log.request({ method: "GET", path: "/", status: Number.NaN, durationMs: 1 }));
    expect((JSON.parse(out) as { status: number }).status).toBe(0);
  });
});

describe("formatDuration", () => {
  it.each([
    [0, "0.00ms"],
    [0.42, "0.42ms"],
    [9.994, "9.99ms"],
    [9.996, "10.0ms"],
    [12.34, "12.3ms"],
    [999.94, "999.9ms"],
    [999.96, "1.00s"],
    [1234, "1.23s"],
    [65_000, "65.00s"],
    [-1, "0.00ms"],
    [Number.NaN, "0.00ms"],
  ])("%d ms reads %s", (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });
});

describe("jsonString", () => {
  it.each(["GET", "/items/42?x=1", "", 'a"b', "back\\slash", "tab\t", "nul\u0000", "é", "😀", "\ud800 lone"])(
    "matches JSON.stringify for %j",
    (value) => {
      expect(jsonString(value)).toBe(JSON.stringify(value));
    },
  );

  // JSON.stringify leaves these raw; a log line must not (they drive terminals or split lines).
  it.each([["del\u007f", '"del\\u007f"'], ["\u2028", '"\\u2028"'], ["c1\u009b", '"c1\\u009b"']])(
    "escapes %j, which JSON.stringify leaves raw",
    (value, literal) => {
      expect(jsonString(value)).toBe(literal);
      expect(JSON.parse(literal)).toBe(value);
    },
  );
});

describe("printf formatting", () => {
  it.each([
    ["plain", [], "plain"],
    ["%s and %s", ["a", 1], "a and 1"],
    ["%d items", [3.9], "3 items"],
    ["%i items", ["-7.5"], "-7 items"],
    ["%d big", [12n], "12 big"],
    ["%f", ["1.5"], "1.5"],
    ["%j", [{ a: [1, "x"] }], '{"a":[1,"x"]}'],
    ["%o", ["s"], "'s'"],
    ["%v", [{ a: 1 }], "{ a: 1 }"],
    ["100%%", [], "100%"],
    ["%d%% done", [50], "50% done"],
    ["extra", ["a", 2, { b: true }], "extra a 2 { b: true }"],
    ["missing %s %d", ["one"], "missing one %d"],
    ["unknown %x verb", [1], "unknown %x verb 1"],
    ["trailing %", [], "trailing %"],
    ["%s", [null], "null"],
    ["%s", [undefined], "undefined"],
    ["%d", [Symbol("s")], "NaN"],
  ] as const)("formats %s (case %#)", (format, args, expected) => {
    expect(formatMessage(format, args)).toBe(expected);
  });

  it("returns the same string on the no-argument fast path", () => {
    const message = "no percent here";
    expect(formatMessage(message, [])).toBe(message);
  });

  it("does not throw on circular %j or errors", () => {
    const cyclic: Record<string, unknown> = {};
    cyclic["self"] = cyclic;
    expect(formatMessage("%j", [cyclic])).toContain("Circular");
    expect(formatMessage("failed: %s", [new Error("nope")])).toMatch(/^failed: Error: nope\n {4}at /);
  });
});

describe("constructors and settings", () => {
  it("development logger: text with debug on", () => {
    const log = newLogger(false);
    expect([log.format, log.isProduction, log.debugEnabled]).toEqual([LogFormatText, false, true]);
    expect(logged(false, (l) => l.debug("dbg %s", "x"))).toMatch(/^\[DEBUG\] .* dbg x\n$/);
  });

  it("production logger: JSON with debug off, and debug does not even format", () => {
    const log = newLogger(true);
    expect([log.format, log.isProduction, log.debugEnabled]).toEqual([LogFormatJSON, true, false]);
    let formatted = false;
    const spy = { toJSON: () => ((formatted = true), "x") };
    expect(logged(true, (l) => l.debug("%j", spy))).toBe("");
    expect(formatted).toBe(false);
  });

  it("newLoggerWithFormat(true, text) gives text without debug", () => {
    const log = newLoggerWithFormat(true, "text");
    expect([log.format, log.debugEnabled]).toEqual(["text", false]);
    const out = capture();
    const copy = log.withWriter(out.writer);
    copy.debug("hidden");
    copy.info("shown");
    copy.flush();
    expect(out.text()).toMatch(/^\[INFO\] .* shown\n$/);
  });

  it("newLoggerWithFormat(false, json) gives JSON with debug on", () => {
    const log = newLoggerWithFormat(false, "json");
    expect([log.format, log.debugEnabled]).toEqual(["json", true]);
  });

  it("withWriter returns a new logger and leaves the original writing to its own writer", () => {
    const first = capture();
    const second = capture();
    const original = new Logger({ isProduction: true, output: first.writer });
    const copy = original.withWriter(second.writer);
    expect(copy).not.toBe(original);
    expect([copy.format, copy.isProduction, copy.debugEnabled]).toEqual(["json", true, false]);
    original.info("to first");
    copy.info("to second");
    flushAllLoggers();
    expect(first.text()).toContain("to first");
    expect(first.text()).not.toContain("to second");
    expect(second.text()).toContain("to second");
    expect(second.text()).not.toContain("to first");
  });
});

describe("buffering", () => {
  it("writes nothing synchronously, then everything in one write on the next setImmediate tick", async () => {
    const out = capture();
    const log = new Logger({ isProduction: true, output: out.writer });
    log.info("one");
    log.request({ method: "GET", path: "/", status: 200, durationMs: 1 });
    log.warn("three");
    expect(out.chunks).toEqual([]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(out.chunks).toHaveLength(1);
    expect(out.text().split("\n")).toHaveLength(4);
  });

  it("flush() writes synchronously and leaves nothing pending", () => {
    const out = capture();
    const log = new Logger({ isProduction: false, output: out.writer });
    log.info("now");
    expect(pendingSinkCount()).toBeGreaterThan(0);
    log.flush();
    expect(out.chunks).toHaveLength(1);
    flushAllLoggers();
    expect(pendingSinkCount()).toBe(0);
  });

  it("flushes synchronously once the buffer passes 64 KiB", () => {
    const out = capture();
    const log = new Logger({ isProduction: false, output: out.writer });
    const line = "x".repeat(1000);
    for (let i = 0; i < 70; i++) log.info(line);
    expect(out.chunks).toHaveLength(1);
    expect(out.chunks[0]?.length).toBeGreaterThanOrEqual(64 * 1024);
    log.flush();
    expect(out.text().split("\n")).toHaveLength(71);
  });

  it("flushAllLoggers flushes every logger, and loggers sharing a writer keep their order", () => {
    const shared = capture();
    const other = capture();
    const a = new Logger({ isProduction: false, output: shared.writer });
    const b = a.withWriter(shared.writer);
    const c = a.withWriter(other.writer);
    a.info("1");
    b.info("2");
    c.info("x");
    a.info("3");
    flushAllLoggers();
    expect(shared.text().match(/ (\d)\n/g)).toEqual([" 1\n", " 2\n", " 3\n"]);
    expect(other.text()).toContain(" x\n");
  });

  it("registers a single exit listener however many loggers log", () => {
    new Logger({ isProduction: true, output: capture().writer }).info("install the hook");
    const before = process.listenerCount("exit");
    for (let i = 0; i < 50; i++) new Logger({ isProduction: true, output: capture().writer }).info("x");
    expect(process.listenerCount("exit")).toBe(before);
    flushAllLoggers();
  });

  it("never throws out of a log call when the writer throws", () => {
    const log = new Logger({ isProduction: false, output: { write: () => { throw new Error("disk on fire"); } } });
    expect(() => {
      log.info("a");
      log.flush();
      log.info("b");
      flushAllLoggers();
    }).not.toThrow();
  });

  it("terminates when a writer logs to itself while being flushed", () => {
    const chunks: string[] = [];
    const writer: LogWriter = {
      write: (chunk: string) => {
        chunks.push(chunk);
        log.info("echo");
      },
    };
    const log = new Logger({ isProduction: false, output: writer });
    log.info("first");
    flushAllLoggers();
    expect(chunks.length).toBeGreaterThan(1);
    log.flush();
  });

  it("writes to a file descriptor with fs.writeSync", () => {
    const dir = mkdtempSync(join(tmpdir(), "keelson-logger-"));
    const file = join(dir, "out.log");
    const fd = openSync(file, "w");
    try {
      const log = new Logger({ isProduction: true, output: fd });
      log.info("to a file é");
      log.flush();
      expect((JSON.parse(readFileSync(file, "utf8")) as { message: string }).message).toBe("to a file é");
    } finally {
      closeSync(fd);
      rmSync(dir, { recursive: true });
    }
  });
});

function errno(code: string): Error {
  return Object.assign(new Error(code), { code });
}

describe("writeAvailable", () => {
  it("retries partial writes and EINTR, and stops at EAGAIN without waiting", () => {
    const written: number[] = [];
    const script: (number | string)[] = [3, "EINTR", 2, "EAGAIN", 100];
    const write: FdWrite = (_fd, buffer, offset, length) => {
      const step = script.shift() ?? length;
      if (typeof step === "string") throw errno(step);
      const n = Math.min(step, length);
      written.push(...buffer.subarray(offset, offset + n));
      return n;
    };
    const bytes = Buffer.from("héllo wörld\n", "utf8");
    expect(writeAvailable(9, bytes, write)).toEqual({ written: 5, closed: false });
    expect(writeAvailable(9, bytes.subarray(5), write)).toEqual({ written: bytes.length - 5, closed: false });
    expect(Buffer.from(written).toString("utf8")).toBe("héllo wörld\n");
  });

  it("reports EPIPE as a closed reader and drops other errors without throwing", () => {
    expect(writeAvailable(9, Buffer.from("x"), () => { throw errno("EPIPE"); })).toEqual({ written: 0, closed: true });
    expect(writeAvailable(9, Buffer.from("x"), () => { throw errno("EBADF"); })).toEqual({ written: 1, closed: false });
  });
});

interface ChildResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const FIXTURE = fileURLToPath(new URL("./fixtures/logger-exit.ts", import.meta.url));

/** Runs the fixture in a real child process; a slow reader leaves stdout paused for 200 ms. */
function runFixture(mode: string, slowReader = false, env: Record<string, string> = {}, pauseMs = 200): Promise<ChildResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", FIXTURE, mode], {
      cwd: ROOT, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env },
    });
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    child.stdout.on("data", (chunk: Buffer) => stdout.push(chunk));
    child.stderr.on("data", (chunk: Buffer) => stderr.push(chunk));
    if (slowReader) {
      child.stdout.pause();
      setTimeout(() => child.stdout.resume(), pauseMs);
    }
    child.on("error", reject);
    child.on("close", (code) =>
      resolve({ code, stdout: Buffer.concat(stdout).toString("utf8"), stderr: Buffer.concat(stderr).toString("utf8") }),
    );
  });
}

function messages(stdout: string): string[] {
  return stdout
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => (JSON.parse(line) as { message: string }).message);
}

describe("child processes", () => {
  it("keeps all 1000 lines when the process calls process.exit(0) synchronously", async () => {
    const result = await runFixture("exit");
    expect(result.code).toBe(0);
    expect(messages(result.stdout)).toEqual(Array.from({ length: 1000 }, (_, i) => `line ${i}`));
  });

  it("flushes on an uncaught exception and keeps Node's crash behaviour", async () => {
    const result = await runFixture("uncaught");
    expect(result.code).toBe(1);
    expect(messages(result.stdout)).toEqual(Array.from({ length: 10 }, (_, i) => `before crash ${i}`));
    expect(result.stderr).toContain("Error: boom from fixture");
    expect(result.stderr).toMatch(/\n\s+at /);
  });

  it("error() writes the ERROR line and earlier lines, then exits with code 1", async () => {
    const result = await runFixture("error");
    expect(result.code).toBe(1);
    const lines = result.stdout.split("\n").filter((line) => line !== "").map((line) => JSON.parse(line) as object);
    expect(lines).toEqual([
      expect.objectContaining({ level: "info", message: "starting up" }),
      expect.objectContaining({ level: "error", message: "bad config x" }),
    ]);
  });

  it("delivers 5 MB through a slowly read, full, non-blocking pipe exactly once and in order (buffer large enough)", async () => {
    // The whole flood is written in one event-loop turn: it fits in an 8 MiB buffer, and the
    // exit hook waits for the reader (bounded) to take it all.
    const result = await runFixture("flood", true, { KEELSON_LOG_BUFFER_BYTES: String(8 * 1024 * 1024) });
    expect(result.code).toBe(0);
    expect(result.stdout.length).toBeGreaterThan(5_000_000);
    const got = messages(result.stdout);
    expect(got).toHaveLength(50_000);
    const padding = "x".repeat(40);
    got.forEach((message, i) => {
      if (message !== `flood ${i} ${padding}`) expect.fail(`line ${i} is ${message}`);
    });
  });

  it("never waits for a stalled reader: lines past the buffer are dropped, counted and reported when it reads again", async () => {
    const result = await runFixture("stall", true, { KEELSON_LOG_BUFFER_BYTES: "65536" }, 1500);
    expect(result.code).toBe(0);
    // The process went on logging and ran its timers while nobody read its output.
    expect(result.stderr).toContain("logged all");
    expect(result.stderr).toContain("timer ran 40 times");
    const lines = result.stdout.split("\n").filter((line) => line !== "").map((line) => JSON.parse(line) as { level: string; message: string });
    const kept = lines.filter((line) => line.message.startsWith("stall ")).map((line) => Number(line.message.slice(6)));
    const reports = lines.filter((line) => line.message.includes("log line(s) dropped"));
    // Kept lines are whole and in order; the report says exactly how many are missing.
    kept.forEach((value, i) => {
      if (i > 0 && value <= (kept[i - 1] ?? -1)) expect.fail(`line ${value} after ${kept[i - 1]}`);
    });
    expect(kept.length).toBeLessThan(20_000);
    // One report per stall (a paused stream still reads a little first, which can end a short first stall).
    expect(reports.length).toBeGreaterThanOrEqual(1);
    expect(reports.every((report) => report.level === "warn")).toBe(true);
    const reported = reports.reduce((sum, report) => sum + Number(/^(\d+) log line/.exec(report.message)?.[1]), 0);
    expect(reported).toBe(20_000 - kept.length);
  });

  it("refuses a KEELSON_LOG_BUFFER_BYTES that is not a whole number of bytes", async () => {
    const result = await runFixture("exit", false, { KEELSON_LOG_BUFFER_BYTES: "1MB" });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('KEELSON_LOG_BUFFER_BYTES must be a whole number of bytes (0 or more); got "1MB"');
  });
});
