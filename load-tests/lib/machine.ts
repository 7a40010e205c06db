// Machine description and CPU pinning, so every report says what it was measured on.
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import type { MachineInfo } from "./types.js";

export interface Pinning {
  server: number | null;
  load: number | null;
  note: string;
}

/** Server on CPU 0, load generator (and this harness) on CPU 1, when the machine allows it. */
export function choosePinning(): Pinning {
  const cores = os.cpus().length;
  const probe = spawnSync("taskset", ["-c", "0", "true"], { stdio: "ignore" });
  if (probe.error || probe.status !== 0) {
    return { server: null, load: null, note: "NOT PINNED: taskset is not available, server and load generator share CPUs" };
  }
  if (cores < 2) {
    return { server: null, load: null, note: `NOT PINNED: only ${cores} CPU available, server and load generator share it` };
  }
  // -a: every thread of this process (tsx runs its loader hooks on a worker thread).
  const self = spawnSync("taskset", ["-a", "-p", "-c", "1", String(process.pid)], { stdio: "ignore" });
  const selfNote = self.status === 0 ? "harness on CPU 1" : "harness unpinned";
  return { server: 0, load: 1, note: `pinned with taskset: server on CPU 0, load generator on CPU 1, ${selfNote}` };
}

function cpuModel(): string {
  try {
    const line = fs
      .readFileSync("/proc/cpuinfo", "utf8")
      .split("\n")
      .find((l) => l.startsWith("model name"));
    if (line) return line.slice(line.indexOf(":") + 1).trim();
  } catch {
    // Not Linux: fall through to what node knows.
  }
  return os.cpus()[0]?.model ?? "unknown";
}

export function describeMachine(pinning: Pinning): MachineInfo {
  return {
    cpuModel: cpuModel(),
    cores: os.cpus().length,
    node: process.version,
    platform: `${os.platform()} ${os.arch()}`,
    kernel: os.release(),
    pinned: pinning.server !== null,
    pinningNote: pinning.note,
    loadAvgBefore: os.loadavg()[0] ?? 0,
    loadAvgAfter: null,
  };
}

/** Resident set size of a process in MB, from /proc (Linux only). */
export function readRssMb(pid: number): number | null {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
    const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
    return match?.[1] ? Number(match[1]) / 1024 : null;
  } catch {
    return null;
  }
}
