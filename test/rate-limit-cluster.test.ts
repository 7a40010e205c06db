import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { freePort, killAllChildren, spawnChild } from "../harness/child.js";
import { hitMany } from "./helpers/hits.js";

// Four real workers under the real supervisor (CLI from source), one client, fresh connections.
const ROOT = fileURLToPath(new URL("..", import.meta.url));

afterEach(killAllChildren);

describe("rate limits under the supervisor (4 real workers)", () => {
  it("1,000 requests from one client over fresh connections: exactly 100 served cluster-wide, 900 refused with 429 and Retry-After, in a few dozen IPC leases", async () => {
    const port = await freePort();
    const child = spawnChild([process.execPath, "--import", "tsx", "cli/cli.ts", "start", "test/fixtures/rate-limit-app.ts",
      "--workers", "4", "--port", String(port)], { cwd: ROOT, env: { NODE_ENV: "production", RATE_LIMIT: "100" } });
    await child.waitFor(/4 worker\(s\) ready/, { timeoutMs: 60_000 });
    const hits = await hitMany([port], 1000);
    const served = hits.filter((h) => h.status === 200);
    const refused = hits.filter((h) => h.status === 429);
    // Every worker served some: the limit held across processes, not per process.
    expect(new Set(served.map((h) => (JSON.parse(h.body) as { pid: number }).pid)).size).toBe(4);
    // Leases never exceed what the primary has left (no overshoot), and every leased unit is spent
    // because each worker keeps getting requests after the budget is gone (no undershoot).
    expect(served).toHaveLength(100);
    expect(refused).toHaveLength(900);
    for (const h of refused) {
      expect(Number(h.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(h.rateLimit).toMatch(/^"100-in-24h";r=0;t=\d+$/);
      expect(JSON.parse(h.body)).toMatchObject({ status_code: 429, code: "RATE_LIMITED" });
    }
    expect(served.every((h) => /^"100-in-24h";r=\d+;t=\d+$/.test(h.rateLimit ?? ""))).toBe(true);
    // One round trip per lease (batches of at most 10, shrinking near the end) and one refusal per
    // worker; the 900 refusals after it are answered from the worker's memory.
    const leases = child.lines(/ratelimit:take sent/).length;
    expect(leases).toBeGreaterThanOrEqual(14);
    expect(leases).toBeLessThanOrEqual(60);
    await child.stop();
  }, 120_000);

  it("workers of another node:cluster primary (PM2-like) count in their own memory instead of waiting on leases nobody grants", async () => {
    const port = await freePort();
    const child = spawnChild([process.execPath, "--import", "tsx", "test/fixtures/plain-cluster-primary.ts"],
      { cwd: ROOT, env: { NODE_ENV: "production", RATE_LIMIT: "5", PORT: String(port) } });
    await child.waitFor(/2 plain workers listening/, { timeoutMs: 60_000 });
    const hits = await hitMany([port], 60, 4);
    // 5 per worker: a limiter waiting on the unanswered IPC would time out and fail open (60 served).
    expect(hits.filter((h) => h.status === 200)).toHaveLength(10);
    expect(hits.filter((h) => h.status === 429)).toHaveLength(50);
    expect(child.lines(/ratelimit:take sent/)).toHaveLength(0);
    await child.stop();
  }, 120_000);
});
