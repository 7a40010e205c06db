/**
 * Every verb of the `keelson` command, once: the usage text's command list, the unknown-command
 * message and the dispatch in main.ts are all read from this table, so a new verb cannot be
 * missing from one of them.
 */
export const VERBS = [
  { name: "start", args: "<entry> [options]", summary: "run <entry> in N workers behind one port" },
  { name: "dev", args: "<entry.ts> [options]", summary: "start, plus a rolling reload on every save" },
  { name: "ls", args: "[--json]", summary: "every supervisor of this user: folder, entry, port, workers, uptime, socket" },
  { name: "status", args: "[pid|port|folder] [options]", summary: "workers, memory, load of one running supervisor" },
  { name: "reload", args: "[pid|port|folder] [options]", summary: "a rolling reload of one running supervisor" },
  { name: "client", args: "<entry> [--out DIR]", summary: "OpenAPI document + types for openapi-fetch" },
  { name: "new", args: "<dir>", summary: "a new project" },
  { name: "bundle", args: "<entry> [--out DIR]", summary: "the service and this CLI bundled for production" },
] as const;

export type Verb = (typeof VERBS)[number]["name"];

/** Verbs that run once and exit, loaded on demand (see tools.ts). */
export type ToolVerb = "client" | "new" | "bundle" | "ls";

export function isVerb(word: string | undefined): word is Verb {
  return VERBS.some((verb) => verb.name === word);
}

/** The `Commands:` block of `keelson --help`. */
export function commandList(): string {
  const width = Math.max(...VERBS.map((verb) => `keelson ${verb.name} ${verb.args}`.length));
  return VERBS.map((verb) => `  ${`keelson ${verb.name} ${verb.args}`.padEnd(width)}  ${verb.summary} (keelson ${verb.name} --help)`).join("\n");
}

/** `unknown command "run" (expected one of: start, dev, …)`. */
export function unknownCommand(word: string): string {
  return `unknown command "${word}" (expected one of: ${VERBS.map((verb) => verb.name).join(", ")})`;
}
