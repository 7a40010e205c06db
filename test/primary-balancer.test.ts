// The balancer's decisions in-process: which hosts the reuseport mode refuses and why, how it is
// chosen (option, KEELSON_BALANCER, flag), and, on the fake cluster, the port probed before any fork
// and handed to every worker. With real workers: test/supervisor-reuseport.test.ts.
import { afterEach, describe, expect, it } from "vitest";
import { parseStart } from "../cli/args.js";
import { resolveBalancer, reusePortRefusal, type BalancerHost } from "../supervisor/balancer.js";
import { balanceSkew, loadRates, type WorkerStats } from "../src/cluster/worker-stats.js";
import { fakeSupervisor, stopFakeSupervisors } from "./helpers/fake-cluster.js";

afterEach(stopFakeSupervisors);

const able: BalancerHost = { platform: "linux", nodeVersion: "24.21.0", sysctl: () => "1" };

describe("the balancer", () => {
  it("refuses reuseport off Linux, before Node 22.12, and without tcp_migrate_req=1, saying why", () => {
    expect(reusePortRefusal(able)).toBeUndefined();
    expect(reusePortRefusal({ ...able, nodeVersion: "22.12.0" })).toBeUndefined();
    expect(reusePortRefusal({ ...able, platform: "darwin" })).toBe("it needs Linux (this is darwin)");
    expect(reusePortRefusal({ ...able, nodeVersion: "22.11.0" })).toMatch(/Node 22\.12 or later .*\(this is 22\.11\.0\)/);
    expect(reusePortRefusal({ ...able, nodeVersion: "20.19.0" })).toMatch(/Node 22\.12 or later/);
    expect(reusePortRefusal({ ...able, sysctl: () => undefined })).toMatch(/no net\.ipv4\.tcp_migrate_req \(Linux 5\.14 or later\)/);
    expect(reusePortRefusal({ ...able, sysctl: () => "0" })).toMatch(
      /tcp_migrate_req is 0: a worker that stops listening \(reload, drain\) would reset the connections queued on it; set it with `sysctl -w net\.ipv4\.tcp_migrate_req=1`/);
  });

  it("is the option, else KEELSON_BALANCER, else round-robin; a bad name is refused with the name of what set it", () => {
    expect(resolveBalancer(undefined, {}, able)).toBe("round-robin");
    expect(resolveBalancer(undefined, { KEELSON_BALANCER: " reuseport " }, able)).toBe("reuseport");
    expect(resolveBalancer("round-robin", { KEELSON_BALANCER: "reuseport" }, able)).toBe("round-robin");
    expect(() => resolveBalancer("kernel", {}, able)).toThrow('balancer must be "round-robin" or "reuseport", got "kernel"');
    expect(() => resolveBalancer(undefined, { KEELSON_BALANCER: "rr" }, able)).toThrow('KEELSON_BALANCER must be "round-robin" or "reuseport", got "rr"');
    expect(() => resolveBalancer("reuseport", {}, { ...able, sysctl: () => "0" }))
      .toThrow(/^balancer "reuseport" cannot be used here: net\.ipv4\.tcp_migrate_req is 0: .*; use "round-robin"$/);
    const cli = parseStart(["test/fixtures/supervisor-app.ts", "--balancer", "kernel"], {});
    expect(cli).toEqual({ command: "error", message: '--balancer must be "round-robin" or "reuseport", got "kernel"' });
    const ok = parseStart(["test/fixtures/supervisor-app.ts", "--balancer", "reuseport"], {});
    expect(ok.command === "start" && ok.options.balancer).toBe("reuseport");
  });

  it("reuseport: the port is probed before any fork, and port 0 becomes one free port shared by every worker", async () => {
    const probed: number[] = [];
    const sup = fakeSupervisor({ workers: 2, port: 0, balancer: "reuseport" }, {
      balancerHost: able, probePort: (port) => (probed.push(port), Promise.resolve(45_678)),
    });
    await sup.start();
    expect(probed).toEqual([0]);
    expect(sup.cluster.forks.map((worker) => [worker.env.PORT, worker.env.KEELSON_BALANCER])).toEqual([["45678", "reuseport"], ["45678", "reuseport"]]);
    expect(sup.output()).toMatch(/balancer reuseport: each worker listens on port 45678 itself/);
  });

  it("reuseport without a port asked for serves PORT, else the App's default 3000: the primary must know it before the workers bind", async () => {
    const probed: number[] = [];
    const sup = fakeSupervisor({ workers: 1, balancer: "reuseport", env: { PORT: "8123" } }, {
      balancerHost: able, probePort: (port) => (probed.push(port), Promise.resolve(port)),
    });
    await sup.start();
    expect(probed).toEqual([8123]);
    const bare = fakeSupervisor({ workers: 1, balancer: "reuseport", env: { PORT: "" } }, { balancerHost: able, probePort: (port) => Promise.resolve(port) });
    expect(bare.supervisor.options.port).toBe(3000);
  });

  it("reuseport: a port another program holds stops the start with exit 1 and the reason, and no worker is forked", async () => {
    const sup = fakeSupervisor({ workers: 2, port: 4000, balancer: "reuseport" }, {
      balancerHost: able, probePort: () => Promise.reject(new Error("port 4000 is already in use (EADDRINUSE): another program listens on it")),
    });
    const started = sup.supervisor.start();
    await expect(started).rejects.toThrow(/stopped before all workers were ready: startup failed: port 4000 is already in use/);
    const report = await sup.supervisor.finished;
    expect(report.exitCode).toBe(1);
    expect(sup.cluster.forks).toHaveLength(0);
    expect(sup.output()).toMatch(/stopped in \d+ms with exit 1: startup failed: port 4000 is already in use \(EADDRINUSE\): another program listens on it/);
  });

  it("round-robin neither probes nor fixes the port: the App's own port stays the App's", async () => {
    let probes = 0;
    const sup = fakeSupervisor({ workers: 1 }, { balancerHost: able, probePort: (port) => (probes++, Promise.resolve(port)) });
    await sup.start();
    expect(probes).toBe(0);
    expect(sup.cluster.forks[0]?.env.PORT).toBeUndefined();
    expect(sup.cluster.forks[0]?.env.KEELSON_BALANCER).toBe("round-robin");
  });
});

function stats(requests: number, connections: number): WorkerStats {
  return { rss: 0, heapUsed: 0, elu: 0, delayMeanMs: 0, delayP99Ms: 0, inflight: 0, requests, connections };
}

describe("the balance figures", () => {
  it("the skew is the busiest worker's rate over the mean: 1 even, N all on one, none below two workers or without load", () => {
    expect(balanceSkew([100, 100])).toBe(1);
    expect(balanceSkew([300, 100])).toBe(1.5);
    expect(balanceSkew([90, 0, 0])).toBe(3);
    expect(balanceSkew([100])).toBeUndefined();
    expect(balanceSkew([0, 0])).toBeUndefined();
  });

  it("rates come from two reports of one worker, never negative, zero for the first", () => {
    expect(loadRates(undefined, stats(10, 5), 1000)).toEqual({ requestsPerSecond: 0, connectionsPerSecond: 0 });
    expect(loadRates({ stats: stats(10, 5), at: 1000 }, stats(40, 8), 1500)).toEqual({ requestsPerSecond: 60, connectionsPerSecond: 6 });
    expect(loadRates({ stats: stats(10, 5), at: 1000 }, stats(0, 0), 2000)).toEqual({ requestsPerSecond: 0, connectionsPerSecond: 0 });
  });
});
