// Waiting for another process's SQLite write lock, three ways (issue 23, defect 7):
//   sync    node:sqlite's own busy timeout: the wait happens inside the statement (keelson before)
//   timers  busy_timeout 0 and retries on timers with 1..20 ms backoff (keelson's openSQLite now)
//   worker  the database in a worker_thread with node:sqlite's busy timeout, queries posted to it
//           (a prototype written here for the measurement only)
// Per variant and round: (1) the cost of a query when nobody holds the lock: N sequential point
// SELECTs and N sequential INSERTs, then N INSERTs 32 in flight; (2) while a second process holds
// BEGIN IMMEDIATE for HOLD ms: the worst event-loop delay seen by a 5 ms interval timer, and how
// long after the holder's ROLLBACK the waiting INSERT completes; (3) two processes inserting
// into one file at once, N each, 16 in flight: wall time. Medians over rounds.
//
//   node --import tsx load-tests/bench.ts sqlite-lock [--queries 5000] [--rounds 5] [--hold 1000]
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { parseArgs } from "node:util";
import { Worker } from "node:worker_threads";
import { openSQLite } from "../../src/entries/sql.js";

const { values: flags } = parseArgs({
  options: {
    queries: { type: "string", default: "5000" }, rounds: { type: "string", default: "5" }, hold: { type: "string", default: "1000" },
    // Internal: this file re-run as the second writer of (3).
    "writer-of": { type: "string" }, variant: { type: "string" },
  },
});
const QUERIES = Number(flags.queries);
const ROUNDS = Number(flags.rounds);
const HOLD_MS = Number(flags.hold);

type Row = Record<string, unknown>;
interface Handle {
  query(sql: string, params?: (string | number)[]): Promise<Row[]>;
  close(): Promise<void>;
}

/** What openSQLite did before: WAL, busy_timeout 5000, every statement run on the calling thread. */
function openSync(file: string): Handle {
  const db = new DatabaseSync(file);
  db.exec("PRAGMA busy_timeout = 5000");
  db.exec("PRAGMA journal_mode = WAL");
  db.exec("PRAGMA synchronous = NORMAL");
  const statements = new Map<string, ReturnType<DatabaseSync["prepare"]>>();
  return {
    async query(sql, params = []) {
      let statement = statements.get(sql);
      if (!statement) statements.set(sql, (statement = db.prepare(sql)));
      return statement.all(...params) as Row[];
    },
    async close() {
      db.close();
    },
  };
}

const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const { DatabaseSync } = require("node:sqlite");
const db = new DatabaseSync(workerData.file);
db.exec("PRAGMA busy_timeout = 5000");
db.exec("PRAGMA journal_mode = WAL");
db.exec("PRAGMA synchronous = NORMAL");
const statements = new Map();
parentPort.on("message", ({ id, sql, params }) => {
  if (sql === null) { db.close(); parentPort.postMessage({ id }); return; }
  try {
    let statement = statements.get(sql);
    if (!statement) statements.set(sql, (statement = db.prepare(sql)));
    parentPort.postMessage({ id, rows: statement.all(...params) });
  } catch (error) {
    parentPort.postMessage({ id, error: { message: error.message, errcode: error.errcode } });
  }
});
`;

/** The database on a worker thread: SQLite may wait there as long as it likes. */
function openWorker(file: string): Handle {
  const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { file } });
  const pending = new Map<number, { resolve: (rows: Row[]) => void; reject: (error: Error) => void }>();
  let next = 0;
  worker.on("message", (message: { id: number; rows?: Row[]; error?: { message: string } }) => {
    const waiter = pending.get(message.id)!;
    pending.delete(message.id);
    if (message.error) waiter.reject(new Error(message.error.message));
    else waiter.resolve(message.rows ?? []);
  });
  const send = (sql: string | null, params: (string | number)[]) => new Promise<Row[]>((resolve, reject) => {
    const id = next++;
    pending.set(id, { resolve, reject });
    // A worker_threads port, not a window: there is no target origin.
    // oxlint-disable-next-line unicorn/require-post-message-target-origin
    worker.postMessage({ id, sql, params });
  });
  return {
    query: (sql, params = []) => send(sql, params),
    async close() {
      await send(null, []);
      await worker.terminate();
    },
  };
}

function openTimers(file: string): Handle {
  const db = openSQLite({ file, busyTimeoutMs: 5000 });
  return { query: (sql, params = []) => db.query(sql, params), close: () => db.close() };
}

const VARIANTS = { sync: openSync, timers: openTimers, worker: openWorker } as const;
type VariantName = keyof typeof VARIANTS;

const SCHEMA = "CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT)";

async function insertMany(db: Handle, count: number, inFlight: number, tag: string): Promise<void> {
  let started = 0;
  const lane = async () => {
    while (started < count) {
      const i = started++;
      await db.query("INSERT INTO t (v) VALUES (?)", [`${tag}-${i}`]);
    }
  };
  await Promise.all(Array.from({ length: inFlight }, lane));
}

/** A second process that takes the write lock, reports it, and rolls back after `holdMs`, printing the wall time it did. */
function holdLock(file: string, holdMs: number): Promise<{ released: Promise<number> }> {
  const source = `const { DatabaseSync } = require("node:sqlite"); const db = new DatabaseSync(${JSON.stringify(file)});
    db.exec("PRAGMA busy_timeout = 5000"); db.exec("BEGIN IMMEDIATE"); console.log("locked");
    setTimeout(() => { db.exec("ROLLBACK"); console.log("released " + (performance.timeOrigin + performance.now())); db.close(); }, ${holdMs});`;
  const child = spawn(process.execPath, ["-e", source], { stdio: ["ignore", "pipe", "inherit"] });
  let text = "";
  return new Promise((resolveLocked) => {
    let onReleased: (at: number) => void;
    const released = new Promise<number>((resolve) => (onReleased = resolve));
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      text += chunk;
      if (text.includes("locked\n")) resolveLocked({ released });
      const match = /released ([\d.]+)/.exec(text);
      if (match) onReleased(Number(match[1]));
    });
  });
}

interface Sample {
  selectUs: number;
  insertUs: number;
  insertConcurrentUs: number;
  maxLoopDelayMs: number;
  afterReleaseMs: number;
  twoWritersMs: number;
}

async function perQuery(work: () => Promise<void>): Promise<number> {
  const start = performance.now();
  await work();
  return ((performance.now() - start) * 1000) / QUERIES;
}

async function measure(variant: VariantName, dir: string, round: number): Promise<Sample> {
  const file = join(dir, `${variant}-${round}.db`);
  const db = VARIANTS[variant](file);
  await db.query(SCHEMA);
  await insertMany(db, 1000, 1, "seed");
  const selectUs = await perQuery(async () => {
    for (let i = 0; i < QUERIES; i++) await db.query("SELECT v FROM t WHERE id = ?", [(i % 1000) + 1]);
  });
  const insertUs = await perQuery(() => insertMany(db, QUERIES, 1, "seq"));
  const insertConcurrentUs = await perQuery(() => insertMany(db, QUERIES, 32, "par"));

  // (2) a foreign lock: the event loop's worst delay while one INSERT waits, and its lateness after the release.
  const { released } = await holdLock(file, HOLD_MS);
  let last = performance.now();
  let maxLoopDelayMs = 0;
  const ticker = setInterval(() => {
    const now = performance.now();
    maxLoopDelayMs = Math.max(maxLoopDelayMs, now - last - 5);
    last = now;
  }, 5);
  await db.query("INSERT INTO t (v) VALUES (?)", ["after-lock"]);
  const doneAt = performance.timeOrigin + performance.now();
  clearInterval(ticker);
  // A wait inside the statement blocks the ticker itself: the gap since its last tick is the delay.
  maxLoopDelayMs = Math.max(maxLoopDelayMs, performance.now() - last - 5);
  const afterReleaseMs = doneAt - (await released);
  await db.close();

  // (3) two processes writing into one fresh file at once.
  const shared = join(dir, `${variant}-${round}-shared.db`);
  const setup = VARIANTS[variant](shared);
  await setup.query(SCHEMA);
  await setup.close();
  const start = performance.now();
  const writers = [0, 1].map((n) => new Promise<void>((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", import.meta.filename, "--writer-of", shared, "--variant", variant, "--queries", String(QUERIES)], { stdio: "inherit" });
    child.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`writer ${n} exited ${code}`))));
  }));
  await Promise.all(writers);
  const twoWritersMs = performance.now() - start;
  return { selectUs, insertUs, insertConcurrentUs, maxLoopDelayMs, afterReleaseMs, twoWritersMs };
}

const median = (all: number[]) => all.toSorted((a, b) => a - b)[Math.floor(all.length / 2)]!;

if (flags["writer-of"] !== undefined) {
  const db = VARIANTS[flags.variant as VariantName](flags["writer-of"]);
  await insertMany(db, QUERIES, 16, String(process.pid));
  await db.close();
} else {
  const dir = mkdtempSync(join(tmpdir(), "keelson-sqlite-lock-bench-"));
  const samples: Record<VariantName, Sample[]> = { sync: [], timers: [], worker: [] };
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (const variant of Object.keys(VARIANTS) as VariantName[]) samples[variant].push(await measure(variant, dir, round));
      process.stderr.write(`round ${round + 1}/${ROUNDS} done\n`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const columns: [keyof Sample, string, number][] = [
    ["selectUs", "point SELECT, µs", 1], ["insertUs", "INSERT, µs", 1], ["insertConcurrentUs", "INSERT ×32 in flight, µs each", 1],
    ["maxLoopDelayMs", "worst event-loop delay under a foreign lock, ms", 0], ["afterReleaseMs", "write done after the release, ms", 1],
    ["twoWritersMs", `2 processes × ${QUERIES} INSERTs, ms`, 0],
  ];
  console.log(`${ROUNDS} rounds, ${QUERIES} queries, lock held ${HOLD_MS} ms; medians (best in parentheses)`);
  console.log(`| variant | ${columns.map(([, title]) => title).join(" | ")} |`);
  console.log(`| --- | ${columns.map(() => "---").join(" | ")} |`);
  for (const variant of Object.keys(VARIANTS) as VariantName[]) {
    const cells = columns.map(([key, , digits]) => {
      const all = samples[variant].map((sample) => sample[key]);
      return `${median(all).toFixed(digits)} (${Math.min(...all).toFixed(digits)})`;
    });
    console.log(`| ${variant} | ${cells.join(" | ")} |`);
  }
}
