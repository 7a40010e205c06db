// Load shedding at about twice a worker's capacity: one keelson process with a CPU-heavy route
// (GET /cpu, 5 ms of synchronous work), first without, then with `loadShedding`. Capacity is
// measured first (closed loop); then an open-loop client offers 2x that rate, as real traffic does
// (it does not slow down when the server does). Reports, for each: the p99 of accepted requests,
// the share rejected with 503, and how long the rejections took (they must be < 5 ms).
import * as http from "node:http";
import { startServer } from "../lib/server.js";
import { sleep } from "../lib/http.js";
import { table, verdict, type Context, type Verdict } from "./common.js";

const NAME = "load-shed";
const CAPACITY_CONNECTIONS = 4;
const REQUEST_TIMEOUT_MS = 10_000;

/** The nearest-rank percentile of `values` (ms); 0 when empty. */
function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = values.toSorted((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0;
}

interface Tally {
  accepted: number[];
  rejected: number[];
  other: number;
  errors: number;
}

function fire(agent: http.Agent, origin: URL, tally: Tally): Promise<void> {
  const started = performance.now();
  return new Promise((resolve) => {
    const req = http.request({ host: origin.hostname, port: origin.port, path: "/cpu", agent, timeout: REQUEST_TIMEOUT_MS }, (res) => {
      res.resume();
      res.on("end", () => {
        const ms = performance.now() - started;
        if (res.statusCode === 200) tally.accepted.push(ms);
        else if (res.statusCode === 503 && res.headers["retry-after"] !== undefined) tally.rejected.push(ms);
        else tally.other++;
        resolve();
      });
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", () => {
      tally.errors++;
      resolve();
    });
    req.end();
  });
}

/** Requests per second the server completes with a few connections in a closed loop. */
async function capacity(origin: URL, seconds: number): Promise<number> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CAPACITY_CONNECTIONS });
  const tally: Tally = { accepted: [], rejected: [], other: 0, errors: 0 };
  const deadline = performance.now() + seconds * 1000;
  await Promise.all(Array.from({ length: CAPACITY_CONNECTIONS }, async () => {
    while (performance.now() < deadline) await fire(agent, origin, tally);
  }));
  agent.destroy();
  return tally.accepted.length / seconds;
}

/** Offers `rate` requests per second for `seconds`, whatever the server does, and waits for every answer. */
async function openLoop(origin: URL, rate: number, seconds: number): Promise<Tally> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 512 });
  const tally: Tally = { accepted: [], rejected: [], other: 0, errors: 0 };
  const pending: Array<Promise<void>> = [];
  const started = performance.now();
  let sent = 0;
  while (performance.now() - started < seconds * 1000) {
    const due = Math.floor(((performance.now() - started) / 1000) * rate);
    for (; sent < due; sent++) pending.push(fire(agent, origin, tally));
    await sleep(5);
  }
  await Promise.all(pending);
  agent.destroy();
  return tally;
}

async function run(context: Context, shed: boolean, rate: number | undefined): Promise<{ rate: number; tally: Tally }> {
  const build = context.build();
  const server = await startServer({
    target: "keelson-cpu", args: [build.entry("keelson-cpu")], pinCpu: context.pinning.server, logDir: context.logDir, cwd: build.dir,
    env: { SHED: shed ? "1" : "0" },
  });
  try {
    const origin = new URL(server.origin);
    const offered = rate ?? 2 * (await capacity(origin, context.seconds));
    return { rate: offered, tally: await openLoop(origin, offered, context.seconds) };
  } finally {
    await server.stop();
  }
}

function row(name: string, rate: number, tally: Tally): Array<string | number> {
  const total = tally.accepted.length + tally.rejected.length + tally.other + tally.errors;
  return [
    name, rate.toFixed(0), total, tally.accepted.length, `${((tally.rejected.length / Math.max(1, total)) * 100).toFixed(1)} %`,
    percentile(tally.accepted, 99).toFixed(1), tally.rejected.length === 0 ? "-" : percentile(tally.rejected, 99).toFixed(2),
    tally.rejected.length === 0 ? "-" : Math.max(...tally.rejected).toFixed(2), tally.other, tally.errors,
  ];
}

export async function loadShed(context: Context): Promise<Verdict> {
  const off = await run(context, false, undefined);
  const on = await run(context, true, off.rate);
  table(["loadShedding", "offered req/s (2x capacity)", "sent", "200", "rejected (503)", "p99 of 200 (ms)", "p99 of 503 (ms)", "max 503 (ms)", "other status", "errors"], [
    row("off", off.rate, off.tally), row("on (maxEventLoopDelay 50 ms)", on.rate, on.tally),
  ]);
  const rejectedP99 = percentile(on.tally.rejected, 99);
  const pass = on.tally.rejected.length > 0 && rejectedP99 < 5 && on.tally.errors === 0 && on.tally.other === 0 &&
    percentile(on.tally.accepted, 99) < percentile(off.tally.accepted, 99);
  return verdict(NAME, pass,
    `at ${off.rate.toFixed(0)} req/s (2x capacity) on a 5 ms CPU route: without shedding p99 ${percentile(off.tally.accepted, 99).toFixed(0)} ms ` +
    `(${off.tally.errors} errors); with shedding p99 of accepted ${percentile(on.tally.accepted, 99).toFixed(0)} ms, ` +
    `${((on.tally.rejected.length / Math.max(1, on.tally.rejected.length + on.tally.accepted.length)) * 100).toFixed(1)} % rejected with 503 ` +
    `in p99 ${rejectedP99.toFixed(2)} ms (limit 5 ms), ${on.tally.errors} errors.`);
}
