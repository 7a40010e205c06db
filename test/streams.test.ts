/**
 * Event streams in-process, through app.request(): the wire format, ids, resume with
 * Last-Event-ID, the replay buffer's bound, the slow-client policy, the end of a stream on close(),
 * its one log line, its gauge, and its OpenAPI description.
 */
import { afterEach, describe, expect, it } from "vitest";
import { App, configureStreams, get, publish, sse, websocket, type MetricsCollector } from "../src/index.js";
import { ReplayLog } from "../src/streams/replay-log.js";
import { limitHits } from "../src/limit-hits.js";
import { StreamHub } from "../src/streams/hub.js";
import { coalesced, memoryBroker, streamsDatabaseUrl } from "../src/streams/broker.js";
import { captureLogs } from "./helpers/logs.js";
import { createPrometheus } from "../src/entries/metrics.js";

const hits = () => Object.fromEntries(limitHits());
const hit = (limit: string) => limitHits().get(limit) ?? 0;

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
async function waitUntil(test: () => boolean): Promise<void> {
  const deadline = performance.now() + 5000;
  while (!test()) {
    if (performance.now() > deadline) throw new Error("timed out");
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

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

  it("answers an id it cannot place (unreadable, pre-restart, ahead of the channel) with missed: unknown and no backlog", () => {
    const before = new ReplayLog({ replayEvents: 2 });
    const after = new ReplayLog({ replayEvents: 2 });
    const old = before.append("c", "1");
    for (const n of ["a", "b", "c"]) after.append("c", JSON.stringify(n));
    expect(after.plan("c", old.id, 1 << 20)).toEqual({ missed: "unknown" });
    expect(after.plan("c", "garbage", 1 << 20)).toEqual({ missed: "unknown" });
    expect(after.plan("c", `${after.epoch}-4`, 1 << 20)).toEqual({ missed: "unknown" });
    expect(after.plan("c", after.lastId("c")!, 1 << 20)).toEqual({ missed: 0, epoch: after.epoch, resume: 3, after: 3, to: 3 });
  });

  it("forgets the least recently published channel beyond maxChannels; its old ids are not taken for positions of the channel created again", () => {
    const log = new ReplayLog({ replayEvents: 5, maxChannels: 2 });
    const a = log.append("a", "1");
    const b = log.append("b", "1");
    log.append("b", "2");
    log.append("a", "2");
    log.append("c", "1");
    expect(log.lastId("b")).toBeUndefined();
    expect(log.piece("a", a.seq, 2, 1000).map((e) => e.data)).toEqual(["2"]);
    // b again: numbered after every forgotten seq, and its old ids cannot be placed.
    const again = log.append("b", "3");
    expect(again.seq).toBe(3);
    expect(log.plan("b", b.id, 1 << 20)).toEqual({ missed: "unknown" });
    expect(log.plan("b", again.id, 1 << 20)).toMatchObject({ missed: 0, resume: 3 });
  });

  it("bounds the buffer in bytes per channel and for all channels, oldest first, and counts each limit hit", () => {
    const start = hits();
    const log = new ReplayLog({ replayEvents: 1000, replayBytes: 10 * 164 - 1, replayTotalBytes: 15 * 164 });
    const x = "x".repeat(98);
    for (let n = 0; n < 12; n++) log.append("a", JSON.stringify(x));
    // 100 characters of JSON + 64 of overhead each: 9 fit in the channel's bound.
    expect(log.piece("a", 0, 12, 1 << 20).map((e) => e.seq)).toEqual([4, 5, 6, 7, 8, 9, 10, 11, 12]);
    expect(log.plan("a", `${log.epoch}-1`, 1 << 20)).toMatchObject({ missed: 2, after: 3, to: 12 });
    for (let n = 0; n < 8; n++) log.append("b", JSON.stringify(x));
    // 17 events over the whole log's 15 slots: "a", published least recently, loses its oldest.
    expect(log.bytes).toBeLessThanOrEqual(15 * 164);
    expect(log.piece("a", 0, 12, 1 << 20).map((e) => e.seq)).toEqual([6, 7, 8, 9, 10, 11, 12]);
    expect(log.piece("b", 0, 8, 1 << 20)).toHaveLength(8);
    // One message over the channel's bound is still kept alone: the newest always is.
    log.append("c", JSON.stringify("y".repeat(2000)));
    expect(log.piece("c", 0, 1, 1 << 20)).toHaveLength(1);
    expect(hits().stream_replay_channel_bytes! - (start.stream_replay_channel_bytes ?? 0)).toBe(3);
    expect(hits().stream_replay_total_bytes! - (start.stream_replay_total_bytes ?? 0)).toBeGreaterThan(0);
  });

  it("replays at most replayRequestBytes to one client, the newest events, and says how many were left out", () => {
    const before = hit("stream_replay_request_bytes");
    const log = new ReplayLog();
    for (let n = 1; n <= 10; n++) log.append("a", JSON.stringify("z".repeat(98)));
    // Each event costs 100 + 64: 3 fit in 500 bytes.
    expect(log.plan("a", `${log.epoch}-2`, 500)).toEqual({ missed: 5, epoch: log.epoch, resume: 2, after: 7, to: 10 });
    expect(hit("stream_replay_request_bytes")).toBe(before + 1);
    expect(log.plan("a", `${log.epoch}-8`, 500)).toMatchObject({ missed: 0, after: 8 });
    expect(hit("stream_replay_request_bytes")).toBe(before + 1);
    // Pieces: at most maxBytes, at least one event.
    expect(log.piece("a", 7, 10, 200).map((e) => e.seq)).toEqual([8]);
    expect(log.piece("a", 7, 10, 400).map((e) => e.seq)).toEqual([8, 9]);
    expect(log.piece("a", 7, 10, 10).map((e) => e.seq)).toEqual([8]);
  });

  it("drops a client that does not read once maxQueuedBytes wait, and logs why", async () => {
    const { app, lines } = streamApp({ maxQueuedBytes: 1000 });
    const channel = freshChannel();
    const response = await app.request(`/events/${channel}`);
    const reader = response.body!.getReader();
    await readUntil(reader, /retry/);
    const before = hit("stream_backlog");
    // The client reads nothing more: every event waits in the stream's queue.
    for (let n = 0; n < 20; n++) await publish(channel, "x".repeat(100));
    await expect(reader.read()).rejects.toThrow(/slow client dropped: \d+ bytes waiting, over maxQueuedBytes \(1000\)/);
    expect(lines().join("\n")).toMatch(/event stream client dropped: \d+ bytes waiting/);
    expect(hit("stream_backlog")).toBe(before + 1);
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

describe("the hub's replay", () => {
  it("answers a garbage or foreign id with one missed event and no backlog, then the live events", async () => {
    const { app } = streamApp();
    const channel = freshChannel();
    for (let n = 1; n <= 5; n++) await publish(channel, n);
    const response = await app.request(`/events/${channel}`, { headers: { "last-event-id": "garbage" } });
    const reader = response.body!.getReader();
    let text = await readUntil(reader, /event: missed\n/);
    await publish(channel, 6);
    text = await readUntil(reader, /data: 6\n/, text);
    expect(text).toContain(`event: missed\ndata: {"channel":"${channel}","missed":"unknown"}\n\n`);
    expect([...text.matchAll(/^data: (\d+)$/gm)].map((m) => Number(m[1]))).toEqual([6]);
    await reader.cancel();
  });

  it("reads a long replay in pieces, the next only once the sink is ready, coalescing subscribers that resume together", async () => {
    let planned = 0;
    const pieces: string[] = [];
    const log = new ReplayLog({ replayBytes: 1 << 22 });
    const hub = new StreamHub((deliver) => {
      const broker = memoryBroker(log, deliver);
      return coalesced({
        publish: (channel, data, limits) => broker.publish(channel, data, limits),
        plan: (channel, id, max) => (planned++, broker.plan(channel, id, max)),
        piece: (channel, after, to, max) => (pieces.push(`${after}-${to}`), broker.piece(channel, after, to, max)),
      });
    });
    const channel = freshChannel();
    const first = await hub.publish(channel, 0);
    // 20 events of 40 KiB: 800 KiB after the first, over three pieces of 256 KiB.
    for (let n = 1; n <= 20; n++) await hub.publish(channel, "p".repeat(40_000));
    const gates: (() => void)[] = [];
    const got: number[][] = [[], []];
    for (const i of [0, 1]) {
      hub.subscribe(channel, {
        deliver: (event) => got[i]!.push(event.seq),
        missed: () => got[i]!.push(-1),
        ready: () => new Promise((resolve) => gates.push(resolve)),
      }, first);
    }
    await waitUntil(() => gates.length === 2);
    expect(planned).toBe(1);
    expect(pieces).toEqual([]);
    gates.splice(0).forEach((open) => open());
    await waitUntil(() => gates.length === 2);
    // One piece read for both; nothing more until they are ready again.
    expect(pieces).toEqual(["1-21"]);
    expect(got[0]).toEqual([2, 3, 4, 5, 6, 7]);
    expect(got[1]).toEqual(got[0]);
    while (got[0]!.length < 20) {
      gates.splice(0).forEach((open) => open());
      await waitUntil(() => gates.length === 2 || got[0]!.length === 20);
    }
    expect(pieces).toEqual(["1-21", "7-21", "13-21", "19-21"]);
    expect(got[0]).toEqual(Array.from({ length: 20 }, (_, i) => i + 2));
    expect(got[1]).toEqual(got[0]);
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

describe("keelson_limit_hits_total", () => {
  it("counts a Last-Event-ID that cannot be placed in the Prometheus exposition", async () => {
    const prometheus = createPrometheus({ defaultMetrics: false, cluster: false });
    const { app } = streamApp();
    app.use(prometheus);
    const channel = freshChannel();
    await publish(channel, 1);
    const response = await app.request(`/events/${channel}`, { headers: { "last-event-id": "garbage" } });
    const reader = response.body!.getReader();
    await readUntil(reader, /event: missed/);
    await reader.cancel();
    const count = hit("stream_replay_unknown_id");
    expect(count).toBeGreaterThan(0);
    expect(await prometheus.readExposition()).toContain(`keelson_limit_hits_total{limit="stream_replay_unknown_id"} ${count}`);
  });
});

describe("keelson_open_streams", () => {
  it("counts the open event streams of a route in the Prometheus exposition", async () => {
    const app = new App({ logger: captureLogs().logger, disableHealth: true });
    const prometheus = createPrometheus({ defaultMetrics: false, cluster: false });
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
