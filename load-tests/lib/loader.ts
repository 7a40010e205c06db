// The load generator: runs as its own process (pinned to the CPU the server is not on)
// and executes autocannon jobs sent by the harness over IPC, one at a time.
import autocannon, { type Instance, type Result } from "autocannon";
import { needsIds } from "./args.js";
import { cpuUsage } from "./http.js";
import type { LoadJob, LoaderReply, LoaderRequest, LoadResult } from "./types.js";

/** Running instances by job id, so a `stop` message can end one early. */
const running = new Map<number, Instance>();

function runAutocannon(id: number, job: LoadJob, errorCodes: Record<string, number>): Promise<Result> {
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: job.origin,
        connections: job.connections,
        pipelining: job.pipelining,
        duration: job.durationSec,
        timeout: 10,
        idReplacement: needsIds(job.requests),
        requests: job.requests.map((spec) => ({
          method: spec.method,
          path: spec.path,
          ...(spec.body === undefined ? {} : { body: spec.body }),
          headers: { ...(spec.body === undefined ? {} : { "content-type": "application/json" }), ...spec.headers },
        })),
      },
      (error, result) => {
        clearTimeout(guard);
        running.delete(id);
        if (error) reject(error);
        else resolve(result);
      },
    );
    running.set(id, instance);
    // autocannon emits reqError once per pipelined slot of the failed connection; the counts are
    // divided by the pipelining factor afterwards, so they add up to `errors`. Only failures pay this.
    instance.on("reqError", (error: NodeJS.ErrnoException) => {
      const code = error.code ?? (/timed out/.test(error.message) ? "timeout" : error.message);
      errorCodes[code] = (errorCodes[code] ?? 0) + 1;
    });
    // autocannon ends on its own after `duration`; this only catches a wedged run.
    const guard = setTimeout(() => instance.stop(), (job.durationSec + 15) * 1_000);
  });
}

async function execute(id: number, job: LoadJob): Promise<LoadResult> {
  // The CPU probes sit outside the window on purpose: the window is autocannon's run.
  const before = job.measureCpu ? await cpuUsage(job.origin) : null;
  const slots: Record<string, number> = {};
  const result = await runAutocannon(id, job, slots);
  const after = job.measureCpu ? await cpuUsage(job.origin) : null;
  const cpuSec =
    before && after ? (after.user - before.user + (after.system - before.system)) / 1e6 : null;
  return {
    requests: result.requests.total,
    reqPerSec: result.requests.average,
    p50Ms: result.latency.p50,
    p90Ms: result.latency.p90,
    p99Ms: result.latency.p99,
    maxMs: result.latency.max,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    cpuSec,
    durationSec: result.duration,
    sent: result.requests.sent,
    errorCodes: Object.fromEntries(Object.entries(slots).map(([code, n]) => [code, Math.round(n / job.pipelining)])),
  };
}

function reply(message: LoaderReply): void {
  process.send?.(message);
}

if (!process.send) {
  console.error("loader.ts is started by bench.ts over IPC; it cannot run on its own");
  process.exit(2);
}

process.on("message", (raw: LoaderRequest) => {
  if ("stop" in raw) {
    running.get(raw.id)?.stop();
    return;
  }
  execute(raw.id, raw.job).then(
    (result) => reply({ id: raw.id, ok: true, result }),
    (error: unknown) => reply({ id: raw.id, ok: false, error: error instanceof Error ? error.message : String(error) }),
  );
});
// Exit with the harness: a dead parent closes the IPC channel.
process.on("disconnect", () => process.exit(0));
