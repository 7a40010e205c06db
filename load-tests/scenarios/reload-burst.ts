// Ten rolling reloads asked back to back (five `reload` commands on the control socket, five
// SIGHUPs) of the built example with 2 workers, under steady autocannon load on GET /hello: they
// merge into as few runs as needed (two), never overlap, and no request fails.
import * as path from "node:path";
import { startCluster } from "../lib/cluster.js";
import { sleep } from "../lib/http.js";
import { sendControl, type ControlReply } from "../../supervisor/control-socket.js";
import { formatCodes, table, verdict, type Context, type Verdict } from "./common.js";

const NAME = "reload-burst";
const CONNECTIONS = 50;
const PIPELINING = 1;
const WORKERS = 2;
const ASKS = 10;

export async function reloadBurst(context: Context): Promise<Verdict> {
  const socket = path.join(context.logDir, "reload-burst.sock");
  const cluster = await startCluster({
    cwd: context.root, entry: "dist/examples/bookstore/main.js", workers: WORKERS, pinCpu: context.pinning.server,
    env: { KEELSON_CONTROL_SOCKET: socket },
  });
  const stopLoad = new AbortController();
  try {
    await cluster.waitFor(/control socket/);
    const load = context.client.run({
      origin: cluster.origin, requests: [{ method: "GET", path: "/hello" }], durationSec: 90,
      connections: CONNECTIONS, pipelining: PIPELINING, measureCpu: false,
    }, stopLoad.signal);
    await sleep((context.seconds * 1_000) / 2);
    const mark = cluster.log().length;
    const asked = performance.now();
    const commands: Array<Promise<ControlReply | { ok: false; error: string }>> = [];
    for (let i = 0; i < ASKS; i++) {
      if (i % 2 === 0) commands.push(sendControl(socket, { command: "reload" }, 120_000).catch((error: Error) => ({ ok: false, error: error.message })));
      else process.kill(cluster.pid, "SIGHUP");
    }
    const replies = await Promise.all(commands);
    // SIGHUPs have no reply: the last run's end in the log closes the burst.
    await cluster.waitFor(/reload (complete|stopped)/, mark, 60_000);
    const burstMs = performance.now() - asked;
    await sleep((context.seconds * 1_000) / 2);
    stopLoad.abort();
    const result = await load;
    const runs = cluster.log().slice(mark).split("\n").filter((line) => /reload: replacing|reload complete|reload stopped/.test(line))
      .map((line) => (/reload: replacing/.test(line) ? "start" : line.includes("reload complete") ? "end" : "stopped"));
    const overlapping = runs.some((step, i) => (i % 2 === 0 ? step !== "start" : step === "start"));
    const started = runs.filter((step) => step === "start").length;
    const repliedOk = replies.filter((reply) => reply.ok && "reload" in reply && reply.reload.ok).length;
    const exit = await cluster.stop();

    table(["asked", "runs", "overlapping", "commands answered ok", "burst (ms)", "answered", "non-2xx", "errors", "exit"], [[
      `${ASKS} (${commands.length} commands, ${ASKS - commands.length} SIGHUP)`, started, overlapping ? "YES" : "no",
      `${repliedOk}/${commands.length}`, burstMs.toFixed(0), result.requests, result.non2xx, result.errors, `code ${exit.code}`,
    ]]);
    console.log(`errors by cause: ${formatCodes(result.errorCodes)}; runs in the log: ${runs.join(" ")}`);
    const pass = !overlapping && started >= 1 && started <= 2 && runs.every((step) => step !== "stopped") &&
      repliedOk === commands.length && result.errors === 0 && result.non2xx === 0 && result.requests > 0;
    return verdict(NAME, pass,
      `${ASKS} reloads asked back to back under ${CONNECTIONS} connections ran as ${started} rolling reload(s) ` +
      `(${overlapping ? "OVERLAPPING" : "one at a time"}) in ${burstMs.toFixed(0)} ms; ${repliedOk}/${commands.length} control-socket ` +
      `commands answered ok; autocannon: ${result.requests} answered, ${result.errors} errors, ${result.non2xx} non-2xx.`);
  } finally {
    stopLoad.abort();
    await cluster.stop();
  }
}
