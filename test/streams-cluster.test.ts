/**
 * Event streams and WebSockets under the supervisor, with real clients: a rolling reload and then
 * SIGTERM end every stream cleanly, clients resume with Last-Event-ID on another worker and get
 * every message published meanwhile exactly once, and a publish on one worker reaches every client
 * of the pod. Kept short for a shared machine (40 + 10 clients, 2 workers); the full-size run
 * (200 + 50 on 4) is `make scenarios ONLY=streams`.
 */
import { afterEach, describe, expect, it } from "vitest";
import { killAll, startSupervisor } from "./fixtures/supervisor-harness.js";
import { ReconnectingWS, SSEClient, postJSON } from "./helpers/stream-clients.js";

const publishOver = (port: number, room: string, body: unknown) => postJSON<{ id: string; worker: string }>(port, `/publish/${room}`, body);

afterEach(() => killAll());

const SSE_CLIENTS = 40;
const WS_CLIENTS = 10;

/** POST /publish/:room on a fresh connection; resolves with the event id and the worker that published. */

async function until(test: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!test()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const numbers = (values: unknown[]) => values.map((value) => (value as { n: number }).n);

describe("streams under the supervisor", () => {
  it("rolling reload then SIGTERM: clean ends, resume with Last-Event-ID on any worker, every message exactly once, exit 0", async () => {
    const run = await startSupervisor(["--workers", "2"], { entry: "test/fixtures/streams-app.ts" });
    await run.waitFor(/2 worker\(s\) ready in/);
    const sse = Array.from({ length: SSE_CLIENTS }, () => new SSEClient(run.port, "/events/reload"));
    await Promise.all(sse.map((client) => client.connect()));
    const ws = Array.from({ length: WS_CLIENTS }, () => new ReconnectingWS(`ws://127.0.0.1:${run.port}/socket/reload`));
    await Promise.all(ws.map((client) => client.current.opened));

    // One publish, on whichever worker takes the POST, reaches every client of the pod.
    const first = await publishOver(run.port, "reload", { n: 0 });
    await until(() => sse.every((c) => c.data().length === 1) && ws.every((c) => c.events.length === 1), 10_000, "the first message everywhere");
    expect(new Set(sse.map((c) => c.events[0]!.id))).toEqual(new Set([first.id]));

    // Publish without pause through the whole reload.
    const state = { publishing: true };
    const published: { n: number; id: string; worker: string }[] = [{ n: 0, ...first }];
    const publisher = (async () => {
      for (let n = 1; state.publishing; n++) {
        const answer = await publishOver(run.port, "reload", { n });
        published.push({ n, ...answer });
        await new Promise((resolve) => setTimeout(resolve, 15));
      }
    })();
    const mark = run.output().length;
    process.kill(run.pid, "SIGHUP");
    await run.waitFor(/reload complete: 2 worker\(s\) replaced/, 30_000, mark);
    // Every client has been moved off a replaced worker: all connected again.
    await until(() => sse.every((c) => c.ends.length >= 1 && c.connections === c.ends.length + 1), 15_000, "every SSE client to reconnect");
    await until(() => ws.every((c) => c.closes.length >= 1), 15_000, "every WebSocket to reconnect");
    await new Promise((resolve) => setTimeout(resolve, 300));
    state.publishing = false;
    await publisher;
    const last = published.length;
    await until(() => sse.every((c) => c.data().length === last) && ws.every((c) => c.events.length === last), 15_000,
      `every client to have all ${last} messages`);

    const expected = Array.from({ length: last }, (_, n) => n);
    for (const client of sse) {
      expect(numbers(client.data().map((d) => JSON.parse(d)))).toEqual(expected);
      // Each of its connections ended as the drain ends one: the app's last message, then `shutdown`.
      for (const end of client.ends) expect(end).toEqual({ how: "end", lastEvent: "shutdown" });
      expect(client.data("bye")).toHaveLength(client.ends.length);
      expect(client.data("missed")).toEqual([]);
    }
    for (const client of ws) {
      expect(numbers(client.events.map((e) => e.data))).toEqual(expected);
      for (const close of client.closes) expect(close).toEqual({ code: 1001, reason: "going away", wasClean: true });
      expect(client.other.filter((frame) => "missed" in frame)).toEqual([]);
    }
    // Published through both workers, old and new: ids come from the primary, one sequence.
    expect(new Set(published.map((p) => p.worker)).size).toBeGreaterThanOrEqual(2);

    const stopMark = run.output().length;
    const sseEnds = sse.map((c) => c.ends.length);
    const wsCloses = ws.map((c) => c.closes.length);
    for (const client of sse) client.retryMs = 60_000;
    process.kill(run.pid, "SIGTERM");
    const exit = await run.exited;
    expect(exit.code).toBe(0);
    await until(() => sse.every((c, i) => c.ends.length > sseEnds[i]!) && ws.every((c, i) => c.closes.length > wsCloses[i]!), 10_000, "every client to see the end");
    for (const client of sse) expect(client.ends.at(-1)).toEqual({ how: "end", lastEvent: "shutdown" });
    for (const client of ws) expect(client.closes.at(-1)).toEqual({ code: 1001, reason: "going away", wasClean: true });
    for (const client of sse) client.close();
    await Promise.all(ws.map((client) => client.stop()));

    const stop = run.output().slice(stopMark);
    expect(stop).toMatch(/stopped: 2 worker\(s\) exited cleanly in \d+ms/);
    // Each worker: streams ended, then its hooks in order, then its drain time.
    for (const match of stop.matchAll(/\[worker (\d+)[^\]]*\][^\n]*terminated cleanly in (\d+)ms/g)) expect(Number(match[2])).toBeLessThan(3000);
    const workerLines = (id: string) => stop.split("\n").filter((line) => line.includes(`worker ${id}`) || line.includes(`w${id}`));
    for (const id of ["1", "2"]) {
      const lines = workerLines(id);
      const ending = lines.findIndex((line) => /ending \d+ event stream\(s\) and \d+ WebSocket\(s\)/.test(line));
      const firstHook = lines.findIndex((line) => /fixture hook first: started/.test(line));
      const secondHook = lines.findIndex((line) => /fixture hook second: started/.test(line));
      expect(ending, lines.join("\n")).toBeGreaterThanOrEqual(0);
      expect(firstHook).toBeGreaterThan(ending);
      expect(secondHook).toBeGreaterThan(firstHook);
    }
  });
});
