// The request line alone: keelson's formatter and sink against pino's, writing the same JSON line
// (level, time, method, path, status, duration, request id) to a file. CPU time per line of the
// whole process (every thread: libuv's pool writes pino's asynchronous destination), measured over
// batches that let the event loop turn as a server's would, until the bytes are in the file.
// Interleaved rounds; `process.cpuUsage()` counts this process's CPU only, so neighbours on a busy
// machine slow the wall clock, not the figure (they still share caches: compare within one run).
//
//   node --import tsx load-tests/log-line.ts [--rounds 7] [--lines 200000] [--batch 200]
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parseArgs } from "node:util";
import pino from "pino";
import { Logger } from "../src/index.js";

const { values } = parseArgs({
  options: { rounds: { type: "string", default: "7" }, lines: { type: "string", default: "200000" }, batch: { type: "string", default: "200" } },
});
const rounds = Number(values.rounds);
const lines = Number(values.lines);
const batch = Number(values.batch);
if (!(rounds > 0 && lines > 0 && batch > 0)) {
  console.error("usage: node --import tsx load-tests/log-line.ts [--rounds N] [--lines N] [--batch N]");
  process.exit(2);
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "keelson-log-line-"));
process.on("exit", () => fs.rmSync(dir, { recursive: true, force: true }));

const PATHS = ["/hello", "/books/42", "/books"];
const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

interface Variant {
  name: string;
  /** Writes `lines` lines to `file`; resolves once its writer says every byte is written. */
  run(file: string): Promise<void>;
}

/** Ends a pino destination and resolves once it has written everything and closed its file. */
function closed(destination: ReturnType<typeof pino.destination>): Promise<void> {
  return new Promise((resolve, reject) => {
    destination.once("close", () => resolve());
    destination.once("error", reject);
    destination.end();
  });
}

/** The lines in `file`, checked after the measured window: a variant that lost lines is refused. */
function countLines(file: string): number {
  const text = fs.readFileSync(file, "utf8");
  let n = 0;
  for (let at = text.indexOf("\n"); at !== -1; at = text.indexOf("\n", at + 1)) n++;
  return n;
}

async function batches(write: (i: number) => void): Promise<void> {
  for (let i = 0; i < lines; ) {
    const end = Math.min(lines, i + batch);
    for (; i < end; i++) write(i);
    await turn();
  }
}

/** The fields of pino's line `i` (keelson's are the arguments of `logger.request`). */
const fields = (i: number) => ({ method: "GET", path: PATHS[i % 3], status: 200, duration: `${(0.42 + (i % 7) / 10).toFixed(2)}ms` });

/** pino to `file` through its destination; the request id bound by a child logger, or as a field. */
function pinoToFile(name: string, sync: boolean, child: boolean): Variant {
  return {
    name,
    async run(file) {
      const destination = pino.destination({ dest: file, sync });
      const logger = pino({ base: undefined }, destination);
      await batches((i) => (child ? logger.child({ request_id: `7f575724e9-${i}` }).info(fields(i)) : logger.info({ request_id: `7f575724e9-${i}`, ...fields(i) })));
      await closed(destination);
    },
  };
}

/** A writer that keeps nothing: the formatter's cost alone. */
const discard = { write: (): boolean => true };

const variants: Variant[] = [
  {
    name: "keelson, formatter only (a no-op writer)",
    async run(file) {
      const logger = new Logger({ isProduction: true, format: "json" }).withWriter(discard);
      await batches((i) => logger.request({ method: "GET", path: PATHS[i % 3]!, status: 200, durationMs: 0.42 + (i % 7) / 10, requestId: `7f575724e9-${i}` }));
      logger.flush();
      fs.writeFileSync(file, "\n".repeat(lines));
    },
  },
  {
    name: "pino, formatter only (a no-op stream)",
    async run(file) {
      const logger = pino({ base: undefined }, discard);
      await batches((i) => logger.child({ request_id: `7f575724e9-${i}` }).info({ method: "GET", path: PATHS[i % 3], status: 200, duration: `${(0.42 + (i % 7) / 10).toFixed(2)}ms` }));
      fs.writeFileSync(file, "\n".repeat(lines));
    },
  },
  {
    // What a service writes to stdout: the sink batches a turn's lines into one write(2).
    name: "keelson, file descriptor (its stdout path)",
    async run(file) {
      const fd = fs.openSync(file, "w");
      const logger = new Logger({ isProduction: true, format: "json", output: fd });
      await batches((i) => logger.request({ method: "GET", path: PATHS[i % 3]!, status: 200, durationMs: 0.42 + (i % 7) / 10, requestId: `7f575724e9-${i}` }));
      logger.flush();
      fs.closeSync(fd);
    },
  },
  {
    name: "keelson, fs.createWriteStream (withWriter)",
    async run(file) {
      const stream = fs.createWriteStream(file);
      const logger = new Logger({ isProduction: true, format: "json" }).withWriter(stream);
      await batches((i) => logger.request({ method: "GET", path: PATHS[i % 3]!, status: 200, durationMs: 0.42 + (i % 7) / 10, requestId: `7f575724e9-${i}` }));
      logger.flush();
      await new Promise<void>((resolve) => stream.end(resolve));
    },
  },
  // As fastify logs: a child logger per request bound to its id, one line at completion.
  pinoToFile("pino, destination({ sync: false })", false, true),
  pinoToFile("pino, sync: false, no child per request", false, false),
  pinoToFile("pino, destination() (sync, pino's default)", true, true),
];

const samples = new Map<string, number[]>(variants.map((v) => [v.name, []]));
const bytes = new Map<string, number>();
let run = 0;
for (let round = 0; round <= rounds; round++) {
  // Round 0 warms every variant up (V8's compilers) and is not counted.
  const order = round % 2 === 0 ? variants : variants.toReversed();
  for (const variant of order) {
    const file = path.join(dir, `run-${run++}.log`);
    const before = process.cpuUsage();
    await variant.run(file);
    const used = process.cpuUsage(before);
    const written = countLines(file);
    // The formatter-only variants write nothing; their file only stands in for the check.
    if (written !== lines) throw new Error(`${variant.name} wrote ${written} of ${lines} lines`);
    if (round > 0) samples.get(variant.name)!.push(((used.user + used.system) * 1_000) / lines);
    if (!variant.name.includes("formatter only")) bytes.set(variant.name, fs.statSync(file).size / lines);
    fs.rmSync(file);
  }
}

const median = (xs: number[]): number => xs.toSorted((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`node ${process.version}, ${os.cpus()[0]?.model ?? "?"}, load average ${os.loadavg()[0]?.toFixed(2)}; ${lines} lines per run in batches of ${batch}, median of ${rounds} rounds`);
console.log(`${"variant".padEnd(46)} ${"CPU ns/line".padStart(12)} ${"min".padStart(8)} ${"max".padStart(8)} ${"bytes/line".padStart(11)}`);
for (const variant of variants) {
  const xs = samples.get(variant.name)!;
  console.log(`${variant.name.padEnd(46)} ${median(xs).toFixed(0).padStart(12)} ${Math.min(...xs).toFixed(0).padStart(8)} ${Math.max(...xs).toFixed(0).padStart(8)} ${(bytes.get(variant.name)?.toFixed(0) ?? "-").padStart(11)}`);
}
