/**
 * The `keelson` commands that run once and exit, as opposed to `start`; loaded on demand so that
 * `keelson start` never loads the document builder. Resolves to the exit code.
 */
export async function runTool(command: "client" | "new", argv: readonly string[]): Promise<number> {
  if (command === "client") return (await import("./client-command.js")).runClientCommand(argv);
  return (await import("./new-command.js")).runNewCommand(argv);
}
