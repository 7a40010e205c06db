/**
 * Startup failures of a real service process (one line, non-zero exit) and running as PID 1
 * in its own PID namespace, as in a container without an init process.
 */
import { readFileSync } from "node:fs";
import { createServer, type AddressInfo, type Server } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { BOOKSTORE, httpGet, killAll, spawnService, startService } from "./fixtures/lifecycle-harness.js";

let blocker: Server | undefined;

afterEach(() => {
  killAll();
  blocker?.close();
  blocker = undefined;
});

async function takePort(): Promise<number> {
  const server = (blocker = createServer());
  await new Promise<void>((resolve) => server.listen(0, resolve));
  return (server.address() as AddressInfo).port;
}

/** Runs a service that is expected to fail at startup; returns its exit code and output lines. */
async function failedStart(env: Record<string, string>, script?: string): Promise<{ code: number | null; lines: string[] }> {
  const service = spawnService(env, script);
  const exit = await service.exited;
  return { code: exit.code, lines: service.lines() };
}

describe("startup failure of the example service", () => {
  it("exits 1 with one line when the port is taken, and does not move to another port", async () => {
    const port = await takePort();
    const { code, lines } = await failedStart({ PORT: String(port) }, BOOKSTORE);
    expect(code).toBe(1);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^\\[ERROR\\] \\S+ \\S+ startup failed: port ${port} is already in use \\(EADDRINUSE\\)$`));
  });

  it("exits 1 with one line for an invalid port", async () => {
    const { code, lines } = await failedStart({ PORT: "70000" }, BOOKSTORE);
    expect(code).toBe(1);
    expect(lines).toEqual([expect.stringMatching(/startup failed: PORT must be an integer from 0 to 65535, got "70000"$/)]);
  });

  it("exits 1 with a JSON line in production", async () => {
    const port = await takePort();
    // Configured as production is (a token key set), so the only line is the failure's.
    const { code, lines } = await failedStart({ PORT: String(port), NODE_ENV: "production", BOOKSTORE_JWT_SECRET: "a-production-key-of-at-least-32-bytes" }, BOOKSTORE);
    expect(code).toBe(1);
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: "error", message: `startup failed: port ${port} is already in use (EADDRINUSE)` });
  });
});

describe("startup failure of a module", () => {
  it.each([
    ["throws", "throw", "no database"],
    ["rejects", "reject", "no database after a while"],
  ])("exits 1 with one line when a register step %s", async (_, mode, message) => {
    const { code, lines } = await failedStart({ LC_REGISTER: mode });
    expect(code).toBe(1);
    expect(lines).toEqual([expect.stringMatching(new RegExp(`startup failed: module failing failed to register: ${message}$`))]);
  });
});

describe("as PID 1", () => {
  it("drains, runs the hooks and exits 0 on SIGTERM when it is the init process of its PID namespace", async () => {
    const service = await startService({ LC_SHOW_PID: "1", LC_HOOKS: "only:ok" }, undefined, ["unshare", "--pid", "--fork", "--kill-child"]);
    expect(service.output()).toMatch(/:\d\d pid 1\n/);
    expect((await httpGet(service.port, "/fast")).status).toBe(200);
    // The kernel drops signals to a namespace's init unless it handles them: this only works with handlers.
    const unshare = service.child.pid!;
    const node = Number(readFileSync(`/proc/${unshare}/task/${unshare}/children`, "utf8").trim());
    process.kill(node, "SIGTERM");
    const exit = await service.exited;
    expect(exit.code).toBe(0);
    expect(service.output()).toMatch(/draining \(SIGTERM\)[^]*fixture hook only: finished[^]*terminated cleanly/);
  });
});
