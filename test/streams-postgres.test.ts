/**
 * Fan-out across pods through PostgreSQL: two supervisors (two "pods") share one database through
 * KEELSON_STREAMS_DATABASE_URL. A message published on one pod reaches the clients of both, with
 * one id, in order (large messages too); a client resumes on the other pod with Last-Event-ID.
 */
import { afterEach, describe, expect, it } from "vitest";
import { killAll, startSupervisor } from "./fixtures/supervisor-harness.js";
import { usePostgres } from "./helpers/postgres.js";
import { SSEClient, WSClient, postJSON } from "./helpers/stream-clients.js";

const publishOver = (port: number, room: string, body: unknown) => postJSON<{ id: string; worker: string }>(port, `/publish/${room}`, body);

const pg = usePostgres();
afterEach(() => killAll());


async function until(test: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!test()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe("streams across pods through PostgreSQL", () => {
  it("delivers a publish of one pod to the clients of both, in order, and resumes a client on the other pod", async () => {
    const url = await pg.createDatabase();
    const env = { KEELSON_STREAMS_DATABASE_URL: url };
    const [a, b] = await Promise.all([startSupervisor(["--workers", "1"], { entry: "test/fixtures/streams-app.ts", env }),
      startSupervisor(["--workers", "1"], { entry: "test/fixtures/streams-app.ts", env })]);
    await Promise.all([a!.waitFor(/1 worker\(s\) ready in/), b!.waitFor(/1 worker\(s\) ready in/)]);
    const onA = new SSEClient(a!.port, "/events/pods", { reconnect: false });
    await onA.connect();
    const onB = new WSClient(`ws://127.0.0.1:${b!.port}/socket/pods`);
    await onB.opened;

    const big = "y".repeat(20_000);
    const published = [
      await publishOver(b!.port, "pods", { n: 1 }),
      await publishOver(a!.port, "pods", { n: 2, big }),
      await publishOver(b!.port, "pods", { n: 3 }),
    ];
    await until(() => onA.data().length === 3 && onB.messages.length === 3, "3 messages on both pods");
    expect(onA.events.map((e) => e.id)).toEqual(published.map((p) => p.id));
    expect(onB.json().map((m) => m.id)).toEqual(published.map((p) => p.id));
    expect(onA.data().map((d) => (JSON.parse(d) as { n: number }).n)).toEqual([1, 2, 3]);
    expect((onB.json()[1]!.data as { big: string }).big).toBe(big);

    // The client of pod A leaves; two more are published; it comes back on pod B with its last id.
    const lastId = onA.lastId;
    onA.close();
    await publishOver(a!.port, "pods", { n: 4 });
    await publishOver(b!.port, "pods", { n: 5 });
    const resumed = new SSEClient(b!.port, "/events/pods", { reconnect: false, lastId });
    await resumed.connect();
    await until(() => resumed.data().length === 2, "the 2 missed messages on pod B");
    await publishOver(a!.port, "pods", { n: 6 });
    await until(() => resumed.data().length === 3, "the live message after the replay");
    expect(resumed.data().map((d) => (JSON.parse(d) as { n: number }).n)).toEqual([4, 5, 6]);
    expect(resumed.data("missed")).toEqual([]);
    resumed.close();
    onB.socket.close();

    process.kill(a!.pid, "SIGTERM");
    process.kill(b!.pid, "SIGTERM");
    const exits = await Promise.all([a!.exited, b!.exited]);
    expect(exits.map((exit) => exit.code)).toEqual([0, 0]);
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
