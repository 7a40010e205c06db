// Issue 32, defects 2 and 3, at full size under the supervisor with 2 workers (fixture
// test/fixtures/websockets-app.ts: h3's own WebSocket handler, the App's defaults). First 8 clients
// each announce a 90 MiB message and stream it; then one client sends 1M pings and never reads.
// Bounds (the targets): every oversized message closed with 1009 before its payload is
// buffered (each worker's RSS grows by less than 50 MB), the ping flooder dropped with the log line
// that names it and each worker's RSS again under +50 MB, no worker replaced, the service serving.
import { randomBytes } from "node:crypto";
import { startCluster, type Cluster } from "../lib/cluster.js";
import { frame, openRaw, PING, TEXT } from "../../test/helpers/raw-websocket.js";
import { rssMiB } from "../../test/helpers/replay-attack.js";
import { table, verdict, type Context, type Verdict } from "./common.js";

const NAME = "ws-flood";
const BIG_CLIENTS = 8;
const BIG_BYTES = 90 * 1024 * 1024;
const PINGS = 1_000_000;
const GROWTH_BOUND_MIB = 50;

/** The header of one masked client frame announcing `length` bytes, and its mask. */
function bigFrameHead(length: number): { head: Buffer; mask: Buffer } {
  const head = Buffer.alloc(10);
  head[0] = 0x80 | TEXT;
  head[1] = 0x80 | 127;
  head.writeBigUInt64BE(BigInt(length), 2);
  return { head, mask: randomBytes(4) };
}

/** Streams one announced 90 MiB message; resolves with the bytes written before the server closed. */
async function sendBig(port: number): Promise<{ written: number; code: number | undefined }> {
  const raw = await openRaw(port, "/h3/echo", true);
  const { head, mask } = bigFrameHead(BIG_BYTES);
  raw.socket.write(Buffer.concat([head, mask]));
  // Masked payload of 'x' (0x78): the mask repeats every 4 bytes, so one chunk serves for all.
  const chunk = Buffer.alloc(64 * 1024, 0x78);
  for (let i = 0; i < chunk.length; i++) chunk[i]! ^= mask[i & 3]!;
  let written = 0;
  while (!raw.socket.destroyed && written < BIG_BYTES) {
    if (!raw.socket.write(chunk)) {
      await new Promise((resolve) => { raw.socket.once("drain", resolve); raw.socket.once("close", resolve); });
    }
    written += chunk.length;
  }
  await Promise.race([raw.closed, new Promise((resolve) => setTimeout(resolve, 10_000))]);
  raw.socket.destroy();
  return { written, code: raw.closeCode() };
}

/** 1M pings with a 16-byte payload, never reading the pongs; stops when the server drops the socket. */
async function pingFlood(port: number): Promise<number> {
  const raw = await openRaw(port, "/h3/echo");
  const burst = Buffer.concat(Array.from({ length: 1000 }, () => frame(PING, Buffer.alloc(16, 112))));
  let sent = 0;
  while (!raw.socket.destroyed && sent < PINGS) {
    if (!raw.socket.write(burst)) {
      await new Promise((resolve) => { raw.socket.once("drain", resolve); raw.socket.once("close", resolve); });
    }
    sent += 1000;
  }
  raw.socket.destroy();
  return sent;
}

const workerRss = (cluster: Cluster): number[] => [...cluster.workers().values()].map(rssMiB);

export async function wsFlood(context: Context): Promise<Verdict> {
  const cluster = await startCluster({ cwd: context.root, entry: "test/fixtures/websockets-app.ts", workers: 2, tsx: true, pinCpu: context.pinning.server });
  try {
    const workersBefore = [...cluster.workers().values()].join(",");
    const before = workerRss(cluster);
    const big = await Promise.all(Array.from({ length: BIG_CLIENTS }, () => sendBig(cluster.port)));
    const afterBig = workerRss(cluster);
    const from = cluster.log().length;
    const pings = await pingFlood(cluster.port);
    const dropped = await cluster.waitFor(/WebSocket client on \/h3\/echo dropped: \d+ bytes waiting, over maxQueuedBytes/, from, 30_000)
      .then(() => true, () => false);
    const afterPings = workerRss(cluster);
    const serving = (await fetch(`${cluster.origin}/rss`)).status === 200;
    const replaced = [...cluster.workers().values()].join(",") !== workersBefore;
    const growthBig = Math.max(...afterBig.map((rss, i) => rss - before[i]!));
    const growthPings = Math.max(...afterPings.map((rss, i) => rss - afterBig[i]!));
    const closed1009 = big.filter((b) => b.code === 1009).length;
    const maxWritten = Math.max(...big.map((b) => b.written));
    table(["workers' RSS before", "after 8 × 90 MiB", "after 1M pings", "closed 1009", "most bytes written before the close", "pings sent before the drop", "workers replaced"], [[
      before.map((r) => `${r.toFixed(0)}`).join(" / ") + " MiB", afterBig.map((r) => `${r.toFixed(0)}`).join(" / ") + " MiB",
      afterPings.map((r) => `${r.toFixed(0)}`).join(" / ") + " MiB", `${closed1009}/${BIG_CLIENTS}`,
      `${(maxWritten / 1048576).toFixed(1)} MiB`, String(pings), replaced ? "yes" : "no",
    ]]);
    const stopped = await cluster.stop();
    const pass = closed1009 === BIG_CLIENTS && growthBig < GROWTH_BOUND_MIB && dropped && growthPings < GROWTH_BOUND_MIB
      && serving && !replaced && stopped.code === 0;
    return verdict(NAME, pass, `${closed1009}/${BIG_CLIENTS} announced 90 MiB messages closed with 1009 (RSS +${growthBig.toFixed(0)} MiB, bound ${GROWTH_BOUND_MIB}), ` +
      `ping flooder ${dropped ? "dropped" : "NOT dropped"} after ${pings} pings (RSS +${growthPings.toFixed(0)} MiB, bound ${GROWTH_BOUND_MIB}), workers ${replaced ? "REPLACED" : "kept"}, exit ${stopped.code}`);
  } finally {
    await cluster.stop().catch(() => undefined);
  }
}
