// `make bench MODE=cluster` in its short form (one round, half-second loads): every server of the
// table starts, serves both loads without a failed request and gets its row; keelson's reuseport
// row is either measured or skipped with the reason printed.
import { spawnSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { killAllChildren, spawnChild } from "../../harness/child.js";

const ROOT = resolve(import.meta.dirname, "..", "..");
const ROWS = [
  "bare h3, one process",
  "bare node:cluster + 2 h3 workers (round-robin)",
  "PM2 cluster mode, 2 instances",
  "keelson, one process",
  "keelson start --workers 2 --balancer round-robin",
  "keelson start --workers 2 --balancer reuseport",
  "bare node:cluster + 2 h3 workers (reusePort)",
];

/** What the mode runs (make build-bench), built here when missing or older than its source. */
function stale(): boolean {
  const pairs = [["cli/main.ts", "dist/cli/main.js"], ["supervisor/primary.ts", "dist/supervisor/primary.js"], ["src/logging/sink.ts", "dist/src/logging/sink.js"],
    ["load-tests/servers/keelson-hello.ts", "dist/load-tests/servers/keelson-hello.js"], ["load-tests/servers/h3.ts", "dist/load-tests/servers/h3.js"],
    ["load-tests/servers/plain-cluster.ts", "dist/load-tests/servers/plain-cluster.js"]];
  return pairs.some(([source, out]) => !existsSync(join(ROOT, out as string)) || statSync(join(ROOT, out as string)).mtimeMs < statSync(join(ROOT, source as string)).mtimeMs);
}

beforeAll(() => {
  if (!stale()) return;
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  for (const project of ["tsconfig.build.json", "tsconfig.bench.json"]) {
    const result = spawnSync(process.execPath, [tsc, "-p", project], { cwd: ROOT, encoding: "utf8" });
    expect(result.status, `tsc -p ${project}:\n${result.stdout}${result.stderr}`).toBe(0);
  }
}, 240_000);

afterAll(() => killAllChildren());

/** The body rows of the Markdown table whose header starts with `header`. */
function rowsOf(output: string, header: string): string[] {
  const lines = output.split("\n");
  const start = lines.findIndex((line) => line.startsWith(header));
  if (start === -1) return [];
  const rows: string[] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith("| ")) break;
    rows.push(line);
  }
  return rows;
}

describe("make bench MODE=cluster, short form", () => {
  it("prints a row for every server, each measured with no failed request or skipped with its reason", async () => {
    const run = spawnChild([process.execPath, "--import", "tsx", "load-tests/bench.ts", "cluster", "--duration", "0.5", "--warmup", "0", "--connections", "4"],
      { cwd: ROOT, env: { ROUNDS: "1" } });
    const exit = await run.exited;
    const output = run.output();
    expect(exit.code, output).toBe(0);
    expect(output).toMatch(/1 round\(s\) of \d+ servers/);
    const table = rowsOf(output, "| server");
    expect(table.map((line) => line.split(" | ")[0]?.slice(2))).toEqual(ROWS);
    for (const row of table) {
      const cells = row.split(" | ");
      if (/skipped: /.test(cells[1] ?? "")) {
        expect(cells[0]).toMatch(/reuseport/);
        continue;
      }
      // Requests per CPU-second in both loads, and no failed request.
      expect(cells[1], row).toMatch(/^[\d,]+( \([\d.]+ ×\))?$/);
      expect(cells[2], row).toMatch(/^[\d,]+( \([\d.]+ ×\))?$/);
      // The share of the CPU off the main threads, in both loads.
      expect(cells.at(-2), row).toMatch(/^\d+ % \/ \d+ %$/);
      expect(cells.at(-1), row).toBe("0 |");
    }
    // The clusters show how their 2 workers split the work.
    for (const row of table.filter((line) => /node:cluster|PM2|--workers 2/.test(line) && !/skipped: /.test(line))) {
      expect(row.split(" | ")[3], row).toMatch(/^\d+\/\d+ \/ \d+\/\d+$/);
    }
    // The comparisons, per round within a load, wherever both rows ran.
    const pairs = rowsOf(output, "| ratio");
    expect(pairs.map((line) => line.split(" | ")[0]?.slice(2))).toContain(`${ROWS[4]} ÷ ${ROWS[1]}`);
    for (const row of pairs) expect(row, row).toMatch(/^\| .+ ÷ .+ \| [\d.]+ \([\d.]+–[\d.]+\) \[[\d.]+\] \| [\d.]+ \([\d.]+–[\d.]+\) \[[\d.]+\] \|$/);
  }, 240_000);

  it("runs side by side: every server up for the whole run, each measured in every round", async () => {
    const run = spawnChild([process.execPath, "--import", "tsx", "load-tests/bench.ts", "cluster", "--duration", "0.5", "--warmup", "0", "--connections", "4", "--only", "2,5", "--side-by-side"],
      { cwd: ROOT, env: { ROUNDS: "2" } });
    const exit = await run.exited;
    const output = run.output();
    expect(exit.code, output).toBe(0);
    expect(output).toMatch(/2 round\(s\) of 3 servers × 2 loads × 0.5s \(\+0s warm-up each\), side by side/);
    // Every server measured in both loads in both rounds.
    for (const row of [ROWS[0], ROWS[1], ROWS[4]]) {
      for (const round of [1, 2]) for (const load of ["keep-alive", "close"]) expect(output).toContain(`round ${round} ${row} ${load}: `);
    }
    expect(rowsOf(output, "| server").map((line) => line.split(" | ")[0]?.slice(2))).toEqual([ROWS[0], ROWS[1], ROWS[4]]);
    expect(rowsOf(output, "| ratio").map((line) => line.split(" | ")[0]?.slice(2))).toEqual([`${ROWS[4]} ÷ ${ROWS[1]}`]);
    // The machine's speed read around every window, and the same comparison over the steady rounds.
    expect(output.match(/ (?:keep-alive|close): .*, speed \d+\.\d+→\d+\.\d+$/gm)).toHaveLength(3 * 2 * 2);
    expect(rowsOf(output, "| the same over").map((line) => line.split(" | ")[0]?.slice(2))).toEqual([`${ROWS[4]} ÷ ${ROWS[1]}`]);
  }, 240_000);
});
