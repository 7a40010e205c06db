// `make bench` side by side in a short form: every target up for the whole run, measured in every
// round, its work counted after each round, and keelson's ratio to every other target reported.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { killAllChildren, spawnChild } from "../../harness/child.js";
import type { Results } from "../../load-tests/lib/report.js";

const ROOT = path.resolve(import.meta.dirname, "..", "..");
const results = fs.mkdtempSync(path.join(os.tmpdir(), "bench-peers-"));

afterAll(() => {
  killAllChildren();
  fs.rmSync(results, { recursive: true, force: true });
});

describe("make bench SIDE_BY_SIDE=1, short form", () => {
  it("measures every target in every round, counts keelson's work after each round and divides keelson by each target", async () => {
    const run = spawnChild([process.execPath, "--import", "tsx", "load-tests/bench.ts", "peers", "--tsx", "--side-by-side", "--rounds", "2", "--duration", "0.5",
      "--warmup", "0.5", "--cold-starts", "1", "--connections", "4", "--pipelining", "1", "--targets", "h3,keelson"],
    { cwd: ROOT, env: { BENCH_RESULTS_DIR: results } });
    const exit = await run.exited;
    const output = run.output();
    expect(exit.code, output).toBe(0);
    expect(output).toContain("side by side (every target up at once");
    expect(output).toMatch(/all 2 servers up/);
    const latest = JSON.parse(fs.readFileSync(path.join(results, "latest.json"), "utf8")) as Results;
    // Three scenarios, two targets, two rounds: one window each.
    expect(latest.runs.map((r) => `${r.round} ${r.target} ${r.scenario}`).toSorted()).toEqual(
      [1, 2].flatMap((round) => ["h3", "keelson"].flatMap((t) => ["GET /books/42", "GET /hello", "POST /books"].map((s) => `${round} ${t} ${s}`))).toSorted(),
    );
    const keelson = latest.targets.find((t) => t.target === "keelson");
    expect(keelson?.warnings).toEqual([]);
    expect(keelson?.workCounts).toHaveLength(2);
    expect(keelson?.workCounts[1]).toMatch(/^after round 2: (\d+) log lines, \1 histogram samples for \d+\.\.\d+ responses$/);
    expect(latest.keelsonRatios.map((r) => `${r.denominator} ${r.scenario} ${r.rounds}`)).toEqual(
      ["GET /hello", "GET /books/42", "POST /books"].map((s) => `h3 ${s} 2`),
    );
    expect(output).toMatch(/keelson ÷ +GET \/hello/);
    // The machine's speed read around every window, and the ratios over the rounds it held steady.
    for (const r of latest.runs) expect(r.speedBefore! > 0 && r.speedAfter! > 0, JSON.stringify(r)).toBe(true);
    expect(latest.keelsonSteadyRatios.map((r) => `${r.denominator} ${r.scenario}`)).toEqual(["GET /hello", "GET /books/42", "POST /books"].map((s) => `h3 ${s}`));
    expect(output).toMatch(/the same over the rounds whose two windows ran at one machine speed/);
  }, 240_000);
});
