import type { ConsolaInstance } from "consola";
import { resolve as resolvePath } from "node:path";
import { parseArgs } from "node:util";
import { PORT_RULE, numberFromText } from "../src/checks.js";
import { defaultControlSocket, effectivePort } from "../supervisor/control-path.js";
import { FEATURE_SETTINGS } from "../supervisor/feature-settings.js";
import type { ReloadReport } from "../supervisor/reload.js";
import type { StatusReport } from "../supervisor/status.js";
import { terminal } from "./terminal.js";
import { errorMessage } from "../src/errors.js";

/** `keelson status` / `keelson reload`, parsed. */
export interface ControlCommand {
  command: "status" | "reload";
  /** The control socket: `--socket`, else `KEELSON_CONTROL_SOCKET`, else the one of this folder and port. */
  socket: string;
  /** `keelson status <pid|port|folder>`: the supervisor to find among this user's (then `socket` is not used). */
  target?: string;
  /**
   * True when nothing names the supervisor (no argument, `--socket`, `--port` or `KEELSON_CONTROL_SOCKET`):
   * the one running from this folder, whatever its port; `socket` is the fallback for one without a record.
   */
  here?: boolean;
  /** With `here`: the `PORT` of the environment, which picks among several of this folder. */
  envPort?: number;
  json: boolean;
  /** `status --watch`: refresh every this many ms. */
  watchMs: number | undefined;
}

/** How `status` and `reload` name the supervisor they talk to. */
const NAMING = `Names the supervisor by its pid, the port it serves or the folder it was started from, from any
folder (keelson ls lists them all). Without a name, the one started from this folder, whatever
its port (it says which); several there: the one serving $PORT if set, else it lists them and
asks for one (exit 1).
  --port N       the one of this folder serving N
  --socket PATH  the one listening on this control socket (default: $KEELSON_CONTROL_SOCKET)
  --json         the answer as one JSON line`;

/** `keelson status --help` and `keelson reload --help`. */
export const CONTROL_USAGE = {
  status: `Usage: keelson status [pid|port|folder] [--json] [--watch] [--interval MS] [--socket PATH] [--port N]

One row per worker (pid, generation, state, uptime, restarts, memory, event loop, requests in
flight and per second), the primary's row and the crash-loop breaker.
${NAMING}
  --watch        refresh every --interval MS (default 2000)`,
  reload: `Usage: keelson reload [pid|port|folder] [--json] [--socket PATH] [--port N]

A rolling reload of the running supervisor, one worker at a time; prints which workers were replaced.
${NAMING}`,
} as const;

/** Parses the arguments after `status` or `reload`; throws a one-line reason. */
export function parseControlCommand(command: "status" | "reload", argv: readonly string[], env: NodeJS.ProcessEnv): ControlCommand {
  const { values, positionals } = parseArgs({
    args: [...argv], allowPositionals: true, strict: true,
    options: {
      socket: { type: "string" }, port: { type: "string", short: "p" }, json: { type: "boolean" },
      watch: { type: "boolean" }, interval: { type: "string" },
    },
  });
  if (positionals.length > 1) throw new Error(`unexpected argument(s): ${positionals.slice(1).join(" ")} (name one supervisor)`);
  const target = positionals[0];
  if (target !== undefined && (values.socket !== undefined || values.port !== undefined)) {
    throw new Error(`name the supervisor one way: "${target}", --socket or --port`);
  }
  if (command === "reload" && (values.watch === true || values.interval !== undefined)) throw new Error("--watch and --interval are for keelson status");
  const port = values.port === undefined ? undefined : numberFromText(values.port, PORT_RULE);
  if (values.port !== undefined && port === undefined) throw new Error(`--port expects an integer from 0 to 65535, got "${values.port}"`);
  const interval = values.interval === undefined ? 2000 : Number(values.interval);
  if (!Number.isFinite(interval) || interval < 100) throw new Error(`--interval expects milliseconds >= 100, got "${values.interval}"`);
  const fromEnv = env.KEELSON_CONTROL_SOCKET;
  const named = fromEnv !== undefined && fromEnv !== "" ? fromEnv : undefined;
  const socket = values.socket ?? named ?? defaultControlSocket(process.cwd(), effectivePort(port, env), env);
  const here = target === undefined && values.socket === undefined && named === undefined && port === undefined;
  const envPort = here && env.PORT?.trim() ? effectivePort(undefined, env) : undefined;
  return {
    command, socket, ...(target === undefined ? {} : { target }), ...(here ? { here } : {}), ...(envPort === undefined ? {} : { envPort }),
    json: values.json === true,
    watchMs: values.watch === true || values.interval !== undefined ? interval : undefined,
  };
}

/**
 * `keelson status|reload [argv]`: parses, then runs; resolves with the exit code (2 on a usage error).
 *
 * @example
 * process.exitCode = await runControlVerb("status", ["--json"], process.env);
 */
export async function runControlVerb(command: "status" | "reload", argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  let parsed: ControlCommand;
  try {
    parsed = parseControlCommand(command, argv, env);
  } catch (error) {
    process.stderr.write(`keelson: ${errorMessage(error)}\nRun "keelson ${command} --help" for usage.\n`);
    return 2;
  }
  return runControlCommand(parsed);
}

/** Runs the command; resolves with the exit code (0, or 1 when the supervisor cannot be reached or the reload stopped). */
export async function runControlCommand(command: ControlCommand): Promise<number> {
  try {
    const socket = command.target !== undefined ? await findByTarget(command.target)
      : command.here === true ? await findHere(command) : command.socket;
    const cli = { ...command, socket };
    if (cli.command === "reload") return await runReload(cli);
    // The client side loads when a command runs: `--help` and a usage error need neither node:net
    // nor the registry.
    const { sendControl } = await import("../supervisor/control-socket.js");
    do {
      const reply = await sendControl(cli.socket, { command: "status" }, 5000);
      if (!reply.ok || !("status" in reply)) throw new Error(reply.ok ? "unexpected answer" : reply.error);
      if (cli.watchMs !== undefined && process.stdout.isTTY) process.stdout.write("\u001B[2J\u001B[H");
      if (cli.json) process.stdout.write(`${JSON.stringify(reply.status)}\n`);
      else printStatus(reply.status, await terminal());
      if (cli.watchMs !== undefined) await new Promise((resolve) => setTimeout(resolve, cli.watchMs));
    } while (cli.watchMs !== undefined);
    return 0;
  } catch (error) {
    (await terminal()).error(errorMessage(error));
    return 1;
  }
}

/**
 * The socket of the one running supervisor named by `target`: a number is a pid or the port it
 * serves, anything else the folder it was started from. Throws when none or several match.
 */
async function findByTarget(target: string): Promise<string> {
  const { findSupervisors } = await import("../supervisor/registry.js");
  const running = (await findSupervisors()).filter((found) => found.state === "running");
  const number = /^\d+$/.test(target) ? Number(target) : undefined;
  const folder = number === undefined ? resolvePath(target) : undefined;
  const matches = running.filter(({ pid, status: { primary } }) => (number !== undefined ? pid === number || primary.port === number : primary.cwd === folder));
  const describe = ({ pid, status: { primary } }: (typeof running)[number]) => `pid ${pid} (${primary.cwd}, port ${primary.port ?? "-"})`;
  if (matches.length === 1) return matches[0]!.socket;
  if (matches.length === 0) {
    const what = number === undefined ? `started from ${folder}` : `with pid or port ${number}`;
    throw new Error(`no running supervisor ${what}; ${running.length === 0 ? "none runs for this user" : `running: ${running.map(describe).join(", ")}`}`);
  }
  throw new Error(`${matches.length} supervisors match "${target}": ${matches.map(describe).join(", ")}; name one by its pid`);
}

/**
 * The socket of the one supervisor running from this folder, whatever its port, said on a line of
 * its own (stderr under --json); several: the one serving `PORT` if that is set and one does, else
 * throws listing them. None recorded: the default socket of this folder and PORT, as a supervisor
 * of an older keelson has no record.
 */
async function findHere(command: ControlCommand): Promise<string> {
  const { findSupervisors } = await import("../supervisor/registry.js");
  const folder = process.cwd();
  const inFolder = (await findSupervisors()).flatMap((found) => (found.state === "running" && found.status.primary.cwd === folder ? [found] : []));
  const describe = ({ pid, status: { primary } }: (typeof inFolder)[number]) => `pid ${pid} (port ${primary.port ?? "-"})`;
  const onPort = inFolder.filter((found) => found.status.primary.port === command.envPort);
  const here = inFolder.length > 1 && onPort.length === 1 ? onPort : inFolder;
  const [one, ...others] = here;
  if (one === undefined) return command.socket;
  if (others.length > 0) {
    throw new Error(`${here.length} supervisors run from ${folder}: ${here.map(describe).join(", ")}; name one: keelson ${command.command} <pid|port>`);
  }
  const line = `the supervisor of ${folder}: ${describe(one)}`;
  if (command.json) process.stderr.write(`${line}\n`);
  else (await terminal()).info(line);
  return one.socket;
}

async function runReload(cli: ControlCommand): Promise<number> {
  // A rolling reload takes a worker's start plus its drain per slot: no short deadline here.
  const { sendControl } = await import("../supervisor/control-socket.js");
  const reply = await sendControl(cli.socket, { command: "reload" }, 30 * 60_000);
  if (!reply.ok || !("reload" in reply)) throw new Error(reply.ok ? "unexpected answer" : reply.error);
  if (cli.json) process.stdout.write(`${JSON.stringify(reply.reload)}\n`);
  else printReload(reply.reload, await terminal());
  return reply.reload.ok ? 0 : 1;
}

/** `worker 1 (pid 10 → 12), worker 2 (pid 11 → 13)`. */
function describeReplaced(report: ReloadReport): string {
  return report.workers.map((w) => `worker ${w.id} (pid ${w.from} → ${w.to})`).join(", ") || "none";
}

function printReload(report: ReloadReport, consola: ConsolaInstance): void {
  const replaced = `${report.replaced} worker(s) replaced in ${formatDuration(report.durationMs)}: ${describeReplaced(report)}`;
  // A worker that hit the drain cap cut its clients off: not a ✔, though every worker was replaced.
  const unclean = report.unclean ?? [];
  if (report.ok && unclean.length === 0) consola.success(`reload complete: ${replaced}`);
  else if (report.ok) consola.warn(`reload done with errors: ${replaced}; ${unclean.length} old worker(s) did not drain cleanly: ${unclean.join("; ")}`);
  else consola.fail(`reload stopped: ${report.error ?? "unknown reason"}; ${replaced}`);
}

const COLUMNS = ["worker", "pid", "gen", "state", "uptime", "restarts", "rss", "heap", "fds", "elu", "delay p99", "in flight", "req/s", "requests", "conns"] as const;

function printStatus(status: StatusReport, consola: ConsolaInstance): void {
  const { primary, breaker } = status;
  const flags = [primary.reloading ? "reloading" : "", primary.stopping ? "stopping" : ""].filter(Boolean).join(", ");
  const serving = primary.url === undefined ? "" : ` on ${primary.url}`;
  consola.info(`supervisor pid ${primary.pid}, up ${formatDuration(primary.uptimeMs)}, ${primary.workers} worker(s) of ${primary.entry}${serving}${flags ? ` (${flags})` : ""}`);
  for (const feature of FEATURE_SETTINGS) {
    const line = feature.statusLine?.(status.features?.[feature.name]);
    if (line !== undefined) consola.info(line);
  }
  consola.info(`breaker ${breaker.state}: ${breaker.crashes} crash(es) in the last ${formatDuration(breaker.windowMs)} (trips at ${breaker.maxCrashes})`);
  const rows: string[][] = [[
    "primary", String(primary.pid), "", "", formatDuration(primary.uptimeMs), "", formatBytes(primary.rss), formatBytes(primary.heapUsed),
    formatFds(primary), primary.elu.toFixed(2), "", "", "", "", "",
  ]];
  for (const worker of status.workers) {
    const stats = worker.stats;
    rows.push([
      String(worker.id), String(worker.pid), String(worker.generation), worker.state, formatDuration(worker.uptimeMs), String(worker.restarts),
      stats ? formatBytes(stats.rss) : "-", stats ? formatBytes(stats.heapUsed) : "-", stats ? formatFds(stats) : "-", stats ? stats.elu.toFixed(2) : "-",
      stats ? `${stats.delayP99Ms.toFixed(1)}ms` : "-", stats ? String(stats.inflight) : "-", stats ? stats.requestsPerSecond.toFixed(1) : "-",
      stats ? String(stats.requests) : "-", stats ? String(stats.connections ?? "-") : "-",
    ]);
  }
  const table = [[...COLUMNS], ...rows];
  const widths = COLUMNS.map((_, column) => Math.max(...table.map((row) => (row[column] ?? "").length)));
  // The table itself goes out bare (no reporter prefix), so it stays aligned when piped to grep or awk.
  process.stdout.write(`${table.map((row) => row.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join("  ").trimEnd()).join("\n")}\n`);
  const { requestsSkew, connectionsSkew } = status.balance ?? {};
  if (requestsSkew != null || connectionsSkew != null) {
    process.stdout.write(`balance: skew ${requestsSkew?.toFixed(2) ?? "-"} (requests/s), ${connectionsSkew?.toFixed(2) ?? "-"} (connections/s): busiest worker ÷ mean, 1.00 is even\n`);
  }
}

/** `180/256` (in use / soft limit), `180` when unlimited, `-` where unknown. */
function formatFds(usage: { fds?: number; fdLimit?: number }): string {
  if (usage.fds === undefined) return "-";
  return usage.fdLimit === undefined ? String(usage.fds) : `${usage.fds}/${usage.fdLimit}`;
}

function formatBytes(bytes: number): string {
  return bytes >= 1024 ** 3 ? `${(bytes / 1024 ** 3).toFixed(2)} GB` : `${(bytes / 1024 ** 2).toFixed(1)} MB`;
}

/** `850ms`, `12.3s`, `5m 03s`, `2h 05m`. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  const seconds = ms / 1000;
  if (seconds < 60) return `${seconds.toFixed(1)}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m ${String(Math.floor(seconds % 60)).padStart(2, "0")}s`;
  return `${Math.floor(minutes / 60)}h ${String(minutes % 60).padStart(2, "0")}m`;
}
