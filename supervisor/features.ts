import type { FeatureHost } from "../src/cluster/feature-host.js";
import { installIdempotency } from "../src/idempotency/primary.js";
import { installJobs } from "../src/jobs/primary.js";
import { serveMetricsPort } from "../src/metrics/metrics-port.js";
import { installClusterMetrics } from "../src/metrics/primary.js";
import { installRateLimits } from "../src/rate-limit/primary.js";
import { installStreams } from "../src/streams/primary.js";
import type { ResolvedSupervisorOptions } from "./options.js";

/**
 * Installs one cluster feature's primary side: it subscribes to workers and IPC types through
 * `host` (never the supervisor's internals) and may read the supervisor's options.
 */
export type FeatureInstaller = (host: FeatureHost, options: ResolvedSupervisorOptions) => void;

/**
 * The cluster features the primary installs, in this order, when it is constructed. A new
 * feature keeps its primary side in its own folder under `src/` and adds its installer here:
 * no other supervisor file changes.
 */
export const FEATURES: readonly FeatureInstaller[] = [
  (host) => installJobs(host),
  (host, options) => serveMetricsPort(host, installClusterMetrics(host), options),
  (host) => installRateLimits(host),
  (host) => installStreams(host),
  (host) => installIdempotency(host),
];
