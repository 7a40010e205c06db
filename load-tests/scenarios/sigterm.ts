// SIGTERM to a single keelson service under autocannon load: every answered request is a 2xx,
// no connection is reset or times out, and the process exits 0. Same service and method as
// the bench's shutdown mode (the benchmark's keelson server from dist/, pinned; signal after 1.5 s).
import { performance } from "node:perf_hooks";
import { sleep } from "../lib/http.js";
import { politeLoad, type PoliteLoadResult } from "../lib/raw-http.js";
import { startServer } from "../lib/server.js";
import type { LoadResult } from "../lib/types.js";
import { formatCodes, silentlyLost, table, verdict, type Context, type Verdict } from "./common.js";

const NAME = "sigterm";
const CONNECTIONS = 50;
const PIPELINING = 1;
// Load runs this long before the signal, so every connection is busy when it arrives.
const LOAD_BEFORE_SIGNAL_MS = 1_500;
// Beside autocannon: a client that honours Connection: close, so every lost request is a real failure.
const POLITE_CONNECTIONS = 10;

export async function sigterm(context: Context): Promise<Verdict> {
  const build = context.build();
  const server = await startServer({
    target: "keelson", args: [build.entry("keelson")], pinCpu: context.pinning.server, logDir: context.logDir, cwd: build.dir,
  });
  const stopLoad = new AbortController();
  let exit: { code: number | null; signal: NodeJS.Signals | null } | null;
  let shutdownMs: number;
  let result: LoadResult;
  let wellBehaved: PoliteLoadResult;
  try {
    const load = context.client.run({
      origin: server.origin,
      requests: [{ method: "GET", path: "/hello" }],
      durationSec: Math.max(context.seconds, 3),
      connections: CONNECTIONS,
      pipelining: PIPELINING,
      measureCpu: false,
    }, stopLoad.signal);
    const polite = politeLoad(Number(new URL(server.origin).port), "/hello", POLITE_CONNECTIONS, stopLoad.signal);
    await sleep(LOAD_BEFORE_SIGNAL_MS);
    const signalled = performance.now();
    server.kill("SIGTERM");
    exit = await Promise.race([server.exited, sleep(15_000).then(() => null)]);
    shutdownMs = performance.now() - signalled;
    // Once the process is gone every reconnect is refused: no need to watch that for seconds.
    await sleep(200);
    stopLoad.abort();
    [result, wellBehaved] = await Promise.all([load, polite]);
  } finally {
    stopLoad.abort();
  }
  if (exit === null) await server.stop();

  const refused = result.errorCodes.ECONNREFUSED ?? 0;
  const failed = result.errors - refused;
  const lost = silentlyLost(result, CONNECTIONS, PIPELINING);
  table(["client", "answered", "non-2xx", "resets/timeouts", "lost (no answer, no error)", "refused reconnects"], [
    [`autocannon, ${CONNECTIONS} connections`, result.requests, result.non2xx, failed, lost, refused],
    [`well-behaved, ${POLITE_CONNECTIONS} connections`, wellBehaved.answered, wellBehaved.non2xx, "-", wellBehaved.lost, wellBehaved.refused],
  ]);
  console.log(`errors by cause: ${formatCodes(result.errorCodes)}; SIGTERM → exit ${shutdownMs.toFixed(1)} ms, ` +
    `${exit === null ? "still running after 15 s" : `code ${exit.code}, signal ${exit.signal}`}`);
  const pass = exit?.code === 0 && result.requests > 0 && result.non2xx === 0 && failed === 0 &&
    wellBehaved.answered > 0 && wellBehaved.non2xx === 0 && wellBehaved.lost === 0;
  return verdict(NAME, pass,
    `SIGTERM after ${LOAD_BEFORE_SIGNAL_MS / 1000} s of load, exit code ${exit?.code ?? "none"} ${shutdownMs.toFixed(0)} ms later; autocannon: ${result.requests} answered, ` +
    `${result.non2xx} non-2xx, ${failed} resets/timeouts; a client honouring Connection: close: ${wellBehaved.answered} answered, ${wellBehaved.non2xx} non-2xx, ` +
    `${wellBehaved.lost} lost; not failed requests: ${refused} autocannon reconnects refused after the listener closed (nothing was sent) and ` +
    `${lost} requests ${lost === CONNECTIONS ? "(one per connection) " : ""}autocannon wrote after a Connection: close answer, a header it ignores.`);
}
