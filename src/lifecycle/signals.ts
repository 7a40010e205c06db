import { flushAllLoggers } from "../logging/logger.js";
import type { Lifecycle } from "./lifecycle.js";

/**
 * The process side of the lifecycle: the one SIGINT/SIGTERM handler of the process. The first
 * signal shuts down every listening App (each with its own budget), flushes the logs and exits
 * 0 when all shut down cleanly, else 1. Later signals change nothing. A shutdown that stalls
 * past its deadline anyway (the orderly path never should) is cut short by a last-resort timer.
 */

const SIGNALS = ["SIGINT", "SIGTERM"] as const;
// How long after the largest budget the last-resort exit fires; the orderly path ends long before.
const FORCE_EXIT_GRACE_MS = 150;

const listening = new Set<Lifecycle>();
let exiting = false;

function exit(code: number): never {
  flushAllLoggers();
  process.exit(code);
}

function onSignal(signal: NodeJS.Signals): void {
  const lifecycles = Array.from(listening);
  if (exiting) {
    for (const lifecycle of lifecycles) lifecycle.logger.info("received %s while shutting down: nothing more to do", signal);
    return;
  }
  exiting = true;
  const budget = Math.max(0, ...lifecycles.map((lifecycle) => lifecycle.budget));
  setTimeout(() => {
    for (const lifecycle of lifecycles) {
      lifecycle.logger.logError("shutdown still running %dms after its %dms budget: forcing exit", FORCE_EXIT_GRACE_MS, budget);
    }
    exit(1);
  }, budget + FORCE_EXIT_GRACE_MS).unref();
  Promise.all(lifecycles.map((lifecycle) => lifecycle.shutdown(signal))).then(
    (reports) => exit(reports.every((report) => report.clean) ? 0 : 1),
    (error: unknown) => {
      for (const lifecycle of lifecycles) lifecycle.logger.logError("shutdown failed: %s", String(error));
      exit(1);
    },
  );
}

/**
 * Makes SIGINT/SIGTERM shut `lifecycle` down and then exit the process. Returns the undo,
 * called once the App has shut down by other means (`close()`) or failed to start.
 */
export function handleSignals(lifecycle: Lifecycle): () => void {
  if (listening.size === 0) for (const signal of SIGNALS) process.on(signal, onSignal);
  listening.add(lifecycle);
  return () => {
    if (!listening.delete(lifecycle) || listening.size > 0 || exiting) return;
    for (const signal of SIGNALS) process.off(signal, onSignal);
  };
}
