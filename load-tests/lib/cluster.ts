// A keelson supervisor (its CLI) with N workers, in its own process group so that it and its
// workers all die with the harness. Its output goes to a temp file, read on demand: parsing every
// request log line as it arrives would take CPU from the load generator.
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { adopt as track } from "../../test/helpers/child.js";
import { sleep } from "./http.js";
import { freePort } from "./server.js";

export interface ClusterSpec {
  /** The repository root (holds dist/ and node_modules/). */
  cwd: string;
  /** The worker entry, relative to `cwd`. */
  entry: string;
  workers: number;
  /** Run the CLI from source through tsx (supervisor/cli.ts) instead of the build in dist/. */
  tsx?: boolean;
  pinCpu: number | null;
  env?: Record<string, string>;
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface Cluster {
  /** The primary's pid. */
  pid: number;
  port: number;
  origin: string;
  /** The supervisor's and the workers' own lines so far; request log lines are left out. */
  log(): string;
  /** Request log lines (JSON lines with a `method`) the workers wrote so far. */
  requestLines(): number;
  /** The first line matching `pattern` after offset `from` of log(); rejects after `timeoutMs`. */
  waitFor(pattern: RegExp, from?: number, timeoutMs?: number): Promise<string>;
  /** Latest pid of each worker slot, from the `worker N (pid P) ready` lines. */
  workers(): Map<number, number>;
  /** Pids of the primary's live child processes, read from /proc: the ground truth. */
  children(): number[];
  exited: Promise<Exit>;
  /** SIGTERM to the primary, SIGKILL to the whole group after `timeoutMs`; resolves on exit. */
  stop(timeoutMs?: number): Promise<Exit>;
}

/** Live processes whose parent is `ppid` (Linux /proc). */
export function childPids(ppid: number): number[] {
  const pids: number[] = [];
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, "utf8");
      // "pid (comm) state ppid …": comm may hold spaces and parentheses, so split after the last ')'.
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(fields[1]) === ppid && fields[0] !== "Z") pids.push(Number(name));
    } catch {
      // Exited while we looked.
    }
  }
  return pids;
}

export async function startCluster(spec: ClusterSpec, readyTimeoutMs = 60_000): Promise<Cluster> {
  const cli = spec.tsx ? "supervisor/cli.ts" : "dist/supervisor/cli.js";
  if (!fs.existsSync(path.join(spec.cwd, cli)) || !fs.existsSync(path.join(spec.cwd, spec.entry))) {
    throw new Error(`${cli} or ${spec.entry} is missing under ${spec.cwd}: run make build first`);
  }
  const port = await freePort();
  const logDir = fs.mkdtempSync(path.join(os.tmpdir(), "keelson-scenario-cluster-"));
  const fd = fs.openSync(path.join(logDir, "supervisor.log"), "w+");
  const node = [process.execPath, ...(spec.tsx ? ["--import", "tsx"] : []), cli, "start", spec.entry,
    "--workers", String(spec.workers), "--port", String(port)];
  const argv = spec.pinCpu === null ? node : ["taskset", "-c", String(spec.pinCpu), ...node];
  const child = spawn(argv[0] ?? process.execPath, argv.slice(1), {
    cwd: spec.cwd,
    env: { ...process.env, NODE_ENV: "production", ...spec.env },
    stdio: ["ignore", fd, fd],
    detached: true,
  });
  track(child, { group: true });
  const removeLogDir = (): void => fs.rmSync(logDir, { recursive: true, force: true });
  process.once("exit", removeLogDir);

  let text = "";
  let partial = "";
  let offset = 0;
  let closed = false;
  let requests = 0;
  const chunk = Buffer.alloc(1 << 20);
  const log = (): string => {
    if (closed) return text;
    for (let n = fs.readSync(fd, chunk, 0, chunk.length, offset); n > 0; n = fs.readSync(fd, chunk, 0, chunk.length, offset)) {
      offset += n;
      const lines = (partial + chunk.subarray(0, n).toString("utf8")).split("\n");
      partial = lines.pop() ?? "";
      for (const line of lines) {
        if (line.includes('"method":"')) requests++;
        else text += `${line}\n`;
      }
    }
    return text;
  };
  const exited = new Promise<Exit>((resolve) => child.once("exit", (code, signal) => {
    // The last lines (the stop summary) are read before the file goes.
    log();
    closed = true;
    fs.closeSync(fd);
    removeLogDir();
    process.off("exit", removeLogDir);
    resolve({ code, signal });
  }));
  const waitFor = async (pattern: RegExp, from = 0, timeoutMs = 30_000): Promise<string> => {
    const deadline = performance.now() + timeoutMs;
    while (performance.now() < deadline) {
      const line = log().slice(from).split("\n").find((candidate) => pattern.test(candidate));
      if (line !== undefined) return line;
      if (child.exitCode !== null || child.signalCode !== null) break;
      await sleep(20);
    }
    throw new Error(`supervisor: no line matching ${pattern} within ${timeoutMs} ms; its log:\n${log().slice(-3_000)}`);
  };
  const cluster: Cluster = {
    pid: child.pid ?? -1,
    port,
    origin: `http://127.0.0.1:${port}`,
    log,
    requestLines: () => {
      log();
      return requests;
    },
    waitFor,
    workers() {
      const pids = new Map<number, number>();
      for (const match of log().matchAll(/worker (\d+) \(pid (\d+)\) ready/g)) pids.set(Number(match[1]), Number(match[2]));
      return pids;
    },
    children: () => childPids(child.pid ?? -1),
    exited,
    async stop(timeoutMs = 15_000) {
      if (child.exitCode !== null || child.signalCode !== null) return exited;
      log();
      child.kill("SIGTERM");
      const timer = setTimeout(() => {
        try {
          process.kill(-(child.pid ?? 0), "SIGKILL");
        } catch {
          // Gone meanwhile.
        }
      }, timeoutMs);
      const exit = await exited;
      clearTimeout(timer);
      return exit;
    },
  };
  await waitFor(/worker\(s\) ready in/, 0, readyTimeoutMs);
  return cluster;
}
