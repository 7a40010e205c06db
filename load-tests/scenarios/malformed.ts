// 1,000 malformed requests of every kind (malformed-requests.ts) to the example bookstore, twice:
// no 5xx (none of its routes throws on purpose), every error answer is JSON with a `code`, and
// RSS after the last burst within 10 % of RSS after the one before it (each reading after a GC).
// The first bursts raise RSS with a flat JS heap: glibc keeps the memory of 16 concurrent 1 MiB
// bodies in its arenas. On Node 24 that high-water mark still rises ~20 % in the second burst (the
// code of the previous release measures the same), so three bursts run and the last two are
// compared: a leak shows up as growth from one identical burst to the next.
import { spawn } from "node:child_process";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import { adopt as track } from "../../harness/child.js";
import { sleep } from "../lib/http.js";
import { readRssMb } from "../lib/machine.js";
import { rawRequest, type RawRequest } from "../lib/raw-http.js";
import { freePort } from "../lib/server.js";
import { table, verdict, type Context, type Verdict } from "./common.js";
import { countStatuses, judge, KINDS, newTally } from "./malformed-requests.js";

const NAME = "malformed";
const PER_KIND = 1_000;
const CONCURRENCY = 16;
const WARMUP_REQUESTS = 2_000;
// The allocator's high-water is reached within the first bursts (the first, or on a quiet machine
// sometimes the third); the last two bursts are compared, so they must come after it: a leak keeps
// growing burst after burst, a high-water does not.
const BURSTS = 5;
const RSS_TOLERANCE = 1.1;

/** The built bookstore App on 127.0.0.1 (main.js would bind every interface), GC on SIGUSR2. */
const serverProgram = (appUrl: string) => `
const { buildApp } = await import(${JSON.stringify(appUrl)});
process.on("SIGUSR2", () => { globalThis.gc(); process.stdout.write("GC_DONE " + process.memoryUsage().heapUsed + "\\n"); });
// Load shedding off: this scenario judges input handling, and on a busy machine a shed 503 (by
// design under overload) would read as a 5xx the malformed input caused.
await buildApp({ host: "127.0.0.1", port: Number(process.env.PORT), loadShedding: false }).listen();`;

/** Runs `count` jobs `concurrency` at a time; stops starting new ones after `deadlineMs`. */
async function pool(count: number, concurrency: number, deadlineMs: number, job: (i: number) => Promise<void>): Promise<number> {
  let next = 0;
  const deadline = performance.now() + deadlineMs;
  const lane = async (): Promise<void> => {
    while (next < count && performance.now() < deadline) await job(next++);
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
  return next;
}

/** A stand-in OTLP/HTTP collector, so the App has a real tracer and parses every traceparent. */
async function startSpanSink(): Promise<http.Server> {
  const sink = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end("{}"));
  });
  await new Promise<void>((resolve) => sink.listen(0, "127.0.0.1", resolve));
  return sink;
}

export async function malformed(context: Context): Promise<Verdict> {
  const sink = await startSpanSink();
  const port = await freePort();
  const appUrl = pathToFileURL(path.join(context.root, "dist/examples/bookstore/app.js")).href;
  const node = [process.execPath, "--expose-gc", "--input-type=module", "-e", serverProgram(appUrl)];
  const argv = context.pinning.server === null ? node : ["taskset", "-c", String(context.pinning.server), ...node];
  const child = spawn(argv[0] ?? process.execPath, argv.slice(1), {
    cwd: context.root,
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      ...process.env, NODE_ENV: "production", PORT: String(port), OTEL_SERVICE_NAME: "bookstore-malformed",
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(sink.address() as AddressInfo).port}`,
    },
  });
  track(child);
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  // The JSON request log, tallied line by line: it also records answers the client never saw.
  const logged = { fiveXx: 0, errorLines: 0, listening: false, gcs: 0, heapMb: Number.NaN, firstError: "" };
  let partial = "";
  const onOutput = (chunk: Buffer): void => {
    const lines = (partial + chunk.toString("utf8")).split("\n");
    partial = lines.pop() ?? "";
    for (const line of lines) {
      if (line.startsWith("GC_DONE ")) {
        logged.gcs++;
        logged.heapMb = Number(line.slice(8)) / 1024 / 1024;
      }
      else if (/"status":5\d\d/.test(line)) logged.fiveXx++;
      else if (line.includes('"level":"error"')) {
        logged.errorLines++;
        logged.firstError ||= line.slice(0, 300);
      } else if (line.includes("listening on")) logged.listening = true;
    }
  };
  child.stdout.on("data", onOutput);
  child.stderr.on("data", onOutput);
  const waitUntil = async (ready: () => boolean, what: string, timeoutMs: number): Promise<void> => {
    const deadline = performance.now() + timeoutMs;
    while (!ready()) {
      if (performance.now() > deadline || child.exitCode !== null) throw new Error(`bookstore: ${what} not seen within ${timeoutMs} ms`);
      await sleep(20);
    }
  };
  /** GC, 1 s settle, then VmRSS; also prints the JS heap, to tell a heap leak from allocator high-water. */
  const gcRss = async (label: string): Promise<number> => {
    const before = logged.gcs;
    child.kill("SIGUSR2");
    await waitUntil(() => logged.gcs > before, "GC_DONE", 5_000);
    await sleep(1_000);
    const rss = readRssMb(child.pid ?? -1) ?? Number.NaN;
    console.log(`RSS ${label}: ${rss.toFixed(1)} MB (JS heap used after GC: ${logged.heapMb.toFixed(1)} MB)`);
    return rss;
  };

  try {
    await waitUntil(() => logged.listening, "the listening line", 20_000);
    const valid: RawRequest[] = ["/hello", "/api/books?page=1&limit=2", "/api/books/b1", "/health"].map((p) => ({
      head: `GET ${p} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\ntraceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01`,
    }));
    let warmFailures = 0;
    await pool(WARMUP_REQUESTS, CONCURRENCY, 60_000, async (i) => {
      const res = await rawRequest(port, valid[i % valid.length] as RawRequest);
      if (res.status !== 200) warmFailures++;
    });
    const rssWarm = await gcRss(`after ${WARMUP_REQUESTS} valid requests + GC`);

    const tallies = KINDS.map(newTally);
    const rss: number[] = [];
    const burstStarted = performance.now();
    for (let burst = 1; burst <= BURSTS; burst++) {
      for (const [k, kind] of KINDS.entries()) {
        const tally = tallies[k] ?? newTally();
        tally.sent += await pool(PER_KIND, CONCURRENCY, 60_000, async (i) => judge(kind, await rawRequest(port, kind.request(i)), tally));
      }
      // Let the span batches go out and the sockets close before the reading.
      await sleep(1_000);
      rss.push(await gcRss(`after burst ${burst} (${PER_KIND} of each kind) + GC`));
    }
    const burstSec = (performance.now() - burstStarted) / 1000;
    child.kill("SIGTERM");
    const code = await Promise.race([exited, sleep(15_000).then(() => "timeout")]);
    if (code === "timeout") child.kill("SIGKILL");

    const sum = (pick: (t: (typeof tallies)[number], k: number) => number): number => tallies.reduce((n, t, k) => n + pick(t, k), 0);
    const totals = {
      sent: sum((t) => t.sent), clientFiveXx: sum((t) => countStatuses(t, (s) => s >= 500)), notJson: sum((t) => t.notJson), parserLevel: sum((t) => t.parserLevel),
    };
    table(["kind", "sent", "statuses", "expected", "unexpected status", "Node parser answers", "no answer", "not JSON with code"], KINDS.map((kind, k) => {
      const t = tallies[k] ?? newTally();
      const statuses = [...t.statuses].toSorted(([a], [b]) => a - b).map(([s, c]) => `${s}×${c}`).join(" ");
      return [kind.name, t.sent, statuses || "-", kind.expected.join("/"), countStatuses(t, (s) => !kind.expected.includes(s)), t.parserLevel, t.noResponse,
        t.notJson + (t.samples.length > 0 ? ` (${t.samples.join("; ")})` : "")];
    }));
    const [rssFirst = Number.NaN, rssBefore = Number.NaN, rssLast = Number.NaN] = [rss[0], rss.at(-2), rss.at(-1)];
    console.log(`warm-up: ${WARMUP_REQUESTS} valid requests (${warmFailures} not 200); ${BURSTS} bursts: ${totals.sent} requests in ${burstSec.toFixed(1)} s`);
    console.log(`RSS: ${rssWarm.toFixed(1)} MB after the warm-up, ${rss.map((r) => r.toFixed(1)).join(" MB, ")} MB after each burst ` +
      `(first burst ${((rssFirst / rssWarm - 1) * 100).toFixed(1)} % over the warm-up: allocator high-water; last burst ${((rssLast / rssBefore - 1) * 100).toFixed(1)} % over the one before)`);
    console.log(`server log: ${logged.fiveXx} request line(s) with a 5xx status, ${logged.errorLines} other ERROR line(s); exit code ${code}`);
    if (logged.firstError) console.log(`first ERROR line: ${logged.firstError}`);
    const rssOk = rssLast <= rssBefore * RSS_TOLERANCE;
    const pass = totals.sent === BURSTS * PER_KIND * KINDS.length && totals.clientFiveXx === 0 && logged.fiveXx === 0 && totals.notJson === 0 && rssOk && warmFailures === 0;
    return verdict(NAME, pass,
      `${totals.sent} malformed requests (${KINDS.length} kinds × ${PER_KIND}, ${BURSTS} bursts): ${totals.clientFiveXx} 5xx answers received and ${logged.fiveXx} 5xx in the server's request log, ` +
      `${totals.notJson} answers not JSON with a \`code\` (${totals.parserLevel} bodiless 4xx from Node's HTTP parser, before keelson, not counted), ` +
      `RSS ${rssBefore.toFixed(1)} → ${rssLast.toFixed(1)} MB from the burst before the last to the last (${(rssLast / rssBefore).toFixed(3)}×, limit ${RSS_TOLERANCE}×; ` +
      `${rssWarm.toFixed(1)} MB after the valid warm-up).`);
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    sink.close();
    sink.closeAllConnections();
  }
}
