/**
 * Issue 32's hostile resume, shared by test/streams-replay.test.ts (short) and the `replay-garbage`
 * load scenario (full size): a channel of the streams fixture filled with large events, then
 * clients that resume with `Last-Event-ID: garbage` (and a few with a real id that fell out of the
 * buffer), all at once, while GET /health is timed and the primary's RSS sampled.
 */
import * as fs from "node:fs";
import * as http from "node:http";
import { childPids } from "../../load-tests/lib/cluster.js";
import { SSEClient, postJSON } from "./stream-clients.js";

export interface AttackSpec {
  port: number;
  /** The supervisor's primary. */
  primaryPid: number;
  room: string;
  /** Events published before the attack, and the characters of each. */
  fill: { count: number; bytes: number };
  garbageClients: number;
  /** Clients resuming from the channel's first id, long fallen out of the buffer. */
  staleClients: number;
  timeoutMs: number;
  /** How long /health is timed before the attack, for the baseline (default 2 s). */
  baselineMs?: number;
}

interface Timings {
  count: number;
  failed: number;
  p50: number;
  p99: number;
  max: number;
}

export interface AttackResult {
  rssBeforeMiB: number;
  rssPeakMiB: number;
  /** GET /health during the attack, and for as long before it, with the channel full and no client: the machine's own noise. */
  health: Timings;
  baseline: Timings;
  /** Garbage clients that got exactly one `missed: "unknown"` and no replayed event. */
  garbageClean: number;
  /** Stale clients that got one `missed` count and then only events newer than it, in order. */
  staleClean: number;
  /** Clients (of both kinds) that got the live event published after the attack, once. */
  gotLive: number;
  /** Largest replay one stale client received, in events. */
  staleReplayed: number;
  workersBefore: number[];
  workersAfter: number[];
}

/** VmRSS of `pid` in MiB (Linux /proc). */
export function rssMiB(pid: number): number {
  const line = /^VmRSS:\s+(\d+) kB$/m.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
  return line === null ? Number.NaN : Number(line[1]) / 1024;
}

/** One GET /health on a new connection: its status and milliseconds (status 0: failed or over 5 s). */
function health(port: number): Promise<{ status: number; ms: number }> {
  const started = performance.now();
  return new Promise((resolve) => {
    const request = http.get({ host: "127.0.0.1", port, path: "/health", agent: false, timeout: 5000 }, (response) => {
      response.resume();
      response.on("end", () => resolve({ status: response.statusCode ?? 0, ms: performance.now() - started }));
    });
    request.on("timeout", () => request.destroy());
    request.on("error", () => resolve({ status: 0, ms: performance.now() - started }));
  });
}

async function until(test: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  while (!test()) {
    if (performance.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return true;
}

function summarize(timings: { status: number; ms: number }[]): Timings {
  const ms = timings.filter((t) => t.status === 200).map((t) => t.ms).toSorted((a, b) => a - b);
  return { count: timings.length, failed: timings.length - ms.length, p50: percentile(ms, 50), p99: percentile(ms, 99), max: ms.at(-1) ?? Number.NaN };
}

/** GET /health one after another, 20 ms apart, until `state.measuring` is false. */
async function probe(port: number, state: { measuring: boolean }, timings: { status: number; ms: number }[]): Promise<void> {
  while (state.measuring) {
    timings.push(await health(port));
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const seqOf = (id: string | undefined) => Number(id?.split("-")[1]);
const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;

export async function replayAttack(spec: AttackSpec): Promise<AttackResult> {
  const { port, primaryPid, room } = spec;
  const first = await postJSON<{ id: string }>(port, `/publish/${room}`, { n: -1 });
  // Through the fixture's flood route, 8 at a time: the workers publish, the primary buffers.
  const flood = await fetch(`http://127.0.0.1:${port}/flood/${room}?count=${spec.fill.count}&bytes=${spec.fill.bytes}&burst=8`, { method: "POST" });
  if (flood.status !== 200) throw new Error(`flood answered ${flood.status}`);
  await flood.arrayBuffer();
  const workersBefore = childPids(primaryPid).toSorted();
  const quiet: { status: number; ms: number }[] = [];
  const before = { measuring: true };
  const baselineProbe = probe(port, before, quiet);
  await new Promise((resolve) => setTimeout(resolve, spec.baselineMs ?? 2000));
  before.measuring = false;
  await baselineProbe;
  const rssBeforeMiB = rssMiB(primaryPid);
  let rssPeakMiB = rssBeforeMiB;
  const timings: { status: number; ms: number }[] = [];
  const state = { measuring: true };
  const sampler = setInterval(() => (rssPeakMiB = Math.max(rssPeakMiB, rssMiB(primaryPid))), 25);
  const prober = probe(port, state, timings);
  const garbage = Array.from({ length: spec.garbageClients }, () => new SSEClient(port, `/events/${room}`, { reconnect: false, lastId: "garbage" }));
  const stale = Array.from({ length: spec.staleClients }, () => new SSEClient(port, `/events/${room}`, { reconnect: false, lastId: first.id }));
  const clients = [...garbage, ...stale];
  try {
    await Promise.all(clients.map((client) => client.connect()));
    const staleDone = (client: SSEClient) => client.data("missed").length === 1 && client.data().length > 0 && client.data().at(-1)!.includes(`"n":${spec.fill.count - 1},`);
    await until(() => garbage.every((c) => c.data("missed").length === 1) && stale.every(staleDone), spec.timeoutMs);
    // A second of attack traffic settled: the service must have kept answering through it.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const live = await postJSON<{ id: string }>(port, `/publish/${room}`, { n: "live" });
    await until(() => clients.every((c) => c.events.some((e) => e.id === live.id)), spec.timeoutMs);
    state.measuring = false;
    await prober;
    return {
      rssBeforeMiB, rssPeakMiB, health: summarize(timings), baseline: summarize(quiet),
      garbageClean: garbage.filter((c) => c.data("missed").length === 1 && c.data("missed")[0]!.includes('"missed":"unknown"')
        && c.events.filter((e) => e.event === "message").every((e) => e.id === live.id)).length,
      staleClean: stale.filter((c) => {
        const ids = c.events.filter((e) => e.event === "message").map((e) => seqOf(e.id));
        return c.data("missed").length === 1 && ids.every((seq, i) => i === 0 || seq === ids[i - 1]! + 1);
      }).length,
      gotLive: clients.filter((c) => c.events.filter((e) => e.id === live.id).length === 1).length,
      staleReplayed: Math.max(0, ...stale.map((c) => c.data().length - 1)),
      workersBefore,
      workersAfter: childPids(primaryPid).toSorted(),
    };
  } finally {
    state.measuring = false;
    clearInterval(sampler);
    for (const client of clients) client.close();
  }
}
