// Shapes shared between the harness, its load-generator child and the report.

export interface RequestSpec {
  method: "GET" | "POST";
  path: string;
  body?: string;
  /** Extra request headers (e.g. `origin`: a browser's request, which makes CORS do its work). */
  headers?: Record<string, string>;
}

export interface Scenario extends RequestSpec {
  name: string;
}

/** One autocannon run, sent to the load-generator child over IPC. */
export interface LoadJob {
  origin: string;
  requests: RequestSpec[];
  durationSec: number;
  connections: number;
  pipelining: number;
  /** Diff the server's GET /__cpu around the run (outside the measured window). */
  measureCpu: boolean;
}

export interface LoadResult {
  requests: number;
  reqPerSec: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  /** Server user+system CPU seconds spent during the window, when measured. */
  cpuSec: number | null;
  /** Length of the measured window as autocannon timed it. */
  durationSec: number;
  /** Requests autocannon wrote (answered, lost, or still in flight when the run stopped). */
  sent: number;
  /** `errors` by cause: the socket error code (ECONNRESET, ECONNREFUSED, …) or `timeout`. */
  errorCodes: Record<string, number>;
}

/** A job to run, or a request to end the running job `id` early (it still replies with its result). */
export type LoaderRequest = { id: number; job: LoadJob } | { id: number; stop: true };
export type LoaderReply =
  | { id: number; ok: true; result: LoadResult }
  | { id: number; ok: false; error: string };

/** One (target, scenario, round) measurement. */
export interface RunRecord extends LoadResult {
  target: string;
  scenario: string;
  round: number;
  reqPerCpuSec: number | null;
  ratioVsH3: number | null;
  /** The speed probe's reading right before and right after the window (side by side only). */
  speedBefore?: number;
  speedAfter?: number;
}

export interface TargetInfo {
  target: string;
  idleRssMb: number | null;
  coldStartMs: number | null;
  coldStartsMs: number[];
  /** The same server bundled into one file (only for BUNDLED_TARGETS; null otherwise). */
  bundledColdStartMs: number | null;
  bundledColdStartsMs: number[];
  /** Idle RSS of the bundled server, measured like `idleRssMb` (only for BUNDLED_TARGETS). */
  bundledIdleRssMb: number | null;
  bundledRssSamplesMb: number[];
  rssSamplesMb: number[];
  skipped: string | null;
  warnings: string[];
  /** Per round, what the server emitted against its responses (load-tests/lib/work.ts), once they matched. */
  workCounts: string[];
}

export interface MachineInfo {
  cpuModel: string;
  cores: number;
  node: string;
  platform: string;
  kernel: string;
  pinned: boolean;
  pinningNote: string;
  /** 1-minute load average before the run: other work on the box skews every number. */
  loadAvgBefore: number;
  loadAvgAfter: number | null;
}

export interface SummaryRow {
  target: string;
  scenario: string;
  rounds: number;
  reqPerSec: number;
  p50Ms: number;
  p99Ms: number;
  reqPerCpuSec: number | null;
  /** Server CPU seconds / window seconds: near 100 means the server, not the client, was the limit. */
  serverCpuPct: number | null;
  ratioVsH3: number | null;
  non2xx: number;
  errors: number;
}
