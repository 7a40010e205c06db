/**
 * Load shedding by queue delay over real sockets: requests that arrive while a CPU-bound handler
 * holds the event loop are read together in the next turn; the first is served, and the ones
 * behind more than maxQueueDelay of its work are rejected at once (503, Retry-After, JSON
 * headers), counted and logged; /health is served whatever its place in the turn.
 */
import * as fs from "node:fs";
import * as http from "node:http";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { freeSockets, httpGet, killAll, startService, type Reply } from "./fixtures/lifecycle-harness.js";
import { tempDir } from "./helpers/temp-dir.js";

afterEach(() => killAll());

describe("load shedding by queue delay (real sockets)", () => {
  it("serves the first request of a turn and rejects the one queued behind its 600 ms of work", async () => {
    const service = await startService({}, "test/fixtures/load-shed-app.ts");
    const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
    // Kept-alive sockets first: requests on an open connection are read in one turn, while a new
    // connection would be accepted in one turn and read in the next.
    // (One first: a cold process's first request alone could take longer than maxQueueDelay.)
    expect((await httpGet(service.port, "/fast", agent)).status).toBe(200);
    const warm = await Promise.all(Array.from({ length: 4 }, () => httpGet(service.port, "/fast", agent)));
    expect(warm.map((reply) => reply.status)).toEqual([200, 200, 200, 200]);
    expect(freeSockets(agent)).toHaveLength(4);

    // The event loop is held until the three requests below are in the kernel: one turn reads them all.
    const release = path.join(tempDir("load-shed-"), "release");
    const holder = httpGet(service.port, `/spin?until=${encodeURIComponent(release)}`, agent);
    await service.waitFor(/spin started/);
    const send = (target: string): { written: Promise<void>; reply: Promise<Reply> } => {
      let written!: () => void;
      const promise = new Promise<void>((resolve) => (written = resolve));
      return { written: promise, reply: httpGet(service.port, target, agent, () => written()) };
    };
    const queued = [send("/spin?ms=600"), send("/spin?ms=600"), send("/health")];
    await Promise.all(queued.map((request) => request.written));
    fs.writeFileSync(release, "");
    const [spinA, spinB, health] = await Promise.all(queued.map((request) => request.reply));
    expect((await holder).status).toBe(200);
    for (const reply of [spinA, spinB, health]) expect(reply?.reusedSocket).toBe(true);

    expect(health?.status).toBe(200);
    const statuses = [spinA?.status, spinB?.status].toSorted();
    expect(statuses).toEqual([200, 503]);
    const rejected = spinA?.status === 503 ? spinA : spinB;
    expect(rejected?.headers["retry-after"]).toBe("1");
    expect(rejected?.headers["content-type"]).toMatch(/^application\/json/);
    expect(rejected?.headers["x-content-type-options"]).toBe("nosniff");
    expect(JSON.parse(rejected?.body ?? "")).toMatchObject({ code: "SERVICE_UNAVAILABLE" });

    const metrics = await httpGet(service.port, "/metrics", agent);
    expect(metrics.body).toMatch(/^keelson_requests_shed_total\{reason="queue_delay"\} 1$/m);
    agent.destroy();
    await service.waitFor(/load shedding: queue delay/);
    const warn = service.lines().find((line) => line.includes("load shedding"));
    expect(warn).toMatch(/^\[WARN\] .* load shedding: queue delay: reached after (\d+)ms of other work in the same event-loop turn, limit 200ms: 1 request\(s\) rejected with 503 since the last warning$/);
    expect(Number(/after (\d+)ms/.exec(warn ?? "")?.[1])).toBeGreaterThanOrEqual(600);
  });
});
