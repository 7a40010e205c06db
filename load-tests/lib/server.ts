// Starting, probing and stopping one server under test, always bounded in time, through the
// shared process harness (its output goes to a file, so the harness costs the load nothing).
import { performance } from "node:perf_hooks";
import { freePort, spawnChild, type Child } from "../../harness/child.js";
import { request, sleep } from "./http.js";

export { freePort };

export interface LaunchSpec {
  target: string;
  /** The command after `node` (or after `taskset -c N node`). */
  args: string[];
  pinCpu: number | null;
  logDir: string;
  cwd: string;
  /** Extra environment of the server process. */
  env?: Record<string, string>;
}

export interface ServerHandle {
  pid: number;
  origin: string;
  alive(): boolean;
  output(): string;
  stop(): Promise<void>;
  /** Sends a signal to the server process (e.g. SIGTERM, to time a shutdown). */
  kill(signal: NodeJS.Signals): void;
  /** Settles when the process exits, with its exit code or signal. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function launch(spec: LaunchSpec, port: number): Child {
  const node = [process.execPath, ...spec.args];
  return spawnChild(spec.pinCpu === null ? node : ["taskset", "-c", String(spec.pinCpu), ...node], {
    cwd: spec.cwd,
    output: "file",
    env: { ...spec.env, PORT: String(port), HOST: "127.0.0.1", NODE_ENV: "production", BENCH_LOG_DIR: spec.logDir },
  });
}

const tail = (child: Child): string => child.output().slice(-4_096).trim() || "(none)";

/** Start a server and wait for its `READY <port>` line. */
export async function startServer(spec: LaunchSpec, timeoutMs = 15_000): Promise<ServerHandle> {
  const port = await freePort();
  const child = launch(spec, port);
  try {
    await child.waitFor(/^READY \d+\s*$/, { timeoutMs });
  } catch (error) {
    child.kill("SIGKILL");
    throw new Error(`${(error as Error).message.split("\n")[0]}\n--- server output (tail) ---\n${tail(child)}`, { cause: error });
  }
  return {
    pid: child.pid,
    origin: `http://127.0.0.1:${port}`,
    alive: child.alive,
    output: child.output,
    // SIGTERM, then SIGKILL after 3 s.
    stop: async () => void (await child.stop(3_000)),
    kill: (signal) => child.kill(signal),
    exited: child.exited.then(({ code, signal }) => ({ code, signal })),
  };
}

/**
 * Milliseconds from spawn to the first 200 on GET `path` (default /hello), polling with a fresh
 * connection every 5 ms (the READY line is ignored: this is what a client sees).
 */
export async function coldStart(spec: LaunchSpec, timeoutMs = 15_000, path = "/hello"): Promise<number> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}${path}`;
  const started = performance.now();
  const child = launch(spec, port);
  try {
    while (performance.now() - started < timeoutMs) {
      if (!child.alive()) throw new Error(`exited during cold start\n${tail(child)}`);
      const res = await request(url, { timeoutMs: 1_000 }).catch(() => null);
      if (res?.status === 200) return performance.now() - started;
      await sleep(5);
    }
    throw new Error(`no 200 on GET ${path} within ${timeoutMs} ms\n${tail(child)}`);
  } finally {
    await child.stop(3_000);
  }
}
