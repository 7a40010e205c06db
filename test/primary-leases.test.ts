// Rate-limit lease accounting (src/rate-limit/primary.ts) in-process: the real feature list on a
// Supervisor with a fake fork, the workers' real Leases over the fake IPC, and the paths a process
// test cannot time on purpose: a lease request from a worker that dies before, or after, the
// primary reads it. With real workers: test/rate-limit-cluster.test.ts.
import { afterEach, describe, expect, it } from "vitest";
import { rateLimitTake, primaryRateLimitStore } from "../src/rate-limit/ipc.js";
import { Leases } from "../src/rate-limit/leases.js";
import type { RateLimitTake } from "../src/rate-limit/window.js";
import { FEATURES } from "../supervisor/features.js";
import { fakeSupervisor, settle, stopFakeSupervisors, type FakeWorkerProcess } from "./helpers/fake-cluster.js";

afterEach(stopFakeSupervisors);

const NOW = Date.UTC(2026, 0, 1, 12, 0, 0);
const take = (want: number, key = "api:203.0.113.7"): RateLimitTake => ({ key, limit: 100, windowMs: 60_000, algorithm: "fixed", now: NOW, want });

function ask(worker: FakeWorkerProcess | undefined, want: number) {
  if (worker === undefined) throw new Error("no worker");
  return worker.app.request(rateLimitTake, take(want), 1000);
}

describe("rate-limit leases in the primary (in-process)", () => {
  it("every worker leases from one count: the cluster is granted exactly the limit, never more", async () => {
    const sup = fakeSupervisor({ workers: 3 }, { features: FEATURES });
    await sup.start();
    let granted = 0;
    for (let round = 0; round < 40; round++) {
      const grant = await ask(sup.cluster.forks[round % 3], 10);
      granted += grant.granted;
      expect(grant.remaining).toBe(100 - granted);
    }
    expect(granted).toBe(100);
    expect(await ask(sup.cluster.forks[0], 10)).toMatchObject({ granted: 0, remaining: 0, retryMs: 60_000 });
  });

  it("the workers' own leases over IPC serve the limit exactly across the cluster, one message per lease", async () => {
    const sup = fakeSupervisor({ workers: 2 }, { features: FEATURES });
    await sup.start();
    let messages = 0;
    const leases = sup.cluster.forks.map((worker) => {
      const store = primaryRateLimitStore(worker.app);
      return new Leases({ take: (t) => (messages++, store.take(t)) }, { limit: 100, windowMs: 60_000, algorithm: "fixed", batch: 10, clock: () => NOW, timeoutMs: 1000 });
    });
    let allowed = 0;
    for (let request = 0; request < 150; request++) {
      const verdict = await leases[request % 2]!.take("api:1");
      if (verdict.allowed) allowed++;
    }
    expect(allowed).toBe(100);
    expect(messages).toBeLessThan(30);
  });

  it("a lease request read just before its worker died: the grant is lost (counted as used), the primary serves on", async () => {
    const sup = fakeSupervisor({ workers: 2, backoff: { initial: 0 } }, { features: FEATURES });
    await sup.start();
    const [dying, other] = sup.cluster.forks;
    const lost = ask(dying, 8).then(() => "answered", (error: Error) => error.message);
    // The primary reads the request, then the exit arrives before its reply can be sent.
    queueMicrotask(() => dying?.exit(1));
    expect(await lost).toBe("IPC channel closed");
    await sup.clock.advance(0);
    expect(await ask(other, 10)).toMatchObject({ granted: 10, remaining: 82 });
    // The restarted worker leases from the same count.
    const restarted = sup.cluster.slot(1);
    expect(restarted).not.toBe(dying);
    expect(await ask(restarted, 10)).toMatchObject({ granted: 10, remaining: 72 });
  });

  it("a lease request from a worker whose exit the primary handled first is never counted", async () => {
    const sup = fakeSupervisor({ workers: 2 }, { features: FEATURES });
    await sup.start();
    const [dying, other] = sup.cluster.forks;
    const lost = ask(dying, 8).then(() => "answered", (error: Error) => error.message);
    dying?.exit(1);
    expect(await lost).toBe("IPC channel closed");
    await settle();
    expect(await ask(other, 10)).toMatchObject({ granted: 10, remaining: 90 });
  });

  it("a malformed request is refused with a reason, and counts nothing", async () => {
    const sup = fakeSupervisor({ workers: 1 }, { features: FEATURES });
    await sup.start();
    const worker = sup.cluster.slot(1);
    await expect(worker.app.request(rateLimitTake, { ...take(5), limit: 0 }, 1000)).rejects.toThrow("malformed ratelimit:take request");
    expect(await ask(worker, 5)).toMatchObject({ granted: 5, remaining: 95 });
  });
});
