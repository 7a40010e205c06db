/**
 * The `keelson` commands that run once and exit, as opposed to `start`; loaded on demand so that
 * `keelson start` never loads the document builder. Resolves to the exit code.
 */
export async function runTool(command: "client" | "new" | "bundle", argv: readonly string[]): Promise<number> {
  if (command === "client") return (await import("./client-command.js")).runClientCommand(argv);
  if (command === "bundle") return (await import("./bundle-command.js")).runBundleCommand(argv);
  return (await import("./new-command.js")).runNewCommand(argv);
}
