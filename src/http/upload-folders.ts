import { rmSync } from "node:fs";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { processRuns } from "../pid.js";

/**
 * The temporary folders of form uploads (docs/validation-and-docs.md, "Where uploads go"). A
 * folder is named for the machine and the process that made it, `keelson-upload-<host>-<pid>-XXXXXX`:
 * the asynchronous removal after a request can lose the race with the process's exit, and a killed
 * process removes nothing, so each process removes its own folders synchronously at exit and
 * sweeps, at start, the folders of processes of its machine that no longer run. A live process's
 * folder (another worker of the same supervisor, another service sharing the folder) is never
 * touched; the host in the name keeps containers that share a volume, whose process ids overlap,
 * from judging each other's processes.
 */

const PREFIX = "keelson-upload-";
// A host name may hold characters a folder name should not: kept to what is safe everywhere.
const HOST = hostname().replace(/[^A-Za-z0-9.]/g, "_") || "host";
const OURS = `${PREFIX}${HOST}-`;

/** Folders this process made and has not removed yet. */
const live = new Set<string>();
/** The parent folders form routes write to, swept at start. */
const parents = new Set<string>();
let exitHook = false;
/** Folders being made: their names may be on disk before they are in `live`. */
let making = 0;
let storageFailures = 0;

/** Counts an upload the server could not store (`keelson_upload_storage_errors_total`). */
export function countStorageFailure(): void {
  storageFailures++;
}

/** This process's uploads refused because the temporary folder failed a write. */
export function uploadStorageFailures(): number {
  return storageFailures;
}

/** A form route writes under `dir` (undefined: the system's temporary folder). */
export function registerUploadParent(dir: string | undefined): void {
  parents.add(dir ?? tmpdir());
}

/** Makes a request's folder under `parent`, removed at the latest when this process exits. */
export async function makeUploadFolder(parent: string): Promise<string> {
  making++;
  let dir: string;
  try {
    dir = await mkdtemp(join(parent, `${OURS}${process.pid}-`));
  } finally {
    making--;
  }
  live.add(dir);
  if (!exitHook) {
    exitHook = true;
    process.on("exit", removeLiveFolders);
  }
  return dir;
}

/** Removes a request's folder once the request is done with it. */
export async function removeUploadFolder(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true }).catch(() => {});
  live.delete(dir);
}

/** `exit` listeners run synchronously: whatever is still on disk goes now, or never. */
function removeLiveFolders(): void {
  for (const dir of live) {
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // A folder that cannot be removed now is swept by the next start on this machine.
    }
  }
  live.clear();
}

/**
 * Removes, from every registered parent, the upload folders of this machine's processes that no
 * longer run, and this process's own folders it does not know (left by an earlier process that had
 * the same id, as a restarted container's workers do). Returns how many were removed.
 */
export async function sweepUploadFolders(): Promise<{ removed: number; parents: string[] }> {
  let removed = 0;
  for (const parent of parents) {
    const names = await readdir(parent).catch(() => [] as string[]);
    for (const name of names) {
      if (!name.startsWith(OURS)) continue;
      const pid = Number(/^(\d+)-/.exec(name.slice(OURS.length))?.[1]);
      if (!Number.isSafeInteger(pid) || pid <= 0) continue;
      const dir = join(parent, name);
      if (pid === process.pid ? live.has(dir) || making > 0 : processRuns(pid)) continue;
      await rm(dir, { recursive: true, force: true }).then(() => removed++, () => {});
    }
  }
  return { removed, parents: [...parents] };
}
