/**
 * Loaded into every worker (`--import`) before its entry: an error that kills the worker before
 * keelson runs any code of its own (a syntax error, a missing import, a throw at the entry's top
 * level) is reported to the primary, which then names it instead of only an exit code. A
 * monitor, not a handler: the worker still dies exactly as Node would make it.
 */
import { reportWorkerFailure } from "../src/cluster/worker-failure.js";

process.on("uncaughtExceptionMonitor", (error) => {
  // With a handler of the application's own, the worker may well live on: not its last words.
  if (process.listenerCount("uncaughtException") === 0) reportWorkerFailure(error);
});
