// Load shedding in-process: 503 + Retry-After while saturated, /health always served, counted and logged.
import { describe, expect, it } from "vitest";
import { App, get } from "../src/index.js";
import { createPrometheus } from "../src/entries/metrics.js";
import { captureLogs } from "./helpers/logs.js";
import { delay } from "../harness/child.js";

describe("load shedding", () => {
  it("rejects with 503 and Retry-After past maxInflight, serves /health, counts and logs it, recovers", async () => {
    const logs = captureLogs();
    // Only the in-flight limit decides here: an event loop made late by a loaded machine must not shed too.
    const app = new App({ logger: logs.logger, loadShedding: { maxInflight: 2, retryAfter: 3, maxEventLoopDelay: 60_000 } });
    app.use(createPrometheus({ defaultMetrics: false }));
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let started = 0;
    let bothStarted!: () => void;
    const running = new Promise<void>((resolve) => (bothStarted = resolve));
    app.route(get("/slow", async () => {
      if (++started === 2) bothStarted();
      await gate;
      return { ok: true };
    }));
    const slow = [app.request("/slow"), app.request("/slow")];
    await running;
    const rejected = await app.request("/slow");
    expect(rejected.status).toBe(503);
    expect(rejected.headers.get("retry-after")).toBe("3");
    // A JSON body like every other: the same headers, nosniff included.
    expect(rejected.headers.get("x-content-type-options")).toBe("nosniff");
    expect(await rejected.json()).toMatchObject({ code: "SERVICE_UNAVAILABLE", message: "the service is overloaded: retry later" });
    expect((await app.request("/health")).status).toBe(200);
    release();
    expect((await Promise.all(slow)).map((r) => r.status)).toEqual([200, 200]);
    expect((await app.request("/slow")).status).toBe(200);
    const metrics = await (await app.request("/metrics")).text();
    expect(metrics).toMatch(/^keelson_requests_shed_total\{reason="inflight"\} 1$/m);
    const warns = logs.lines().filter((line) => line.includes("load shedding"));
    expect(warns).toHaveLength(1);
    expect(warns[0]).toMatch(/^\[WARN\] .* load shedding: 2 request\(s\) in flight, limit 2: 1 request\(s\) rejected with 503 since the last warning$/);
    // The rejection is not a request the App served: no request log line for it.
    expect(logs.lines().filter((line) => / GET \/slow 503 /.test(line))).toEqual([]);
  });

  it("rejects while the event loop is late, never /health, and serves again once it is on time", async () => {
    const logs = captureLogs();
    const app = new App({ logger: logs.logger, loadShedding: { maxEventLoopDelay: 50, sampleInterval: 50 } });
    app.route(get("/work", () => ({ ok: true })));
    expect((await app.request("/work")).status).toBe(200);
    const until = Date.now() + 1000;
    while (Date.now() < until) {
      // A blocked event loop, as a CPU-heavy request would leave it.
    }
    // The overdue sampling timer runs first in this timers phase.
    await delay(0);
    const rejected = await app.request("/work");
    expect(rejected.status).toBe(503);
    expect(rejected.headers.get("retry-after")).toBe("1");
    expect((await app.request("/health")).status).toBe(200);
    expect(logs.lines().find((line) => line.includes("load shedding"))).toMatch(/load shedding: event-loop delay \d+ms over 50ms: 1 request\(s\) rejected/);
    let status = 503;
    for (let i = 0; i < 100 && status === 503; i++) {
      await delay(20);
      status = (await app.request("/work")).status;
    }
    expect(status).toBe(200);
  });

  it("rejects a request reached after more than maxQueueDelay of other work in the same event-loop turn", async () => {
    const logs = captureLogs();
    const app = new App({ logger: logs.logger, loadShedding: { maxEventLoopDelay: 60_000, maxQueueDelay: 20 } });
    app.use(createPrometheus({ defaultMetrics: false }));
    app.route(get("/spin", () => {
      const until = performance.now() + 100;
      while (performance.now() < until) {
        // Synchronous work, as a CPU-heavy handler does.
      }
      return { ok: true };
    }));
    app.route(get("/work", () => ({ ok: true })));
    expect((await app.request("/work")).status).toBe(200);
    await delay(0);
    // No macrotask between these: one event-loop turn, as requests read from sockets in one poll phase.
    expect((await app.request("/spin")).status).toBe(200);
    const rejected = await app.request("/work");
    expect((await app.request("/health")).status).toBe(200);
    expect(rejected.status).toBe(503);
    expect(rejected.headers.get("retry-after")).toBe("1");
    expect(rejected.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await rejected.json()).toMatchObject({ code: "SERVICE_UNAVAILABLE" });
    // The next turn starts a new clock.
    await delay(0);
    expect((await app.request("/work")).status).toBe(200);
    await delay(0);
    expect(await (await app.request("/metrics")).text()).toMatch(/^keelson_requests_shed_total\{reason="queue_delay"\} 1$/m);
    expect(logs.lines().find((line) => line.includes("load shedding"))).toMatch(
      /load shedding: queue delay: reached after \d+ms of other work in the same event-loop turn, limit 20ms: 1 request\(s\) rejected/,
    );
  });

  it("is off by default: any number of requests in flight is served", async () => {
    const app = new App({ logger: captureLogs().logger });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    app.route(get("/slow", async () => {
      await gate;
      return { ok: true };
    }));
    const all = Array.from({ length: 50 }, () => app.request("/slow"));
    await delay(10);
    release();
    expect(new Set((await Promise.all(all)).map((r) => r.status))).toEqual(new Set([200]));
  });
});
