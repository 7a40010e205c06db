// One precedence for the port (--port > PORT > the App's `port` > 3000), and a supervisor that never
// reports a port it does not serve.
import { afterEach, describe, expect, it } from "vitest";
import { freePort, get, killAll, startSupervisor } from "./fixtures/supervisor-harness.js";

afterEach(() => killAll());

describe("supervisor: the port", () => {
  it("--port wins over the port written in the App: it is served, reported, and the App's is not", async () => {
    const own = await freePort();
    const sup = await startSupervisor(["--workers", "1", "--metrics-port", "off"], { env: { SUPERVISOR_APP_PORT: String(own) } });
    const ready = await sup.waitFor(/worker\(s\) ready in/);
    // The address bound: every interface, as the supervisor was not told otherwise.
    expect(ready).toMatch(new RegExp(`http://(\\[::\\]|0\\.0\\.0\\.0):${sup.port}/`));
    expect((await get(sup.port, "/whoami")).status).toBe(200);
    await expect(get(own, "/whoami", 2000)).rejects.toThrow(/ECONNREFUSED/);
  });

  it("a worker listening elsewhere than asked is a startup failure with the reason, exit 1, and no ready line", async () => {
    const own = await freePort();
    const sup = await startSupervisor(["--workers", "2", "--metrics-port", "off"], { env: { SUPERVISOR_OWN_PORT: String(own) } });
    expect((await sup.exited).code).toBe(1);
    const output = sup.output();
    expect(output).toMatch(new RegExp(`stopped in \\d+ms with exit 1: worker \\d \\(pid \\d+\\) listens on port ${own}, not on ${sup.port} \\(--port or PORT\\)`));
    expect(output).not.toMatch(/worker\(s\) ready in/);
  });
});
