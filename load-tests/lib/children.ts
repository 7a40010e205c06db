// Every child the harness spawns is tracked here so none outlives it, whatever way it ends.
import type { ChildProcess } from "node:child_process";

const live = new Set<ChildProcess>();
/** Children spawned `detached` (own process group) whose whole group dies with them: a supervisor and its workers. */
const groups = new Set<ChildProcess>();

export function track(child: ChildProcess, options: { group?: boolean } = {}): void {
  if (options.group) {
    groups.add(child);
    // A leader that exited by itself (a supervisor: after its workers) leaves an empty group; one
    // killed by a signal may have left workers behind in it, so the group stays to be killed.
    child.once("exit", (_code, signal) => {
      if (signal === null) groups.delete(child);
    });
    return;
  }
  live.add(child);
  child.once("exit", () => live.delete(child));
}

export function killAll(): void {
  for (const child of live) {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  }
  live.clear();
  for (const child of groups) {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
    } catch {
      // The group is already empty.
    }
  }
  groups.clear();
}
