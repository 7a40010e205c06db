// Every child the harness spawns is tracked here so none outlives it, whatever way it ends.
import type { ChildProcess } from "node:child_process";

const live = new Set<ChildProcess>();

export function track(child: ChildProcess): void {
  live.add(child);
  child.once("exit", () => live.delete(child));
}

export function killAll(): void {
  for (const child of live) {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  }
  live.clear();
}
