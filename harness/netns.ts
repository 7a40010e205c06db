// A network namespace of its own (root only), so a test or a benchmark can set a per-namespace sysctl such as
// net.ipv4.tcp_migrate_req without touching the host's. Processes run in it through `wrap`.
import { execFileSync } from "node:child_process";
import { readFileSync, readdirSync, readlinkSync } from "node:fs";

export interface Netns {
  readonly name: string;
  /** Put before a command's argv to run it inside the namespace. */
  readonly wrap: string[];
  remove(): void;
}

/** Creates a namespace with loopback up and `sysctls` set; a string saying why when the host cannot. */
export function createNetns(name: string, sysctls: Record<string, string> = {}): Netns | string {
  try {
    execFileSync("ip", ["netns", "add", name], { stdio: "pipe" });
  } catch (error) {
    return `network namespaces are unavailable here (ip netns add: ${(error as Error).message.split("\n")[0]})`;
  }
  const remove = () => {
    try {
      execFileSync("ip", ["netns", "delete", name], { stdio: "pipe" });
    } catch {
      // Already gone.
    }
  };
  try {
    execFileSync("ip", ["netns", "exec", name, "ip", "link", "set", "lo", "up"], { stdio: "pipe" });
    for (const [key, value] of Object.entries(sysctls)) {
      execFileSync("ip", ["netns", "exec", name, "sysctl", "-qw", `${key}=${value}`], { stdio: "pipe" });
    }
  } catch (error) {
    remove();
    return `cannot set up namespace ${name}: ${(error as Error).message.split("\n")[0]}`;
  }
  return { name, wrap: ["ip", "netns", "exec", name], remove };
}

/**
 * The TCP sockets listening on `port` in the network namespace of `pids[0]` (from /proc/<pid>/net/tcp
 * and tcp6), each with the pids among `pids` that hold it (from /proc/<pid>/fd).
 */
export function listenersOn(port: number, pids: readonly number[]): Array<{ inode: string; owners: number[] }> {
  const [first] = pids;
  if (first === undefined) return [];
  const hexPort = port.toString(16).toUpperCase().padStart(4, "0");
  const inodes: string[] = [];
  for (const file of ["tcp", "tcp6"]) {
    for (const line of readFileSync(`/proc/${first}/net/${file}`, "utf8").split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      // local_address is ADDR:PORT in hex; st 0A is LISTEN; the inode is the tenth field.
      if (fields[1]?.endsWith(`:${hexPort}`) && fields[3] === "0A" && fields[9] !== undefined) inodes.push(fields[9]);
    }
  }
  const owners = new Map<string, number[]>(inodes.map((inode) => [inode, []]));
  for (const pid of pids) {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      let target: string;
      try {
        target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        continue;
      }
      const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
      if (inode !== undefined) owners.get(inode)?.push(pid);
    }
  }
  return [...owners].map(([inode, holders]) => ({ inode, owners: [...new Set(holders)] }));
}
