import { createHash } from "node:crypto";
import { chmodSync, lstatSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { DEFAULT_PORT, readPortEnv } from "../src/checks.js";

/** The port a supervisor started here serves: `port`, else `PORT`, else the App's default. */
export function effectivePort(port: number | undefined, env: NodeJS.ProcessEnv = process.env): number {
  return port ?? readPortEnv(env) ?? DEFAULT_PORT;
}

/** `$XDG_RUNTIME_DIR/keelson`, else `<tmpdir>/keelson-<uid>`: the folder of the default control sockets. */
export function controlSocketFolder(env: NodeJS.ProcessEnv = process.env): string {
  const runtime = env.XDG_RUNTIME_DIR;
  if (runtime !== undefined && runtime !== "") return join(runtime, "keelson");
  return join(tmpdir(), `keelson-${process.getuid?.() ?? "user"}`);
}

/**
 * The default control socket of a supervisor started in `cwd` serving `port`: a hash of both,
 * so `keelson status` run from the same folder with the same `PORT` finds it without flags,
 * and two services on one machine never share a socket.
 */
export function defaultControlSocket(cwd: string, port: number, env: NodeJS.ProcessEnv = process.env): string {
  const hash = createHash("sha256").update(`${cwd}\0${port}`).digest("hex").slice(0, 16);
  return join(controlSocketFolder(env), `${hash}.sock`);
}

/**
 * Creates the default folder (mode 0700) or checks the one found: it must be a directory owned
 * by this user and not open to others, since anyone who can reach the socket can reload the service.
 */
export function prepareControlFolder(socketPath: string, env: NodeJS.ProcessEnv = process.env): void {
  const folder = dirname(socketPath);
  if (folder === controlSocketFolder(env)) ensurePrivateFolder(folder);
}

/** Creates `folder` (mode 0700) or checks it: a directory of this user, closed to others. */
export function ensurePrivateFolder(folder: string): void {
  mkdirSync(folder, { recursive: true, mode: 0o700 });
  const stat = lstatSync(folder);
  const uid = process.getuid?.();
  if (!stat.isDirectory() || (uid !== undefined && stat.uid !== uid)) {
    throw new Error(`${folder} is not a directory owned by this user (uid ${String(uid)}): refusing to put the control socket there`);
  }
  if ((stat.mode & 0o077) !== 0) chmodSync(folder, 0o700);
}
