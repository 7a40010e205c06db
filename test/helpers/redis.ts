import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../../harness/child.js";

/** A redis-server of this test file: a temp folder, a free loopback port, nothing saved to disk. */
export interface TestRedis {
  readonly url: string;
  readonly port: number;
  /** The server process (SIGSTOP it to make it hang, SIGCONT to resume). */
  readonly server: ChildProcess;
  /** Stops the server and deletes its folder. */
  stop(): Promise<void>;
}

const SERVER = "/usr/bin/redis-server";
const INSTALL_HINT = "redis-server is not installed: run `make test` (it installs it) or `apt-get install -y redis-server`";

/**
 * Starts Debian's redis-server on a free port (a clear error when it is missing: never a skip).
 * Not a spawnChild(): the file's afterEach(killAllChildren) must not take the server with it.
 */
export async function startRedis(): Promise<TestRedis> {
  if (!existsSync(SERVER)) throw new Error(INSTALL_HINT);
  const dir = mkdtempSync(join(tmpdir(), "keelson-redis-"));
  const port = await freePort();
  const server = spawn(SERVER, ["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no",
    "--daemonize", "no", "--loglevel", "notice"], { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
  const killOnExit = () => server.kill("SIGKILL");
  process.once("exit", killOnExit);
  const stop = async (): Promise<void> => {
    process.off("exit", killOnExit);
    try {
      if (server.exitCode === null && server.signalCode === null) {
        const exited = new Promise((resolve) => server.once("exit", resolve));
        server.kill("SIGCONT");
        server.kill("SIGKILL");
        await exited;
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  let output = "";
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`redis-server did not start in 30 s: ${output}`)), 30_000);
    server.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
      output += chunk;
      if (output.includes("Ready to accept connections")) {
        clearTimeout(timer);
        resolve();
      }
    });
    server.on("exit", (code) => reject(new Error(`redis-server exited (${code}): ${output}`)));
  }).catch(async (error: unknown) => {
    // Not started: no caller will stop it, so it is stopped (and its folder removed) here.
    await stop();
    throw error;
  });
  return { url: `redis://127.0.0.1:${port}`, port, server, stop };
}
