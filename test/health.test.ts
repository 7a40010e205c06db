import { describe, expect, it } from "vitest";
import { App, get, type HealthChecker, type KConfig } from "../src/index.js";
import { checkHealth } from "../src/health.js";
import { describeBoth } from "./helpers/both.js";
import { captureLogs, requestLine } from "./helpers/logs.js";
import { delay } from "../harness/child.js";

const up = (name: string): HealthChecker => ({ name, check: () => undefined });

function appWith(checkers: HealthChecker[], config: KConfig = {}): App {
  const app = new App({ serviceName: "orders", version: "2.3.4", logger: captureLogs().logger, ...config });
  for (const checker of checkers) app.registerHealthChecker(checker);
  return app;
}

async function health(app: App, init?: RequestInit): Promise<{ status: number; body: unknown; ms: number }> {
  const started = performance.now();
  const res = await app.request("/health", init);
  const text = await res.text();
  return { status: res.status, body: text === "" ? undefined : JSON.parse(text), ms: performance.now() - started };
}

describe("GET /health report", () => {
  it("is 200 UP with an empty checks object when no checker is registered", async () => {
    const res = await appWith([]).request("/health");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json;charset=UTF-8");
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(await res.text()).toBe('{"status":"UP","service":"orders","version":"2.3.4","checks":{}}');
  });

  it("takes service from serviceName and version from version, else docs.version, else 1.0.0", async () => {
    const fromDocs = new App({ serviceName: "a", docs: { version: "3.0.0" }, logger: captureLogs().logger });
    expect(await (await fromDocs.request("/health")).json()).toMatchObject({ service: "a", version: "3.0.0" });
    const bare = new App({ logger: captureLogs().logger });
    expect(await (await bare.request("/health")).json()).toMatchObject({ service: "keelson-service", version: "1.0.0" });
  });

  it("is 200 UP with every checker UP", async () => {
    expect(await health(appWith([up("db"), up("cache")]))).toMatchObject({
      status: 200, body: { status: "UP", service: "orders", version: "2.3.4", checks: { db: "UP", cache: "UP" } },
    });
  });

  it("is 503 DOWN with 'DOWN: <message>' for each failed checker and UP for the others", async () => {
    const app = appWith([
      up("db"),
      { name: "sync-throw", check: () => {
        throw new Error("connection refused");
      } },
      { name: "rejects", check: () => Promise.reject(new Error("disk full")) },
      { name: "rejects-string", check: () => Promise.reject("quota exceeded") },
      { name: "throws-object", check: () => {
        throw { reason: "odd" };
      } },
      { name: "empty-error", check: () => Promise.reject(new TypeError("")) },
    ]);
    expect(await health(app)).toMatchObject({
      status: 503,
      body: {
        status: "DOWN", service: "orders", version: "2.3.4",
        checks: {
          db: "UP",
          "sync-throw": "DOWN: connection refused",
          rejects: "DOWN: disk full",
          "rejects-string": "DOWN: quota exceeded",
          "throws-object": 'DOWN: {"reason":"odd"}',
          "empty-error": "DOWN: TypeError",
        },
      },
    });
  });

  it("times out a checker that never settles, and aborts its signal", async () => {
    let signal: AbortSignal | undefined;
    const app = appWith([up("db"), { name: "hangs", check: (s) => {
      signal = s;
      return new Promise(() => {});
    } }], { healthTimeout: 100 });
    const result = await health(app);
    expect(result).toMatchObject({ status: 503, body: { status: "DOWN", checks: { db: "UP", hangs: "DOWN: timed out after 100ms" } } });
    // Generous: the endpoint answers near the timeout, never hangs with the checker.
    expect(result.ms).toBeGreaterThanOrEqual(95);
    expect(result.ms).toBeLessThan(5000);
    expect(signal?.aborted).toBe(true);
  });

  it("uses 500 ms per checker by default", async () => {
    const app = appWith([{ name: "slow", check: async () => void (await delay(10_000)) }]);
    expect(app.config.healthTimeout).toBe(500);
    const result = await health(app);
    expect(result.body).toMatchObject({ checks: { slow: "DOWN: timed out after 500ms" } });
    expect(result.ms).toBeGreaterThanOrEqual(490);
    expect(result.ms).toBeLessThan(5000);
  });

  it("runs the checkers in parallel", async () => {
    let running = 0;
    let peak = 0;
    const slow = (name: string): HealthChecker => ({
      name,
      async check() {
        running++;
        peak = Math.max(peak, running);
        await delay(50);
        running--;
      },
    });
    const result = await health(appWith([slow("a"), slow("b"), slow("c")], { healthTimeout: 5000 }));
    expect(result.status).toBe(200);
    expect(peak).toBe(3);
  });

  it("recomputes the status on every call", async () => {
    let healthy = true;
    const app = appWith([{ name: "flaky", check: () => {
      if (!healthy) throw new Error("lost leader");
    } }]);
    expect((await health(app)).status).toBe(200);
    healthy = false;
    expect(await health(app)).toMatchObject({ status: 503, body: { checks: { flaky: "DOWN: lost leader" } } });
    healthy = true;
    expect((await health(app)).status).toBe(200);
  });

  it("answers HEAD with the same status and no body", async () => {
    expect(await health(appWith([up("db")]), { method: "HEAD" })).toMatchObject({ status: 200, body: undefined });
    const down = appWith([{ name: "db", check: () => Promise.reject(new Error("x")) }]);
    expect(await health(down, { method: "HEAD" })).toMatchObject({ status: 503, body: undefined });
  });

  it("is logged like any request: info when UP, error when DOWN", async () => {
    const logs = captureLogs();
    let healthy = true;
    const app = new App({ logger: logs.logger });
    app.registerHealthChecker({ name: "db", check: () => {
      if (!healthy) throw new Error("x");
    } });
    await app.request("/health");
    healthy = false;
    await app.request("/health");
    expect(logs.lines()).toEqual([
      expect.stringMatching(requestLine("INFO", "GET", "/health", 200)),
      expect.stringMatching(requestLine("ERROR", "GET", "/health", 503)),
    ]);
  });

  it("reports DOWN as soon as shutdown starts, whatever the checkers say", async () => {
    const app = appWith([up("db")]);
    let during: unknown;
    app.onShutdown(async () => {
      during = await health(app);
    });
    await app.close();
    expect(during).toMatchObject({ status: 503, body: { status: "DOWN", checks: { db: "UP" } } });
  });

  it("does not exist with disableHealth; the app may supply its own", async () => {
    const app = appWith([up("db")], { disableHealth: true });
    expect((await app.request("/health")).status).toBe(404);
    app.route(get("/health", () => ({ custom: true })));
    expect(await (await app.request("/health")).json()).toEqual({ custom: true });
  });
});

describe("checkHealth()", () => {
  it("builds the report from checkers directly", async () => {
    const report = await checkHealth([up("a"), { name: "b", check: () => Promise.reject(new Error("nope")) }], {
      service: "s", version: "v", timeoutMs: 100,
    });
    expect(report).toEqual({ status: "DOWN", service: "s", version: "v", checks: { a: "UP", b: "DOWN: nope" } });
    expect(await checkHealth([], { service: "s", version: "v", timeoutMs: 100, forceDown: true })).toEqual({
      status: "DOWN", service: "s", version: "v", checks: {},
    });
  });
});

describeBoth(
  "GET /health over both transports",
  (base) => {
    const app = new App({ ...base, serviceName: "svc", version: "1.2.3", healthTimeout: 150 });
    app.registerHealthChecker(up("db"));
    app.registerHealthChecker({ name: "hangs", check: () => new Promise(() => {}) });
    return app;
  },
  (t) => {
    it("answers 503 within the checker timeout when a checker hangs", async () => {
      const started = performance.now();
      const res = await t().fetch("/health");
      expect(res.status).toBe(503);
      expect(await res.json()).toEqual({
        status: "DOWN", service: "svc", version: "1.2.3", checks: { db: "UP", hangs: "DOWN: timed out after 150ms" },
      });
      expect(performance.now() - started).toBeLessThan(5000);
    });

    it("answers HEAD", async () => {
      const res = await t().fetch("/health", { method: "HEAD" });
      expect([res.status, await res.text()]).toEqual([503, ""]);
    });
  },
);
