// The rolling reload's decisions in-process (fake fork, manual clock), including the paths a
// process test cannot reach on purpose: a crash during a reload, at each moment it can happen,
// and a replacement that fails to start. With real processes: test/supervisor-reload.test.ts.
import { afterEach, describe, expect, it } from "vitest";
import { fakeSupervisor, stopFakeSupervisors, type FakeSupervisor } from "./helpers/fake-cluster.js";

afterEach(stopFakeSupervisors);

/** pids of the live workers by slot, oldest first. */
function pids(sup: FakeSupervisor): Array<[number, number]> {
  return sup.supervisor.workers.map((worker) => [worker.id, worker.pid]);
}

/** One worker, reloaded; its old worker crashes (code 1) while the replacement is still starting. */
async function oldCrashesDuringReload(backoff: number) {
  const sup = fakeSupervisor({ workers: 1, backoff: { initial: backoff } });
  await sup.start();
  const old = sup.cluster.slot(1);
  sup.cluster.autoReady = false;
  const reloading = sup.supervisor.reload();
  await sup.clock.advance(0);
  const replacement = sup.cluster.slot(1);
  old.exit(1);
  await sup.clock.advance(0);
  return { sup, old, replacement, reloading };
}

describe("the rolling reload (in-process)", () => {
  it("replaces one slot at a time: the replacement is ready before the old worker gets SIGTERM, and the next slot waits for its exit", async () => {
    const sup = fakeSupervisor({ workers: 2 }, { autoReady: true });
    await sup.start();
    const [old1, old2] = sup.cluster.forks;
    sup.cluster.autoReady = false;
    let reloaded = false;
    const reloading = sup.supervisor.reload();
    void reloading.then(() => (reloaded = true));
    await sup.clock.advance(0);
    // Slot 1's replacement is starting: the old worker still serves, slot 2 is not touched yet.
    expect(sup.cluster.forks).toHaveLength(3);
    const new1 = sup.cluster.slot(1);
    expect(old1?.signals).toEqual([]);
    old1!.onSignal = () => {};
    new1.ready();
    await sup.clock.advance(0);
    expect(old1?.signals).toEqual(["SIGTERM"]);
    expect(sup.cluster.forks).toHaveLength(3);
    old1?.exit(0);
    await sup.clock.advance(0);
    expect(sup.cluster.forks).toHaveLength(4);
    sup.cluster.slot(2).ready();
    await sup.clock.advance(0);
    expect(reloaded).toBe(true);
    const report = await reloading;
    expect(report).toMatchObject({ ok: true, replaced: 2, error: undefined });
    expect(report.workers).toEqual([
      { id: 1, from: old1?.pid, to: new1.pid },
      { id: 2, from: old2?.pid, to: sup.cluster.slot(2).pid },
    ]);
    expect(sup.supervisor.status().workers.map((worker) => [worker.id, worker.generation, worker.restarts])).toEqual([[1, 2, 0], [2, 2, 0]]);
  });

  it("a replacement that dies before it is ready (a bad deploy) ends the reload: the old worker keeps serving, the supervisor runs on, a later reload succeeds", async () => {
    const sup = fakeSupervisor({ workers: 2 });
    await sup.start();
    const [old1, old2] = sup.cluster.forks;
    sup.cluster.autoReady = false;
    const reloading = sup.supervisor.reload();
    await sup.clock.advance(0);
    const bad = sup.cluster.slot(1);
    bad.app.send("failed", { reason: "SyntaxError: Unexpected token" });
    await sup.clock.advance(0);
    bad.exit(1);
    const report = await reloading;
    expect(report).toMatchObject({
      ok: false, replaced: 0,
      error: `replacement worker 1 (pid ${bad.pid}) for worker 1 (pid ${old1?.pid}): exited (code 1) before it was ready: SyntaxError: Unexpected token; keeping the old worker`,
    });
    expect(sup.supervisor.stopping).toBe(false);
    expect(old1?.signals).toEqual([]);
    expect(pids(sup)).toEqual([[1, old1?.pid], [2, old2?.pid]]);
    // Not a crash of the slot: no restart, no breaker count.
    await sup.clock.advance(60_000);
    expect(sup.cluster.forks).toHaveLength(3);
    expect(sup.supervisor.status().breaker.crashes).toBe(0);
    sup.cluster.autoReady = true;
    expect(await sup.supervisor.reload()).toMatchObject({ ok: true, replaced: 2 });
  });

  it("a replacement not ready within readyTimeout is killed; the reload stops before the next slot", async () => {
    const sup = fakeSupervisor({ workers: 2, readyTimeout: 2000 });
    await sup.start();
    sup.cluster.autoReady = false;
    const reloading = sup.supervisor.reload();
    await sup.clock.advance(1999);
    const slow = sup.cluster.slot(1);
    expect(slow.signals).toEqual([]);
    await sup.clock.advance(1);
    expect(slow.signals).toEqual(["SIGKILL"]);
    const report = await reloading;
    expect(report.error).toMatch(/: not ready after 2000ms; keeping the old worker$/);
    expect(sup.cluster.forks).toHaveLength(3);
    expect(sup.output()).toMatch(/worker 1 \(pid \d+\): reload: replacement not ready: sending SIGKILL/);
  });

  it("the old worker crashes while its replacement starts, before the restart is due: the replacement takes the slot and the restart is cancelled", async () => {
    const { sup, old, replacement, reloading } = await oldCrashesDuringReload(1000);
    await sup.clock.advance(10);
    expect(sup.output()).toMatch(/died unexpectedly \(code 1\) after 0ms up; restarting in 1000ms/);
    replacement.ready();
    const report = await reloading;
    expect(report).toMatchObject({ ok: true, workers: [{ id: 1, from: old.pid, to: replacement.pid }] });
    expect(sup.clock.pending).toBe(0);
    await sup.clock.advance(5000);
    expect(sup.cluster.forks).toHaveLength(2);
    expect(pids(sup)).toEqual([[1, replacement.pid]]);
    expect(replacement.signals).toEqual([]);
  });

  it("the old worker crashes and its slot is restarted before the replacement is ready: the replacement is retired, the restarted worker stays", async () => {
    const { sup, old, replacement, reloading } = await oldCrashesDuringReload(0);
    const restarted = sup.cluster.slot(1);
    expect(restarted).not.toBe(replacement);
    restarted.ready();
    await sup.clock.advance(0);
    replacement.ready();
    const report = await reloading;
    expect(report).toMatchObject({ ok: true, workers: [{ id: 1, from: old.pid, to: restarted.pid }] });
    expect(replacement.signals).toEqual(["SIGTERM"]);
    expect(sup.output()).toMatch(/draining \(reload: slot 1 was restarted meanwhile\)/);
    expect(pids(sup)).toEqual([[1, restarted.pid]]);
  });

  it("another slot's worker crashes during the reload: the pool restarts it and the reload skips it while it starts", async () => {
    const sup = fakeSupervisor({ workers: 2, backoff: { initial: 0 } });
    await sup.start();
    sup.cluster.autoReady = false;
    const reloading = sup.supervisor.reload();
    await sup.clock.advance(0);
    sup.cluster.slot(2).exit(1);
    await sup.clock.advance(0);
    const restarted2 = sup.cluster.slot(2);
    sup.cluster.slot(1).ready();
    const report = await reloading;
    expect(report).toMatchObject({ ok: true, replaced: 1, workers: [{ id: 1 }] });
    expect(sup.output()).toMatch(/reload: worker 2 is not serving \(being restarted\): skipped/);
    restarted2.ready();
    await sup.clock.advance(0);
    expect(sup.supervisor.workers.map((worker) => worker.state)).toEqual(["ready", "ready"]);
  });

  it("reloads asked while one runs fold into one more full run; a reload while stopping is refused at once", async () => {
    const sup = fakeSupervisor({ workers: 2 });
    await sup.start();
    const first = sup.supervisor.reload();
    const second = sup.supervisor.reload();
    const third = sup.supervisor.reload();
    expect(second).toBe(first);
    expect(third).toBe(first);
    const report = await first;
    expect(report).toMatchObject({ ok: true, replaced: 2 });
    // Two full runs: the first, then one for both requests made meanwhile.
    expect(sup.cluster.forks).toHaveLength(6);
    expect(sup.output().match(/reload requested while one runs: another follows it/g)).toHaveLength(2);
    const stopping = sup.stop();
    expect(await sup.supervisor.reload()).toEqual({ ok: false, replaced: 0, workers: [], durationMs: 0, error: "the supervisor is stopping", unclean: [] });
    await stopping;
  });

  it("a stop during a reload ends the reload with that reason and drains the replacement too", async () => {
    const sup = fakeSupervisor({ workers: 2 });
    await sup.start();
    sup.cluster.autoReady = false;
    const reloading = sup.supervisor.reload();
    await sup.clock.advance(0);
    const replacement = sup.cluster.slot(1);
    const stopped = sup.stop();
    expect(await reloading).toMatchObject({ ok: false, error: "the supervisor is stopping" });
    expect(await stopped).toMatchObject({ exitCode: 0, workers: [{}, {}, {}] });
    expect(replacement.signals).toEqual(["SIGTERM"]);
  });
});
