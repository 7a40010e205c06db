/**
 * Event streams and WebSockets with real processes, sockets, clients and signals: the drain ends
 * them on purpose (final event, close frame 1001) and the shutdown stays clean and on time.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { killAll, startService } from "./fixtures/lifecycle-harness.js";
import { freePort, spawnChild } from "../harness/child.js";
import { SSEClient, WSClient, curl, postJSON } from "./helpers/stream-clients.js";

afterEach(() => killAll());

const STREAMS_APP = "test/fixtures/streams-app.ts";

describe("SIGTERM with an event stream open", () => {
  it("sends the final event with a retry hint, ends the stream cleanly, runs the hooks and exits 0 without waiting for the drain cap", async () => {
    const service = await startService({ STREAMS_TIMEOUT_MS: "10000" }, STREAMS_APP);
    let connected!: () => void;
    const ready = new Promise<void>((resolve) => (connected = resolve));
    const client = curl(`http://127.0.0.1:${service.port}/ticker`, (out) => {
      if (out.includes("event: tick")) connected();
    });
    await ready;
    const signalledAt = performance.now();
    service.child.kill("SIGTERM");
    const [exit, result] = await Promise.all([service.exited, client]);

    expect(exit.code).toBe(0);
    // Far below the drain cap (half of the 10 s budget) that the open stream used to run into.
    expect(exit.at - signalledAt).toBeLessThan(2500);
    expect(result.code).toBe(0);
    expect(result.out).toMatch(/event: shutdown\nretry: 1000\ndata: \{"reconnect":true\}\n\n$/);
    expect(service.output()).toMatch(/ending 1 event stream\(s\) and 0 WebSocket\(s\)/);
    expect(service.output()).toMatch(/GET \/ticker 200 \d/);
    const hooks = ["first", "second"].map((name) => service.indexOf(new RegExp(`fixture hook ${name}: started`)));
    expect(hooks[0]).toBeGreaterThan(service.indexOf(/GET \/ticker 200/));
    expect(hooks[1]).toBeGreaterThan(hooks[0]!);
    expect(service.lines().at(-1)).toMatch(/terminated cleanly in \d+ms \(SIGTERM\)$/);
  });
});

describe("WebSockets on app.listen()", () => {
  it("delivers published events, sends the app's last message and close 1001 going away at SIGTERM, and exits 0", async () => {
    const service = await startService({ STREAMS_TIMEOUT_MS: "10000" }, STREAMS_APP);
    const client = new WSClient(`ws://127.0.0.1:${service.port}/socket/lobby`);
    await client.opened;
    const sse = new SSEClient(service.port, "/events/lobby", { reconnect: false });
    await sse.connect();
    // A text frame from the socket is published to the room: both clients get it, with the same id.
    client.socket.send("hello");
    await sse.until(() => sse.data().length === 1, 10_000, "the published message");
    await until(() => client.messages.length === 1);
    const frame = client.json()[0]!;
    expect(frame).toEqual({ channel: "room:lobby", id: sse.events[0]!.id, data: "hello" });
    expect(sse.data()).toEqual(['"hello"']);

    const signalledAt = performance.now();
    service.child.kill("SIGTERM");
    const [exit] = await Promise.all([service.exited, client.closed, sse.until(() => sse.ends.length === 1)]);
    expect(exit.code).toBe(0);
    expect(exit.at - signalledAt).toBeLessThan(2500);
    expect(client.close).toEqual({ code: 1001, reason: "going away", wasClean: true });
    expect(client.json().at(-1)).toEqual({ bye: "solo" });
    expect(sse.ends).toEqual([{ how: "end", lastEvent: "shutdown" }]);
    expect(sse.data("bye")).toEqual(['{"worker":"solo"}']);
    expect(service.output()).toMatch(/ending 1 event stream\(s\) and 1 WebSocket\(s\)/);
    expect(service.output()).toMatch(/GET \/socket\/lobby 101 \d/);
    expect(service.lines().at(-1)).toMatch(/terminated cleanly in \d+ms \(SIGTERM\)$/);
  });
});

async function until(test: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!test()) {
    if (performance.now() > deadline) throw new Error("timed out");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe("a client that does not read", () => {
  it("is dropped once maxQueuedBytes wait, with the reason logged, while the process's memory stays bounded", async () => {
    // A replay buffer of 16 events: what stays is then the streams' queues, not the replay buffer (docs/streams.md: its bound).
    const service = await startService({ STREAMS_QUEUE: String(256 * 1024), STREAMS_REPLAY: "16" }, STREAMS_APP);
    const base = `http://127.0.0.1:${service.port}`;
    const stalled = connect(service.port, "127.0.0.1");
    stalled.write("GET /events/slow HTTP/1.1\r\nhost: x\r\naccept: text/event-stream\r\n\r\n");
    await new Promise((resolve) => stalled.once("data", resolve));
    stalled.pause();
    let stalledClosed = false;
    stalled.on("close", () => (stalledClosed = true));
    const before = (await (await fetch(`${base}/whoami`)).json()) as { rss: number };
    // 64 MiB published: without a bound the stalled client's queue would hold all of it.
    const flood = (await (await fetch(`${base}/flood/slow?count=16384&bytes=4096`, { method: "POST" })).json()) as { rss: number };
    await service.waitFor(/event stream client dropped: \d+ bytes waiting, over maxQueuedBytes \(262144\): the client does not read/);
    stalled.resume();
    await until(() => stalledClosed);
    const growth = flood.rss - before.rss;
    expect(growth).toBeLessThan(32 * 1024 * 1024);
    expect(service.count(/event stream client dropped/)).toBe(1);
    // The service still serves.
    expect((await fetch(`${base}/whoami`)).status).toBe(200);
    console.log(`slow client: RSS ${Math.round(before.rss / 1048576)} MiB before, ${Math.round(flood.rss / 1048576)} MiB after 64 MiB published`);
  });
});

describe("keelson dev", () => {
  it("serves event streams and WebSockets, and a save ends them cleanly; the client resumes on the new worker without loss", async () => {
    const root = fileURLToPath(new URL("..", import.meta.url));
    const project = mkdtempSync(join(tmpdir(), "keelson-dev-streams-"));
    try {
      writeFileSync(join(project, "package.json"), '{ "type": "module" }\n');
      const source = (version: number) => `import { App, post, publish, sse, websocket } from ${JSON.stringify(join(root, "src/index.ts"))};
const app = new App({ serviceName: "dev-streams" });
app.route(sse("/events", (_ctx, stream) => stream.subscribe("news")));
app.route(websocket("/socket", { open: (socket) => socket.subscribe("news") }));
app.route(post("/publish", async (ctx) => ({ id: await publish("news", { version: ${version}, body: ctx.body }) })));
await app.listen();
`;
      writeFileSync(join(project, "main.ts"), source(1));
      const port = await freePort();
      const dev = spawnChild([process.execPath, "--import", import.meta.resolve("tsx"), join(root, "cli/cli.ts"), "dev", "main.ts", "--port", String(port)],
        { cwd: project, env: { NODE_ENV: "development" } });
      await dev.waitFor(/1 worker\(s\) ready in/, { timeoutMs: 30_000 });
      const client = new SSEClient(port, "/events");
      await client.connect();
      const socket = new WSClient(`ws://127.0.0.1:${port}/socket`);
      await socket.opened;
      await postJSON(port, "/publish", "before");
      await client.until(() => client.data().length === 1, 10_000, "the first message");

      const mark = dev.output().length;
      writeFileSync(join(project, "main.ts"), source(2));
      await dev.waitFor(/main\.ts changed: reloaded 1 worker\(s\) in \d+ms/, { from: mark, timeoutMs: 30_000 });
      // Published while the client waits its retry: it gets it from the primary's buffer when it resumes.
      await postJSON(port, "/publish", "after");
      await client.until(() => client.data().length === 2, 15_000, "the message published after the reload");
      await socket.closed;

      expect(client.data().map((d) => JSON.parse(d) as unknown)).toEqual([{ version: 1, body: "before" }, { version: 2, body: "after" }]);
      expect(client.ends).toEqual([{ how: "end", lastEvent: "shutdown" }]);
      expect(client.connections).toBe(2);
      expect(socket.close).toEqual({ code: 1001, reason: "going away", wasClean: true });
      client.close();
      await dev.stop();
    } finally {
      rmSync(project, { recursive: true, force: true });
    }
  });
});
