import type { ToolVerb } from "./verbs.js";

const TOOLS: readonly ToolVerb[] = ["client", "new", "bundle", "ls"];

export function isToolVerb(word: string | undefined): word is ToolVerb {
  return TOOLS.includes(word as ToolVerb);
}

/**
 * The `keelson` commands that run once and exit, as opposed to `start`; loaded on demand so that
 * `keelson start` never loads the document builder. Resolves to the exit code.
 */
export async function runTool(command: ToolVerb, argv: readonly string[]): Promise<number> {
  if (command === "client") return (await import("./client-command.js")).runClientCommand(argv);
  if (command === "bundle") return (await import("./bundle-command.js")).runBundleCommand(argv);
  if (command === "ls") return (await import("./ls-command.js")).runLsCommand(argv);
  return (await import("./new-command.js")).runNewCommand(argv);
}
