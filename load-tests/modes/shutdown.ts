// Time from SIGTERM to process exit of a keelson service, idle and under autocannon load:
// `node --import tsx load-tests/bench.ts shutdown [--runs 5] [--connections 50]`.
// The service is the benchmark's keelson server, transpiled to plain JavaScript (no tsx at
// run time), pinned to CPU 0; autocannon runs in its own process on CPU 1 when possible.
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { builtServers } from "../lib/build.js";
import { killAllChildren as killAll, adopt as track } from "../../harness/child.js";
import { sleep } from "../lib/http.js";
import { LoadClient } from "../lib/load-client.js";
import { choosePinning } from "../lib/machine.js";
import { freePort } from "../lib/server.js";
import { median } from "../lib/stats.js";
import type { LoadResult } from "../lib/types.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
// Load runs this long before the signal, so every connection is busy when it arrives.
const LOAD_BEFORE_SIGNAL_MS = 1500;
const LOAD_DURATION_SEC = 4;

interface Sample {
  ms: number;
  code: number | null;
  load?: LoadResult;
}

const { values } = parseArgs({
  options: { runs: { type: "string", default: "5" }, connections: { type: "string", default: "50" } },
});
const runs = Number(values.runs);
const connections = Number(values.connections);
if (!Number.isInteger(runs) || runs < 1 || !Number.isInteger(connections) || connections < 1) {
  console.error("usage: node --import tsx load-tests/bench.ts shutdown [--runs N] [--connections N]");
  process.exit(2);
}

const pinning = choosePinning();
const build = builtServers(ROOT);
const logDir = fs.mkdtempSync(path.join(os.tmpdir(), "keelson-shutdown-logs-"));
const client = new LoadClient(pinning.load, ROOT);
process.on("exit", () => {
  killAll();
  build.remove();
  fs.rmSync(logDir, { recursive: true, force: true });
});

/** Starts the service and resolves once it prints READY; returns the child and its port. */
async function startService() {
  const port = await freePort();
  const node = [process.execPath, build.entry("keelson")];
  const argv = pinning.server === null ? node : ["taskset", "-c", String(pinning.server), ...node];
  const child = spawn(argv[0]!, argv.slice(1), {
    cwd: build.dir,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, PORT: String(port), NODE_ENV: "production", BENCH_LOG_DIR: logDir },
  });
  track(child);
  let output = "";
  const exited = new Promise<{ code: number | null; at: number }>((resolve) =>
    child.once("exit", (code) => resolve({ code, at: performance.now() })));
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString("utf8");
      if (output.includes(`READY ${port}`)) resolve();
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    void exited.then(() => reject(new Error(`service exited before READY:\n${output}`)));
  });
  return { child, port, exited };
}

async function measureIdle(): Promise<Sample> {
  const service = await startService();
  await sleep(300);
  const signalled = performance.now();
  service.child.kill("SIGTERM");
  const exit = await service.exited;
  return { ms: exit.at - signalled, code: exit.code };
}

async function measureLoaded(): Promise<Sample> {
  const service = await startService();
  const load = client.run({
    origin: `http://127.0.0.1:${service.port}`,
    requests: [{ method: "GET", path: "/hello" }],
    durationSec: LOAD_DURATION_SEC,
    connections,
    pipelining: 1,
    measureCpu: false,
  });
  await sleep(LOAD_BEFORE_SIGNAL_MS);
  const signalled = performance.now();
  service.child.kill("SIGTERM");
  const exit = await service.exited;
  return { ms: exit.at - signalled, code: exit.code, load: await load };
}

const fmt = (n: number | null) => (n === null ? "-" : n.toFixed(1));

function row(name: string, samples: Sample[]): string {
  const ms = samples.map((s) => s.ms);
  const codes = [...new Set(samples.map((s) => s.code))].join(",");
  const loads = samples.flatMap((s) => (s.load ? [s.load] : []));
  // Requests answered in the whole run (1.5 s of load, then the drain); non-2xx must stay 0.
  const loadNote = loads.length === 0 ? "" : `${fmt(median(loads.map((l) => l.requests)))} answered, ${Math.max(...loads.map((l) => l.non2xx))} non-2xx`;
  return `| ${name} | ${samples.length} | ${fmt(median(ms))} | ${fmt(Math.min(...ms))} | ${fmt(Math.max(...ms))} | ${codes} | ${loadNote} |`;
}

console.log(`machine: ${os.cpus().length} x ${os.cpus()[0]?.model ?? "?"}, node ${process.version}; ${pinning.note}`);
const idle: Sample[] = [];
const loaded: Sample[] = [];
// Interleaved, so drift of a shared machine hits both conditions alike.
for (let i = 0; i < runs; i++) {
  idle.push(await measureIdle());
  loaded.push(await measureLoaded());
  console.log(`run ${i + 1}/${runs}: idle ${idle.at(-1)!.ms.toFixed(1)} ms, under load ${loaded.at(-1)!.ms.toFixed(1)} ms`);
}
client.close();
console.log("");
console.log("| condition | runs | median ms | min ms | max ms | exit codes | requests (median) |");
console.log("| --- | --- | --- | --- | --- | --- | --- |");
console.log(row("idle", idle));
console.log(row(`autocannon, ${connections} connections`, loaded));
process.exit(0);
