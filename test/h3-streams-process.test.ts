/**
 * h3's own event streams (`createEventStream`) drain as keelson's `sse()` does, with real processes,
 * sockets, clients and signals (docs/h3.md, docs/lifecycle.md): at SIGTERM and at each worker's turn
 * in a rolling reload the client gets a final event with a `retry:` hint and a clean end of the
 * body, the request is logged once at its end, and the worker exits 0 well before the drain cap.
 */
import { execFile } from "node:child_process";
import { request } from "node:http";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { ROOT, killAll, startService } from "./fixtures/lifecycle-harness.js";
import { killAll as killSupervisors, startSupervisor } from "./fixtures/supervisor-harness.js";
import { SSEClient, curl } from "./helpers/stream-clients.js";

const FIXTURE = "test/fixtures/h3-streams-app.ts";
const execute = promisify(execFile);

afterEach(() => {
  killAll();
  killSupervisors();
});

async function until(test: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!test()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe("SIGTERM with h3 event streams open", () => {
  it("ends h3's streams on a keelson route and on httpEngine with a final event and retry:, logs each once at its end, exits 0 within 2 s", async () => {
    // A 10 s budget: the drain cap (half of it) is what the open streams used to wait for.
    const service = await startService({ H3_STREAMS_TIMEOUT_MS: "10000" }, FIXTURE);
    const paths = ["/h3/ticker", "/engine/ticker"];
    let ticking = 0;
    let ticked!: () => void;
    const ready = new Promise<void>((resolve) => (ticked = resolve));
    const clients = paths.map((path) => {
      let seen = false;
      return curl(`http://127.0.0.1:${service.port}${path}`, (out) => {
        if (seen || out.split("event: tick").length < 3) return;
        seen = true;
        if (++ticking === paths.length) ticked();
      });
    });
    await ready;

    const signalledAt = performance.now();
    service.child.kill("SIGTERM");
    const [exit, ...results] = await Promise.all([service.exited, ...clients]);

    expect(exit.code).toBe(0);
    expect(exit.at - signalledAt).toBeLessThan(2000);
    for (const result of results) {
      // curl exits 18 when the body is cut mid-transfer: 0 is the end of the chunked body.
      expect(result.code).toBe(0);
      expect(result.out).toMatch(/\n\nevent: shutdown\nretry: 1000\ndata: \{"reconnect":true\}\n\n$/);
    }
    const output = service.output();
    expect(output).toMatch(/closing the listener: 2 request\(s\) in flight, 2 of them response\(s\) still being written/);
    expect(output).toMatch(/ending 2 event stream\(s\) and 0 WebSocket\(s\)/);
    expect(output).not.toMatch(/drain cap/);
    for (const path of paths) {
      // Logged once, at its end: the line comes after the drain began.
      const lines = service.lines().filter((line) => line.includes(`GET ${path} 200`));
      expect(lines).toHaveLength(1);
      expect(service.indexOf(new RegExp(`GET ${path} 200`))).toBeGreaterThan(service.indexOf(/draining \(SIGTERM\)/));
      // h3's onClosed callbacks run: the application's timers stop.
      expect(output).toContain(`h3 stream closed: ${path}`);
    }
    expect(service.lines().at(-1)).toMatch(/terminated cleanly in \d+ms \(SIGTERM\)$/);
  });
});

describe("a rolling reload with h3 event streams open", () => {
  it("replaces 2 workers holding 20 h3 streams within 4 s: every stream ends with the final event, every old worker exits 0", async () => {
    const run = await startSupervisor(["--workers", "2"], { entry: FIXTURE, env: { H3_STREAMS_TIMEOUT_MS: "10000" } });
    await run.waitFor(/2 worker\(s\) ready in/);
    const clients = Array.from({ length: 20 }, (_, n) => new SSEClient(run.port, n % 2 === 0 ? "/h3/ticker" : "/engine/ticker", { reconnect: false }));
    await Promise.all(clients.map((client) => client.connect()));
    await until(() => clients.every((client) => client.events.length >= 1), 10_000, "a tick on every stream");

    const mark = run.output().length;
    process.kill(run.pid, "SIGHUP");
    await run.waitFor(/reload complete: 2 worker\(s\) replaced/, 30_000, mark);
    await until(() => clients.every((client) => client.ends.length === 1), 10_000, "every stream's end");

    const after = run.output().slice(mark);
    // The reload's time less the replacements' start (tsx on a shared machine): what the old
    // workers' drains cost. Each used to wait out its drain cap (5 s of the 10 s budget).
    const reloadMs = Number(/reload complete: 2 worker\(s\) replaced in (\d+)ms/.exec(after)![1]);
    const startsMs = [...after.matchAll(/ready on \S+ in (\d+)ms/g)].reduce((sum, match) => sum + Number(match[1]), 0);
    expect(reloadMs - startsMs).toBeLessThan(4000);
    const drains = [...after.matchAll(/terminated cleanly in (\d+)ms \(SIGTERM\)/g)].map((match) => Number(match[1]));
    expect(drains).toHaveLength(2);
    for (const ms of drains) expect(ms).toBeLessThan(2000);
    for (const client of clients) expect(client.ends).toEqual([{ how: "end", lastEvent: "shutdown" }]);
    expect(after).not.toMatch(/drain cap/);
    process.kill(run.pid, "SIGTERM");
    expect((await run.exited).code).toBe(0);
  });
});

describe("a rolling reload with a long response that is not an event stream", () => {
  it("keelson reload says which old worker hit the drain cap instead of reload complete", async () => {
    // A 2 s budget: the drain cap is half of what is left of it, about 1 s.
    const run = await startSupervisor(["--workers", "2"], { entry: FIXTURE, env: { H3_STREAMS_TIMEOUT_MS: "2000" } });
    await run.waitFor(/2 worker\(s\) ready in/);
    const slow = request(`http://127.0.0.1:${run.port}/engine/slow-body`);
    let got = "";
    slow.on("response", (response) => response.on("data", (chunk: Buffer) => (got += chunk.toString())));
    slow.on("error", () => {});
    slow.end();
    await until(() => got.includes("line"), 10_000, "the slow body's first line");

    const cli = await keelson(["reload"], run.port);
    expect(cli.code).toBe(0);
    expect(cli.stdout).not.toMatch(/reload complete/);
    expect(cli.stdout).toMatch(/reload done with errors: 2 worker\(s\) replaced .*; 1 old worker\(s\) did not drain cleanly: worker \d \(pid \d+\) \(code 1\): drain cap of \d+ms reached with 1 response\(s\) still being written/);
    expect(run.output()).toMatch(/reload done with errors: 2 worker\(s\) replaced in \d+ms; 1 old worker\(s\) did not drain cleanly/);
    slow.destroy();
  });
});

/** `keelson <args>` from the repository root with PORT set, as a user would type it; `stdout` holds stderr too (consola's warnings). */
async function keelson(args: string[], port: number): Promise<{ code: number; stdout: string }> {
  try {
    const { stdout, stderr } = await execute(process.execPath, ["--import", "tsx", "cli/cli.ts", ...args], {
      cwd: ROOT, env: { ...process.env, PORT: String(port), KEELSON_CONTROL_SOCKET: "" }, timeout: 60_000,
    });
    return { code: 0, stdout: stdout + stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout + failed.stderr };
  }
}
