import { lstatSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { processRuns } from "../src/pid.js";
import { controlSocketFolder, ensurePrivateFolder } from "./control-path.js";
import { isListening, sendControl } from "./control-socket.js";
import type { StatusReport } from "./status.js";
import { errorMessage } from "../src/errors.js";

/**
 * What a running supervisor leaves in the control folder (`<pid>.json`, 0600) so that `keelson ls`
 * and `keelson status <pid|port|folder>` find it whatever its socket is (a `--control-socket`
 * elsewhere too). Removed when it stops; one left by a supervisor that was killed is removed by
 * the next listing.
 */
export interface SupervisorRecord {
  pid: number;
  socket: string;
  cwd: string;
  entry: string;
}

/** One supervisor found: running (its live status) or stale (gone; what was left of it is removed). */
export type FoundSupervisor =
  | { state: "running"; pid: number; socket: string; status: StatusReport }
  | { state: "unreachable"; pid: number; socket: string; cwd: string; entry: string; error: string }
  | { state: "stale"; pid: number | undefined; socket: string; removed: boolean };

/** Writes this process's record; returns the function that removes it. Never throws: the record only serves `keelson ls`. */
export function registerSupervisor(record: Omit<SupervisorRecord, "pid">, env: NodeJS.ProcessEnv = process.env): () => void {
  const folder = controlSocketFolder(env);
  const path = join(folder, `${process.pid}.json`);
  try {
    ensurePrivateFolder(folder);
    writeFileSync(path, `${JSON.stringify({ pid: process.pid, ...record })}\n`, { mode: 0o600 });
  } catch {
    return () => {};
  }
  return () => removeFile(path);
}

/** Every supervisor of this user: the records and the sockets of the control folder, each asked for its status. */
export async function findSupervisors(env: NodeJS.ProcessEnv = process.env, timeoutMs = 3000): Promise<FoundSupervisor[]> {
  const folder = controlSocketFolder(env);
  let names: string[];
  try {
    names = readdirSync(folder);
  } catch {
    return [];
  }
  const records = names.filter((name) => /^\d+\.json$/.test(name)).flatMap((name) => readRecord(join(folder, name)));
  const recorded = new Set(records.map((record) => record.socket));
  const found = await Promise.all(records.map((record) => probeRecord(record, join(folder, `${record.pid}.json`), timeoutMs)));
  // Sockets without a record: a supervisor of an older keelson, or one killed before it wrote its record.
  const orphans = names.filter((name) => name.endsWith(".sock") && !recorded.has(join(folder, name)));
  for (const name of orphans) {
    const socket = join(folder, name);
    const status = await askStatus(socket, timeoutMs).catch(() => undefined);
    if (status !== undefined) found.push({ state: "running", pid: status.primary.pid, socket, status });
    else if (!(await isListening(socket))) found.push({ state: "stale", pid: undefined, socket, removed: removeFile(socket) });
  }
  return found.toSorted((a, b) => (a.pid ?? 0) - (b.pid ?? 0));
}

async function probeRecord(record: SupervisorRecord, path: string, timeoutMs: number): Promise<FoundSupervisor> {
  if (!processRuns(record.pid)) {
    removeFile(path);
    const removed = isSocket(record.socket) && !(await isListening(record.socket)) && removeFile(record.socket);
    return { state: "stale", pid: record.pid, socket: record.socket, removed };
  }
  try {
    return { state: "running", pid: record.pid, socket: record.socket, status: await askStatus(record.socket, timeoutMs) };
  } catch (error) {
    return { state: "unreachable", pid: record.pid, socket: record.socket, cwd: record.cwd, entry: record.entry, error: errorMessage(error) };
  }
}

async function askStatus(socket: string, timeoutMs: number): Promise<StatusReport> {
  const reply = await sendControl(socket, { command: "status" }, timeoutMs);
  if (!reply.ok || !("status" in reply)) throw new Error(reply.ok ? "unexpected answer" : reply.error);
  return reply.status;
}

function readRecord(path: string): SupervisorRecord[] {
  try {
    const record = JSON.parse(readFileSync(path, "utf8")) as Partial<SupervisorRecord>;
    if (typeof record.pid !== "number" || typeof record.socket !== "string") return [];
    return [{ pid: record.pid, socket: record.socket, cwd: String(record.cwd ?? ""), entry: String(record.entry ?? "") }];
  } catch {
    return [];
  }
}

function isSocket(path: string): boolean {
  try {
    return lstatSync(path).isSocket();
  } catch {
    return false;
  }
}

function removeFile(path: string): boolean {
  try {
    unlinkSync(path);
    return true;
  } catch {
    return false;
  }
}
