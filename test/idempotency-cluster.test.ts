import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { freePort, killAllChildren, spawnChild, type Child } from "../harness/child.js";
import { openSQLite, type SQLDatabase } from "../src/entries/sql.js";
import { usePostgres } from "./helpers/postgres.js";
import { startRedis, type TestRedis } from "./helpers/redis.js";

// idempotency() with real processes: 2 workers under the supervisor (the primary's store), and 2
// pods (separate processes, no supervisor) sharing keys in PostgreSQL or in a real redis-server.
// Every order is a row in a shared database, so a second run of the handler cannot hide.
const ROOT = fileURLToPath(new URL("..", import.meta.url));

afterEach(killAllChildren);

interface Answer {
  status: number;
  body: Buffer;
  replayed: string | undefined;
}

/** POST /orders on a fresh connection (no agent), so the supervisor spreads requests over its workers. */
function order(port: number, key: string, body: object, apiKey?: string): Promise<Answer> {
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request({
      host: "127.0.0.1", port, path: apiKey === undefined ? "/orders" : "/team/orders", method: "POST", agent: false, timeout: 30_000,
      headers: {
        "content-type": "application/json", "idempotency-key": key, "content-length": Buffer.byteLength(payload),
        ...(apiKey === undefined ? {} : { "x-api-key": apiKey }),
      },
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks), replayed: res.headers["idempotent-replayed"] as string | undefined }));
    });
    req.on("timeout", () => req.destroy(new Error("POST /orders timed out")));
    req.on("error", (error) => reject(new Error(`POST with key ${key} (${JSON.stringify(body)}) failed: ${error.message}`)));
    req.end(payload);
  });
}

/** 50 POSTs with one key at once, spread over `ports`: one row, and every answer the first response or a 409. */
async function expectOnceUnderFifty(ports: readonly number[], rows: () => Promise<number>): Promise<void> {
  const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => order(ports[i % ports.length]!, "fifty-1", { item: "book" })));
  const created = answers.filter((a) => a.status === 201);
  const busy = answers.filter((a) => a.status === 409);
  expect(created.length + busy.length).toBe(50);
  expect(created.length).toBeGreaterThanOrEqual(1);
  expect(new Set(created.map((a) => a.body.toString())).size).toBe(1);
  expect(await rows()).toBe(1);
  // A sequential repeat: the kept answer, byte for byte, and still one row.
  const first = created[0]!.body;
  const again = await order(ports[0]!, "fifty-1", { item: "book" });
  expect(again.status).toBe(201);
  expect(again.replayed).toBe("true");
  expect(again.body.equals(first)).toBe(true);
  // Another payload with the key.
  expect((await order(ports.at(-1)!, "fifty-1", { item: "pen" })).status).toBe(422);
  expect(await rows()).toBe(1);
}

function startPods(env: Record<string, string>, ports: readonly number[]): Promise<Child[]> {
  const pods = ports.map((port) => spawnChild([process.execPath, "--import", "tsx", "test/fixtures/idempotency-app.ts"],
    { cwd: ROOT, env: { NODE_ENV: "production", ...env, PORT: String(port) } }));
  return Promise.all(pods.map(async (pod) => (await pod.waitFor(/listening on/, { timeoutMs: 60_000 }), pod)));
}

describe("under the supervisor: 2 workers, the primary's store, orders in one SQLite file", () => {
  const dir = mkdtempSync(join(tmpdir(), "keelson-idem-"));
  const file = join(dir, "orders.db");
  let db: SQLDatabase;
  beforeAll(() => void (db = openSQLite({ file })));
  afterAll(async () => {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const count = async () => Number((await db.query<{ n: number }>("SELECT COUNT(*) AS n FROM orders"))[0]?.n);

  it("50 concurrent POSTs with one key make one row; a repeat replays it byte for byte; another payload gets 422; a SIGKILLed worker's key is released within its lease", async () => {
    const port = await freePort();
    const hangFile = join(dir, "hang");
    const child = spawnChild([process.execPath, "--import", "tsx", "cli/cli.ts", "start", "test/fixtures/idempotency-app.ts", "--workers", "2", "--port", String(port)],
      { cwd: ROOT, env: { NODE_ENV: "production", IDEM_DATA_SQLITE: file, IDEM_LEASE_MS: "20000", IDEM_HANG_FILE: hangFile } });
    await child.waitFor(/2 worker\(s\) ready/, { timeoutMs: 90_000 });
    await expectOnceUnderFifty([port], count);

    writeFileSync(hangFile, "");
    const hanging = order(port, "kill-1", { item: "lamp", hang: true }).catch((error: Error) => error);
    const line = await child.waitFor(/order handler hanging pid=(\d+)/, { timeoutMs: 30_000 });
    const pid = Number(/pid=(\d+)/.exec(line)![1]);
    expect((await order(port, "kill-1", { item: "lamp", hang: true })).status).toBe(409);
    const killedAt = Date.now();
    process.kill(pid, "SIGKILL");
    expect(await hanging).toBeInstanceOf(Error);
    // The primary frees the dead worker's key when it exits, well within the 20 s lease.
    // A connection the primary handed to the worker as it died is reset: a client retries that too.
    let retry: Answer | Error;
    do retry = await order(port, "kill-1", { item: "lamp", hang: true }).catch((error: Error) => error);
    while ((retry instanceof Error || retry.status === 409) && Date.now() - killedAt < 20_000);
    if (retry instanceof Error) throw retry;
    expect(retry.status).toBe(201);
    expect(Date.now() - killedAt).toBeLessThan(20_000);
    expect(await count()).toBe(2);
    await child.stop();
  }, 240_000);
});

describe("2 pods sharing keys in PostgreSQL (orders there too)", () => {
  const pg = usePostgres();

  it("50 concurrent POSTs with one key over both pods make one row; a repeat replays it; another payload gets 422; two principals' same key are two keys", async () => {
    const url = await pg.createDatabase();
    const ports = [await freePort(), await freePort()];
    const pods = await startPods({ IDEM_DATA_POSTGRES: url, IDEM_STORE: "sql", IDEM_LEASE_MS: "3000" }, ports);
    const db = pg.open(url);
    const count = async () => Number((await db.query<{ n: string }>("SELECT COUNT(*) AS n FROM orders"))[0]?.n);
    await expectOnceUnderFifty(ports, count);

    // alice on one pod, bob on the other, one key: each runs once, and each repeat (on the other pod) gets its own.
    const alice = await order(ports[0]!, "team-1", { item: "book" }, "alice-key-0123456789");
    const bob = await order(ports[1]!, "team-1", { item: "book" }, "bob-key-0123456789ab");
    expect([alice.status, bob.status]).toEqual([201, 201]);
    expect([JSON.parse(alice.body.toString()).by, JSON.parse(bob.body.toString()).by]).toEqual(["alice", "bob"]);
    const aliceAgain = await order(ports[1]!, "team-1", { item: "book" }, "alice-key-0123456789");
    const bobAgain = await order(ports[0]!, "team-1", { item: "book" }, "bob-key-0123456789ab");
    expect([aliceAgain.replayed, bobAgain.replayed]).toEqual(["true", "true"]);
    expect(aliceAgain.body.equals(alice.body)).toBe(true);
    expect(bobAgain.body.equals(bob.body)).toBe(true);
    expect(await count()).toBe(3);
    await Promise.all(pods.map((pod) => pod.stop()));
  }, 240_000);
});

describe("2 pods sharing keys in a real redis-server (orders in one SQLite file)", () => {
  let redis: TestRedis;
  const dir = mkdtempSync(join(tmpdir(), "keelson-idem-"));
  beforeAll(async () => void (redis = await startRedis()), 60_000);
  afterAll(async () => {
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("50 concurrent POSTs with one key over both pods make one row; a killed pod's key is free after its lease, not before", async () => {
    const file = join(dir, "orders.db");
    const hangFile = join(dir, "hang");
    const ports = [await freePort(), await freePort()];
    const pods = await startPods({ IDEM_DATA_SQLITE: file, IDEM_REDIS: redis.url, IDEM_LEASE_MS: "3000", IDEM_HANG_FILE: hangFile }, ports);
    const db = openSQLite({ file });
    const count = async () => Number((await db.query<{ n: number }>("SELECT COUNT(*) AS n FROM orders"))[0]?.n);
    try {
      await expectOnceUnderFifty(ports, count);
      writeFileSync(hangFile, "");
      const hanging = order(ports[0]!, "kill-2", { item: "lamp", hang: true }).catch((error: Error) => error);
      await pods[0]!.waitFor(/order handler hanging/, { timeoutMs: 30_000 });
      const killedAt = Date.now();
      process.kill(pods[0]!.pid, "SIGKILL");
      expect(await hanging).toBeInstanceOf(Error);
      // The other pod cannot know the first died: 409 until the lease ends, then the retry runs.
      const early = await order(ports[1]!, "kill-2", { item: "lamp", hang: true });
      const earlyMs = Date.now() - killedAt;
      let retry: Answer;
      do retry = await order(ports[1]!, "kill-2", { item: "lamp", hang: true });
      while (retry.status === 409 && Date.now() - killedAt < 30_000);
      // Unless the machine stalled past the lease before the first retry, it met the live claim.
      if (earlyMs < 2500) expect(early.status).toBe(409);
      expect(retry.status).toBe(201);
      expect(await count()).toBe(2);
    } finally {
      await db.close();
      await Promise.all(pods.map((pod) => pod.stop()));
    }
  }, 240_000);
});
