import type { IpcMessageType } from "../cluster/ipc.js";
import type { FeatureHost, SupervisedWorker } from "../cluster/feature-host.js";
import { metricsHello } from "./ipc.js";
import type { MetricsListener } from "./listener.js";
import type { ClusterMetrics } from "./primary.js";
import type { MetricsPortSettings, MetricsPortState } from "./port-settings.js";
import { errorMessage } from "../errors.js";

/** What the metrics port needs from the primary; it closes once `finished` settles. */
export interface MetricsPortHost extends Pick<FeatureHost, "logger" | "stopping" | "finished" | "fail"> {
  /** Shows where the metrics are served in `keelson status` (FeatureHost has it; a test host may not). */
  addStatus?: FeatureHost["addStatus"];
  onMessage<P>(type: IpcMessageType<P>, listener: (payload: P, worker: SupervisedWorker) => void): unknown;
}

/**
 * The primary's metrics port: one scrape target per pod that answers for every worker, off the
 * service port. It opens when the first worker says it has metrics (`metrics:hello`), so a
 * primary whose App has none opens no port and loads neither prom-client nor node:http. Each scrape waits
 * at most the workers' `clusterTimeoutMs` for each worker (in parallel); a blocked or dead one
 * counts with its last numbers and `keelson_worker_up 0`. A port that was asked for (option, flag,
 * variable) and cannot be opened stops the supervisor with exit 1: a scrape target that never
 * answers is a deployment error. The default port (9464) taken, by a second service on the same
 * host, is not: the metrics are served on a free port instead, said in a warning and in
 * `keelson status` (its `metrics` section).
 */
export function serveMetricsPort(host: MetricsPortHost, metrics: ClusterMetrics, settings: MetricsPortSettings): void {
  const { metricsPort: port, metricsHost } = settings;
  if (port === false) return;
  const state: MetricsPortState = { url: undefined, note: undefined };
  let timeoutMs = 2000;
  let opening: Promise<MetricsListener | undefined> | undefined;
  // Scrapes that arrive while one is being merged share its answer: N scrapers never ask every
  // worker N times at once.
  let merging: Promise<string> | undefined;
  const read = () => (merging ??= metrics.readExposition(timeoutMs).then(({ text }) => text).finally(() => (merging = undefined)));
  let stopped = false;
  const open = async (): Promise<MetricsListener | undefined> => {
    try {
      // Loaded here, not at the top: node:http adds noticeably to a process's memory, and a
      // primary whose App has no metrics (or whose port is off) should not carry it.
      const { openMetricsListener } = await import("./listener.js");
      const onError = (error: unknown) => host.logger.logError("metrics: merging the workers' metrics failed: %s", errorMessage(error));
      let listener: MetricsListener;
      try {
        listener = await openMetricsListener({ port, host: metricsHost, read, onError });
      } catch (error) {
        if (!settings.metricsPortIsDefault || ((error as Error).cause as NodeJS.ErrnoException | undefined)?.code !== "EADDRINUSE") throw error;
        listener = await openMetricsListener({ port: 0, host: metricsHost, read, onError });
        state.note = `the default port ${port} is taken (another service on this host?): set --metrics-port (KEELSON_METRICS_PORT) to choose one`;
      }
      state.url = listener.url;
      if (stopped) await listener.close();
      else if (state.note === undefined) host.logger.info("cluster-wide metrics on %s", listener.url);
      else host.logger.warn("cluster-wide metrics on %s: %s", listener.url, state.note);
      return listener;
    } catch (error) {
      host.fail(`${errorMessage(error)}; set --metrics-port (KEELSON_METRICS_PORT) to a free port, or off`);
      return undefined;
    }
  };
  host.onMessage(metricsHello, (hello) => {
    if (Number.isFinite(hello.timeoutMs) && hello.timeoutMs > 0) timeoutMs = hello.timeoutMs;
    if (!host.stopping) opening ??= open();
  });
  void host.finished.then(async () => {
    stopped = true;
    await (await opening)?.close();
  });
  host.addStatus?.("metrics", () => (opening === undefined ? undefined : { ...state }));
}
