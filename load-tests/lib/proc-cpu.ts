// CPU time of a process tree from /proc (Linux): what a server made of several processes (a
// primary and its workers, PM2's daemon and its instances) spent, whoever accepted the connections.
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";

let clockTicks: number | undefined;

/** Clock ticks per second of /proc/PID/stat's utime and stime. */
function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

interface Stat {
  ppid: number;
  /** utime + stime, in seconds. */
  cpu: number;
}

function readStat(pid: number, file = `/proc/${pid}/stat`): Stat | undefined {
  try {
    const stat = fs.readFileSync(file, "utf8");
    // "pid (comm) state ppid …": comm may hold spaces and parentheses, so split after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { ppid: Number(fields[1]), cpu: (Number(fields[11]) + Number(fields[12])) / ticksPerSecond() };
  } catch {
    return undefined;
  }
}

/**
 * CPU seconds of each process's main thread (the JavaScript event loop), by pid: the rest of a
 * process's CPU is its other threads' (V8's compilers and GC helpers, libuv's pool). A share of
 * theirs that is large in a measured window says the server was still warming up.
 */
export function mainThreadCpu(pids: Iterable<number>): Map<number, number> {
  const cpu = new Map<number, number>();
  for (const pid of pids) {
    const stat = readStat(pid, `/proc/${pid}/task/${pid}/stat`);
    if (stat !== undefined) cpu.set(pid, stat.cpu);
  }
  return cpu;
}

/** CPU seconds (user + system) of `root` and of each of its live descendants, by pid. */
export function treeCpu(root: number): Map<number, number> {
  const stats = new Map<number, Stat>();
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const stat = readStat(Number(name));
    if (stat !== undefined) stats.set(Number(name), stat);
  }
  const inTree = new Map<number, number>();
  const rootStat = stats.get(root);
  if (rootStat === undefined) return inTree;
  inTree.set(root, rootStat.cpu);
  for (let grew = true; grew;) {
    grew = false;
    for (const [pid, stat] of stats) {
      if (!inTree.has(pid) && inTree.has(stat.ppid)) {
        inTree.set(pid, stat.cpu);
        grew = true;
      }
    }
  }
  return inTree;
}

/** What each process of the tree spent between two `treeCpu` readings (processes in both). */
export function cpuSpent(before: Map<number, number>, after: Map<number, number>): Map<number, number> {
  const spent = new Map<number, number>();
  for (const [pid, cpu] of after) spent.set(pid, cpu - (before.get(pid) ?? cpu));
  return spent;
}
