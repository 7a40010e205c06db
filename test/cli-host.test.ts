// --host and HOST (flag > variable > the App's host > every interface), checked on the sockets
// themselves: 127.0.0.2 is routed to lo by Linux, so a server bound to 127.0.0.1 alone must refuse
// it while one on every interface answers it. The log lines and `keelson status` name the address
// bound, the metrics port's too.
import { spawnSync } from "node:child_process";
import { request } from "node:http";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { freePort, get, killAll, startSupervisor } from "./fixtures/supervisor-harness.js";

const ROOT = join(import.meta.dirname, "..");

afterEach(() => killAll());

/** The status code of GET /whoami on `address:port`, or the connection error's code. */
function answerOn(address: string, port: number, path = "/whoami"): Promise<number | string> {
  return new Promise((resolve) => {
    const req = request({ host: address, port, path, timeout: 5000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.once("timeout", () => req.destroy(new Error("timeout")));
    req.once("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    req.end();
  });
}

function status(port: number): string {
  const run = spawnSync(process.execPath, ["--import", "tsx", "cli/cli.ts", "status", "--port", String(port)], { cwd: ROOT, encoding: "utf8", timeout: 30_000 });
  expect(run.status, run.stderr).toBe(0);
  return run.stdout;
}

describe("keelson start --host", () => {
  it("--host 127.0.0.1: bound there only (127.0.0.2 refused), the ready lines, status and the metrics port name it", async () => {
    const metrics = await freePort();
    const sup = await startSupervisor(["--workers", "1", "--host", "127.0.0.1", "--metrics-port", String(metrics)], {
      env: { SUPERVISOR_METRICS: "1", HOST: "127.0.0.2" },
    });
    const ready = await sup.waitFor(/worker\(s\) ready in/);
    expect(ready).toContain(`http://127.0.0.1:${sup.port}/`);
    expect(sup.output()).toMatch(new RegExp(`worker 1 \\(pid \\d+\\) ready on http://127\\.0\\.0\\.1:${sup.port}/`));
    expect(await answerOn("127.0.0.1", sup.port)).toBe(200);
    expect(await answerOn("127.0.0.2", sup.port)).toBe("ECONNREFUSED");
    // The metrics port follows --host unless --metrics-host says otherwise.
    expect(await sup.waitFor(/cluster-wide metrics on/)).toContain(`http://127.0.0.1:${metrics}/metrics`);
    expect(await answerOn("127.0.0.1", metrics, "/metrics")).toBe(200);
    expect(await answerOn("127.0.0.2", metrics, "/metrics")).toBe("ECONNREFUSED");
    const shown = status(sup.port);
    expect(shown).toContain(`on http://127.0.0.1:${sup.port}/`);
    expect(shown).toContain(`metrics on http://127.0.0.1:${metrics}/metrics`);
  }, 60_000);

  it("HOST when there is no flag", async () => {
    const sup = await startSupervisor(["--workers", "1", "--metrics-port", "off"], { env: { HOST: "127.0.0.1" } });
    expect(await sup.waitFor(/worker\(s\) ready in/)).toContain(`http://127.0.0.1:${sup.port}/`);
    expect(await answerOn("127.0.0.2", sup.port)).toBe("ECONNREFUSED");
  }, 60_000);

  it("neither: every interface, and the lines say so (not localhost)", async () => {
    const metrics = await freePort();
    const sup = await startSupervisor(["--workers", "1", "--metrics-port", String(metrics)], { env: { SUPERVISOR_METRICS: "1" } });
    const ready = await sup.waitFor(/worker\(s\) ready in/);
    expect(ready).toMatch(new RegExp(`http://(\\[::\\]|0\\.0\\.0\\.0):${sup.port}/`));
    expect(ready).not.toContain("localhost");
    expect(await sup.waitFor(/cluster-wide metrics on/)).toMatch(new RegExp(`http://(\\[::\\]|0\\.0\\.0\\.0):${metrics}/metrics`));
    expect(await answerOn("127.0.0.2", sup.port)).toBe(200);
    expect((await get(sup.port, "/whoami")).status).toBe(200);
  }, 60_000);
});

describe("make run and make dev", () => {
  it("pass HOST on, 127.0.0.1 unless told: a make variable, else the environment", () => {
    const { HOST: _, ...inherited } = process.env;
    const dry = (args: string[], env: Record<string, string> = {}) => {
      const run = spawnSync("make", ["-n", ...args], { cwd: ROOT, encoding: "utf8", env: { ...inherited, ...env } });
      expect(run.status, run.stderr).toBe(0);
      return run.stdout;
    };
    expect(dry(["run"])).toMatch(/^HOST=127\.0\.0\.1 .*cli\.js start /m);
    expect(dry(["run"], { HOST: "0.0.0.0" })).toMatch(/^HOST=0\.0\.0\.0 .*cli\.js start /m);
    expect(dry(["run", "HOST=::"], { HOST: "0.0.0.0" })).toMatch(/^HOST=:: .*cli\.js start /m);
    expect(dry(["dev"])).toMatch(/^HOST=127\.0\.0\.1 .*cli\.ts dev /m);
  });
});
