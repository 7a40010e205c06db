import { chmodSync, lstatSync, unlinkSync } from "node:fs";
import { connect, createServer, type Server, type Socket } from "node:net";
import type { Logger } from "../src/logging/logger.js";
import { prepareControlFolder } from "./control-path.js";
import type { ReloadReport } from "./reload.js";
import type { StatusReport } from "./status.js";

/** A control command: one JSON line from the client. */
export type ControlRequest = { command: "status" } | { command: "reload" };

/** The supervisor's answer: one JSON line, then the connection ends. */
export type ControlReply =
  | { ok: true; status: StatusReport }
  | { ok: true; reload: ReloadReport }
  | { ok: false; error: string };

/** What the control socket asks of the supervisor. */
export interface ControlHost {
  status(): StatusReport;
  reload(): Promise<ReloadReport>;
}

/** The listening control socket; `close()` stops it and removes the file. */
export interface ControlServer {
  readonly path: string;
  close(): Promise<void>;
}

const MAX_REQUEST_BYTES = 4096;
const IDLE_TIMEOUT_MS = 10_000;

/**
 * Listens on a Unix socket (mode 0600, in a 0700 folder by default) for `status` and `reload`.
 * A socket file left by a supervisor that died is replaced; one a live supervisor answers on is
 * an error, as is any other kind of file at `path`.
 */
export async function openControlSocket(path: string, host: ControlHost, logger: Logger): Promise<ControlServer> {
  prepareControlFolder(path);
  await removeStaleSocket(path);
  const server = createServer((socket) => serve(socket, host, logger));
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(path, () => {
      server.off("error", reject);
      resolve();
    });
  });
  chmodSync(path, 0o600);
  server.on("error", (error) => logger.warn("control socket %s: %s", path, error.message));
  server.unref();
  return { path, close: () => closeServer(server, path) };
}

async function removeStaleSocket(path: string): Promise<void> {
  let stat;
  try {
    stat = lstatSync(path);
  } catch {
    return;
  }
  if (!stat.isSocket()) throw new Error(`${path} exists and is not a socket: refusing to replace it`);
  if (await isListening(path)) throw new Error(`another supervisor is listening on ${path} (same folder and port?)`);
  unlinkSync(path);
}

/** True when something accepts connections on the Unix socket `path`; false when nothing does (a supervisor that is gone). */
export function isListening(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = connect(path);
    probe.once("connect", () => {
      probe.destroy();
      resolve(true);
    });
    probe.once("error", () => resolve(false));
  });
}

function serve(socket: Socket, host: ControlHost, logger: Logger): void {
  let data = "";
  socket.setEncoding("utf8");
  socket.setTimeout(IDLE_TIMEOUT_MS, () => socket.destroy());
  socket.on("error", () => {});
  socket.on("data", (chunk: string) => {
    data += chunk;
    const end = data.indexOf("\n");
    if (end === -1 && data.length <= MAX_REQUEST_BYTES) return;
    socket.removeAllListeners("data");
    socket.setTimeout(0);
    void answer(end === -1 ? undefined : data.slice(0, end), host, logger).then((reply) => socket.end(`${JSON.stringify(reply)}\n`));
  });
}

async function answer(line: string | undefined, host: ControlHost, logger: Logger): Promise<ControlReply> {
  let request: unknown;
  try {
    request = line === undefined ? undefined : JSON.parse(line);
  } catch {
    request = undefined;
  }
  const command = typeof request === "object" && request !== null ? (request as { command?: unknown }).command : undefined;
  if (command === "status") return { ok: true, status: host.status() };
  if (command === "reload") {
    logger.info("reload requested on the control socket");
    return { ok: true, reload: await host.reload() };
  }
  return { ok: false, error: 'expected one JSON line: {"command":"status"} or {"command":"reload"}' };
}

function closeServer(server: Server, path: string): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    // Clients waiting for a reload's outcome got it already or get a closed connection: no wait.
    try {
      unlinkSync(path);
    } catch {
      // Removed by someone else: nothing to clean up.
    }
  });
}

/** Why a control request failed, in words for the terminal. */
function describeConnectError(path: string, error: NodeJS.ErrnoException): string {
  switch (error.code) {
    case "ENOENT":
      return `no supervisor at ${path}: none runs from this folder with this PORT (keelson ls lists every supervisor; name one: keelson status <pid|port|folder>)`;
    case "ECONNREFUSED":
      return `no supervisor answers at ${path} (a stale socket: its supervisor is gone)`;
    case "EACCES":
      return `permission denied on ${path}: the supervisor runs as another user`;
    default:
      return `${path}: ${error.message}`;
  }
}

/** Sends one command and resolves with the reply; rejects with a readable reason. */
export function sendControl(path: string, request: ControlRequest, timeoutMs: number): Promise<ControlReply> {
  return new Promise((resolve, reject) => {
    const socket = connect(path);
    let data = "";
    socket.setEncoding("utf8");
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error(`no answer from ${path} within ${timeoutMs}ms`)));
    socket.once("connect", () => socket.write(`${JSON.stringify(request)}\n`));
    socket.on("data", (chunk: string) => (data += chunk));
    socket.once("error", (error: NodeJS.ErrnoException) => reject(new Error(error.code === undefined ? error.message : describeConnectError(path, error))));
    socket.once("end", () => {
      try {
        resolve(JSON.parse(data) as ControlReply);
      } catch {
        reject(new Error(`the supervisor at ${path} closed the connection without an answer`));
      }
    });
  });
}
