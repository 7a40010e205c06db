import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { checkOneOf } from "../src/checks.js";

/**
 * Who spreads the connections over the workers: `round-robin`, node:cluster's primary accepting
 * every connection and passing it over IPC; `reuseport`, every worker listening on the port itself
 * with SO_REUSEPORT so the kernel spreads them and the primary is out of the data path.
 */
export type Balancer = "round-robin" | "reuseport";

export const BALANCERS: readonly Balancer[] = ["round-robin", "reuseport"];

/** The system facts the reuseport mode depends on; a seam so unit tests can play any host. */
export interface BalancerHost {
  platform: NodeJS.Platform;
  /** `process.versions.node`. */
  nodeVersion: string;
  /** The value of a file under /proc/sys, trimmed; undefined when it does not exist. */
  sysctl(path: string): string | undefined;
}

export const systemHost: BalancerHost = {
  platform: process.platform,
  nodeVersion: process.versions.node,
  sysctl(path) {
    try {
      return readFileSync(`/proc/sys/${path}`, "utf8").trim();
    } catch {
      return undefined;
    }
  },
};

const MIGRATE = "net/ipv4/tcp_migrate_req";

/**
 * Why this host cannot run the reuseport mode with the promises of round-robin; undefined when it
 * can. A listener that closes (a worker draining in a reload, a worker killed) takes the
 * connections queued on it along unless the kernel migrates them to the other listeners of the
 * port, which only `net.ipv4.tcp_migrate_req=1` (Linux 5.14 and later, per network namespace)
 * does: without it every reload would reset connections, so the mode is refused, not degraded.
 */
export function reusePortRefusal(host: BalancerHost = systemHost): string | undefined {
  if (host.platform !== "linux") return `it needs Linux (this is ${host.platform})`;
  const [major = 0, minor = 0] = host.nodeVersion.split(".").map(Number);
  if (major < 22 || (major === 22 && minor < 12)) return `it needs Node 22.12 or later for listen({ reusePort }) (this is ${host.nodeVersion})`;
  const migrate = host.sysctl(MIGRATE);
  if (migrate === undefined) {
    return "the kernel has no net.ipv4.tcp_migrate_req (Linux 5.14 or later): a worker that stops listening would reset the connections queued on it";
  }
  if (migrate !== "1") {
    return `net.ipv4.tcp_migrate_req is ${migrate}: a worker that stops listening (reload, drain) would reset the connections queued on it; `
      + "set it with `sysctl -w net.ipv4.tcp_migrate_req=1` (per network namespace: in a container, the pod's or container's sysctls)";
  }
  return undefined;
}

/**
 * The balancer asked for (`option`, else `KEELSON_BALANCER`, else round-robin), refused with its
 * name when it is not one, or when it is `reuseport` on a host that cannot keep its promises.
 */
export function resolveBalancer(option: unknown, env: NodeJS.ProcessEnv = process.env, host: BalancerHost = systemHost): Balancer {
  const raw = env.KEELSON_BALANCER?.trim();
  const balancer = option !== undefined
    ? checkOneOf(option, "balancer", BALANCERS)
    : raw === undefined || raw === "" ? "round-robin" : checkOneOf(raw, "KEELSON_BALANCER", BALANCERS);
  if (balancer === "reuseport") {
    const why = reusePortRefusal(host);
    if (why !== undefined) throw new Error(`balancer "reuseport" cannot be used here: ${why}; use "round-robin"`);
  }
  return balancer;
}

/**
 * Binds `port` on every address without SO_REUSEPORT, then lets it go: the reuseport mode's
 * "port already in use". Two reuseport listeners of the same user silently share a port, so the
 * workers' own binds would not notice a program already on it; this bind does, whether that
 * program set SO_REUSEPORT or not. Port 0 resolves to a free port here, once: workers binding
 * port 0 themselves would each get a port of their own.
 *
 * @example
 * const port = await probePort(3000); // rejects with "port 3000 is already in use (EADDRINUSE) …"
 */
export function probePort(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", (error: NodeJS.ErrnoException) => {
      if (error.code === "EADDRINUSE") {
        reject(new Error(`port ${port} is already in use (EADDRINUSE): another program listens on it`, { cause: error }));
      } else if (error.code === "EACCES") reject(new Error(`no permission to listen on port ${port} (EACCES)`, { cause: error }));
      else reject(new Error(`cannot listen on port ${port}: ${error.message}`, { cause: error }));
    });
    server.listen({ port, exclusive: true }, () => {
      const address = server.address();
      const bound = typeof address === "object" && address !== null ? address.port : port;
      server.close(() => resolve(bound));
    });
  });
}
