import { errorMessage } from "./errors.js";
import type { HealthChecker } from "./integrations.js";

/** The body of GET /health. */
export interface HealthReport {
  status: "UP" | "DOWN";
  service: string;
  version: string;
  /** Checker name → `"UP"` or `"DOWN: <message>"`; `{}` when no checker is registered. */
  checks: Record<string, string>;
}


/** Runs one checker under its own timeout; never throws, never hangs past `timeoutMs`. */
async function runChecker(checker: HealthChecker, timeoutMs: number): Promise<string> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<string>((resolve) => {
    timer = setTimeout(() => {
      controller.abort(new Error(`timed out after ${timeoutMs}ms`));
      resolve(`DOWN: timed out after ${timeoutMs}ms`);
    }, timeoutMs);
  });
  const run = (async () => {
    await checker.check(controller.signal);
    return "UP";
  })().catch((error: unknown) => `DOWN: ${errorMessage(error)}`);
  try {
    return await Promise.race([run, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs every checker in parallel and builds the report. `forceDown` (set while the App is
 * shutting down) reports DOWN whatever the checkers say, so load balancers stop sending traffic.
 */
export async function checkHealth(
  checkers: readonly HealthChecker[],
  info: { service: string; version: string; timeoutMs: number; forceDown?: boolean },
): Promise<HealthReport> {
  const results = await Promise.all(checkers.map((c) => runChecker(c, info.timeoutMs)));
  const checks: Record<string, string> = {};
  let up = !info.forceDown;
  checkers.forEach((checker, i) => {
    const result = results[i]!;
    checks[checker.name] = result;
    if (result !== "UP") up = false;
  });
  return { status: up ? "UP" : "DOWN", service: info.service, version: info.version, checks };
}
