import { prepareRuntime, type RuntimeSetup } from "./runtime.js";
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
 * `keelson <verb> …`, dispatched from the one table of verbs (verbs.ts): `keelson --help` lists
 * them, `keelson <verb> --help` prints that verb's usage alone, and each verb loads only what it runs.
 */
const { asksForHelp, findVerb, globalUsage, unknownCommand } = await import("./verbs.js");
const [word, ...rest] = process.argv.slice(2);
const verb = findVerb(word);
if (word === undefined || word === "--help" || word === "-h") {
  process.stdout.write(`${globalUsage()}\n`);
} else if (verb === undefined) {
  process.stderr.write(`keelson: ${unknownCommand(word)}\nRun "keelson --help" for usage.\n`);
  process.exitCode = 2;
} else {
  const module = await verb.load();
  if (asksForHelp(rest)) {
    process.stdout.write(`${module.usage}\n`);
  } else {
    const code = await module.run(rest, { env: process.env, warnings: runtime.warnings });
    if (verb.exits) process.exit(code ?? 0);
    if (code !== undefined) process.exitCode = code;
  }
}
