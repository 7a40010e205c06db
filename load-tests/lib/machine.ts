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

/**
 * TCP connections in state ESTABLISHED that process `pid` holds with local port `port`: the
 * sockets among its file descriptors, looked up in /proc/net/tcp and tcp6 (Linux only; 0 elsewhere).
 */
export function establishedConnections(pid: number, port: number): number {
  try {
    const inodes = new Set<string>();
    for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
      try {
        const match = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (match?.[1]) inodes.add(match[1]);
      } catch {
        // Closed while we looked.
      }
    }
    let count = 0;
    for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
      const lines = fs.existsSync(table) ? fs.readFileSync(table, "utf8").split("\n").slice(1) : [];
      for (const line of lines) {
        // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
        const fields = line.trim().split(/\s+/);
        const localPort = Number.parseInt(fields[1]?.split(":")[1] ?? "", 16);
        if (localPort === port && fields[3] === "01" && inodes.has(fields[9] ?? "")) count++;
      }
    }
    return count;
  } catch {
    return 0;
  }
}
