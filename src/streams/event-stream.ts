import { MS_FROM_0, checkOptionalNumber } from "../checks.js";
import type { Logger } from "../logging/logger.js";
import type { ChannelEvent, Missed } from "./event.js";
import { hub } from "./hub.js";
import { lastWords, type LongConnection, type OpenStreams } from "../http/open-streams.js";
import { countLimitHit } from "../limit-hits.js";

/** Settings of an event-stream route (`sse()`); every one is optional. */
export interface EventStreamOptions {
  /**
   * Bytes that may wait for a client that does not read (default 1 MiB). Past it the client is
   * dropped: its connection is closed, the reason logged, and it resumes with Last-Event-ID.
   */
  maxQueuedBytes?: number;
  /** A comment line sent when nothing else was for this long, so proxies keep the connection (ms, default 15,000; 0: none). */
  heartbeatMs?: number;
  /** The reconnection delay sent to the client (`retry:`) at the start and in the final event (ms, default 1000). */
  retryMs?: number;
  /**
   * Called when the App drains (shutdown, or this worker's turn in a rolling reload), before
   * keelson's final `shutdown` event: send your own last message here. Awaited at most 1 s.
   */
  onShutdown?: (stream: EventStream, reason: string) => void | Promise<void>;
}

export const DEFAULT_MAX_QUEUED_BYTES = 1024 * 1024;
export const DEFAULT_HEARTBEAT_MS = 15_000;
export const DEFAULT_RETRY_MS = 1000;

/** What `send()` takes besides the data. */
export interface SendOptions {
  /** The SSE `event:` name (default: none, so the client's `message` event). */
  event?: string;
  /** The SSE `id:` (what the client sends back as Last-Event-ID). */
  id?: string;
}

const encoder = new TextEncoder();

// A channel event goes to every subscriber of the process one after another: its bytes are encoded
// once, for the first, and shared by the others (a stream only reads them).
let cached: { event: ChannelEvent; prefix: string; bytes: Uint8Array } | undefined;

function channelEventBytes(event: ChannelEvent, prefix: string): Uint8Array {
  if (cached?.event === event && cached.prefix === prefix) return cached.bytes;
  const bytes = encoder.encode(`id: ${event.id}\n${prefix}data: ${event.data}\n\n`);
  cached = { event, prefix, bytes };
  return bytes;
}

function field(name: string, value: string): string {
  if (/[\r\n]/.test(value)) throw new TypeError(`an event's ${name} cannot contain a line break: ${JSON.stringify(value)}`);
  return `${name}: ${value}\n`;
}

/** The `data:` lines of a value: a string as is (one line per line), anything else as JSON. */
function dataLines(data: unknown): string {
  const text = typeof data === "string" ? data : JSON.stringify(data) ?? "null";
  return text.split(/\r\n|\r|\n/).map((line) => `data: ${line}\n`).join("");
}

export function validateEventStreamOptions(options: EventStreamOptions): void {
  checkOptionalNumber(options.maxQueuedBytes, "maxQueuedBytes", { integer: true, min: 1 });
  checkOptionalNumber(options.heartbeatMs, "heartbeatMs", { ...MS_FROM_0, integer: true });
  checkOptionalNumber(options.retryMs, "retryMs", { ...MS_FROM_0, integer: true });
  if (options.onShutdown !== undefined && typeof options.onShutdown !== "function") {
    throw new TypeError(`invalid event stream option onShutdown: ${typeof options.onShutdown} (expected a function)`);
  }
}

/**
 * One server-sent event stream: what an `sse()` route's handler writes to. Events wait in a
 * bounded queue while the client is not reading (see `maxQueuedBytes`); the response ends when
 * the handler calls `close()`, the client goes away, or the App drains.
 */
export class EventStream {
  /** The `Last-Event-ID` the client sent (or the `lastEventId` query parameter), if any. */
  readonly lastEventId: string | undefined;
  /** The response body: given to the client by the route. */
  readonly body: ReadableStream<Uint8Array>;
  /** Settles with why it ended: `closed`, `client closed`, `shutdown: …` or `dropped: …`. */
  readonly ended: Promise<string>;
  readonly #options: Required<Omit<EventStreamOptions, "onShutdown">> & Pick<EventStreamOptions, "onShutdown">;
  readonly #logger: Logger;
  #controller!: ReadableStreamDefaultController<Uint8Array>;
  #queue: Uint8Array[] = [];
  #queuedBytes = 0;
  #wanted = false;
  #state: "open" | "closing" | "ended" = "open";
  #resolveEnded!: (reason: string) => void;
  #endReason = "closed";
  readonly #cleanups: (() => void)[] = [];
  #resumed = false;
  #heartbeat: NodeJS.Timeout | undefined;
  /** Something was written since the last heartbeat tick. */
  #wrote = false;
  #events = 0;
  /** Replays waiting for the client to take what is queued (`ready()`). */
  #waiting: (() => void)[] = [];

  constructor(options: EventStreamOptions, logger: Logger, lastEventId: string | undefined) {
    this.#options = {
      maxQueuedBytes: options.maxQueuedBytes ?? DEFAULT_MAX_QUEUED_BYTES,
      heartbeatMs: options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS,
      retryMs: options.retryMs ?? DEFAULT_RETRY_MS,
      onShutdown: options.onShutdown,
    };
    this.#logger = logger;
    this.lastEventId = lastEventId;
    this.ended = new Promise((resolve) => (this.#resolveEnded = resolve));
    this.body = new ReadableStream<Uint8Array>({
      start: (controller) => {
        this.#controller = controller;
      },
      pull: () => {
        this.#wanted = true;
        this.#flush();
      },
      cancel: () => this.#end("client closed"),
    }, { highWaterMark: 0 });
    // The head goes out with the first bytes: the client knows at once it is connected, and how long to wait before reconnecting.
    this.#write(`retry: ${this.#options.retryMs}\n\n`);
    const beat = this.#options.heartbeatMs;
    if (beat > 0) {
      this.#heartbeat = setInterval(() => {
        if (!this.#wrote) this.#write(": keep-alive\n\n");
        this.#wrote = false;
      }, beat);
      this.#heartbeat.unref();
    }
  }

  /** True once it ended or is ending: `send()` then does nothing. */
  get closed(): boolean {
    return this.#state !== "open";
  }

  /** Events sent so far (channel events included). */
  get sent(): number {
    return this.#events;
  }

  /**
   * Sends one event: a string as is, any other value as JSON. Returns false when the stream has
   * ended (or the client was dropped for not reading).
   *
   * @example
   * stream.send({ progress: 40 }, { event: "progress" });
   */
  send(data: unknown, options: SendOptions = {}): boolean {
    if (this.#state !== "open") return false;
    let text = "";
    if (options.id !== undefined) text += field("id", options.id);
    if (options.event !== undefined) text += field("event", options.event);
    text += dataLines(data) + "\n";
    this.#events++;
    return this.#write(text);
  }

  /** Sends a comment line (ignored by clients; keeps a proxy from timing out). */
  comment(text: string): boolean {
    if (this.#state !== "open") return false;
    return this.#write(text.split(/\r\n|\r|\n/).map((line) => `: ${line}\n`).join("") + "\n");
  }

  /**
   * Sends the events published to `channel` (see `publish()`) from now on, each with its id. The
   * stream's first subscription resumes after the client's Last-Event-ID: it first gets what it
   * missed, from the replay buffer (a `missed` event says how many fell out of it, if any).
   * `event` names the SSE event of these messages (default: none, the client's `message`).
   *
   * @example
   * sse("/rooms/:room/events", (ctx, stream) => stream.subscribe(`room:${ctx.params.room}`));
   */
  subscribe(channel: string, options: { event?: string; lastEventId?: string } = {}): void {
    if (this.#state !== "open") return;
    if (options.event !== undefined) field("event", options.event);
    const resume = options.lastEventId ?? (this.#resumed ? undefined : this.lastEventId);
    this.#resumed = true;
    const prefix = options.event === undefined ? "" : `event: ${options.event}\n`;
    const unsubscribe = hub.subscribe(channel, {
      deliver: (event: ChannelEvent) => {
        if (this.#state !== "open") return;
        this.#events++;
        this.#push(channelEventBytes(event, prefix));
      },
      missed: (name: string, missed: Missed) => {
        this.send({ channel: name, missed }, { event: "missed" });
      },
      ready: () => this.#ready(),
    }, resume);
    this.#cleanups.push(unsubscribe);
  }

  /** Runs `listener` once the stream has ended, whatever ended it. */
  onClose(listener: (reason: string) => void): void {
    void this.ended.then(listener);
  }

  /** Ends the response once the events already sent are written. */
  close(): void {
    this.#closing("closed");
  }

  /** @internal The App's drain: the application's last message, then the final event with the retry hint, then the end. */
  async shutdown(reason: string): Promise<void> {
    if (this.#state !== "open") return;
    const hook = this.#options.onShutdown;
    await lastWords(hook && (() => hook(this, reason)), this.#logger, "event stream onShutdown hook");
    if (this.#state !== "open") return;
    this.#write(`event: shutdown\nretry: ${this.#options.retryMs}\ndata: {"reconnect":true}\n\n`);
    this.#closing(`shutdown: ${reason}`);
  }

  /** Resolves once nothing waits for the client (or the stream ended): a replay's next piece is read only then. */
  #ready(): Promise<void> {
    if (this.#queuedBytes === 0 || this.#state === "ended") return Promise.resolve();
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  #wake(): void {
    for (const resolve of this.#waiting.splice(0)) resolve();
  }

  #write(text: string): boolean {
    return this.#push(encoder.encode(text));
  }

  #push(bytes: Uint8Array): boolean {
    if (this.#state === "ended") return false;
    this.#queue.push(bytes);
    this.#queuedBytes += bytes.byteLength;
    this.#wrote = true;
    if (this.#queuedBytes > this.#options.maxQueuedBytes && !this.#wanted) {
      countLimitHit("stream_backlog");
      this.#drop(`${this.#queuedBytes} bytes waiting, over maxQueuedBytes (${this.#options.maxQueuedBytes}): the client does not read`);
      return false;
    }
    this.#flush();
    return true;
  }

  #flush(): void {
    if (!this.#wanted || this.#state === "ended") return;
    if (this.#queue.length > 0) {
      const bytes = this.#queue.length === 1 ? this.#queue[0]! : Buffer.concat(this.#queue, this.#queuedBytes);
      this.#queue = [];
      this.#queuedBytes = 0;
      this.#wanted = false;
      this.#controller.enqueue(bytes);
      this.#wake();
      return;
    }
    if (this.#state === "closing") {
      this.#controller.close();
      this.#end(this.#endReason);
    }
  }

  #closing(reason: string): void {
    if (this.#state !== "open") return;
    this.#state = "closing";
    this.#endReason = reason;
    this.#release();
    this.#flush();
  }

  #drop(reason: string): void {
    this.#logger.warn("event stream client dropped: %s", reason);
    this.#queue = [];
    this.#queuedBytes = 0;
    // An error, not a close: the connection is destroyed instead of waiting for a reader that does not read.
    this.#controller.error(new Error(`slow client dropped: ${reason}`));
    this.#end(`dropped: ${reason}`);
  }

  #release(): void {
    clearInterval(this.#heartbeat);
    for (const cleanup of this.#cleanups.splice(0)) cleanup();
  }

  #end(reason: string): void {
    if (this.#state === "ended") return;
    this.#state = "ended";
    this.#release();
    this.#wake();
    this.#resolveEnded(reason);
  }
}

/** The drain's view of an event stream. */
export function eventStreamConnection(stream: EventStream, route: string, streams: OpenStreams): LongConnection {
  const connection: LongConnection = {
    kind: "sse",
    route,
    end: (reason) => stream.shutdown(reason),
  };
  streams.add(connection);
  void stream.ended.then(() => streams.delete(connection));
  return connection;
}
