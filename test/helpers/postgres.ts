import { execFileSync, spawnSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll } from "vitest";
import { openPostgres, type PostgresOptions, type SQLDatabase } from "../../src/entries/sql.js";
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
  try {
    pg("initdb", ["-D", data, "-U", "keelson", "-A", "trust", "--no-sync", "-E", "UTF8"]);
    pg("pg_ctl", ["-D", data, "-l", join(dir, "server.log"), "-w", "-t", "60", "start",
      "-o", `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`]);
  } catch (error) {
    // Not started: no stop() will come, so the server (if it came up too late) and its folder go now.
    try {
      pg("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"]);
    } catch {
      // Not running.
    }
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
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

/** The throwaway server of a test file (or describe block), from `usePostgres()`. */
export interface PostgresSuite {
  /** `postgres://…` of the server's `postgres` database. */
  readonly url: string;
  /** Creates an empty database and returns its URL (one per test keeps tests apart). */
  createDatabase(): Promise<string>;
  /** `openPostgres({ url, ...options })`, closed when the suite ends, before the server stops. */
  open(url: string, options?: Omit<PostgresOptions, "url">): SQLDatabase;
  /** A new empty database opened `pools` times: separate pools, as separate machines (pods) would have. */
  openDatabase(pools?: number, options?: Omit<PostgresOptions, "url">): Promise<SQLDatabase[]>;
}

/**
 * Starts a server in `beforeAll` of the calling file or describe block and, in its `afterAll`,
 * closes every pool opened through the suite, then stops the server. The members are for tests
 * and later hooks: the server does not exist while the file is being collected.
 */
export function usePostgres(startTimeoutMs = 120_000): PostgresSuite {
  let server: TestPostgres | undefined;
  const opened: SQLDatabase[] = [];
  const started = (): TestPostgres => {
    if (server === undefined) throw new Error("usePostgres: the server is not started yet (use it in a test or a later beforeAll)");
    return server;
  };
  beforeAll(async () => {
    server = await startPostgres();
  }, startTimeoutMs);
  afterAll(async () => {
    for (const db of opened.splice(0)) await db.close();
    await server?.stop();
  });
  const suite: PostgresSuite = {
    get url() {
      return started().url;
    },
    createDatabase: () => started().createDatabase(),
    open(url, options) {
      const db = openPostgres({ ...options, url });
      opened.push(db);
      return db;
    },
    async openDatabase(pools = 1, options) {
      const url = await started().createDatabase();
      return Array.from({ length: pools }, () => suite.open(url, options));
    },
  };
  return suite;
}
