// SIGKILL of one of the supervisor's 2 workers (the built example bookstore) under autocannon load:
// the failed requests stay within what that worker could have had in flight, the supervisor forks
// a replacement in the same slot, and the service answers 200 afterwards.
import { startCluster } from "../lib/cluster.js";
import { request, sleep } from "../lib/http.js";
import { establishedConnections } from "../lib/machine.js";
import { formatCodes, silentlyLost, table, verdict, type Context, type Verdict } from "./common.js";

const NAME = "sigkill-worker";
const CONNECTIONS = 50;
const PIPELINING = 1;
const WORKERS = 2;
// Round-robin spreads the connections over the workers, the victim holding about half of them
// (not exactly: the primary hands a connection to whichever worker is free). The bound is what
// it really held: its established connections on the port, counted just before the kill, each
// with at most PIPELINING requests in flight. The nominal connections × pipelining / workers is printed too.
const NOMINAL_BOUND = (CONNECTIONS * PIPELINING) / WORKERS;
const VICTIM_SLOT = 1;

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

export async function sigkillWorker(context: Context): Promise<Verdict> {
  const cluster = await startCluster({
    cwd: context.root, entry: "dist/examples/bookstore/main.js", workers: WORKERS, pinCpu: context.pinning.server,
  });
  const stopLoad = new AbortController();
  try {
    const victim = cluster.workers().get(VICTIM_SLOT);
    if (victim === undefined) throw new Error(`no worker ${VICTIM_SLOT} in the supervisor's log`);
    const load = context.client.run({
      origin: cluster.origin, requests: [{ method: "GET", path: "/hello" }], durationSec: 60,
      connections: CONNECTIONS, pipelining: PIPELINING, measureCpu: false,
    }, stopLoad.signal);
    const half = (context.seconds * 1_000) / 2;
    await sleep(half);
    const mark = cluster.log().length;
    const victimConnections = establishedConnections(victim, cluster.port);
    const bound = victimConnections * PIPELINING;
    const killed = performance.now();
    process.kill(victim, "SIGKILL");
    const readyLine = await cluster.waitFor(new RegExp(`worker ${VICTIM_SLOT} \\(pid \\d+\\) ready`), mark, 30_000).catch(() => null);
    const replacedMs = performance.now() - killed;
    await sleep(half);
    stopLoad.abort();
    const result = await load;

    const replacement = cluster.workers().get(VICTIM_SLOT);
    const live = cluster.children().toSorted((a, b) => a - b);
    const checks = await Promise.all(Array.from({ length: 4 }, () => request(`${cluster.origin}/hello`).then((r) => r.status, () => 0)));
    // Every request written is answered, lost, or one of the PIPELINING per connection still in flight at the stop.
    const unanswered = result.sent - result.requests - CONNECTIONS * PIPELINING;
    const failures = unanswered + result.non2xx;
    const lostSilently = silentlyLost(result, CONNECTIONS, PIPELINING);
    const replaced = readyLine !== null && replacement !== undefined && replacement !== victim && !alive(victim);
    const exit = await cluster.stop();

    table(["answered", "non-2xx", "errors", "unanswered", "failures", "bound (nominal)", "victim", "replacement", "ready after", "live children", "exit"], [[
      result.requests, result.non2xx, result.errors, unanswered, failures, `${bound} (${NOMINAL_BOUND})`, victim, replacement ?? "-",
      readyLine === null ? "never" : `${replacedMs.toFixed(0)} ms`, live.join(" "), `code ${exit.code}`,
    ]]);
    console.log(`errors by cause: ${formatCodes(result.errorCodes)}; of the unanswered, ${lostSilently} without any error ` +
      `(the kernel closed the dead worker's sockets with a FIN; autocannon reconnects without counting them); GET /hello afterwards: ${checks.join(" ")}`);
    const pass = bound > 0 && failures <= bound && replaced && live.length === WORKERS && live.includes(replacement ?? -1) && checks.every((s) => s === 200) && result.requests > 0;
    return verdict(NAME, pass,
      `SIGKILL of worker ${VICTIM_SLOT} (pid ${victim}) under ${CONNECTIONS} connections × pipelining ${PIPELINING}: ${failures} failed requests ` +
      `(${result.errors} socket errors, ${unanswered} unanswered, ${result.non2xx} non-2xx) of ${result.sent - CONNECTIONS * PIPELINING}, ` +
      `bound ${bound} = the ${victimConnections} connections the victim held × pipelining ${PIPELINING} (nominal ${CONNECTIONS} × ${PIPELINING} / ${WORKERS} workers = ${NOMINAL_BOUND}); replacement ${replaced ? `pid ${replacement} ready in ${replacedMs.toFixed(0)} ms` : "NOT seen"}, ` +
      `${live.length} live workers, GET /hello afterwards ${checks.every((s) => s === 200) ? "200" : checks.join("/")}.`);
  } finally {
    stopLoad.abort();
    await cluster.stop();
  }
}
