// keelson dev as a process: a TypeScript project in a temp folder, edited while it serves.
import { spawn } from "node:child_process";
import { connect } from "node:net";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { freePort, get } from "./fixtures/supervisor-harness.js";
import { parseDevCommand } from "../cli/dev.js";
import { tempDir } from "./helpers/temp-dir.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const children = new Set<ReturnType<typeof spawn>>();
afterEach(() => {
  for (const child of children) child.kill("SIGKILL");
  children.clear();
});

const entry = (version: number) => `import { App, get } from ${JSON.stringify(join(ROOT, "src/index.ts"))};
const app = new App({ serviceName: "dev-test" });
app.route(get("/whoami", () => ({ pid: process.pid, worker: ${version} })));
await app.listen();
`;

/** "connected", or the error code of a TCP connection to `host:port`. */
function connects(host: string, port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host, port }, () => {
      socket.destroy();
      resolve("connected");
    });
    socket.once("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
  });
}

describe("keelson dev", () => {
  it("parses its arguments", () => {
    expect(parseDevCommand(["main.ts", "-w", "2", "--port", "4000"], {})).toEqual({
      entry: "main.ts", workers: 2, port: 4000, host: "127.0.0.1", root: process.cwd(),
    });
    expect(parseDevCommand(["main.ts", "--host", "::"], { HOST: "10.0.0.1" }).host).toBe("::");
    expect(parseDevCommand(["main.ts"], { HOST: "0.0.0.0" }).host).toBe("0.0.0.0");
    expect(() => parseDevCommand([], {})).toThrow("missing <entry>: the TypeScript module that builds the App and calls listen()");
    expect(() => parseDevCommand(["main.ts", "--workers", "0"], {})).toThrow('--workers expects a positive integer, got "0"');
    expect(() => parseDevCommand(["main.ts", "--host", "http://x"], {})).toThrow('--host must be an IP address or a host name');
  });

  it("reloads on a save, shows a broken save's error once and keeps the last good worker serving", async () => {
    const project = tempDir("keelson-dev-");
    writeFileSync(join(project, "package.json"), '{ "type": "module" }\n');
    const main = join(project, "main.ts");
    writeFileSync(main, entry(1));
    const port = await freePort();
    const child = spawn(process.execPath, ["--import", import.meta.resolve("tsx"), join(ROOT, "cli/cli.ts"), "dev", "main.ts", "--port", String(port)], {
      cwd: project, env: { ...process.env, NODE_ENV: "development", HOST: "" }, stdio: ["ignore", "pipe", "pipe"],
    });
    children.add(child);
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const waitFor = async (pattern: RegExp, from: number) => {
      const deadline = performance.now() + 30_000;
      while (!pattern.test(output.slice(from))) {
        if (performance.now() > deadline) throw new Error(`no ${pattern} in:\n${output}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    };
    await waitFor(/1 worker\(s\) ready in/, 0);
    expect(output).toMatch(/keelson dev: main\.ts, 1 worker\(s\), watching /);
    expect((await get(port, "/whoami")).body.worker).toBe(1);
    // This machine only unless told: bound to 127.0.0.1, so 127.0.0.2 (routed to lo too) is refused.
    expect(output).toMatch(new RegExp(`ready in \\d+ms: http://127\\.0\\.0\\.1:${port}/`));
    expect(await connects("127.0.0.2", port)).toBe("ECONNREFUSED");

    let mark = output.length;
    writeFileSync(main, entry(2));
    await waitFor(/main\.ts changed: reloaded 1 worker\(s\) in \d+ms/, mark);
    expect((await get(port, "/whoami")).body.worker).toBe(2);

    // An editor's temp file, gone before the watcher looks at it (sed -i, vim's 4913): ignored, no crash.
    for (let i = 0; i < 5; i++) {
      writeFileSync(join(project, `sed${i}`), "x");
      rmSync(join(project, `sed${i}`));
    }

    mark = output.length;
    writeFileSync(main, `${entry(3)}\nconst broken: number = ;\n`);
    await waitFor(/main\.ts changed: reload failed \(the error is above\), the last good workers keep serving/, mark);
    // The worker's report comes on stderr, the supervisor's line on stdout: two pipes, either first.
    await waitFor(/Transform failed with 1 error[\s\S]*Transform failed with 1 error/, mark);
    const failure = output.slice(mark);
    // The replacement's own report (with its stack) once, named once more in the supervisor's reload line: no restart loop.
    expect(failure.match(/Transform failed with 1 error/g)).toHaveLength(2);
    expect(failure.match(/at failureErrorWithLog/g)).toHaveLength(1);
    expect(failure).toMatch(/reload stopped after 0 worker\(s\) replaced in \d+ms: .*ERROR: Unexpected ";"; keeping the old worker/);
    expect(failure).not.toMatch(/died unexpectedly/);
    expect((await get(port, "/whoami")).body.worker).toBe(2);

    mark = output.length;
    writeFileSync(main, readFileSync(main, "utf8").replace("const broken: number = ;", ""));
    await waitFor(/main\.ts changed: reloaded 1 worker\(s\)/, mark);
    expect((await get(port, "/whoami")).body.worker).toBe(3);
    child.kill("SIGTERM");
    await new Promise((resolve) => child.once("exit", resolve));
    expect(output).toMatch(/stopped: 1 worker\(s\) exited cleanly/);
    expect(output).not.toMatch(/ENOENT/);
  }, 120_000);
});
