// Issue 32, defect 6, under the supervisor with 2 workers (fixture test/fixtures/jwks-app.ts,
// jwtAuth's defaults): a JWKS endpoint that answers 200 and streams junk without end, as fast as it is
// read, while the load sends a validly signed token to every request. Bounds: every request answered
// 503 (the keys cannot be had, not the client's fault), the endpoint read at most `jwks.maxBytes` plus
// the sockets' buffers per fetch, a handful of fetches for the whole run rather than one per request
// (a failure is remembered, doubling from 1 s), each worker's RSS under +50 MB, no worker replaced.
import { generateKeyPairSync } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { SignJWT } from "jose";
import { startCluster } from "../lib/cluster.js";
import { rssMiB } from "../../test/helpers/replay-attack.js";
import { table, verdict, type Context, type Verdict } from "./common.js";

const NAME = "jwks-junk";
const MAX_BYTES = 256 * 1024;
/** What a reader that stopped at MAX_BYTES lets through: the limit plus both sockets' buffers. */
const PER_FETCH_BOUND = 32 * 1024 * 1024;
const GROWTH_BOUND_MIB = 50;

function junkServer(): { server: Server; stats: { fetches: number; sent: number } } {
  const stats = { fetches: 0, sent: 0 };
  const chunk = Buffer.alloc(64 * 1024, 0x20);
  const server = createServer((_req, res) => {
    stats.fetches++;
    res.writeHead(200, { "content-type": "application/json" });
    const pump = () => {
      while (!res.destroyed) {
        stats.sent += chunk.length;
        if (!res.write(chunk)) break;
      }
    };
    res.on("drain", pump);
    pump();
  });
  return { server, stats };
}

export async function jwksJunk(context: Context): Promise<Verdict> {
  const { server, stats } = junkServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const cluster = await startCluster({
    cwd: context.root, entry: "test/fixtures/jwks-app.ts", workers: 2, tsx: true, pinCpu: context.pinning.server,
    env: { JWKS_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks` },
  });
  try {
    const { privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
    const token = await new SignJWT({ sub: "ada" }).setProtectedHeader({ alg: "ES256", kid: "k" }).setIssuedAt().setExpirationTime("1h").sign(privateKey);
    const workersBefore = [...cluster.workers().values()];
    const before = workersBefore.map(rssMiB);
    const result = await context.client.run({
      origin: cluster.origin, requests: [{ method: "GET", path: "/me", headers: { authorization: `Bearer ${token}` } }],
      durationSec: context.seconds, connections: 10, pipelining: 1, measureCpu: false,
    });
    const after = workersBefore.map(rssMiB);
    const growth = Math.max(...after.map((rss, i) => rss - before[i]!));
    const replaced = [...cluster.workers().values()].join(",") !== workersBefore.join(",");
    const status = await fetch(`${cluster.origin}/me`, { headers: { authorization: `Bearer ${token}` } });
    const body = (await status.json()) as { code?: string };
    table(["requests", "req/s", "non-2xx", "errors", "JWKS fetches", "junk the endpoint got out", "workers' RSS before → after", "workers replaced"], [[
      String(result.requests), result.reqPerSec.toFixed(0), String(result.non2xx), String(result.errors), String(stats.fetches),
      `${(stats.sent / 1048576).toFixed(1)} MiB`, `${before.map((r) => r.toFixed(0)).join(" / ")} → ${after.map((r) => r.toFixed(0)).join(" / ")} MiB`, replaced ? "yes" : "no",
    ]]);
    const stopped = await cluster.stop();
    // Two workers, each remembering a failure for 1 s, then 2, 4, 8…: a few fetches per worker per run.
    const fetchBound = 2 * (Math.ceil(Math.log2(context.seconds + 1)) + 2);
    const pass = result.requests > 0 && result.non2xx === result.requests && result.errors === 0 && status.status === 503
      && stats.fetches <= fetchBound && stats.sent <= stats.fetches * PER_FETCH_BOUND && growth < GROWTH_BOUND_MIB && !replaced && stopped.code === 0;
    return verdict(NAME, pass, `${result.requests} requests with a junk-streaming JWKS endpoint: all ${result.non2xx === result.requests ? "503" : "NOT 503"} (${body.code ?? "no code"}), ` +
      `${stats.fetches} fetches (bound ${fetchBound}), ${(stats.sent / 1048576).toFixed(1)} MiB of junk sent (reader limit ${MAX_BYTES / 1024} KiB per fetch), ` +
      `RSS +${growth.toFixed(0)} MiB (bound ${GROWTH_BOUND_MIB}), workers ${replaced ? "REPLACED" : "kept"}, exit ${stopped.code}`);
  } finally {
    await cluster.stop().catch(() => undefined);
    server.closeAllConnections();
    server.close();
  }
}
