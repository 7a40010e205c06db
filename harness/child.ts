/**
 * The one way tests and load tests run a process: spawn it, collect its output, wait for a line it
 * prints, signal it, and make sure it never outlives the run (its whole process group when it is a
 * supervisor with workers). Ports come from the kernel, never from a random number.
 */
import { spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { performance } from "node:perf_hooks";

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** performance.now() when the exit was seen. */
  at: number;
}

export interface ChildOptions {
  cwd?: string;
  /** Merged over this process's environment (replaces it with `inheritEnv: false`). */
  env?: Record<string, string | undefined>;
  /** False: the child sees `env` only, as a container would. */
  inheritEnv?: boolean;
  /** Its own process group: stop() and killAllChildren() then reach its children (workers) too. */
  group?: boolean;
  /**
   * `memory` (default) keeps every line and wakes waiters as output arrives. `file` sends output to a
   * temp file read only when asked, so a service logging every request under load costs the load
   * generator nothing.
   */
  output?: "memory" | "file";
  /** Lines for which this returns false are counted (see `dropped()`) but not kept. */
  keep?: (line: string) => boolean;
}

export interface Child {
  readonly process: ChildProcess;
  readonly pid: number;
  /** Every kept line written to stdout and stderr so far, in arrival order. */
  output(): string;
  /** Kept lines, all or those matching `pattern`. */
  lines(pattern?: RegExp): string[];
  /** How many lines `keep` left out. */
  dropped(): number;
  /** The first line matching `pattern` at or after offset `from` of output(); rejects on exit or timeout. */
  waitFor(pattern: RegExp, options?: { from?: number; timeoutMs?: number }): Promise<string>;
  /** Resolves once `test(output())` holds (patterns across lines, counts); rejects on exit or timeout. */
  waitUntil(test: (output: string) => boolean, options?: { timeoutMs?: number; what?: string }): Promise<void>;
  readonly exited: Promise<Exit>;
  alive(): boolean;
  /** Sends `signal` to the process (to its group with `all`). */
  kill(signal: NodeJS.Signals, options?: { all?: boolean }): void;
  /** SIGTERM, then SIGKILL to the group after `killAfterMs`; resolves with the exit. */
  stop(killAfterMs?: number): Promise<Exit>;
}

/** Everything to kill when the run ends: each entry SIGKILLs one child (and its group, if it has one). */
const live = new Set<() => void>();

/** Spawns `argv` and watches it. */
export function spawnChild(argv: string[], options: ChildOptions = {}): Child {
  const [command, ...args] = argv;
  if (command === undefined) throw new Error("spawnChild: empty argv");
  const file = options.output === "file" ? openLogFile() : undefined;
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: options.inheritEnv === false ? { ...options.env } : { ...process.env, ...options.env },
    stdio: ["ignore", file?.fd ?? "pipe", file?.fd ?? "pipe"],
    detached: options.group ?? false,
  });
  const keep = options.keep ?? (() => true);
  let text = "";
  let partial = "";
  let dropped = 0;
  let ended = false;
  const waiters = new Set<() => void>();
  const ingest = (chunk: string): void => {
    if (chunk === "") return;
    const parts = (partial + chunk).split("\n");
    partial = parts.pop() ?? "";
    for (const line of parts) {
      if (keep(line)) text += `${line}\n`;
      else dropped++;
    }
  };
  const append = (chunk: string): void => {
    ingest(chunk);
    for (const wake of waiters) wake();
  };
  child.stdout?.setEncoding("utf8").on("data", append);
  child.stderr?.setEncoding("utf8").on("data", append);
  const read = (): string => {
    if (file !== undefined) ingest(file.read());
    return text;
  };
  let exitEvent: string | undefined;
  // When the test first asked it to end (tests call `child.kill` on the ChildProcess itself); a
  // SIGSTOP, SIGCONT or SIGHUP asks for no end (a stalled reader, a reload).
  let signalledAt: number | undefined;
  const sendSignal = child.kill.bind(child);
  child.kill = (sig?: NodeJS.Signals | number) => {
    if (sig === undefined || ENDING_SIGNALS.has(sig)) signalledAt ??= performance.now();
    return sendSignal(sig);
  };
  const exited = new Promise<Exit>((resolve) => {
    child.once("exit", (code, signal) => {
      const at = performance.now();
      exitEvent = `code ${code}, signal ${signal}`;
      const done = (): void => {
        read();
        if (partial !== "") ingest("\n");
        file?.close();
        live.delete(killHard);
        ended = true;
        resolve({ code, signal, at });
        for (const wake of waiters) wake();
      };
      // Let the pipes drain before anyone reads the output.
      if (file === undefined) child.once("close", done);
      else done();
    });
  });
  const alive = (): boolean => child.exitCode === null && child.signalCode === null;
  const kill = (signal: NodeJS.Signals, { all = false } = {}): void => {
    try {
      if (all && options.group && child.pid !== undefined) process.kill(-child.pid, signal);
      else child.kill(signal);
    } catch {
      // Already gone.
    }
  };
  const handle: Child = {
    process: child,
    pid: child.pid ?? -1,
    output: read,
    lines: (pattern) => read().split("\n").filter((line) => line !== "" && (pattern?.test(line) ?? true)),
    dropped: () => (read(), dropped),
    exited,
    alive,
    kill,
    async waitFor(pattern, { from = 0, timeoutMs = 20_000 } = {}) {
      let found = "";
      await handle.waitUntil((output) => {
        found = output.slice(from).split("\n").find((candidate) => pattern.test(candidate)) ?? "";
        return found !== "";
      }, { timeoutMs, what: `a line matching ${pattern}` });
      return found;
    },
    waitUntil(test, { timeoutMs = 20_000, what = "the condition" } = {}) {
      return new Promise<void>((resolve, reject) => {
        const check = (): void => {
          if (test(read())) return finish(resolve);
          if (ended) finish(() => reject(new Error(`exited before ${what}; output:\n${tail(text)}`)));
        };
        const timer = setTimeout(
          () => finish(() => reject(new Error(`no ${what} within ${timeoutMs} ms; output:\n${tail(text)}`))),
          timeoutMs,
        );
        // A file is not watched: poll it, cheaply, until the output is there.
        const poll = file === undefined ? undefined : setInterval(check, 20);
        const finish = (settle: () => void): void => {
          clearTimeout(timer);
          if (poll !== undefined) clearInterval(poll);
          waiters.delete(check);
          settle();
        };
        waiters.add(check);
        check();
      });
    },
    async stop(killAfterMs = 15_000) {
      if (!alive()) return exited;
      kill("SIGTERM");
      const timer = setTimeout(() => kill("SIGKILL", { all: true }), killAfterMs);
      const exit = await exited;
      clearTimeout(timer);
      return exit;
    },
  };
  // A group leader that already exited can leave workers behind: kill the group anyway.
  const killHard = (): void => {
    // Signalled by its test seconds ago and still not settled: say where it was stuck, so that a test
    // that timed out waiting for `exited` tells a hung child from an exit whose pipes never closed.
    // (A test that signals and moves on is cleaned up within moments: not reported.)
    if (signalledAt !== undefined && !ended && performance.now() - signalledAt > UNSETTLED_AFTER_MS) reportUnsettled(child, exitEvent, tail(read()));
    kill("SIGKILL", { all: true });
  };
  live.add(killHard);
  return handle;
}

/** The signals after which a child is expected to end by itself soon. */
const ENDING_SIGNALS = new Set<NodeJS.Signals | number>(["SIGTERM", "SIGINT", "SIGQUIT", "SIGKILL"]);

/** How long after its first signal a child still running at the cleanup is reported. */
const UNSETTLED_AFTER_MS = 5_000;

/** One stderr line per signalled child that had not settled by the cleanup, with its threads' kernel wait channels on Linux. */
function reportUnsettled(child: ChildProcess, exitEvent: string | undefined, output: string): void {
  let threads = "";
  try {
    const dir = `/proc/${child.pid}/task`;
    threads = fs.readdirSync(dir).map((tid) => {
      const read = (name: string) => fs.readFileSync(path.join(dir, tid, name), "utf8").trim();
      return `${read("comm")}:${read("wchan")}`;
    }).join(" ");
  } catch {
    // Gone, or not Linux.
  }
  const state = exitEvent === undefined ? `no exit event, threads ${threads || "unknown"}` : `exit event seen (${exitEvent}), its pipes never closed`;
  process.stderr.write(`harness: pid ${child.pid} was signalled and had not settled at the cleanup: ${state}; output:\n${output}\n`);
}

/**
 * Hands a process spawned some other way (valgrind, a load generator) to the harness, so that
 * killAllChildren() ends it too; `group`: it leads its own process group (spawned `detached`).
 */
export function adopt(child: ChildProcess, options: { group?: boolean } = {}): void {
  const killHard = (): void => {
    try {
      if (options.group && child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
      else if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    } catch {
      // Already gone.
    }
  };
  live.add(killHard);
  // A group leader that exited by itself (a supervisor, after its workers) leaves an empty group;
  // one killed by a signal may have left workers behind, so its group stays to be killed.
  child.once("exit", (_code, signal) => {
    if (!options.group || signal === null) live.delete(killHard);
  });
}

/** SIGKILLs every child still running, with its process group (for afterEach and process exit). */
export function killAllChildren(): void {
  for (const killHard of live) killHard();
  live.clear();
}

/** A free loopback port, chosen by the kernel (the short reuse race is acceptable in tests). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      probe.close(() => (port > 0 ? resolve(port) : reject(new Error("the kernel gave no port"))));
    });
  });
}

/** Waits `ms`. Never to order events (wait for a line instead): only to let time pass on purpose. */
export const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

const tail = (text: string): string => (text.length > 4_000 ? `…${text.slice(-4_000)}` : text);

function openLogFile(): { fd: number; read(): string; close(): void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "keelson-child-"));
  const fd = fs.openSync(path.join(dir, "output.log"), "w+");
  const chunk = Buffer.alloc(1 << 20);
  const decoder = new TextDecoder();
  let offset = 0;
  let closed = false;
  const close = (): void => {
    if (closed) return;
    closed = true;
    fs.closeSync(fd);
    fs.rmSync(dir, { recursive: true, force: true });
    process.off("exit", close);
  };
  process.once("exit", close);
  return {
    fd,
    read() {
      if (closed) return "";
      let text = "";
      for (let n = fs.readSync(fd, chunk, 0, chunk.length, offset); n > 0; n = fs.readSync(fd, chunk, 0, chunk.length, offset)) {
        offset += n;
        text += decoder.decode(chunk.subarray(0, n), { stream: true });
      }
      return text;
    },
    close,
  };
}
