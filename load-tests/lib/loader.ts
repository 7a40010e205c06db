// The load generator: runs as its own process (pinned to the CPU the server is not on)
// and executes autocannon jobs sent by the harness over IPC, one at a time.
import autocannon, { type Result } from "autocannon";
import { cpuUsage } from "./http.js";
import type { LoadJob, LoaderReply, LoaderRequest, LoadResult } from "./types.js";

function runAutocannon(job: LoadJob): Promise<Result> {
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: job.origin,
        connections: job.connections,
        pipelining: job.pipelining,
        duration: job.durationSec,
        timeout: 10,
        requests: job.requests.map((spec) => ({
          method: spec.method,
          path: spec.path,
          ...(spec.body === undefined ? {} : { body: spec.body, headers: { "content-type": "application/json" } }),
        })),
      },
      (error, result) => {
        clearTimeout(guard);
        if (error) reject(error);
        else resolve(result);
      },
    );
    // autocannon ends on its own after `duration`; this only catches a wedged run.
    const guard = setTimeout(() => instance.stop(), (job.durationSec + 15) * 1_000);
  });
}

async function execute(job: LoadJob): Promise<LoadResult> {
  // The CPU probes sit outside the window on purpose: the window is autocannon's run.
  const before = job.measureCpu ? await cpuUsage(job.origin) : null;
  const result = await runAutocannon(job);
  const after = job.measureCpu ? await cpuUsage(job.origin) : null;
  const cpuSec =
    before && after ? (after.user - before.user + (after.system - before.system)) / 1e6 : null;
  return {
    requests: result.requests.total,
    reqPerSec: result.requests.average,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    cpuSec,
    durationSec: result.duration,
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
  execute(raw.job).then(
    (result) => reply({ id: raw.id, ok: true, result }),
    (error: unknown) => reply({ id: raw.id, ok: false, error: error instanceof Error ? error.message : String(error) }),
  );
});
// Exit with the harness: a dead parent closes the IPC channel.
process.on("disconnect", () => process.exit(0));
