// The bench's equal-work check (load-tests/lib/work.ts): what it counts and what it refuses.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { sideBySideWindows } from "../load-tests/lib/side-by-side.js";
import { pairRatio } from "../load-tests/lib/stats.js";
import type { RunRecord } from "../load-tests/lib/types.js";
import { benchSpans, checkCounts, countLogLines, describeCounts, histogramSamples, LogLineCounter } from "../load-tests/lib/work.js";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

describe("counting what a bench target emitted", () => {
  it("counts request lines on the bench paths only, whatever the framework's fields", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "bench-work-"));
    dirs.push(dir);
    const lines = [
      { message: "bench listening on http://127.0.0.1:1/" },
      { method: "GET", path: "/hello", status: 200 },
      { level: 30, reqId: "req-1", method: "GET", path: "/books/42", status: 200, msg: "request completed" },
      { method: "POST", path: "/books", status: 201 },
      { method: "GET", path: "/__cpu", status: 200 },
      { method: "GET", path: "/metrics", status: 200 },
      { level: 30, msg: "incoming request", req: { url: "/hello" } },
    ];
    fs.writeFileSync(path.join(dir, "a.log"), `${lines.map((l) => JSON.stringify(l)).join("\n")}\nnot json\n`);
    expect(countLogLines(dir)).toBe(4);
  });

  it("sums the request histogram's _count on the bench routes, under keelson's and the peers' label names", () => {
    const exposition = [
      "# TYPE http_request_duration_seconds histogram",
      'http_request_duration_seconds_bucket{le="0.005",http_request_method="GET",http_route="/hello",http_response_status_code="200"} 5',
      'http_request_duration_seconds_count{http_request_method="GET",http_route="/hello",http_response_status_code="200"} 7',
      'http_request_duration_seconds_count{method="GET",route="/books/:id",status_code="200"} 3',
      'http_request_duration_seconds_count{method="GET",route="/metrics",status_code="200"} 2',
      'http_request_duration_seconds_count{method="POST",status="201",ok="true",route="/books"} 4',
      'http_request_duration_seconds_sum{method="POST",route="/books"} 0.5',
    ].join("\n");
    expect(histogramSamples(exposition)).toBe(14);
  });

  it("counts spans by route or by a name that ends in the route", () => {
    expect(benchSpans({ "/hello": 3, "GET /books/:id": 2, "/metrics": 1, "GET /__spans": 1, request: 9 })).toBe(5);
  });

  it("accepts counts within the responses and refuses two lines or a span per hook per response", () => {
    const responses = { answered: 1_000, sent: 1_200 };
    expect(checkCounts("t", { logLines: 1_000, histogramSamples: 1_100, spans: 1_200 }, responses)).toBeNull();
    expect(checkCounts("t", { logLines: null, histogramSamples: null, spans: null }, responses)).toBeNull();
    expect(checkCounts("fastify", { logLines: 2_000, histogramSamples: 1_000, spans: null }, responses)).toBe(
      "fastify: unequal work: 2000 log lines for 1000..1200 responses",
    );
    expect(checkCounts("otel", { logLines: 1_000, histogramSamples: 1_000, spans: 5_000 }, responses)).toMatch(/5000 spans/);
    expect(checkCounts("lossy", { logLines: 900, histogramSamples: 1_000, spans: null }, responses)).toMatch(/900 log lines/);
  });

  it("describes only what a target emits", () => {
    expect(describeCounts({ logLines: null, histogramSamples: null, spans: null }, { answered: 1, sent: 2 })).toBeNull();
    expect(describeCounts({ logLines: 5, histogramSamples: 5, spans: null }, { answered: 5, sent: 6 })).toBe(
      "5 log lines, 5 histogram samples for 5..6 responses",
    );
  });
});

const line = (p: string): string => `${JSON.stringify({ method: "GET", path: p, status: 200, note: "é" })}\n`;
const run = (target: string, round: number, reqPerCpuSec: number | null): RunRecord =>
  ({ target, round, scenario: "GET /hello", reqPerCpuSec }) as RunRecord;
const at = (record: RunRecord, speedBefore: number, speedAfter: number): RunRecord => ({ ...record, speedBefore, speedAfter });

describe("the side-by-side bench's bookkeeping", () => {
  it("counts a growing log from where it stopped, a line still being written once it ends", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "bench-work-"));
    dirs.push(dir);
    const file = path.join(dir, "keelson.log");
    fs.writeFileSync(file, line("/hello") + line("/metrics"));
    const counter = new LogLineCounter(dir);
    expect(counter.count()).toBe(1);
    const next = line("/books/42");
    fs.appendFileSync(file, next.slice(0, 20));
    expect(counter.count()).toBe(1);
    fs.appendFileSync(file, next.slice(20) + line("/books"));
    expect(counter.count()).toBe(3);
    fs.writeFileSync(path.join(dir, "second.log"), line("/hello"));
    expect(counter.count()).toBe(4);
    expect(counter.count()).toBe(4);
  });

  it("keeps a line whose multi-byte character straddles a read", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "bench-work-"));
    dirs.push(dir);
    // Longer than the counter's 1 MiB read, so one read ends inside a line of two-byte characters.
    const long = `${JSON.stringify({ path: "/hello", pad: "é".repeat(600_000) })}\n`;
    fs.writeFileSync(path.join(dir, "a.log"), long + long);
    expect(new LogLineCounter(dir).count()).toBe(2);
  });

  it("puts every target's window of a scenario next to the others', in the round's order", () => {
    expect(sideBySideWindows(["a", "b"], ["GET", "POST"], 1, 42)).toEqual([["GET", "a"], ["GET", "b"], ["POST", "a"], ["POST", "b"]]);
    expect(sideBySideWindows(["a", "b"], ["GET"], 2, 42)).toEqual([["GET", "b"], ["GET", "a"]]);
  });

  it("divides within a round and scenario, and reports the range and the ratio of the medians", () => {
    const records = [run("k", 1, 100), run("h", 1, 50), run("k", 2, 90), run("h", 2, 90), run("k", 3, 80), run("h", 3, null), run("k", 4, 60), run("h", 4, 40)];
    const ratio = pairRatio(records, "k", "h", "GET /hello");
    expect(ratio).toMatchObject({ rounds: 3, median: 1.5, min: 1, max: 2 });
    // The medians of the rounds both had (1, 2 and 4): 90 and 50.
    expect(ratio.ofMedians).toBeCloseTo(90 / 50, 10);
    expect(pairRatio(records, "k", "nobody", "GET /hello")).toMatchObject({ rounds: 0, median: null, ofMedians: null });
  });

  it("keeps, when asked for steady rounds, only those whose windows ran at one machine speed", () => {
    const records = [
      at(run("k", 1, 100), 6, 5.9), at(run("h", 1, 50), 5.8, 6), // steady: 2
      at(run("k", 2, 90), 6, 3.6), at(run("h", 2, 90), 3.6, 3.6), // k's window straddles a slowdown
      at(run("k", 3, 30), 3.6, 3.7), at(run("h", 3, 60), 6, 6), // each steady, at two speeds
      at(run("k", 4, 40), 3.6, 3.6), at(run("h", 4, 40), 3.7, 3.5), // steady, slow: 1
      run("k", 5, 10), run("h", 5, 10), // no readings
    ];
    expect(pairRatio(records, "k", "h", "GET /hello")).toMatchObject({ rounds: 5 });
    expect(pairRatio(records, "k", "h", "GET /hello", true)).toMatchObject({ rounds: 2, median: 1.5, min: 1, max: 2, ofMedians: 70 / 45 });
  });
});
