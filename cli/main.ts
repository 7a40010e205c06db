import { prepareRuntime, type RuntimeSetup } from "./runtime.js";
import type { SupervisorOptions } from "../supervisor/options.js";
import { errorMessage } from "../src/errors.js";

// Before the rest is loaded: the compile cache then covers the supervisor's own modules, and `.env`
// is in process.env before any option is read.
let runtime: RuntimeSetup;
try {
  runtime = prepareRuntime();
} catch (error) {
  process.stderr.write(`keelson: ${errorMessage(error)}\n`);
  process.exit(2);
}

/**
 * `keelson start <entry> [--workers N] [--port N] …`: runs the supervisor in this process and
 * exits with its code (0 after a clean stop, 1 after a crash loop or an unclean stop, 2 on a
 * usage error). `keelson status` and `keelson reload` talk to a running one over its control socket.
 * Each command loads only what it runs.
 */
// One-shot tools (client, new, bundle, ls) exit when done: a user module they load may hold handles open.
const { isToolVerb, runTool } = await import("./tools.js");
const tool = process.argv[2];
if (isToolVerb(tool)) process.exit(await runTool(tool, process.argv.slice(3)));
const { parseCli } = await import("./args.js");
const cli = parseCli(process.argv.slice(2));
if (cli.command === "help") {
  process.stdout.write(cli.usage + "\n");
} else if (cli.command === "error") {
  process.stderr.write(`keelson: ${cli.message}\nRun "keelson --help" for usage.\n`);
  process.exitCode = 2;
} else if (cli.command === "control") {
  const { runControlCommand } = await import("./control-command.js");
  process.exitCode = await runControlCommand(cli.control);
} else if (cli.command === "dev") {
  const { runDev } = await import("./dev.js");
  await runDev(cli.dev).catch((error: unknown) => {
    process.stderr.write(`keelson: ${errorMessage(error)}\n`);
    process.exitCode = 2;
  });
} else {
  await start(cli.options);
}

/**
 * The workers are forked as soon as the options are known to be valid, before the supervisor's
 * modules load: a worker's start is the longer part, and it runs meanwhile (supervisor/prefork.ts).
 */
async function start(options: SupervisorOptions): Promise<void> {
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
    for (const warning of runtime.warnings) supervisor.logger.warn("%s", warning);
  } catch (error) {
    release();
    early?.discard();
    process.stderr.write(`keelson: ${errorMessage(error)}\n`);
    process.exitCode = 2;
    return;
  }
  // A start that fails because the supervisor stopped (crash loop, signal) exits through `finished`.
  supervisor.start().catch((error: unknown) => {
    if (!supervisor.stopping) supervisor.logger.error("supervisor failed to start: %s", errorMessage(error));
  });
  release();
  if (stopSignal !== undefined) void supervisor.stop(stopSignal);
}

function ignoreSignal(): void {}
