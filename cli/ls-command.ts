import { parseArgs } from "node:util";
import { findSupervisors, type FoundSupervisor } from "../supervisor/registry.js";
import { formatDuration } from "./control-command.js";
import { errorMessage } from "../src/errors.js";

export const LS_USAGE = `Usage: keelson ls [--json]

Every supervisor this user runs on this machine, one row each: pid, folder, entry, port, workers
(ready/asked), uptime, control socket. Sockets and records left by a supervisor that is gone
(killed, machine crash) are removed and listed as stale. Name one to keelson status or reload by
its pid, its port or its folder: keelson status 3000, keelson reload ~/api.`;

const COLUMNS = ["pid", "folder", "entry", "port", "workers", "uptime", "socket"] as const;

/** The row of one supervisor, as `keelson ls` prints it. */
function row(found: FoundSupervisor): string[] {
  if (found.state === "running") {
    const { primary, workers } = found.status;
    const ready = workers.filter((worker) => worker.state === "ready").length;
    const flags = [primary.reloading ? "reloading" : "", primary.stopping ? "stopping" : ""].filter(Boolean).join(",");
    // `?` for what a supervisor of an older keelson does not report.
    return [String(found.pid), primary.cwd ?? "?", primary.entry, primary.port === undefined ? "-" : String(primary.port),
      `${ready}/${primary.workers}${flags ? ` ${flags}` : ""}`, formatDuration(primary.uptimeMs), found.socket];
  }
  if (found.state === "unreachable") return [String(found.pid), found.cwd, found.entry, "?", "?", "?", `${found.socket} (${found.error})`];
  return [found.pid === undefined ? "-" : String(found.pid), "-", "-", "-", "-", "stale", `${found.socket} (supervisor gone${found.removed ? ", removed" : ""})`];
}

/** `keelson ls`: resolves to the exit code (0, or 2 on a usage error). */
export async function runLsCommand(argv: readonly string[]): Promise<number> {
  let json: boolean;
  try {
    const { values } = parseArgs({ args: [...argv], strict: true, options: { json: { type: "boolean" }, help: { type: "boolean", short: "h" } } });
    if (values.help === true) {
      process.stdout.write(LS_USAGE + "\n");
      return 0;
    }
    json = values.json === true;
  } catch (error) {
    process.stderr.write(`keelson ls: ${errorMessage(error)}\nRun "keelson ls --help" for usage.\n`);
    return 2;
  }
  const found = await findSupervisors();
  if (json) {
    process.stdout.write(`${JSON.stringify(found)}\n`);
    return 0;
  }
  if (found.length === 0) {
    process.stdout.write("no keelson supervisor runs for this user\n");
    return 0;
  }
  const table = [[...COLUMNS], ...found.map(row)];
  const widths = COLUMNS.map((_, column) => Math.max(...table.map((cells) => (cells[column] ?? "").length)));
  process.stdout.write(`${table.map((cells) => cells.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join("  ").trimEnd()).join("\n")}\n`);
  return 0;
}
