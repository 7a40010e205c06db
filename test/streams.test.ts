/**
 * Event streams in-process, through app.request(): the wire format, ids, resume with
 * Last-Event-ID, the replay buffer's bound, the slow-client policy, the end of a stream on close(),
 * its one log line, its gauge, and its OpenAPI description.
 */
import { afterEach, describe, expect, it } from "vitest";
import { App, configureStreams, get, publish, sse, websocket, type MetricsCollector } from "../src/index.js";
import { ReplayLog } from "../src/streams/replay-log.js";
import { StreamHub } from "../src/streams/hub.js";
import { streamsDatabaseUrl } from "../src/streams/broker.js";
import { captureLogs } from "./helpers/logs.js";
import { definePrometheus } from "../src/metrics/index.js";

const decoder = new TextDecoder();

/** Reads the body until `until` matches what was read so far (or the stream ends). */
async function readUntil(reader: ReadableStreamDefaultReader<Uint8Array>, until: RegExp, sofar = ""): Promise<string> {
  let text = sofar;
  while (!until.test(text)) {
    const { done, value } = await reader.read();
    if (done) return text;
    text += decoder.decode(value);
  }
  return text;
}

let channelCount = 0;
/** A channel no other test publishes to: the hub is per process. */
const freshChannel = () => `test-${process.pid}-${++channelCount}`;

const apps: App[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

function streamApp(options: Parameters<typeof sse>[1] = {}): { app: App; lines: () => string[]; metrics: string[] } {
  const { logger, lines } = captureLogs();
  const app = new App({ logger, disableHealth: true });
  const metrics: string[] = [];
  const collector: MetricsCollector = {
    observeRequest: (method, route, status) => metrics.push(`request ${method} ${route} ${status}`),
    streamOpened: (kind, route) => metrics.push(`open ${kind} ${route}`),
    streamClosed: (kind, route) => metrics.push(`closed ${kind} ${route}`),
  };
  app.setMetricsCollector(collector);
  app.route(sse("/events/:channel", options as object, (ctx, stream) => {
    if (ctx.params.channel === "forbidden") throw new Error("refused before the stream starts");
    stream.subscribe(ctx.params.channel);
  }));
  apps.push(app);
  return { app, lines, metrics };
}

describe("sse() through app.request()", () => {
  it("answers text/event-stream with a retry hint first, then each published event with its id", async () => {
    const { app } = streamApp();
    const channel = freshChannel();
    const response = await app.request(`/events/${channel}`);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    expect(response.headers.get("cache-control")).toBe("no-cache, no-transform");
    const reader = response.body!.getReader();
    expect(await readUntil(reader, /\n\n/)).toBe("retry: 1000\n\n");
    const first = await publish(channel, { n: 1 });
    const second = await publish(channel, "two\nlines");
    const text = await readUntil(reader, /"two\\nlines"/);
    expect(text).toBe(`id: ${first}\ndata: {"n":1}\n\nid: ${second}\ndata: "two\\nlines"\n\n`);
    await reader.cancel();
  });

  it("resumes after Last-Event-ID with exactly the events missed, then the live ones, in order", async () => {
    const { app } = streamApp();
    const channel = freshChannel();
    const ids = [];
    for (let n = 1; n <= 5; n++) ids.push(await publish(channel, n));
    const response = await app.request(`/events/${channel}`, { headers: { "last-event-id": ids[1]! } });
    const reader = response.body!.getReader();
    let text = await readUntil(reader, /data: 5\n/);
    await publish(channel, 6);
    text = await readUntil(reader, /data: 6\n/, text);
    const data = [...text.matchAll(/^data: (\d+)$/gm)].map((m) => Number(m[1]));
    expect(data).toEqual([3, 4, 5, 6]);
    expect(text).not.toMatch(/event: missed/);
    await reader.cancel();
  });

  it("tells a client resuming from before the replay buffer how many events it missed", async () => {
    const hub = new StreamHub();
    hub.configure({ replayEvents: 3 });
    const channel = freshChannel();
    const ids = [];
    for (let n = 1; n <= 10; n++) ids.push(await hub.publish(channel, n));
    const seen: string[] = [];
    const off = hub.subscribe(channel, {
      deliver: (event) => seen.push(event.data),
      missed: (name, missed) => seen.push(`missed ${name} ${missed}`),
    }, ids[2]);
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(seen).toEqual([`missed ${channel} 4`, "8", "9", "10"]);
    off();
  });

  it("answers an unknown or pre-restart id with every buffered event and missed: unknown", () => {
    const before = new ReplayLog({ replayEvents: 2 });
    const after = new ReplayLog({ replayEvents: 2 });
    const old = before.append("c", "1");
    for (const n of ["a", "b", "c"]) after.append("c", JSON.stringify(n));
    expect(after.since("c", old.id)).toEqual({ missed: "unknown", events: [expect.objectContaining({ seq: 2 }), expect.objectContaining({ seq: 3 })] });
    expect(after.since("c", "garbage")).toMatchObject({ missed: "unknown" });
    expect(after.since("c", after.lastId("c")!)).toEqual({ missed: 0, events: [] });
  });

  it("forgets the least recently published channel beyond maxChannels", () => {
    const log = new ReplayLog({ replayEvents: 5, maxChannels: 2 });
    const a = log.append("a", "1");
    log.append("b", "1");
    log.append("a", "2");
    log.append("c", "1");
    expect(log.lastId("b")).toBeUndefined();
    expect(log.since("a", a.id).events.map((e) => e.data)).toEqual(["2"]);
  });

  it("drops a client that does not read once maxQueuedBytes wait, and logs why", async () => {
    const { app, lines } = streamApp({ maxQueuedBytes: 1000 });
    const channel = freshChannel();
    const response = await app.request(`/events/${channel}`);
    const reader = response.body!.getReader();
    await readUntil(reader, /retry/);
    // The client reads nothing more: every event waits in the stream's queue.
    for (let n = 0; n < 20; n++) await publish(channel, "x".repeat(100));
    await expect(reader.read()).rejects.toThrow(/slow client dropped: \d+ bytes waiting, over maxQueuedBytes \(1000\)/);
    expect(lines().join("\n")).toMatch(/event stream client dropped: \d+ bytes waiting/);
  });

  it("answers an error thrown before the stream starts as any route's error", async () => {
    const { app } = streamApp();
    const response = await app.request("/events/forbidden");
    expect(response.status).toBe(500);
    expect(response.headers.get("content-type")).toMatch(/application\/json/);
  });

  it("logs the stream once, when it ends, with its duration, and counts it as open until then", async () => {
    const { app, lines, metrics } = streamApp();
    const channel = freshChannel();
    const response = await app.request(`/events/${channel}`);
    const reader = response.body!.getReader();
    await readUntil(reader, /retry/);
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(lines().filter((line) => line.includes("GET /events/"))).toEqual([]);
    expect(metrics).toEqual(["open sse /events/:channel"]);
    await reader.cancel();
    await new Promise((resolve) => setTimeout(resolve, 10));
    const logged = lines().filter((line) => line.includes(`GET /events/${channel}`));
    expect(logged).toHaveLength(1);
    const ms = Number(/ 200 ([\d.]+)ms/.exec(logged[0]!)?.[1]);
    expect(ms).toBeGreaterThanOrEqual(50);
    expect(metrics).toEqual(["open sse /events/:channel", "closed sse /events/:channel"]);
  });

  it("ends the request's server span when the stream ends, with its route and status", async () => {
    const ended: string[] = [];
    const span = { traceId: "0af7651916cd43dd8448eb211c80319c", setAttribute() {}, recordException() {}, end() {} };
    const { app } = streamApp();
    app.setTracer({
      startRequestSpan: () => span,
      endRequestSpan: (_span, end) => ended.push(`${end.route} ${end.status}`),
      startSpan: () => span,
    });
    const response = await app.request(`/events/${freshChannel()}`);
    const reader = response.body!.getReader();
    await readUntil(reader, /retry/);
    expect(ended).toEqual([]);
    await reader.cancel();
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(ended).toEqual(["/events/:channel 200"]);
  });

  it("ends open streams on close(): the app's last message, then the final shutdown event", async () => {
    const { logger } = captureLogs();
    const app = new App({ logger, disableHealth: true });
    app.route(sse("/feed", { retryMs: 2500, onShutdown: (stream, reason) => void stream.send({ reason }, { event: "bye" }) }, () => {}));
    const response = await app.request("/feed");
    const reader = response.body!.getReader();
    const head = await readUntil(reader, /retry/);
    const closing = app.close();
    const text = await readUntil(reader, /shutdown[^]*\n\n$/, head);
    expect(text).toBe('retry: 2500\n\nevent: bye\ndata: {"reason":"close()"}\n\nevent: shutdown\nretry: 2500\ndata: {"reconnect":true}\n\n');
    expect((await reader.read()).done).toBe(true);
    expect((await closing).clean).toBe(true);
  });

  it("ends a stream opened once the drain has begun at once, with the final event", async () => {
    const { logger } = captureLogs();
    const app = new App({ logger, disableHealth: true });
    app.route(sse("/feed", () => {}));
    await app.close();
    const response = await app.request("/feed");
    expect(await response.text()).toBe('retry: 1000\n\nevent: shutdown\nretry: 1000\ndata: {"reconnect":true}\n\n');
  });

  it("answers a plain GET on a WebSocket route with 426", async () => {
    const app = new App({ logger: captureLogs().logger, disableHealth: true });
    app.route(websocket("/ws", { open: () => {} }));
    apps.push(app);
    const response = await app.request("/ws");
    expect(response.status).toBe(426);
  });

  it("documents an event-stream route as text/event-stream and a WebSocket route with 101", async () => {
    const app = new App({ logger: captureLogs().logger });
    app.route(sse("/feed", () => {}));
    app.route(websocket("/ws", { open: () => {} }));
    apps.push(app);
    const doc = await (await app.request("/docs/openapi.json")).json() as { paths: Record<string, { get: { responses: Record<string, unknown> } }> };
    expect(doc.paths["/feed"]!.get.responses["200"]).toEqual({ description: "A stream of server-sent events.", content: { "text/event-stream": { schema: { type: "string" } } } });
    expect(doc.paths["/ws"]!.get.responses["101"]).toEqual({ description: "Switching Protocols: the WebSocket connection is open." });
  });

  it("refuses bad options and bad publishes with the option's name and value", async () => {
    expect(() => sse("/x", { maxQueuedBytes: 0 }, () => {})).toThrow("maxQueuedBytes must be an integer >= 1, got 0");
    expect(() => sse("/x", { heartbeatMs: -1 }, () => {})).toThrow("heartbeatMs must be an integer from 0 to 2147483647, got -1");
    expect(() => sse("/x", { retryMs: Number.NaN }, () => {})).toThrow("retryMs must be an integer from 0 to 2147483647, got NaN");
    expect(() => websocket("/x", { maxQueuedBytes: 1.5 }, {})).toThrow("maxQueuedBytes must be an integer >= 1, got 1.5");
    expect(() => configureStreams({ replayEvents: -1 })).toThrow("replayEvents must be an integer from 0 to 100000, got -1");
    await expect(publish("", 1)).rejects.toThrow(/invalid stream channel ""/);
    await expect(publish("c", undefined)).rejects.toThrow(/not a JSON value/);
    await expect(publish("c", "x".repeat(70_000))).rejects.toThrow(/over the maxMessageBytes limit of 65536/);
    void get;
  });
});

describe("the hub", () => {
  it("sends an event once when the shared store announces it live after a resuming client's replay held it", async () => {
    const hub = new StreamHub();
    const channel = freshChannel();
    const ids = [];
    for (let n = 1; n <= 3; n++) ids.push(await hub.publish(channel, n));
    const seen: string[] = [];
    hub.subscribe(channel, { deliver: (event) => seen.push(event.data), missed: () => seen.push("missed") }, ids[0]);
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(seen).toEqual(["2", "3"]);
    // What a store's LISTEN may do: announce event 3 again, after the replay that held it.
    const [, epochSeq] = /^(.*)-3$/.exec(ids[2]!)!;
    hub.deliver({ channel, id: `${epochSeq}-3`, seq: 3, data: "3" });
    hub.deliver({ channel, id: `${epochSeq}-4`, seq: 4, data: "4" });
    expect(seen).toEqual(["2", "3", "4"]);
  });
});

describe("KEELSON_STREAMS_DATABASE_URL", () => {
  it("is refused unless it is a postgres:// URL, with the password left out of the message", () => {
    const before = process.env.KEELSON_STREAMS_DATABASE_URL;
    try {
      process.env.KEELSON_STREAMS_DATABASE_URL = "mysql://user:secret@db/app";
      expect(() => streamsDatabaseUrl()).toThrow('invalid KEELSON_STREAMS_DATABASE_URL: expected a postgres:// or postgresql:// URL, got "mysql://…@db/app"');
      process.env.KEELSON_STREAMS_DATABASE_URL = "postgresql://user@db/app";
      expect(streamsDatabaseUrl()).toBe("postgresql://user@db/app");
      process.env.KEELSON_STREAMS_DATABASE_URL = "";
      expect(streamsDatabaseUrl()).toBeUndefined();
    } finally {
      if (before === undefined) delete process.env.KEELSON_STREAMS_DATABASE_URL;
      else process.env.KEELSON_STREAMS_DATABASE_URL = before;
    }
  });
});

describe("keelson_open_streams", () => {
  it("counts the open event streams of a route in the Prometheus exposition", async () => {
    const app = new App({ logger: captureLogs().logger, disableHealth: true });
    const prometheus = definePrometheus({ defaultMetrics: false, cluster: false });
    app.use(prometheus);
    app.route(sse("/feed", () => {}));
    apps.push(app);
    const response = await app.request("/feed");
    const reader = response.body!.getReader();
    await readUntil(reader, /retry/);
    expect(await prometheus.readExposition()).toMatch(/^keelson_open_streams\{kind="sse",route="\/feed"\} 1$/m);
    await reader.cancel();
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(await prometheus.readExposition()).toMatch(/^keelson_open_streams\{kind="sse",route="\/feed"\} 0$/m);
  });
});
