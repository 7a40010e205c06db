/**
 * keelson/supervisor: the node:cluster primary that runs N worker Apps behind one port.
 * Library: `startSupervisor(options)` or `new Supervisor(options).start()`. CLI: `keelson start`.
 */
export { Supervisor, startSupervisor, type StopReport } from "./primary.js";
export type { BackoffOptions, CrashLoopOptions, ResolvedSupervisorOptions, SupervisorOptions } from "./options.js";
export type { ReloadReport } from "./reload.js";
export type { StatusReport, WorkerStatus } from "./status.js";
export type { SupervisedWorker, WorkerChannel, WorkerExit, WorkerState } from "./worker-handle.js";
