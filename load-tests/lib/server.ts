// Starting, probing and stopping one server under test, always bounded in time.
import { spawn, type ChildProcess } from "node:child_process";
import * as net from "node:net";
import { performance } from "node:perf_hooks";
import { track } from "./children.js";
import { request, sleep } from "./http.js";

const TAIL_BYTES = 4_096;

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

/** Ask the kernel for a free loopback port; the tiny reuse race is acceptable here. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      const found = typeof address === "object" && address ? address.port : 0;
      probe.close(() => (found ? resolve(found) : reject(new Error("no free port"))));
    });
  });
}

function launch(spec: LaunchSpec, port: number): { child: ChildProcess; output: () => string } {
  const [command, args] =
    spec.pinCpu === null
      ? [process.execPath, spec.args]
      : ["taskset", ["-c", String(spec.pinCpu), process.execPath, ...spec.args]];
  const child = spawn(command, args, {
    cwd: spec.cwd,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...spec.env, PORT: String(port), HOST: "127.0.0.1", NODE_ENV: "production", BENCH_LOG_DIR: spec.logDir },
  });
  track(child);
  // Always drain both pipes: a full pipe would block a server that logs to stdout.
  let tail = "";
  const keep = (chunk: Buffer): void => {
    tail = (tail + chunk.toString("utf8")).slice(-TAIL_BYTES);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  return { child, output: () => tail };
}

const isAlive = (child: ChildProcess): boolean => child.exitCode === null && child.signalCode === null;

/** SIGTERM, then SIGKILL after 3 s; resolves once the process is gone. */
export function stopChild(child: ChildProcess): Promise<void> {
  if (!isAlive(child)) return Promise.resolve();
  return new Promise((resolve) => {
    const kill = setTimeout(() => child.kill("SIGKILL"), 3_000);
    child.once("exit", () => {
      clearTimeout(kill);
      resolve();
    });
    child.kill("SIGTERM");
  });
}

/** Start a server and wait for its `READY <port>` line. */
export async function startServer(spec: LaunchSpec, timeoutMs = 15_000): Promise<ServerHandle> {
  const port = await freePort();
  const { child, output } = launch(spec, port);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })));
  await new Promise<void>((resolve, reject) => {
    let stdout = "";
    const settle = (): void => {
      clearTimeout(timer);
      child.off("exit", onExit);
      child.off("error", onError);
      child.stdout?.off("data", onData);
    };
    const fail = (why: string): void => {
      settle();
      child.kill("SIGKILL");
      reject(new Error(`${why}\n--- server output (tail) ---\n${output().trim() || "(none)"}`));
    };
    const onExit = (code: number | null, signal: string | null): void =>
      fail(`exited before READY (code ${code}, signal ${signal})`);
    const onError = (error: Error): void => fail(`spawn failed: ${error.message}`);
    const onData = (chunk: Buffer): void => {
      stdout += chunk.toString("utf8");
      if (/^READY \d+\s*$/m.test(stdout)) {
        settle();
        resolve();
      }
    };
    const timer = setTimeout(() => fail(`no READY line within ${timeoutMs} ms`), timeoutMs);
    child.on("exit", onExit);
    child.on("error", onError);
    child.stdout?.on("data", onData);
  });
  return {
    pid: child.pid ?? -1,
    origin: `http://127.0.0.1:${port}`,
    alive: () => isAlive(child),
    output,
    stop: () => stopChild(child),
    kill: (signal) => child.kill(signal),
    exited,
  };
}

/**
 * Milliseconds from spawn to the first 200 on GET /hello, polling with a fresh
 * connection every 5 ms (the READY line is ignored: this is what a client sees).
 */
export async function coldStart(spec: LaunchSpec, timeoutMs = 15_000): Promise<number> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}/hello`;
  const started = performance.now();
  const { child, output } = launch(spec, port);
  try {
    while (performance.now() - started < timeoutMs) {
      if (!isAlive(child)) throw new Error(`exited during cold start\n${output().trim()}`);
      const res = await request(url, { timeoutMs: 1_000 }).catch(() => null);
      if (res?.status === 200) return performance.now() - started;
      await sleep(5);
    }
    throw new Error(`no 200 on GET /hello within ${timeoutMs} ms\n${output().trim()}`);
  } finally {
    await stopChild(child);
  }
}
