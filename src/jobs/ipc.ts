import { defineIpcMessage, defineIpcRequest } from "../cluster/ipc.js";
import type { JobSpec } from "./define.js";

/**
 * The jobs integration's IPC message types: the primary (jobs/primary.ts) runs the clock of
 * every `runOn: "one"` job and hands each tick to one ready worker.
 */

/** Worker → primary, as its App starts: the `runOn: "one"` jobs it can run. */
export const jobsRegister = defineIpcMessage<{ jobs: JobSpec[] }>("jobs:register");

/** Primary → worker: run this tick (`scheduledAt` in epoch ms). A job's store knows the worker itself as the tick's owner. */
export const jobsRun = defineIpcMessage<{ job: string; scheduledAt: number }>("jobs:run");

/**
 * Worker → primary: the run of a tick ended (whatever its outcome: the tick counts as run), or
 * `refused` when the worker had stopped its jobs already (the tick goes to another worker). A
 * request, not a message: the worker waits for the answer, so a worker that exits right after
 * its last run has delivered the report first.
 */
export const jobsDone = defineIpcRequest<{ job: string; scheduledAt: number; refused: boolean }, Record<string, never>>("jobs:done");

/**
 * Primary → worker: a tick was given up after its runs crashed their workers; the worker counts
 * it in its job metrics (`keelson_job_runs_total{outcome="failure"}`), which the primary merges.
 */
export const jobsCrashed = defineIpcMessage<{ job: string; scheduledAt: number }>("jobs:crashed");
