/**
 * WebSockets with a real process and signals: h3's own WebSocket handler, in an App without any
 * keelson websocket() route, drains like keelson's sockets (close 1001, exit 0, no error), and a
 * client that floods pings without reading leaves the worker's memory bounded.
 */
import { afterEach, describe, expect, it } from "vitest";
import { killAll, startService } from "./fixtures/lifecycle-harness.js";
import { PING, frame, openRaw } from "./helpers/raw-websocket.js";
import { WSClient } from "./helpers/stream-clients.js";

afterEach(() => killAll());

const APP = "test/fixtures/websockets-app.ts";

async function until(test: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!test()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe("h3's WebSocket handler at SIGTERM", () => {
  it("echoes, then gets close 1001; the process exits 0 quickly, logs the socket as 101 and no error", async () => {
    const service = await startService({}, APP);
    const client = new WSClient(`ws://127.0.0.1:${service.port}/h3/echo`);
    await client.opened;
    client.socket.send("hello");
    await until(() => client.messages.length === 1, "the echo");
    expect(client.messages[0]!.data).toBe("hello");
    const signalledAt = performance.now();
    service.child.kill("SIGTERM");
    const [exit] = await Promise.all([service.exited, client.closed]);
    expect(client.close).toEqual({ code: 1001, reason: "going away", wasClean: true });
    expect(exit.code).toBe(0);
    // Far below the drain cap (5 s of the default budget) the socket used to be held to.
    expect(exit.at - signalledAt).toBeLessThan(2500);
    expect(service.output()).toMatch(/ending 0 event stream\(s\) and 1 WebSocket\(s\)/);
    expect(service.output()).toMatch(/GET \/h3\/echo 101 \d/);
    expect(service.output()).not.toMatch(/\bERROR\b/);
    expect(service.lines().at(-1)).toMatch(/terminated cleanly in \d+ms \(SIGTERM\)$/);
  });
});

describe("a client that sends 1M pings and never reads", () => {
  it("is dropped once the pongs it owes pass maxQueuedBytes; the worker's RSS grows by less than 50 MB", async () => {
    const service = await startService({}, APP);
    const rss = async () => ((await (await fetch(`http://127.0.0.1:${service.port}/rss`)).json()) as { rss: number }).rss;
    const before = await rss();
    const raw = await openRaw(service.port, "/h3/echo");
    // Pings with a 16-byte payload: each owes an 18-byte pong the client never reads.
    const burst = Buffer.concat(Array.from({ length: 1000 }, () => frame(PING, Buffer.alloc(16, 112))));
    let sent = 0;
    while (!raw.socket.destroyed && sent < 1_000_000) {
      if (!raw.socket.write(burst)) await new Promise((resolve) => { raw.socket.once("drain", resolve); raw.socket.once("close", resolve); });
      sent += 1000;
    }
    await service.waitFor(/WebSocket client on \/h3\/echo dropped: \d+ bytes waiting, over maxQueuedBytes \(1048576\): it sends pings and does not read/);
    const after = await rss();
    raw.socket.destroy();
    const growth = after - before;
    console.log(`ping flood: ${sent} pings sent before the drop; RSS ${Math.round(before / 1048576)} MiB before, ${Math.round(after / 1048576)} MiB after`);
    expect(growth).toBeLessThan(50 * 1024 * 1024);
    // The service still serves.
    expect((await fetch(`http://127.0.0.1:${service.port}/rss`)).status).toBe(200);
  });
});
