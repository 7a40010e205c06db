import { prepareRuntime, type RuntimeSetup } from "./runtime.js";

// Before the rest is loaded: the compile cache then covers the supervisor's own modules, and `.env`
// is in process.env before any option is read.
let runtime: RuntimeSetup | undefined;
try {
  runtime = prepareRuntime();
} catch (error) {
  process.stderr.write(`keelson: ${(error as Error).message}\n`);
  process.exit(2);
}
const { parseCli } = await import("./args.js");
const { runControlCommand } = await import("./control-command.js");
const { runDev } = await import("./dev.js");
const { Supervisor } = await import("../supervisor/primary.js");
const { runTool, isToolVerb } = await import("./tools.js");

/**
 * `keelson start <entry> [--workers N] [--port N] …`: runs the supervisor in this process and
 * exits with its code (0 after a clean stop, 1 after a crash loop or an unclean stop, 2 on a
 * usage error). `keelson status` and `keelson reload` talk to a running one over its control socket.
 */
// One-shot tools (client, new, bundle, ls) exit when done: a user module they load may hold handles open.
const tool = process.argv[2];
if (isToolVerb(tool)) process.exit(await runTool(tool, process.argv.slice(3)));
const cli = parseCli(process.argv.slice(2));
if (cli.command === "help") {
  process.stdout.write(cli.usage + "\n");
} else if (cli.command === "error") {
  process.stderr.write(`keelson: ${cli.message}\nRun "keelson --help" for usage.\n`);
  process.exitCode = 2;
} else if (cli.command === "control") {
  process.exitCode = await runControlCommand(cli.control);
} else if (cli.command === "dev") {
  await runDev(cli.dev).catch((error: unknown) => {
    process.stderr.write(`keelson: ${(error as Error).message}\n`);
    process.exitCode = 2;
  });
} else {
  let supervisor: InstanceType<typeof Supervisor> | undefined;
  try {
    supervisor = new Supervisor(cli.options);
    for (const warning of runtime.warnings) supervisor.logger.warn("%s", warning);
  } catch (error) {
    process.stderr.write(`keelson: ${(error as Error).message}\n`);
    process.exitCode = 2;
  }
  // A start that fails because the supervisor stopped (crash loop, signal) exits through `finished`.
  supervisor?.start().catch((error: unknown) => {
    if (!supervisor?.stopping) supervisor?.logger.error("supervisor failed to start: %s", (error as Error).message);
  });
}
