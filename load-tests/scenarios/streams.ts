// Event streams and WebSockets at full size under the supervisor (issue 27's "Done when"):
// 1. 200 event-stream and 50 WebSocket clients on 4 workers, a message published every 10 ms through
//    a rolling reload and then SIGTERM: every stream ends cleanly (final event / close 1001), every
//    client resumes with Last-Event-ID and has every message exactly once, exit 0, hooks after the
//    streams' end; the reload's duration against one without clients.
// 2. Fan-out throughput: 1,000 event-stream subscribers over 4 workers, messages published on one
//    worker: deliveries per second and the p50/p99 delivery latency (publish to arrival).
import * as fs from "node:fs";
import { startCluster, type Cluster } from "../lib/cluster.js";
import { ReconnectingWS, SSEClient, postJSON as post } from "../../test/helpers/stream-clients.js";
import { table, verdict, type Context, type Verdict } from "./common.js";

const NAME = "streams";
const WORKERS = 4;
const SSE_CLIENTS = 200;
const WS_CLIENTS = 50;
const SUBSCRIBERS = 1000;
const FLOOD_MESSAGES = Number(process.env.STREAMS_FLOOD ?? 500);
// The workers run as a deployment runs them: compiled JavaScript from dist/ (`make build-bench` builds
// the fixture there). STREAMS_SOURCE=1 runs CLI and fixture from source through tsx instead, whose
// loader makes every replacement's start cost several times the CPU (see BENCHMARKS.md).
const FROM_SOURCE = process.env.STREAMS_SOURCE === "1";
const ENTRY = FROM_SOURCE ? "test/fixtures/streams-app.ts" : "dist/load-tests/servers/streams.js";


async function until(test: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  while (!test()) {
    if (performance.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return true;
}

/** The reload's duration, and each step's: a replacement's start (`ready in`) and an old worker's drain (`terminated cleanly in`). */
async function reloadMs(cluster: Cluster): Promise<{ ms: number; steps: string }> {
  const mark = cluster.log().length;
  const started = performance.now();
  process.kill(cluster.pid, "SIGHUP");
  await cluster.waitFor(/reload complete/, mark, 60_000);
  const ms = performance.now() - started;
  const log = cluster.log().slice(mark);
  const ready = [...log.matchAll(/ready on \S+ in (\d+)ms/g)].map((m) => m[1]).join("/");
  const drains = [...log.matchAll(/terminated cleanly in (\d+)ms/g)].map((m) => m[1]).join("/");
  return { ms, steps: `replacements ready in ${ready} ms, old workers drained in ${drains} ms` };
}

/** CPU seconds (user + system) the processes have used so far, from /proc (clock ticks of 1/100 s). */
function cpuSeconds(pids: number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    try {
      // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
      const fields = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // Gone meanwhile.
    }
  }
  return ticks / 100;
}

const numbers = (values: unknown[]) => values.map((value) => (value as { n: number }).n);
const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;

export async function streams(context: Context): Promise<Verdict> {
  const failures: string[] = [];
  // 1. Reload and SIGTERM with live clients.
  const cluster = await startCluster({ cwd: context.root, entry: ENTRY, workers: WORKERS, tsx: FROM_SOURCE, pinCpu: context.pinning.server });
  let bare = { ms: 0, steps: "" };
  let idle = { ms: 0, steps: "" };
  let withClients = { ms: 0, steps: "" };
  let published = 0;
  let stopLine = "";
  let exitCode: number | null = null;
  try {
    bare = await reloadMs(cluster);
    const sse = Array.from({ length: SSE_CLIENTS }, () => new SSEClient(cluster.port, "/events/load"));
    await Promise.all(sse.map((client) => client.connect()));
    const ws = Array.from({ length: WS_CLIENTS }, () => new ReconnectingWS(`ws://127.0.0.1:${cluster.port}/socket/load`));
    await Promise.all(ws.map((client) => client.current.opened));
    // Clients connected, nothing published: what the streams themselves cost a reload.
    idle = await reloadMs(cluster);
    await until(() => sse.every((c) => c.connections === c.ends.length + 1) && ws.every((c) => c.closes.length >= 1), 20_000);
    const state = { publishing: true, n: 0 };
    const publisher = (async () => {
      while (state.publishing) {
        await post(cluster.port, "/publish/load", { n: state.n });
        state.n++;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    })();
    await new Promise((resolve) => setTimeout(resolve, 500));
    withClients = await reloadMs(cluster);
    await until(() => sse.every((c) => c.connections === c.ends.length + 1) && ws.every((c) => c.closes.length >= 2), 20_000);
    await new Promise((resolve) => setTimeout(resolve, 500));
    state.publishing = false;
    await publisher;
    published = state.n;
    const caughtUp = await until(() => sse.every((c) => c.data().length === published) && ws.every((c) => c.events.length === published), 30_000);
    const expected = JSON.stringify(Array.from({ length: published }, (_, n) => n));
    const sseExact = sse.filter((c) => JSON.stringify(numbers(c.data().map((d) => JSON.parse(d)))) === expected).length;
    const wsExact = ws.filter((c) => JSON.stringify(numbers(c.events.map((e) => e.data))) === expected).length;
    const sseClean = sse.filter((c) => c.ends.length > 0 && c.ends.every((e) => e.how === "end" && e.lastEvent === "shutdown")).length;
    const wsClean = ws.filter((c) => c.closes.length > 0 && c.closes.every((e) => e.code === 1001 && e.wasClean)).length;
    if (!caughtUp || sseExact !== SSE_CLIENTS || wsExact !== WS_CLIENTS) failures.push(`exactly once: ${sseExact}/${SSE_CLIENTS} SSE, ${wsExact}/${WS_CLIENTS} WS`);
    if (sseClean !== SSE_CLIENTS || wsClean !== WS_CLIENTS) failures.push(`clean ends: ${sseClean}/${SSE_CLIENTS} SSE, ${wsClean}/${WS_CLIENTS} WS`);

    const mark = cluster.log().length;
    for (const client of sse) client.retryMs = 60_000;
    process.kill(cluster.pid, "SIGTERM");
    exitCode = (await cluster.exited).code;
    const ended = await until(() => sse.every((c) => c.ends.at(-1)?.lastEvent === "shutdown") && ws.every((c) => c.closes.at(-1)?.code === 1001), 10_000);
    for (const client of sse) client.close();
    await Promise.all(ws.map((client) => client.stop()));
    const log = cluster.log().slice(mark);
    stopLine = /stopped: .*/.exec(log)?.[0] ?? "no stop line";
    const drains = [...log.matchAll(/terminated cleanly in (\d+)ms/g)].map((m) => Number(m[1]));
    const hooksAfterStreams = [...log.matchAll(/ending \d+ event stream/g)].length === WORKERS && [...log.matchAll(/fixture hook second: started/g)].length === WORKERS;
    if (exitCode !== 0 || !ended || !hooksAfterStreams || drains.length !== WORKERS) failures.push(`SIGTERM: exit ${exitCode}, ends seen ${ended}, drains ${drains.join(",")}`);
    table(["phase", "result"], [
      ["workers run from", FROM_SOURCE ? "source, through tsx (STREAMS_SOURCE=1)" : "dist/ (compiled, as deployed)"],
      ["reload without clients", `${bare.ms.toFixed(0)} ms (${bare.steps})`],
      [`reload with ${SSE_CLIENTS} SSE + ${WS_CLIENTS} WS clients, nothing published`, `${idle.ms.toFixed(0)} ms, ${(idle.ms / bare.ms).toFixed(2)}× (${idle.steps})`],
      [`reload with them and a message every 10 ms to all`, `${withClients.ms.toFixed(0)} ms, ${(withClients.ms / bare.ms).toFixed(2)}× (${withClients.steps})`],
      ["messages published through the reload", published],
      ["clients with every message exactly once", `${sseExact}/${SSE_CLIENTS} SSE, ${wsExact}/${WS_CLIENTS} WS`],
      ["clean ends (final event / close 1001)", `${sseClean}/${SSE_CLIENTS} SSE, ${wsClean}/${WS_CLIENTS} WS`],
      ["SIGTERM", `exit ${exitCode}; worker drains ${drains.join(", ")} ms; ${stopLine}`],
    ]);
  } finally {
    await cluster.stop();
  }

  // 2. Fan-out throughput to 1,000 subscribers.
  const fan = await startCluster({ cwd: context.root, entry: ENTRY, workers: WORKERS, tsx: FROM_SOURCE, pinCpu: context.pinning.server });
  let rate = 0;
  let p50 = NaN;
  let p99 = NaN;
  let delivered = 0;
  let clientCpu = 0;
  let serverCpu = 0;
  try {
    const clients = Array.from({ length: SUBSCRIBERS }, () => new SSEClient(fan.port, "/events/fan", { reconnect: false }));
    for (let i = 0; i < clients.length; i += 100) await Promise.all(clients.slice(i, i + 100).map((client) => client.connect()));
    const started = performance.now();
    const startedAt = Date.now();
    const cpu = process.cpuUsage();
    const serverPids = [fan.pid, ...fan.children()];
    const serverCpuBefore = cpuSeconds(serverPids);
    await post(fan.port, `/flood/fan?count=${FLOOD_MESSAGES}&bytes=64&burst=20&stamp=1`, {});
    const all = await until(() => clients.every((c) => c.data().length >= FLOOD_MESSAGES), 120_000);
    const elapsed = (Math.max(...clients.map((c) => c.events.at(-1)?.at ?? 0)) - started) / 1000;
    const used = process.cpuUsage(cpu);
    serverCpu = cpuSeconds(serverPids) - serverCpuBefore;
    clientCpu = (used.user + used.system) / 1e6 / elapsed;
    delivered = clients.reduce((sum, c) => sum + c.data().length, 0);
    rate = delivered / elapsed;
    const latencies: number[] = [];
    const offset = startedAt - started;
    for (const client of clients) {
      for (const event of client.events) {
        const at = (JSON.parse(event.data) as { at?: number }).at;
        if (at !== undefined) latencies.push(event.at + offset - at);
      }
    }
    latencies.sort((a, b) => a - b);
    p50 = percentile(latencies, 50);
    p99 = percentile(latencies, 99);
    if (!all) failures.push(`fan-out: ${delivered} of ${FLOOD_MESSAGES * SUBSCRIBERS} deliveries`);
    for (const client of clients) client.close();
    table(["fan-out", "result"], [
      ["subscribers / workers", `${SUBSCRIBERS} / ${WORKERS}`],
      ["messages published (64 B, one worker)", FLOOD_MESSAGES],
      ["deliveries", delivered],
      ["deliveries per second", rate.toFixed(0)],
      ["messages per second to all subscribers", (rate / SUBSCRIBERS).toFixed(0)],
      ["delivery latency p50 / p99", `${p50.toFixed(1)} ms / ${p99.toFixed(1)} ms`],
      ["the 1,000 clients' process (same machine)", `${(clientCpu * 100).toFixed(0)} % of a core`],
      ["server CPU (primary + workers) per delivery", `${((serverCpu / Math.max(1, delivered)) * 1e6).toFixed(1)} µs (${serverCpu.toFixed(2)} s in all)`],
    ]);
  } finally {
    await fan.stop();
  }
  return verdict(NAME, failures.length === 0,
    `${SSE_CLIENTS} SSE + ${WS_CLIENTS} WS clients on ${WORKERS} workers (${FROM_SOURCE ? "tsx" : "dist"}): reload ${idle.ms.toFixed(0)} ms (${bare.ms.toFixed(0)} ms without clients, ${withClients.ms.toFixed(0)} ms while publishing), ` +
    `${published} messages published through it, SIGTERM exit ${exitCode}; fan-out to ${SUBSCRIBERS} subscribers: ${rate.toFixed(0)} deliveries/s ` +
    `(${(rate / SUBSCRIBERS).toFixed(0)} messages/s to all; ${((serverCpu / Math.max(1, delivered)) * 1e6).toFixed(1)} µs of server CPU each), p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms` +
    (failures.length === 0 ? "" : `; FAILED: ${failures.join("; ")}`));
}
