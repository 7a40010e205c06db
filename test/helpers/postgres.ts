import { execFileSync, spawnSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { openPostgres, type SQLDatabase } from "../../src/sql/index.js";
import { freePort } from "../../harness/child.js";

/** A PostgreSQL server of this test file: initdb in a temp folder, pg_ctl on a free port. */
export interface TestPostgres {
  /** `postgres://…` of the server's `postgres` database. */
  readonly url: string;
  /** Creates an empty database and returns its URL (one per test keeps tests apart). */
  createDatabase(): Promise<string>;
  /** Closes the helper's own connection, stops the server (immediate mode) and deletes its folder. */
  stop(): Promise<void>;
}

const INSTALL_HINT = "PostgreSQL is not installed: run `make test` (it installs it) or `apt-get install -y postgresql`";

/** The newest Debian postgresql bin folder (initdb, pg_ctl), or a clear error: never a skip. */
function findBinaries(): string {
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root) ? readdirSync(root).filter((v) => existsSync(join(root, v, "bin/initdb"))) : [];
  const newest = versions.map(Number).filter(Number.isFinite).toSorted((a, b) => b - a)[0];
  if (newest === undefined) throw new Error(INSTALL_HINT);
  return join(root, String(newest), "bin");
}

/**
 * Starts a throwaway server (trust authentication, fsync off, unix socket in the temp folder).
 * initdb refuses to run as root: as root the server runs as Debian's `postgres` user.
 */
export async function startPostgres(): Promise<TestPostgres> {
  const bin = findBinaries();
  const dir = mkdtempSync(join(tmpdir(), "keelson-pg-"));
  const asRoot = userInfo().uid === 0;
  if (asRoot) {
    const ids = execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim();
    const gid = execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim();
    chownSync(dir, Number(ids), Number(gid));
  }
  const pg = (tool: string, args: string[]) => {
    const command = asRoot ? ["runuser", "-u", "postgres", "--", join(bin, tool), ...args] : [join(bin, tool), ...args];
    const result = spawnSync(command[0]!, command.slice(1), { encoding: "utf8", cwd: dir });
    if (result.status !== 0) throw new Error(`${tool} failed (${result.status}): ${result.stderr || result.stdout}`);
  };
  const data = join(dir, "data");
  const port = await freePort();
  pg("initdb", ["-D", data, "-U", "keelson", "-A", "trust", "--no-sync", "-E", "UTF8"]);
  pg("pg_ctl", ["-D", data, "-l", join(dir, "server.log"), "-w", "-t", "60", "start",
    "-o", `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`]);
  const url = `postgres://keelson@127.0.0.1:${port}/postgres`;
  let databases = 0;
  const admin: SQLDatabase = openPostgres({ url, max: 1 });
  return {
    url,
    async createDatabase() {
      const name = `test_${process.pid}_${++databases}`;
      await admin.query(`CREATE DATABASE ${name}`);
      return `postgres://keelson@127.0.0.1:${port}/${name}`;
    },
    async stop() {
      await admin.close();
      try {
        pg("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
