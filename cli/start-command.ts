import { parseStart, START_USAGE } from "./args.js";
import type { SupervisorOptions } from "../supervisor/options.js";
import type { VerbContext } from "./verb.js";
import { errorMessage } from "../src/errors.js";

export { START_USAGE };

/**
 * `keelson start <entry> [--workers N] [--port N] …`: runs the supervisor in this process, which
 * exits with its code (0 after a clean stop, 1 after a crash loop or an unclean stop); resolves
 * to 2 on a usage error, else to undefined once the supervisor runs.
 *
 * @example
 * await runStart(["dist/main.js", "--workers", "2"], { env: process.env, warnings: [] });
 */
export async function runStart(argv: readonly string[], context: VerbContext): Promise<number | undefined> {
  const cli = parseStart(argv, context.env);
  if (cli.command === "error") {
    process.stderr.write(`keelson: ${cli.message}\nRun "keelson start --help" for usage.\n`);
    return 2;
  }
  return start(cli.options, context.warnings);
}

/**
 * The workers are forked as soon as the options are known to be valid, before the supervisor's
 * modules load: a worker's start is the longer part, and it runs meanwhile (supervisor/prefork.ts).
 */
async function start(options: SupervisorOptions, warnings: readonly string[]): Promise<number | undefined> {
  const { resolveOptions } = await import("../supervisor/options.js");
  // From the fork until the supervisor has its own handlers: a SIGINT or SIGTERM is kept and handed
  // to it (the workers then stop as they would a moment later), a SIGHUP ignored (they run the
  // current code already); node's default would kill this process and leave the workers to notice.
  let stopSignal: NodeJS.Signals | undefined;
  const keep = (signal: NodeJS.Signals): void => void (stopSignal ??= signal);
  const release = (): void => {
    process.off("SIGINT", keep).off("SIGTERM", keep).off("SIGHUP", ignoreSignal);
  };
  process.on("SIGINT", keep).on("SIGTERM", keep).on("SIGHUP", ignoreSignal);
  let early: import("../supervisor/prefork.js").PreforkedWorkers | undefined;
  let supervisor: import("../supervisor/primary.js").Supervisor | undefined;
  try {
    const resolved = resolveOptions(options);
    // reuseport: the workers bind the port themselves, so it is checked (and 0 resolved) before they
    // are forked. A port that is taken is left to the supervisor, which refuses it in its own lines.
    const probed = resolved.balancer === "reuseport" && resolved.port !== undefined
      ? await (await import("../supervisor/balancer.js")).probePort(resolved.port).catch(() => undefined) : undefined;
    if (resolved.balancer !== "reuseport" || probed !== undefined) {
      if (probed !== undefined) resolved.port = probed;
      early = (await import("../supervisor/prefork.js")).preforkWorkers(resolved);
    }
    const { Supervisor } = await import("../supervisor/primary.js");
    supervisor = new Supervisor(resolved, {
      ...(early === undefined ? {} : { fork: early.fork }),
      ...(probed === undefined ? {} : { probePort: () => Promise.resolve(probed) }),
    });
    for (const warning of warnings) supervisor.logger.warn("%s", warning);
  } catch (error) {
    release();
    early?.discard();
    process.stderr.write(`keelson: ${errorMessage(error)}\n`);
    return 2;
  }
  // A start that fails because the supervisor stopped (crash loop, signal) exits through `finished`.
  supervisor.start().catch((error: unknown) => {
    if (!supervisor.stopping) supervisor.logger.error("supervisor failed to start: %s", errorMessage(error));
  });
  release();
  (await import("./parent-watch.js")).stopWithParent(supervisor);
  if (stopSignal !== undefined) void supervisor.stop(stopSignal);
  return undefined;
}

function ignoreSignal(): void {}
