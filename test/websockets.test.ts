/**
 * WebSockets on a real socket in this process: h3's own WebSocket handlers served without any
 * keelson websocket() route, and the limits every socket is held to (message size, send buffer
 * with the pongs it owes, ping timeout), each crossed by a client and counted.
 */
import { defineWebSocketHandler } from "h3";
import { afterEach, describe, expect, it } from "vitest";
import { App, get, websocket, type MetricsCollector } from "../src/index.js";
import { listenOn, type Listening } from "./helpers/listen.js";
import { captureLogs } from "./helpers/logs.js";
import { PING, TEXT, frame, openRaw } from "./helpers/raw-websocket.js";
import { WSClient } from "./helpers/stream-clients.js";

const running: Listening[] = [];
afterEach(async () => {
  for (const server of running.splice(0)) await server.stop();
});

async function serve(configure: (app: App) => void, config: { bodyLimit?: number } = {}) {
  const { logger, lines } = captureLogs();
  const app = new App({ logger, port: 0, disableHealth: true, ...config });
  const metrics: string[] = [];
  const collector: MetricsCollector = {
    observeRequest: (method, route, status) => metrics.push(`request ${method} ${route} ${status}`),
    streamOpened: (kind, route) => metrics.push(`open ${kind} ${route}`),
    streamClosed: (kind, route) => metrics.push(`closed ${kind} ${route}`),
    webSocketLimitClosed: (route, reason) => metrics.push(`limit ${route} ${reason}`),
  };
  app.setMetricsCollector(collector);
  configure(app);
  const server = await listenOn(app);
  running.push(server);
  return { app, server, lines, metrics };
}

async function until(test: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!test()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const echo = defineWebSocketHandler({ message: (peer, message) => void peer.send(`echo ${message.text()}`) });

describe("h3's WebSocket handlers in an App without keelson WebSocket routes", () => {
  it("open and echo; logged as 101 when the socket ends, measured as 101, counted as open while open", async () => {
    const { server, lines, metrics } = await serve((app) => {
      app.httpEngine.get("/h3/echo", echo);
      app.route(get("/hello", () => ({ hello: "world" })));
    });
    const client = new WSClient(`ws://127.0.0.1:${server.port}/h3/echo`);
    await client.opened;
    client.socket.send("hi");
    await until(() => client.messages.length === 1, "the echo");
    expect(client.messages[0]!.data).toBe("echo hi");
    expect(metrics).toContain("request GET /h3/echo 101");
    expect(metrics).toContain("open websocket /h3/echo");
    expect(lines().some((line) => /GET \/h3\/echo/.test(line))).toBe(false);
    client.socket.close(1000);
    await client.closed;
    await until(() => lines().some((line) => /GET \/h3\/echo 101 \d/.test(line)), "the log line");
    expect(metrics).toContain("closed websocket /h3/echo");
    expect(metrics.filter((m) => m.startsWith("request GET /h3/echo"))).toEqual(["request GET /h3/echo 101"]);
    // The HTTP routes still answer as before.
    expect(await (await server.fetch("/hello")).json()).toEqual({ hello: "world" });
  });

  it("a handler returned from a keelson route opens too; an upgrade to a plain route gets that route's answer", async () => {
    const { server, lines } = await serve((app) => {
      app.route(get("/via-route", (ctx) => echo(ctx.event) as never));
      app.route(get("/plain", () => ({ plain: true })));
    });
    const client = new WSClient(`ws://127.0.0.1:${server.port}/via-route`);
    await client.opened;
    client.socket.send("x");
    await until(() => client.messages.length === 1, "the echo");
    expect(client.messages[0]!.data).toBe("echo x");
    client.socket.close(1000);
    const refused = openRaw(server.port, "/plain");
    await expect(refused).rejects.toThrow(/no upgrade: HTTP\/1.1 200/);
    await until(() => lines().some((line) => /GET \/plain 200 \d/.test(line)), "the plain route's log line");
  });

  it("closes with 1001 at the drain", async () => {
    const { server, lines } = await serve((app) => app.httpEngine.get("/h3/echo", echo));
    const client = new WSClient(`ws://127.0.0.1:${server.port}/h3/echo`);
    await client.opened;
    const report = await server.stop();
    running.splice(0);
    await client.closed;
    expect(client.close).toEqual({ code: 1001, reason: "going away", wasClean: true });
    expect(report.clean).toBe(true);
    expect(lines().join("\n")).toMatch(/ending 0 event stream\(s\) and 1 WebSocket\(s\)/);
  });
});

describe("maxMessageBytes", () => {
  it("defaults to the App's bodyLimit: a larger message closes the socket with 1009, logged and counted", async () => {
    const { server, lines, metrics } = await serve((app) => app.httpEngine.get("/h3/echo", echo), { bodyLimit: 1000 });
    const raw = await openRaw(server.port, "/h3/echo", true);
    raw.socket.write(frame(TEXT, Buffer.alloc(1000, 97)));
    await until(() => raw.received().length > 0, "the echo of a message at the limit");
    raw.socket.write(frame(TEXT, Buffer.alloc(1001, 97)));
    await raw.closed;
    expect(raw.closeCode()).toBe(1009);
    expect(metrics).toContain("limit /h3/echo message_too_big");
    expect(lines().join("\n")).toMatch(/WebSocket client on \/h3\/echo closed with 1009: a message over maxMessageBytes \(1000\)/);
  });

  it("is a route option of websocket(): the route's limit, not the App's, and it is checked at construction", async () => {
    expect(() => websocket("/x", { maxMessageBytes: 0 }, {})).toThrow("maxMessageBytes must be an integer >= 1, got 0");
    expect(() => websocket("/x", { pingIntervalMs: -1 }, {})).toThrow("pingIntervalMs must be an integer >= 0, got -1");
    const { server, metrics } = await serve((app) => {
      app.route(websocket("/small", { maxMessageBytes: 10 }, { message: (socket, message) => void socket.send(message.text()) }));
      app.route(websocket("/default", { message: (socket, message) => void socket.send(message.text()) }));
    }, { bodyLimit: 100 });
    const big = await openRaw(server.port, "/default", true);
    big.socket.write(frame(TEXT, Buffer.alloc(100, 97)));
    await until(() => big.received().length > 0, "the echo on the default route");
    const small = await openRaw(server.port, "/small", true);
    small.socket.write(frame(TEXT, Buffer.alloc(11, 97)));
    await small.closed;
    expect(small.closeCode()).toBe(1009);
    expect(metrics).toEqual(expect.arrayContaining(["limit /small message_too_big"]));
    expect(metrics).not.toContain("limit /default message_too_big");
    big.socket.destroy();
  });
});

describe("a client that pings and never reads", () => {
  it("is dropped once the pongs it owes pass maxQueuedBytes, logged and counted", async () => {
    const { server, lines, metrics } = await serve((app) => {
      app.route(websocket("/socket", { maxQueuedBytes: 64 * 1024 }, {}));
    });
    const raw = await openRaw(server.port, "/socket");
    // Pings with 125-byte payloads: each owes a 127-byte pong, which the client never reads.
    const ping = frame(PING, Buffer.alloc(125, 112));
    const burst = Buffer.concat(Array.from({ length: 1000 }, () => ping));
    let sent = 0;
    while (!raw.socket.destroyed && sent < 200_000) {
      if (!raw.socket.write(burst)) await new Promise((resolve) => { raw.socket.once("drain", resolve); raw.socket.once("close", resolve); });
      sent += 1000;
    }
    await raw.closed;
    expect(metrics.filter((entry) => entry === "limit /socket backlog")).toHaveLength(1);
    expect(lines().filter((line) => /WebSocket client on \/socket dropped: \d+ bytes waiting, over maxQueuedBytes \(65536\): it sends pings and does not read/.test(line))).toHaveLength(1);
  });

  it("a client that pings and reads gets every pong and stays", async () => {
    const { server, metrics } = await serve((app) => app.route(websocket("/socket", { maxQueuedBytes: 64 * 1024 }, {})));
    const raw = await openRaw(server.port, "/socket", true);
    for (let n = 0; n < 2000; n++) raw.socket.write(frame(PING, Buffer.from(String(n))));
    // Each pong echoes its ping's payload: 2 header bytes plus the number.
    const expected = Array.from({ length: 2000 }, (_, n) => 2 + String(n).length).reduce((a, b) => a + b, 0);
    await until(() => raw.received().length >= expected, "every pong");
    expect(raw.socket.destroyed).toBe(false);
    expect(metrics.filter((m) => m.startsWith("limit"))).toEqual([]);
    raw.socket.destroy();
  });
});

describe("the server's ping", () => {
  it("drops a peer that answers nothing within pingIntervalMs, logged and counted; a live one stays", async () => {
    const { server, lines, metrics } = await serve((app) => {
      app.route(websocket("/socket", { pingIntervalMs: 200 }, {}));
    });
    // A raw client never answers a ping, as a peer gone half-open.
    const silent = await openRaw(server.port, "/socket", true);
    // Node's WebSocket answers pings by itself.
    const live = new WSClient(`ws://127.0.0.1:${server.port}/socket`);
    await live.opened;
    const started = performance.now();
    await silent.closed;
    expect(performance.now() - started).toBeLessThan(5000);
    expect(metrics).toContain("limit /socket ping_timeout");
    expect(lines().join("\n")).toMatch(/WebSocket client on \/socket dropped: no answer to a ping within pingIntervalMs \(200ms\)/);
    // A few more intervals: the live client is still open.
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(live.close).toBeUndefined();
    expect(metrics.filter((m) => m === "limit /socket ping_timeout")).toHaveLength(1);
    live.socket.close(1000);
    await live.closed;
  });
});
