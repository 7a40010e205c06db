import { readdirSync, statSync, watch, type FSWatcher } from "node:fs";
import { join, relative } from "node:path";
import { parseArgs } from "node:util";
import { PORT_RULE, numberFromText, readPortEnv } from "../src/checks.js";
import type { Supervisor } from "../supervisor/primary.js";
import { readHost } from "./args.js";
import { stopWithParent } from "./parent-watch.js";
import { terminal } from "./terminal.js";
import { errorMessage } from "../src/errors.js";
import type { VerbContext } from "./verb.js";

/** `keelson dev <entry>`, parsed. */
export interface DevCommand {
  entry: string;
  workers: number;
  port: number | undefined;
  /** `--host`, else `HOST`, else 127.0.0.1: a development server answers this machine only unless told. */
  host: string;
  /** The folder watched for changes: the working directory. */
  root: string;
}

export const DEV_USAGE = `Usage: keelson dev <entry.ts> [--workers N] [--port N] [--host ADDR]

Runs the TypeScript entry directly (workers start with --import tsx), watches the source files
under the current folder and, on a change, does a rolling reload: a request in flight is not lost,
and code that fails to compile or import leaves the last good workers serving.

  -w, --workers N   workers (default 1)
  -p, --port N      port of the App (default: $PORT, else the App's own, 3000)
      --host ADDR   its address (default: $HOST, else 127.0.0.1: this machine only; 0.0.0.0 or ::
                    for every interface, as in a dev container)`;

const WATCHED = /\.(?:[cm]?[jt]sx?|json)$/;
const IGNORED = /(?:^|[/\\])(?:node_modules|dist|coverage|\.git)(?:[/\\]|$)/;
const DEBOUNCE_MS = 100;

/** Parses the arguments after `dev`; throws a one-line reason. */
export function parseDevCommand(argv: readonly string[], env: NodeJS.ProcessEnv): DevCommand {
  const { values, positionals } = parseArgs({
    args: [...argv], allowPositionals: true, strict: true,
    options: { workers: { type: "string", short: "w" }, port: { type: "string", short: "p" }, host: { type: "string" } },
  });
  const [entry, ...extra] = positionals;
  if (entry === undefined) throw new Error("missing <entry>: the TypeScript module that builds the App and calls listen()");
  if (extra.length > 0) throw new Error(`unexpected argument(s): ${extra.join(" ")}`);
  const workers = Number(values.workers ?? 1);
  if (!Number.isInteger(workers) || workers < 1) throw new Error(`--workers expects a positive integer, got "${values.workers}"`);
  const port = values.port === undefined ? readPortEnv(env) : numberFromText(values.port, PORT_RULE);
  if (port === undefined && values.port) throw new Error(`--port expects an integer from 0 to 65535, got "${values.port}"`);
  return { entry, workers, port, host: readHost(values.host, env) ?? DEV_HOST, root: process.cwd() };
}

/** `keelson dev`'s address unless told: a server under development is not for the network. */
export const DEV_HOST = "127.0.0.1";

/**
 * `keelson dev [argv]`: parses, then runs; resolves to 2 on a usage error, else to undefined
 * (the supervisor exits the process when it stops).
 *
 * @example
 * await runDevVerb(["src/main.ts", "--port", "4000"], { env: process.env, warnings: [] });
 */
export async function runDevVerb(argv: readonly string[], context: VerbContext): Promise<number | undefined> {
  try {
    await runDev(parseDevCommand(argv, context.env));
    return undefined;
  } catch (error) {
    process.stderr.write(`keelson: ${errorMessage(error)}\n`);
    return 2;
  }
}

/**
 * Runs the supervisor on the TypeScript entry and reloads it whenever a source file changes.
 * Changes that arrive during a reload merge into one more (the supervisor's own rule).
 */
export async function runDev(cli: DevCommand): Promise<void> {
  // Loaded here, not at the top: `keelson dev --help` and a usage error need no supervisor.
  const { Supervisor } = await import("../supervisor/primary.js");
  const supervisor = new Supervisor({
    entry: cli.entry, workers: cli.workers, port: cli.port, host: cli.host,
    execArgv: process.execArgv.some((arg) => arg.includes("tsx")) ? process.execArgv : [...process.execArgv, "--import", resolveTsx()],
    env: { NODE_ENV: process.env.NODE_ENV ?? "development" },
  });
  const watcher = watchSources(cli.root, (files) => void reload(supervisor, files));
  void supervisor.finished.then(() => watcher.close());
  stopWithParent(supervisor);
  (await terminal()).start(`keelson dev: ${cli.entry}, ${cli.workers} worker(s), watching ${cli.root}`);
  await supervisor.start().catch(() => {
    // A crash loop at start stops the supervisor; its log says why and `finished` exits.
  });
}

/** tsx's loader, found from keelson's own folder upwards (so a project's own devDependency counts). */
function resolveTsx(): string {
  try {
    return import.meta.resolve("tsx");
  } catch {
    throw new Error("keelson dev runs TypeScript through tsx, which is not installed: npm install --save-dev tsx");
  }
}

async function reload(supervisor: Supervisor, files: readonly string[]): Promise<void> {
  const changed = files.length === 1 ? files[0] : `${files[0]} and ${files.length - 1} more`;
  const report = await supervisor.reload();
  const consola = await terminal();
  if (report.ok) consola.success(`${changed} changed: reloaded ${report.replaced} worker(s) in ${report.durationMs}ms`);
  // The replacement printed its error, and the supervisor's log line names it: not a third time here.
  else consola.fail(`${changed} changed: reload failed (the error is above), the last good workers keep serving`);
}

/**
 * Watches every folder under `root` (not node_modules, dist, .git) and calls `onChange` with the
 * changed source files, debounced. One watcher per folder rather than `recursive: true`: on Linux
 * that one follows files by inode and goes quiet after an editor replaces a file (save = write a
 * temp file, rename it over), while a folder's watcher sees every name that changes in it.
 */
function watchSources(root: string, onChange: (files: string[]) => void): { close(): void } {
  const watchers = new Map<string, FSWatcher>();
  const pending = new Set<string>();
  let timer: NodeJS.Timeout | undefined;
  const add = (folder: string): void => {
    if (watchers.has(folder) || IGNORED.test(relative(root, folder))) return;
    try {
      watchers.set(folder, watch(folder, (_event, name) => name !== null && seen(join(folder, name))));
      for (const entry of readdirSync(folder, { withFileTypes: true })) if (entry.isDirectory()) add(join(folder, entry.name));
    } catch {
      // Gone or unreadable: nothing to watch there.
    }
  };
  const seen = (path: string): void => {
    const file = relative(root, path);
    if (IGNORED.test(file)) return;
    if (!WATCHED.test(file)) {
      // An editor's temp file may be gone already: no entry, no error.
      if (statSync(path, { throwIfNoEntry: false })?.isDirectory() === true) add(path);
      return;
    }
    pending.add(file);
    clearTimeout(timer);
    timer = setTimeout(() => {
      const files = [...pending];
      pending.clear();
      onChange(files);
    }, DEBOUNCE_MS);
  };
  add(root);
  return {
    close() {
      clearTimeout(timer);
      for (const watcher of watchers.values()) watcher.close();
    },
  };
}
