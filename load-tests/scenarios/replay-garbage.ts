// Issue 32, defect 1, at full size: a channel filled with 1,000 events of 60 KiB (the size the
// hostile tester used, inside the old limits of 1,000 × 64 KiB), then 40 event-stream clients with
// `Last-Event-ID: garbage` and 10 with an id long gone from the buffer, all at once, under the
// supervisor with 2 workers. Bounds (the targets): the primary's RSS grows by less than
// 100 MB, GET /health's p99 stays under 100 ms and none fails, no worker is replaced, every garbage
// client gets one `missed` event and no backlog, every stale one a replay of at most 1 MiB.
import { startCluster } from "../lib/cluster.js";
import { replayAttack } from "../../test/helpers/replay-attack.js";
import { table, verdict, type Context, type Verdict } from "./common.js";

const NAME = "replay-garbage";
const FILL = { count: 1000, bytes: 60 * 1024 };
const GARBAGE = 40;
const STALE = 10;
// Built JavaScript as a deployment runs it (`make build-bench`); STREAMS_SOURCE=1 runs from source.
const FROM_SOURCE = process.env.STREAMS_SOURCE === "1";
const ENTRY = FROM_SOURCE ? "test/fixtures/streams-app.ts" : "dist/load-tests/servers/streams.js";

export async function replayGarbage(context: Context): Promise<Verdict> {
  const cluster = await startCluster({ cwd: context.root, entry: ENTRY, workers: 2, tsx: FROM_SOURCE, pinCpu: context.pinning.server });
  try {
    const result = await replayAttack({
      port: cluster.port, primaryPid: cluster.pid, room: "garbage", fill: FILL, garbageClients: GARBAGE, staleClients: STALE, timeoutMs: 60_000,
    });
    const growth = result.rssPeakMiB - result.rssBeforeMiB;
    const replaced = result.workersAfter.join(",") !== result.workersBefore.join(",");
    const ms = (t: typeof result.health) => `${t.p50.toFixed(1)} / ${t.p99.toFixed(1)} / ${t.max.toFixed(1)} ms (${t.count}, ${t.failed} failed)`;
    table(["primary RSS before", "peak", "/health p50/p99/max, attack", "same, before it", "garbage clean", "stale clean", "live once", "workers replaced"], [[
      `${result.rssBeforeMiB.toFixed(0)} MiB`, `${result.rssPeakMiB.toFixed(0)} MiB`, ms(result.health), ms(result.baseline),
      `${result.garbageClean}/${GARBAGE}`, `${result.staleClean}/${STALE}`, `${result.gotLive}/${GARBAGE + STALE}`, replaced ? "yes" : "no",
    ]]);
    const stopped = await cluster.stop();
    const pass = growth < 100 && result.health.failed === 0 && result.health.p99 < 100 && !replaced
      && result.garbageClean === GARBAGE && result.staleClean === STALE && result.gotLive === GARBAGE + STALE && stopped.code === 0;
    return verdict(NAME, pass, `${GARBAGE} garbage and ${STALE} stale Last-Event-IDs against ${FILL.count} events of ${FILL.bytes} B: primary RSS +${growth.toFixed(0)} MiB (bound 100), /health p99 ${result.health.p99.toFixed(1)} ms (bound 100; ${result.baseline.p99.toFixed(1)} ms before the attack), ${result.health.failed} failed of ${result.health.count}, workers ${replaced ? "REPLACED" : "kept"}, exit ${stopped.code}`);
  } finally {
    await cluster.stop().catch(() => undefined);
  }
}
