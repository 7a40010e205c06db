import { readFileSync } from "node:fs";
import { basename } from "node:path";
import type { Supervisor } from "../supervisor/primary.js";

/** How often the parent is looked for: a stop a moment late is fine, a busy primary is not. */
const POLL_MS = 500;

/** Why the supervisor does not follow its parent, or undefined when it does. */
export type Detached = "init" | "session" | "nohup" | undefined;

/**
 * Whether this process was meant to outlive the program that started it:
 *
 * - `init`: its parent is already pid 1 (a service manager's direct child, a container's init,
 *   or a wrapper that exited before Node started);
 * - `session`: it leads a session of its own (`setsid`, systemd's services);
 * - `nohup`: bash and zsh put the path of the program they run in `$_`, and nohup execs the
 *   command with that environment. Node resets the SIGHUP that nohup ignores, so this is the
 *   trace left of it.
 *
 * @example
 * if (detachedFrom(process.ppid) === undefined) watchParent(() => void supervisor.stop("parent exited"));
 */
export function detachedFrom(ppid: number, env: NodeJS.ProcessEnv = process.env, statPath = "/proc/self/stat"): Detached {
  if (ppid <= 1) return "init";
  if (ownSession(statPath)) return "session";
  if (env._ !== undefined && basename(env._) === "nohup") return "nohup";
  return undefined;
}

/** True when this process leads its session (Linux `/proc`; elsewhere unknown, so false). */
function ownSession(statPath: string): boolean {
  try {
    // After the `(comm)` field, which may hold spaces: state ppid pgrp session …
    const stat = readFileSync(statPath, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return Number(fields[3]) === process.pid;
  } catch {
    return false;
  }
}

/**
 * Calls `onGone(pid)` once when the parent process of this one exits. Node cannot ask the kernel
 * for a signal on the parent's death (Linux's PR_SET_PDEATHSIG), so it polls `process.ppid`: when
 * the parent dies, the process is handed to init or a subreaper and the ppid changes. This covers
 * `npm start` and `npx` (npm dies of a SIGTERM and its `sh -c` with it, without passing it on) and
 * wrapper scripts (the shell dies of it). Returns the function that stops watching.
 *
 * @example
 * const unwatch = watchParent((pid) => void supervisor.stop(`parent (pid ${pid}) exited`));
 * void supervisor.finished.then(unwatch);
 */
export function watchParent(onGone: (pid: number) => void, readPpid: () => number = () => process.ppid): () => void {
  const parent = readPpid();
  const timer = setInterval(() => {
    if (readPpid() === parent) return;
    clearInterval(timer);
    onGone(parent);
  }, POLL_MS);
  // The watch never keeps the process alive by itself.
  timer.unref();
  return () => clearInterval(timer);
}

/**
 * Stops `supervisor` as a SIGTERM would when the program that started it exits first, unless it
 * was meant to outlive it ({@link detachedFrom}); the line says which parent went.
 *
 * @example
 * stopWithParent(supervisor); // `npm start` killed: the supervisor drains its workers and exits
 */
export function stopWithParent(supervisor: Pick<Supervisor, "logger" | "stop" | "finished">): void {
  if (detachedFrom(process.ppid) !== undefined) return;
  const unwatch = watchParent((pid) => {
    supervisor.logger.info("parent process (pid %d) exited: stopping as on SIGTERM", pid);
    void supervisor.stop("parent exited");
  });
  void supervisor.finished.then(unwatch);
}
