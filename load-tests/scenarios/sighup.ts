// SIGHUP (rolling reload) of the supervisor running the built example bookstore with 2 workers,
// under steady autocannon load on GET /hello: 0 errors, 0 non-2xx, and every worker pid replaced.
import { startCluster } from "../lib/cluster.js";
import { request, sleep } from "../lib/http.js";
import { politeLoad } from "../lib/raw-http.js";
import { formatCodes, silentlyLost, table, verdict, type Context, type Verdict } from "./common.js";

const NAME = "sighup";
const CONNECTIONS = 50;
const PIPELINING = 1;
const WORKERS = 2;
// Beside autocannon: a client that honours Connection: close, so every lost request is a real failure.
const POLITE_CONNECTIONS = 10;

export async function sighup(context: Context): Promise<Verdict> {
  const cluster = await startCluster({
    cwd: context.root, entry: "dist/examples/bookstore/main.js", workers: WORKERS, pinCpu: context.pinning.server,
  });
  const stopLoad = new AbortController();
  try {
    const before = cluster.workers();
    // Open-ended (capped at 60 s): it stops a while after the reload ends, however long that takes.
    const load = context.client.run({
      origin: cluster.origin, requests: [{ method: "GET", path: "/hello" }], durationSec: 60,
      connections: CONNECTIONS, pipelining: PIPELINING, measureCpu: false,
    }, stopLoad.signal);
    const polite = politeLoad(cluster.port, "/hello", POLITE_CONNECTIONS, stopLoad.signal);
    const half = (context.seconds * 1_000) / 2;
    await sleep(half);
    const mark = cluster.log().length;
    const signalled = performance.now();
    process.kill(cluster.pid, "SIGHUP");
    const outcome = await cluster.waitFor(/reload (complete|stopped)/, mark, 45_000).catch((error: Error) => `no reload outcome: ${error.message.split("\n")[0]}`);
    const reloadMs = performance.now() - signalled;
    await sleep(half);
    stopLoad.abort();
    const [result, wellBehaved] = await Promise.all([load, polite]);

    const after = cluster.workers();
    const live = cluster.children().toSorted((a, b) => a - b);
    const afterPids = [...after.values()].toSorted((a, b) => a - b);
    const replaced = [...after].filter(([slot, pid]) => before.get(slot) !== undefined && before.get(slot) !== pid).length;
    const sameAsLive = live.length === WORKERS && afterPids.join() === live.join();
    const checks = await Promise.all(Array.from({ length: 4 }, () => request(`${cluster.origin}/hello`).then((r) => r.status, () => 0)));
    const exit = await cluster.stop();
    const lost = silentlyLost(result, CONNECTIONS, PIPELINING);
    // After the stop every worker has flushed its request log: it holds what the App handled. Beyond
    // autocannon's answers that can only be the requests in flight when the load stopped (one per connection slot).
    const handled = cluster.requestLines() - checks.length;
    const answered = result.requests + wellBehaved.answered;
    const inFlightAtStop = CONNECTIONS * PIPELINING;
    const handledOk = handled >= answered && handled - answered <= inFlightAtStop;

    table(["client", "answered", "non-2xx", "errors", "lost (no answer, no error)"], [
      [`autocannon, ${CONNECTIONS} connections`, result.requests, result.non2xx, result.errors, lost],
      [`well-behaved, ${POLITE_CONNECTIONS} connections`, wellBehaved.answered, wellBehaved.non2xx, wellBehaved.refused, wellBehaved.lost],
    ]);
    table(["reload", "pids before", "pids after", "live children", "exit"], [[
      `${outcome.includes("reload complete") ? "complete" : "NOT complete"} (${reloadMs.toFixed(0)} ms)`,
      [...before.values()].join(" "), afterPids.join(" "), live.join(" "), `code ${exit.code}`,
    ]]);
    console.log(`requests in the workers' logs: ${handled} = ${answered} answered + ${handled - answered} (at most ${inFlightAtStop} may be in flight when autocannon stops)`);
    console.log(`errors by cause: ${formatCodes(result.errorCodes)}; reload: ${outcome.replace(/^.*"message":"([^"]*)".*$/, "$1")}; GET /hello afterwards: ${checks.join(" ")}`);
    const pass = outcome.includes("reload complete") && result.errors === 0 && result.non2xx === 0 && result.requests > 0 &&
      wellBehaved.answered > 0 && wellBehaved.lost === 0 && wellBehaved.non2xx === 0 && wellBehaved.refused === 0 &&
      replaced === WORKERS && sameAsLive && checks.every((s) => s === 200) && handledOk;
    return verdict(NAME, pass,
      `SIGHUP under ${CONNECTIONS} connections: reload ${outcome.includes("reload complete") ? "complete" : "NOT complete"} in ${reloadMs.toFixed(0)} ms, ` +
      `autocannon: ${result.requests} answered, ${result.errors} errors, ${result.non2xx} non-2xx; a client honouring Connection: close (${POLITE_CONNECTIONS} connections): ` +
      `${wellBehaved.answered} answered, ${wellBehaved.non2xx} non-2xx, ${wellBehaved.lost} lost; ${replaced}/${WORKERS} worker pids replaced ` +
      `(${[...before.values()].join(",")} → ${afterPids.join(",")}, ${sameAsLive ? "matching" : "NOT matching"} the live children); ` +
      `the workers logged ${handled} requests (${handled - answered} more than answered, limit ${inFlightAtStop} in flight when autocannon stopped); ` +
      `${lost} requests autocannon wrote got neither an answer nor an error` +
      (handledOk ? " (sent on connections a draining worker closed after a Connection: close answer, which autocannon ignores; the App never handled them)." : "."));
  } finally {
    stopLoad.abort();
    await cluster.stop();
  }
}
