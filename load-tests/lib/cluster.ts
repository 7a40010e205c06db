// A keelson supervisor (its CLI) with N workers, in its own process group so that it and its
// workers all die with the harness. Its output goes to a temp file, read on demand: parsing every
// request log line as it arrives would take CPU from the load generator; request lines are counted, not kept.
import * as fs from "node:fs";
import * as path from "node:path";
import { freePort, spawnChild } from "../../harness/child.js";

export interface ClusterSpec {
  /** The repository root (holds dist/ and node_modules/). */
  cwd: string;
  /** The worker entry, relative to `cwd`. */
  entry: string;
  workers: number;
  /** Run the CLI from source through tsx (cli/cli.ts) instead of the build in dist/. */
  tsx?: boolean;
  /** The CLI to run, relative to `cwd` (e.g. the bundle's dist/bundle/keelson.mjs). Default dist/cli/cli.js. */
  cli?: string;
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
  const cli = spec.cli ?? (spec.tsx ? "cli/cli.ts" : "dist/cli/cli.js");
  if (!fs.existsSync(path.join(spec.cwd, cli)) || !fs.existsSync(path.join(spec.cwd, spec.entry))) {
    throw new Error(`${cli} or ${spec.entry} is missing under ${spec.cwd}: run make build first`);
  }
  const port = await freePort();
  const node = [process.execPath, ...(spec.tsx ? ["--import", "tsx"] : []), cli, "start", spec.entry,
    "--workers", String(spec.workers), "--port", String(port)];
  const child = spawnChild(spec.pinCpu === null ? node : ["taskset", "-c", String(spec.pinCpu), ...node], {
    cwd: spec.cwd,
    // A free metrics port (read it from the "cluster-wide metrics on" line): 9464 may be taken.
    env: { NODE_ENV: "production", KEELSON_METRICS_PORT: "0", ...spec.env },
    group: true,
    output: "file",
    keep: (line) => !line.includes('"method":"'),
  });
  const cluster: Cluster = {
    pid: child.pid,
    port,
    origin: `http://127.0.0.1:${port}`,
    log: child.output,
    requestLines: child.dropped,
    waitFor: (pattern, from = 0, timeoutMs = 30_000) => child.waitFor(pattern, { from, timeoutMs }),
    workers() {
      const pids = new Map<number, number>();
      for (const match of child.output().matchAll(/worker (\d+) \(pid (\d+)\) ready/g)) pids.set(Number(match[1]), Number(match[2]));
      return pids;
    },
    children: () => childPids(child.pid),
    exited: child.exited.then(({ code, signal }) => ({ code, signal })),
    stop: async (timeoutMs = 15_000) => {
      const { code, signal } = await child.stop(timeoutMs);
      return { code, signal };
    },
  };
  await cluster.waitFor(/worker\(s\) ready in/, 0, readyTimeoutMs);
  return cluster;
}
