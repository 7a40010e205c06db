/**
 * The lifecycle driven in-process through listen() and close(), over real sockets: startup
 * failures, close() semantics, the deadline, hooks and the scheduler hook.
 */
import * as http from "node:http";
import * as net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { App, get, newLogger, type KConfig, type ShutdownReport } from "../src/index.js";
import { httpGet, sleep } from "./fixtures/lifecycle-harness.js";

interface Listening {
  listening: Promise<void>;
  port: number;
}

const apps = new Set<App>();

afterEach(async () => {
  await Promise.all(Array.from(apps, (app) => app.close()));
  apps.clear();
});

/** An App on a free port; `logs()` flushes its logger and returns every line written so far. */
function newApp(config: KConfig = {}): { app: App; logs: () => string[] } {
  const lines: string[] = [];
  const logger = newLogger(false).withWriter({ write: (chunk: string) => lines.push(...chunk.split("\n").filter(Boolean)) });
  const app = new App({ port: 0, logger, ...config });
  apps.add(app);
  return { app, logs: () => (logger.flush(), lines) };
}

/** Calls listen() and waits until the port is bound. */
async function listening(app: App): Promise<Listening> {
  const started = app.listen();
  started.catch(() => {});
  for (let waited = 0; app.port === undefined; waited += 10) {
    if (waited > 10_000) throw new Error("the app did not start listening");
    await sleep(10);
  }
  return { listening: started, port: app.port };
}

const signalCount = () => process.listenerCount("SIGTERM") + process.listenerCount("SIGINT");

describe("close()", () => {
  it("drains, runs the hooks once in order, resolves listen() and leaves the port closed", async () => {
    const { app, logs } = newApp();
    const calls: string[] = [];
    app.onShutdown(function first() {
      calls.push("first");
    });
    app.onShutdown(async () => {
      await sleep(20);
      calls.push("second");
    }, "second");
    const h = await listening(app);
    expect((await httpGet(h.port, "/health")).status).toBe(200);

    const [a, b] = [app.close(), app.close()];
    expect(a).toBe(b);
    const report = await a;
    await h.listening;
    expect(calls).toEqual(["first", "second"]);
    expect(report).toMatchObject({ clean: true, reason: "close()", deadlinePassed: false, failedHooks: [], skippedHooks: [] });
    expect(await app.close()).toBe(report);
    expect(calls).toHaveLength(2);
    await expect(httpGet(h.port, "/health")).rejects.toMatchObject({ code: "ECONNREFUSED" });
    expect(logs().join("\n")).toMatch(/running 2 shutdown hook\(s\): first, second/);
  });

  it("logs a hook's duration only when it took a tenth of the budget or more; no debug line per hook", async () => {
    const { app, logs } = newApp({ shutdownTimeout: 2000 });
    app.onShutdown(() => {}, "quick");
    app.onShutdown(() => sleep(400), "slow");
    await listening(app);
    expect((await app.close()).clean).toBe(true);
    const hookLines = logs().filter((line) => /shutdown hook (quick|slow)\b/.test(line));
    expect(hookLines).toHaveLength(1);
    expect(hookLines[0]).toMatch(/^\[INFO\] .* shutdown hook slow took \d+ms of the 2000ms budget$/);
  });

  it("before listen() runs the hooks, and a later listen() rejects", async () => {
    const { app } = newApp();
    let ran = 0;
    app.onShutdown(() => void ran++);
    const report = await app.close();
    expect(report.clean).toBe(true);
    expect(ran).toBe(1);
    await expect(app.listen()).rejects.toThrow("cannot listen: the app was closed");
    expect(app.port).toBeUndefined();
  });

  it("during startup stops listen() from opening the port and resolves it", async () => {
    const { app } = newApp();
    let registering!: () => void;
    const entered = new Promise<void>((resolve) => (registering = resolve));
    app.use({ name: "slow", register: () => (registering(), sleep(200)) });
    let ran = 0;
    app.onShutdown(() => void ran++);
    const started = app.listen();
    await entered;
    await app.close();
    await started;
    expect(app.port).toBeUndefined();
    expect(ran).toBe(1);
  });

  it("gives responses already in flight Connection: close and finishes them", async () => {
    const { app } = newApp();
    let arrived = 0;
    let bothArrived!: () => void;
    const inFlight = new Promise<void>((resolve) => (bothArrived = resolve));
    app.route(get("/slow", () => {
      if (++arrived === 2) bothArrived();
      return sleep(300).then(() => ({ ok: true }));
    }));
    const h = await listening(app);
    const agent = new http.Agent({ keepAlive: true });
    const replies = [httpGet(h.port, "/slow", agent), httpGet(h.port, "/slow", agent)];
    await inFlight;
    const report = await app.close();
    for (const reply of await Promise.all(replies)) {
      expect(reply.status).toBe(200);
      expect(reply.headers.connection).toBe("close");
    }
    agent.destroy();
    expect(report.clean).toBe(true);
  });

  it("closes a keep-alive socket as soon as a response whose head went out before close() ends", async () => {
    const { app } = newApp({ shutdownTimeout: 3000 });
    app.httpEngine.get("/stream", () => new Response(new ReadableStream({
      async start(controller) {
        controller.enqueue(new TextEncoder().encode("first "));
        await sleep(300);
        controller.enqueue(new TextEncoder().encode("last"));
        controller.close();
      },
    })));
    const h = await listening(app);
    const agent = new http.Agent({ keepAlive: true });
    const body = new Promise<{ text: string; connection: string | undefined }>((resolve, reject) => {
      http.get({ host: "127.0.0.1", port: h.port, path: "/stream", agent }, (res: http.IncomingMessage) => {
        let text = "";
        res.on("data", (chunk: Buffer) => {
          text += chunk.toString();
          // The head and the first chunk are out: only now start the shutdown.
          if (text === "first ") void app.close();
        });
        res.on("end", () => resolve({ text, connection: res.headers.connection }));
      }).on("error", reject);
    });
    expect(await body).toEqual({ text: "first last", connection: "keep-alive" });
    const report = await app.close();
    agent.destroy();
    // Without closing it when it turns idle, the socket would hold the drain until the deadline.
    expect(report.clean).toBe(true);
    expect(report.durationMs).toBeLessThan(2000);
  });

  it("answers /health with 503 during the shutdown delay while other routes still answer", async () => {
    const { app, logs } = newApp({ shutdownDelay: 600 });
    const h = await listening(app);
    const closing = app.close();
    const health = await httpGet(h.port, "/health");
    expect(health.status).toBe(503);
    expect(JSON.parse(health.body)).toMatchObject({ status: "DOWN" });
    expect((await httpGet(h.port, "/nowhere")).status).toBe(404);
    const report = await closing;
    expect(report.clean).toBe(true);
    expect(report.durationMs).toBeGreaterThanOrEqual(590);
    expect(logs().join("\n")).toMatch(/waiting 600ms before closing the listener/);
  });
});

describe("the deadline", () => {
  it("destroys a request that never ends at the drain cap (half the budget), counts it, and still runs the hooks", async () => {
    const { app, logs } = newApp({ shutdownTimeout: 800 });
    let hangArrived!: () => void;
    const inFlight = new Promise<void>((resolve) => (hangArrived = resolve));
    app.route(get("/hang", () => (hangArrived(), new Promise<never>(() => {}))));
    let hookRan = false;
    app.onShutdown(() => void (hookRan = true), "cleanup");
    const h = await listening(app);
    const hanging = httpGet(h.port, "/hang").then(() => "answered", (error: NodeJS.ErrnoException) => error.code);
    await inFlight;
    const report = await app.close();
    expect(await hanging).toBe("ECONNRESET");
    expect(report).toMatchObject({ clean: false, deadlinePassed: false, abandonedRequests: 1, skippedHooks: [], failedHooks: [] });
    expect(hookRan).toBe(true);
    expect(report.durationMs).toBeGreaterThanOrEqual(390);
    expect(report.durationMs).toBeLessThan(800);
    expect(logs().join("\n")).toMatch(/\[ERROR\] .*drain cap of \d+ms reached with 1 request\(s\) still running: their connections were destroyed; running the hooks/);
    expect(logs().at(-1)).toMatch(/terminated with errors .*: 1 request\(s\) abandoned$/);
  });

  it("aborts the hooks' shared signal at the deadline and names the hook still running", async () => {
    const { app } = newApp({ shutdownTimeout: 600 });
    const signals: AbortSignal[] = [];
    let reason: unknown;
    app.onShutdown((signal) => void signals.push(signal), "quick");
    app.onShutdown((signal) => {
      signals.push(signal);
      expect(signal.aborted).toBe(false);
      return new Promise<void>((_, reject) => signal.addEventListener("abort", () => {
        reason = signal.reason;
        reject(signal.reason as Error);
      }));
    }, "stubborn");
    app.onShutdown(() => void signals.push(new AbortController().signal), "never");
    const report: ShutdownReport = await app.close();
    expect(report).toMatchObject({ clean: false, deadlinePassed: true, timedOutHook: "stubborn", failedHooks: [], skippedHooks: ["never"] });
    expect(signals).toHaveLength(2);
    expect(signals[0]).toBe(signals[1]);
    expect(signals[0]!.aborted).toBe(true);
    expect(reason).toMatchObject({ name: "TimeoutError", message: "shutdown deadline of 600ms passed" });
    expect(report.durationMs).toBeLessThan(600 + 250);
  });

  it("counts a hook that throws as failed and runs the rest", async () => {
    const { app, logs } = newApp();
    const calls: string[] = [];
    app.onShutdown(() => {
      calls.push("a");
      throw new Error("disk full");
    }, "a");
    app.onShutdown(() => void calls.push("b"), "b");
    const report = await app.close();
    expect(calls).toEqual(["a", "b"]);
    expect(report).toMatchObject({ clean: false, deadlinePassed: false, failedHooks: ["a"] });
    expect(logs().join("\n")).toMatch(/\[ERROR\] .*shutdown hook a failed: Error: disk full/);
  });
});

describe("listen()", () => {
  it("returns the same promise when called twice and logs the URL once", async () => {
    const { app, logs } = newApp();
    const h = await listening(app);
    expect(app.listen()).toBe(h.listening);
    expect(logs().filter((line) => /listening on http:\/\/(?:\[::\]|0\.0\.0\.0):\d+\/ \(development\)$/.test(line))).toHaveLength(1);
  });

  it("rejects with a one-line reason when the port is taken, and never picks another", async () => {
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, resolve));
    const port = (blocker.address() as net.AddressInfo).port;
    try {
      const before = signalCount();
      const { app } = newApp({ port });
      const error = await app.listen().then(() => undefined, (e: Error) => e);
      expect(error?.message).toBe(`port ${port} is already in use (EADDRINUSE)`);
      expect(app.port).toBeUndefined();
      expect(signalCount()).toBe(before);
    } finally {
      blocker.close();
    }
  });

  it.each([70000, -1, 1.5])("refuses the invalid port %s when the App is made", (port) => {
    expect(() => newApp({ port })).toThrow(`port must be an integer from 0 to 65535, got ${port}`);
  });

  it("rejects when a module's register step throws", async () => {
    const { app } = newApp();
    app.use({ name: "db", register: () => {
      throw new Error("no database");
    } });
    await expect(app.listen()).rejects.toThrow("module db failed to register: no database");
    expect(app.port).toBeUndefined();
  });

  it("rejects when a module's register step rejects, even if listen() is called late", async () => {
    const { app } = newApp();
    app.use({ name: "cache", register: () => sleep(5).then(() => Promise.reject(new Error("no cache"))) });
    // The rejection happens before anyone awaits it: it must wait for listen(), not crash the process.
    await sleep(50);
    await expect(app.listen()).rejects.toThrow("module cache failed to register: no cache");
  });

  it("installs one SIGINT/SIGTERM handler pair for all listening apps and removes it after close()", async () => {
    const before = signalCount();
    const one = newApp();
    const two = newApp();
    await listening(one.app);
    await listening(two.app);
    expect(signalCount()).toBe(before + 2);
    await one.app.close();
    await sleep(0);
    expect(signalCount()).toBe(before + 2);
    await two.app.close();
    await sleep(0);
    expect(signalCount()).toBe(before);
  });

  it("starts a registered scheduler and stops it from a shutdown hook, in registration order", async () => {
    const { app, logs } = newApp();
    const calls: string[] = [];
    let stopSignal: AbortSignal | undefined;
    app.onShutdown(() => void calls.push("before"), "before");
    app.registerScheduler({
      start: () => void calls.push("start"),
      stop: (signal) => {
        stopSignal = signal;
        calls.push("stop");
      },
    });
    app.onShutdown(() => void calls.push("after"), "after");
    await listening(app);
    expect(calls).toEqual(["start"]);
    await app.close();
    expect(calls).toEqual(["start", "before", "stop", "after"]);
    expect(stopSignal).toBeInstanceOf(AbortSignal);
    expect(logs().join("\n")).toMatch(/running 3 shutdown hook\(s\): before, scheduler #1, after/);
  });
});
