import type { VerbModule } from "./verb.js";

export type { VerbContext, VerbModule } from "./verb.js";

/** One row of {@link VERBS}. */
export interface VerbEntry {
  name: string;
  /** The arguments shown in `keelson --help`'s command list. */
  args: string;
  summary: string;
  /**
   * True for the one-shot tools (client, new, bundle, ls): the process exits with their code
   * at once, since a user module they load may hold handles open.
   */
  exits: boolean;
  load(): Promise<VerbModule>;
}

/**
 * Every verb of the `keelson` command, once: the dispatch in main.ts, `keelson --help`'s command
 * list, each `keelson <verb> --help` and the unknown-command message are all read from this table,
 * so a new verb cannot be missing from one of them. Each module loads on demand: `keelson start`
 * never loads the document builder.
 *
 * @example
 * const verb = findVerb("status");
 * process.stdout.write((await verb!.load()).usage);
 */
export const VERBS: readonly VerbEntry[] = [
  {
    name: "start", args: "<entry> [options]", summary: "run <entry> in N workers behind one port", exits: false,
    load: async () => {
      const { START_USAGE, runStart } = await import("./start-command.js");
      return { usage: START_USAGE, run: runStart };
    },
  },
  {
    name: "dev", args: "<entry.ts> [options]", summary: "start, plus a rolling reload on every save", exits: false,
    load: async () => {
      const { DEV_USAGE, runDevVerb } = await import("./dev.js");
      return { usage: DEV_USAGE, run: runDevVerb };
    },
  },
  {
    name: "ls", args: "[--json]", summary: "every supervisor of this user: folder, entry, port, workers, uptime, socket", exits: true,
    load: async () => {
      const { LS_USAGE, runLsCommand } = await import("./ls-command.js");
      return { usage: LS_USAGE, run: runLsCommand };
    },
  },
  {
    name: "status", args: "[pid|port|folder] [options]", summary: "workers, memory, load of one running supervisor", exits: false,
    load: async () => {
      const { CONTROL_USAGE, runControlVerb } = await import("./control-command.js");
      return { usage: CONTROL_USAGE.status, run: (argv, { env }) => runControlVerb("status", argv, env) };
    },
  },
  {
    name: "reload", args: "[pid|port|folder] [options]", summary: "a rolling reload of one running supervisor", exits: false,
    load: async () => {
      const { CONTROL_USAGE, runControlVerb } = await import("./control-command.js");
      return { usage: CONTROL_USAGE.reload, run: (argv, { env }) => runControlVerb("reload", argv, env) };
    },
  },
  {
    name: "client", args: "<entry> [--out DIR]", summary: "OpenAPI document + types for openapi-fetch", exits: true,
    load: async () => {
      const { CLIENT_USAGE, runClientCommand } = await import("./client-command.js");
      return { usage: CLIENT_USAGE, run: runClientCommand };
    },
  },
  {
    name: "new", args: "<dir>", summary: "a new project", exits: true,
    load: async () => {
      const { NEW_USAGE, runNewCommand } = await import("./new-command.js");
      return { usage: NEW_USAGE, run: runNewCommand };
    },
  },
  {
    name: "bundle", args: "<entry> [--out DIR]", summary: "the service and this CLI bundled for production", exits: true,
    load: async () => {
      const { BUNDLE_USAGE, runBundleCommand } = await import("./bundle-command.js");
      return { usage: BUNDLE_USAGE, run: runBundleCommand };
    },
  },
];

/** The row of `word`, if it is a verb. */
export function findVerb(word: string | undefined): VerbEntry | undefined {
  return VERBS.find((verb) => verb.name === word);
}

/** True when `--help` or `-h` comes before `--` (after it, the words belong to the entry). */
export function asksForHelp(argv: readonly string[]): boolean {
  const separator = argv.indexOf("--");
  const own = separator === -1 ? argv : argv.slice(0, separator);
  return own.includes("--help") || own.includes("-h");
}

/** `keelson --help`: the command list; each verb's options are in its own `--help`. */
export function globalUsage(): string {
  const width = Math.max(...VERBS.map((verb) => `keelson ${verb.name} ${verb.args}`.length));
  const list = VERBS.map((verb) => `  ${`keelson ${verb.name} ${verb.args}`.padEnd(width)}  ${verb.summary}`).join("\n");
  return `Usage: keelson <command> …

Commands:
${list}

keelson <command> --help prints that command's options.`;
}

/** `unknown command "run" (expected one of: start, dev, …)`. */
export function unknownCommand(word: string): string {
  return `unknown command "${word}" (expected one of: ${VERBS.map((verb) => verb.name).join(", ")})`;
}
