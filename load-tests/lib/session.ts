// One (round, target) session on a freshly started server: correctness check, idle RSS,
// one mixed warm-up, then every scenario measured with the server's CPU diffed around it.
import * as http from "node:http";
import { SCENARIOS, scenariosFor, type Config } from "./args.js";
import { request, sleep } from "./http.js";
import type { LoadClient } from "./load-client.js";
import { readRssMb } from "./machine.js";
import { startServer, type LaunchSpec, type ServerHandle } from "./server.js";
import type { SpeedProbe } from "./speed-probe.js";
import type { RunRecord, Scenario } from "./types.js";
import { countLive, LogLineCounter, workOf, type Counts, type Responses } from "./work.js";

export interface SessionResult {
  records: RunRecord[];
  idleRssMb: number | null;
  warnings: string[];
  /** Every response the server gave this session, and what it emitted for them (log lines: counted once it exits). */
  responses: Responses;
  counts: Counts;
}

/** The session's requests outside autocannon: checkRoutes' four and idleRss's hundred. */
const CONTROL_REQUESTS = 104;

function parse(body: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(body);
    return typeof value === "object" && value !== null ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** Same answers from every target, or the comparison is meaningless: say so loudly. */
export async function checkRoutes(origin: string): Promise<string[]> {
  const problems: string[] = [];
  const hello = await request(`${origin}/hello`);
  if (hello.status !== 200 || parse(hello.body)?.hello !== "world") problems.push(`GET /hello -> ${hello.status} ${hello.body.slice(0, 80)}`);
  const one = await request(`${origin}/books/42`);
  const oneBody = parse(one.body);
  if (one.status !== 200 || String(oneBody?.id) !== "42" || oneBody?.title !== "Book 42") {
    problems.push(`GET /books/42 -> ${one.status} ${one.body.slice(0, 80)}`);
  }
  const valid = await request(`${origin}/books`, { method: "POST", body: JSON.stringify({ title: "Dune", author: "Frank Herbert" }) });
  if (valid.status !== 201 || parse(valid.body)?.title !== "Dune") problems.push(`POST /books (valid) -> ${valid.status} ${valid.body.slice(0, 80)}`);
  const invalid = await request(`${origin}/books`, { method: "POST", body: JSON.stringify({ title: "", author: 7 }) });
  if (invalid.status !== 400 && invalid.status !== 422) problems.push(`POST /books (invalid) -> ${invalid.status}, expected 400/422`);
  return problems;
}

/** 100 requests over one keep-alive connection, a 1 s settle, then VmRSS. */
async function idleRss(server: ServerHandle): Promise<number | null> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    for (let i = 0; i < 100; i++) {
      const scenario = SCENARIOS[i % SCENARIOS.length];
      if (!scenario) continue;
      await request(`${server.origin}${scenario.path}`, { method: scenario.method, body: scenario.body, agent });
    }
  } finally {
    agent.destroy();
  }
  await sleep(1_000);
  return readRssMb(server.pid);
}

/** A fresh server's idle RSS, as a session measures it before its load, then the server stopped. */
export async function measureIdleRss(spec: LaunchSpec): Promise<number | null> {
  const server = await startServer(spec);
  try {
    return await idleRss(server);
  } finally {
    await server.stop();
  }
}

/**
 * The log's request lines once its writer has caught up: counted while the server runs (a peer
 * killed by SIGTERM would lose what its asynchronous writer still held), until two counts 200 ms
 * apart agree.
 */
async function settledLogLines(logs: LogLineCounter): Promise<number> {
  let last = logs.count();
  for (let i = 0; i < 25; i++) {
    await sleep(200);
    const now = logs.count();
    if (now === last) return now;
    last = now;
  }
  return last;
}

/** A started server made ready for measured windows: its answers checked, its idle RSS read, one mixed warm-up. */
export interface Prepared {
  warnings: string[];
  idleRssMb: number | null;
  /** The responses it gave so far (the control requests and the warm-up). */
  responses: Responses;
}

export async function prepareServer(server: ServerHandle, loader: LoadClient, config: Config): Promise<Prepared> {
  const warnings = await checkRoutes(server.origin);
  const idleRssMb = await idleRss(server);
  // One warm-up per server start, all routes mixed, so every handler is JIT-compiled
  // before any measured window without paying a warm-up per scenario.
  const warmup = await loader.run({
    origin: server.origin, connections: config.connections, pipelining: config.pipelining,
    requests: scenariosFor(config), durationSec: config.warmupSec, measureCpu: false,
  });
  return { warnings, idleRssMb, responses: { answered: CONTROL_REQUESTS + warmup.requests, sent: CONTROL_REQUESTS + warmup.sent } };
}

/** One measured window of one scenario, the server's CPU diffed around it; its responses added to `responses`. */
export async function measureWindow(
  server: ServerHandle, loader: LoadClient, config: Config, scenario: Scenario, target: string, round: number, responses: Responses,
  probe?: SpeedProbe,
): Promise<RunRecord> {
  if (!server.alive()) throw new Error(`server died during the run\n${server.output()}`);
  const speedBefore = await probe?.measure();
  const result = await loader.run({
    origin: server.origin, connections: config.connections, pipelining: config.pipelining,
    requests: [scenario], durationSec: config.durationSec, measureCpu: true,
  });
  const reqPerCpuSec = result.cpuSec !== null && result.cpuSec > 0 ? result.requests / result.cpuSec : null;
  // The two CPU probes (GET /__cpu) around the window are responses too.
  responses.answered += result.requests + 2;
  responses.sent += result.sent + 2;
  const record: RunRecord = { ...result, target, scenario: scenario.name, round, reqPerCpuSec, ratioVsH3: null };
  if (probe && speedBefore !== undefined) Object.assign(record, { speedBefore, speedAfter: await probe.measure() });
  return record;
}

/** What a target emitted so far: its histogram and spans read live, its log lines once the writer has caught up. */
export async function countWork(server: ServerHandle, target: string, logs: LogLineCounter): Promise<Counts> {
  const work = workOf(target);
  return { ...(await countLive(server.origin, work)), logLines: work.log ? await settledLogLines(logs) : null };
}

export async function runSession(
  server: ServerHandle,
  loader: LoadClient,
  config: Config,
  target: string,
  round: number,
  logDir: string,
): Promise<SessionResult> {
  const { warnings, idleRssMb, responses } = await prepareServer(server, loader, config);
  const records: RunRecord[] = [];
  for (const scenario of scenariosFor(config)) records.push(await measureWindow(server, loader, config, scenario, target, round, responses));
  const counts = await countWork(server, target, new LogLineCounter(logDir));
  return { records, idleRssMb, warnings, responses, counts };
}
