/**
 * Fan-out across pods through PostgreSQL: two supervisors (two "pods") share one database through
 * KEELSON_STREAMS_DATABASE_URL. A message published on one pod reaches the clients of both, with
 * one id, in order (large messages too); a client resumes on the other pod with Last-Event-ID. A
 * pod whose LISTEN connection is killed listens again, and its clients still get every message once.
 */
import { afterEach, describe, expect, it } from "vitest";
import { killAll, startSupervisor, type Running } from "./fixtures/supervisor-harness.js";
import { LISTEN_APPLICATION_NAME, openPostgresStreamStore } from "../src/streams/postgres-store.js";
import { storeBroker } from "../src/streams/broker.js";
import { StreamHub } from "../src/streams/hub.js";
import { captureLogs } from "./helpers/logs.js";
import { usePostgres } from "./helpers/postgres.js";
import { startTcpProxy } from "./helpers/tcp-proxy.js";
import { SSEClient, WSClient, postJSON } from "./helpers/stream-clients.js";

const publishOver = (port: number, room: string, body: unknown) => postJSON<{ id: string; worker: string }>(port, `/publish/${room}`, body);

const pg = usePostgres();
const limits = { replayEvents: 100, replayBytes: 1 << 20, replayTotalBytes: 1 << 24 };
afterEach(() => killAll());


async function until(test: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!test()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Two pods (supervisors of 1 worker) on one new database, an SSE client of `room` on A and a WebSocket client on B. */
async function twoPods(room: string) {
  const url = await pg.createDatabase();
  const env = { KEELSON_STREAMS_DATABASE_URL: url };
  const [a, b] = await Promise.all([startSupervisor(["--workers", "1"], { entry: "test/fixtures/streams-app.ts", env }),
    startSupervisor(["--workers", "1"], { entry: "test/fixtures/streams-app.ts", env })]);
  await Promise.all([a.waitFor(/1 worker\(s\) ready in/), b.waitFor(/1 worker\(s\) ready in/)]);
  const onA = new SSEClient(a.port, `/events/${room}`, { reconnect: false });
  await onA.connect();
  const onB = new WSClient(`ws://127.0.0.1:${b.port}/socket/${room}`);
  await onB.opened;
  return { url, a, b, onA, onB };
}

/** SIGTERM to the pods; their exit codes. */
async function stopPods(...pods: Running[]): Promise<(number | null)[]> {
  for (const pod of pods) process.kill(pod.pid, "SIGTERM");
  return (await Promise.all(pods.map((pod) => pod.exited))).map((exit) => exit.code);
}

describe("streams across pods through PostgreSQL", () => {
  it("delivers a publish of one pod to the clients of both, in order, and resumes a client on the other pod", async () => {
    const { a, b, onA, onB } = await twoPods("pods");

    const big = "y".repeat(20_000);
    const published = [
      await publishOver(b.port, "pods", { n: 1 }),
      await publishOver(a.port, "pods", { n: 2, big }),
      await publishOver(b.port, "pods", { n: 3 }),
    ];
    await until(() => onA.data().length === 3 && onB.messages.length === 3, "3 messages on both pods");
    expect(onA.events.map((e) => e.id)).toEqual(published.map((p) => p.id));
    expect(onB.json().map((m) => m.id)).toEqual(published.map((p) => p.id));
    expect(onA.data().map((d) => (JSON.parse(d) as { n: number }).n)).toEqual([1, 2, 3]);
    expect((onB.json()[1]!.data as { big: string }).big).toBe(big);

    // The client of pod A leaves; two more are published; it comes back on pod B with its last id.
    const lastId = onA.lastId;
    onA.close();
    await publishOver(a.port, "pods", { n: 4 });
    await publishOver(b.port, "pods", { n: 5 });
    const resumed = new SSEClient(b.port, "/events/pods", { reconnect: false, lastId });
    await resumed.connect();
    await until(() => resumed.data().length === 2, "the 2 missed messages on pod B");
    await publishOver(a.port, "pods", { n: 6 });
    await until(() => resumed.data().length === 3, "the live message after the replay");
    expect(resumed.data().map((d) => (JSON.parse(d) as { n: number }).n)).toEqual([4, 5, 6]);
    expect(resumed.data("missed")).toEqual([]);
    resumed.close();
    onB.socket.close();
    expect(await stopPods(a, b)).toEqual([0, 0]);
  });

  it("listens again after its LISTEN connection is killed: messages published in the gap and after it arrive once, in order", async () => {
    const { url, a, b, onA, onB } = await twoPods("gap");
    const ids = [(await publishOver(b.port, "gap", { n: 1 })).id];
    await until(() => onA.data().length === 1 && onB.messages.length === 1, "the first message on both pods");

    // Both pods' LISTEN backends are terminated; B publishes at once, in the gap (before either listens again).
    // Closed by usePostgres() after the file.
    const admin = pg.open(url, { max: 1 });
    const killed = await admin.query("SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity WHERE application_name = $1", [LISTEN_APPLICATION_NAME]);
    expect(killed.length).toBe(2);
    ids.push((await publishOver(b.port, "gap", { n: 2 })).id, (await publishOver(a.port, "gap", { n: 3 })).id);
    await Promise.all([a.waitFor(/listening to PostgreSQL again after \d+ms/), b.waitFor(/listening to PostgreSQL again after \d+ms/)]);
    expect(a.output()).toMatch(/the LISTEN connection to PostgreSQL was lost; listening again/);
    // Listening again: the next ones arrive live.
    ids.push((await publishOver(a.port, "gap", { n: 4 })).id, (await publishOver(b.port, "gap", { n: 5 })).id);
    await until(() => onA.data().length >= 5 && onB.messages.length >= 5, "5 messages on both pods");
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(onA.data().map((d) => (JSON.parse(d) as { n: number }).n)).toEqual([1, 2, 3, 4, 5]);
    expect(onA.events.map((e) => e.id)).toEqual(ids);
    expect(onB.json().map((m) => m.id)).toEqual(ids);
    // A second time: the connection that came back is watched as the first was.
    const again = a.output().length;
    await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", [LISTEN_APPLICATION_NAME]);
    await a.waitFor(/listening to PostgreSQL again after \d+ms/, 20_000, again);
    ids.push((await publishOver(b.port, "gap", { n: 6 })).id);
    await until(() => onA.data().length >= 6, "the 6th message on pod A");
    expect(onA.events.map((e) => e.id)).toEqual(ids);
    onA.close();
    onB.socket.close();
    expect(await stopPods(a, b)).toEqual([0, 0]);
  });

  it("reads what was published while its LISTEN was cut off when the network is back: each once, in order, then the live ones (the store in-process)", async () => {
    const url = await pg.createDatabase();
    const proxy = await startTcpProxy(Number(new URL(url).port));
    const behind = new URL(url);
    behind.port = String(proxy.port);
    const logs = captureLogs();
    const a = await openPostgresStreamStore(behind.href, logs.logger);
    const b = await openPostgresStreamStore(url, captureLogs().logger);
    try {
      const got: string[] = [];
      await a.listen((event) => got.push(`${event.channel} ${event.id} ${event.data}`));
      const ids = [await b.append("room", "1", limits), await b.append("other", "1", limits)];
      await until(() => got.length === 2, "the first events");
      proxy.cut();
      await until(() => logs.lines().some((line) => line.includes("the LISTEN connection to PostgreSQL was lost")), "the lost LISTEN logged");
      // The gap: nothing reaches A while its network is gone, whatever B publishes.
      ids.push(await b.append("room", "2", limits), await b.append("other", "2", limits), await b.append("room", "3", limits));
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(got).toHaveLength(2);
      proxy.heal();
      await until(() => got.length === 5, "the events of the gap");
      expect(logs.lines().join("\n")).toMatch(/streams: listening to PostgreSQL again after \d+ms[^]*streams: delivered 3 event\(s\) announced while LISTEN was lost/);
      ids.push(await b.append("room", "4", limits));
      await until(() => got.length === 6, "the live event after the gap");
      await new Promise((resolve) => setTimeout(resolve, 200));
      // Each once (6 in all), each channel in order, with the ids the publisher got.
      expect(got).toHaveLength(6);
      const of = (channel: string) => got.filter((line) => line.startsWith(`${channel} `));
      expect(of("room")).toEqual([`room ${ids[0]} 1`, `room ${ids[2]} 2`, `room ${ids[4]} 3`, `room ${ids[5]} 4`]);
      expect(of("other")).toEqual([`other ${ids[1]} 1`, `other ${ids[3]} 2`]);
    } finally {
      await Promise.all([a.close(), b.close()]);
      await proxy.close();
    }
  });

  it("never takes a resumed client behind its Last-Event-ID: the events of a lost LISTEN's gap, caught up after an empty replay, are not sent again", async () => {
    const url = await pg.createDatabase();
    const database = new URL(url).pathname.slice(1);
    // From the server's own database: one cannot refuse connections to the database one is in.
    const admin = pg.open(pg.url, { max: 1 });
    const logs = captureLogs();
    const store = await openPostgresStreamStore(url, logs.logger);
    // The publisher ("pod A") never listens: the one LISTEN connection is pod B's, this hub's.
    const publisher = await openPostgresStreamStore(url, captureLogs().logger);
    const hub = new StreamHub((deliver) => storeBroker(Promise.resolve(store), deliver));
    const live: string[] = [];
    try {
      const off = hub.subscribe("gap", { deliver: (event) => live.push(event.data), missed: () => live.push("missed") });
      // Through the hub: its publish waits until the hub's broker listens.
      await hub.publish("gap", 0);
      await until(() => live.length === 1, "the first event on pod B");
      // Pod B's LISTEN is lost and cannot come back while new connections are refused; its pooled statements go on.
      await admin.query(`ALTER DATABASE "${database}" ALLOW_CONNECTIONS false`);
      await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", [LISTEN_APPLICATION_NAME]);
      await until(() => logs.lines().some((line) => line.includes("the LISTEN connection to PostgreSQL was lost")), "the lost LISTEN logged");
      // Ten events in the gap: the client received them live on pod A, then resumes on pod B with the tenth.
      const gap: string[] = [];
      for (let n = 1; n <= 10; n++) gap.push(await publisher.append("gap", String(n), limits));
      const resumed: string[] = [];
      hub.subscribe("gap", { deliver: (event) => resumed.push(`${event.id} ${event.data}`), missed: (_channel, missed) => resumed.push(`missed ${missed}`) }, gap[9]);
      // Its replay is empty; then pod B listens again and catches up the gap for its live subscriber.
      await admin.query(`ALTER DATABASE "${database}" ALLOW_CONNECTIONS true`);
      await until(() => live.length === 11, "the gap caught up on pod B", 20_000);
      const next = await publisher.append("gap", "11", limits);
      await until(() => live.length === 12 && resumed.length > 0, "the next live event");
      expect(live).toEqual(["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11"]);
      expect(resumed).toEqual([`${next} 11`]);
      off();
    } finally {
      await admin.query(`ALTER DATABASE "${database}" ALLOW_CONNECTIONS true`);
      await Promise.all([store.close(), publisher.close()]);
    }
  });

  it("stops the supervisor with exit 1 and the reason when the database cannot be reached", async () => {
    const run = await startSupervisor(["--workers", "1"], {
      entry: "test/fixtures/streams-app.ts", env: { KEELSON_STREAMS_DATABASE_URL: "postgres://nobody@127.0.0.1:1/none" },
    });
    const exit = await run.exited;
    expect(exit.code).toBe(1);
    expect(run.output()).toMatch(/stopped in \d+ms with exit 1: streams: the shared store \(KEELSON_STREAMS_DATABASE_URL\) cannot be used: .*ECONNREFUSED/);
  });
});
