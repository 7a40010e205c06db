/**
 * Real clients of event streams and WebSockets for process tests and load tests: they keep what
 * they receive, see how each connection ended, and resume with Last-Event-ID as a browser does.
 */
import { spawn } from "node:child_process";
import * as http from "node:http";

/** One server-sent event as a client parses it. */
export interface ReceivedEvent {
  id: string | undefined;
  event: string;
  data: string;
  /** performance.now() at arrival. */
  at: number;
}

/** How one connection of a client ended. */
export interface StreamEnd {
  /** `end` (the server ended the response), `error: <message>` (reset, refused), or `closed` (by the client). */
  how: string;
  /** The last event of the connection (`shutdown` for a drain). */
  lastEvent: string | undefined;
}

/**
 * An event-stream client: GET with `Accept: text/event-stream`, parse, and on an end reconnect
 * after the server's `retry:` with the last id seen (as EventSource does) while `reconnect` holds.
 */
export class SSEClient {
  readonly events: ReceivedEvent[] = [];
  readonly ends: StreamEnd[] = [];
  lastId: string | undefined;
  retryMs = 1000;
  connections = 0;
  #request: http.ClientRequest | undefined;
  #stopped = false;
  #listeners = new Set<() => void>();
  readonly #port: number;
  readonly #path: string;
  readonly #reconnect: boolean;

  constructor(port: number, path: string, options: { reconnect?: boolean; lastId?: string } = {}) {
    this.#port = port;
    this.#path = path;
    this.#reconnect = options.reconnect ?? true;
    this.lastId = options.lastId;
  }

  /** Connects; resolves once the response head is in (rejects on a refused or failed connection). */
  connect(): Promise<void> {
    return new Promise((resolve, reject) => {
      const headers: Record<string, string> = { accept: "text/event-stream" };
      if (this.lastId !== undefined) headers["last-event-id"] = this.lastId;
      const request = http.get({ host: "127.0.0.1", port: this.#port, path: this.#path, headers, agent: false }, (response) => {
        this.connections++;
        resolve();
        let buffer = "";
        let lastEvent: string | undefined;
        response.setEncoding("utf8");
        response.on("data", (chunk: string) => {
          buffer += chunk;
          let end: number;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const event = this.#parse(block);
            if (event !== undefined) lastEvent = event.event;
          }
        });
        const ended = (how: string) => {
          if (this.ends.length >= this.connections) return;
          this.ends.push({ how, lastEvent });
          this.#notify();
          if (!this.#stopped && this.#reconnect && how !== "closed") this.#again();
        };
        response.on("end", () => ended("end"));
        response.on("error", (error) => ended(`error: ${error.message}`));
        response.on("close", () => ended(this.#stopped ? "closed" : "error: closed before its end"));
      });
      request.on("error", (error) => {
        if (this.connections === 0 || this.#stopped) reject(error);
        else this.#again();
      });
      this.#request = request;
    });
  }

  /** Stops reconnecting and closes the connection. */
  close(): void {
    this.#stopped = true;
    this.#request?.destroy();
  }

  /** Resolves once `test()` holds (checked at each event and each end). */
  until(test: () => boolean, timeoutMs = 20_000, what = "a condition"): Promise<void> {
    if (test()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#listeners.delete(check);
        reject(new Error(`SSE client ${this.#path}: timed out waiting for ${what}`));
      }, timeoutMs);
      const check = () => {
        if (!test()) return;
        clearTimeout(timer);
        this.#listeners.delete(check);
        resolve();
      };
      this.#listeners.add(check);
    });
  }

  /** Data of the events named `name` (default `message`). */
  data(name = "message"): string[] {
    return this.events.filter((event) => event.event === name).map((event) => event.data);
  }

  #again(): void {
    // A refused connection while the old worker's port closes and the next one takes it: retry, as a browser does.
    setTimeout(() => {
      if (!this.#stopped) this.connect().catch(() => this.#again());
    }, this.retryMs);
  }

  #parse(block: string): ReceivedEvent | undefined {
    let id: string | undefined;
    let event = "message";
    const data: string[] = [];
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "id") id = value;
      else if (field === "event") event = value;
      else if (field === "data") data.push(value);
      else if (field === "retry" && /^\d+$/.test(value)) this.retryMs = Number(value);
    }
    if (data.length === 0) return undefined;
    if (id !== undefined) this.lastId = id;
    const received = { id, event, data: data.join("\n"), at: performance.now() };
    this.events.push(received);
    this.#notify();
    return received;
  }

  #notify(): void {
    for (const listener of Array.from(this.#listeners)) listener();
  }
}

/** A WebSocket client (Node's global WebSocket) that keeps every text frame and how it closed. */
export class WSClient {
  readonly messages: { data: string; at: number }[] = [];
  close: { code: number; reason: string; wasClean: boolean } | undefined;
  readonly socket: WebSocket;
  readonly opened: Promise<void>;
  readonly closed: Promise<void>;

  constructor(url: string) {
    this.socket = new WebSocket(url);
    this.opened = new Promise((resolve, reject) => {
      this.socket.addEventListener("open", () => resolve(), { once: true });
      this.socket.addEventListener("error", () => reject(new Error(`WebSocket ${url} failed to open`)), { once: true });
    });
    this.closed = new Promise((resolve) => {
      this.socket.addEventListener("close", (event) => {
        this.close = { code: event.code, reason: event.reason, wasClean: event.wasClean };
        resolve();
      });
    });
    this.socket.addEventListener("message", (event) => this.messages.push({ data: String(event.data), at: performance.now() }));
  }

  /** The frames parsed as JSON. */
  json(): Record<string, unknown>[] {
    return this.messages.map((message) => JSON.parse(message.data) as Record<string, unknown>);
  }
}

/**
 * A WebSocket client that reconnects after a close (as an application's client would), passing
 * the id of the last channel event it got as the `lastEventId` query parameter.
 */
export class ReconnectingWS {
  /** Channel events (`{channel,id,data}` frames) over every connection, in arrival order. */
  readonly events: { id: string; data: unknown; at: number }[] = [];
  /** Every other frame (`{bye}`, `{missed}`). */
  readonly other: Record<string, unknown>[] = [];
  readonly closes: { code: number; reason: string; wasClean: boolean }[] = [];
  current: WSClient;
  #stopped = false;
  readonly #url: string;

  constructor(url: string) {
    this.#url = url;
    this.current = this.#open(undefined);
  }

  get lastId(): string | undefined {
    return this.events.at(-1)?.id;
  }

  /** Stops reconnecting and closes the socket. */
  stop(): Promise<void> {
    this.#stopped = true;
    this.current.socket.close();
    return this.current.closed;
  }

  #open(lastId: string | undefined): WSClient {
    const url = lastId === undefined ? this.#url : `${this.#url}${this.#url.includes("?") ? "&" : "?"}lastEventId=${encodeURIComponent(lastId)}`;
    const client = new WSClient(url);
    client.socket.addEventListener("message", (event) => {
      const frame = JSON.parse(String(event.data)) as Record<string, unknown>;
      if (typeof frame.id === "string") this.events.push({ id: frame.id, data: frame.data, at: performance.now() });
      else this.other.push(frame);
    });
    let opened = false;
    client.opened.then(() => (opened = true), () => {});
    void client.closed.then(() => {
      // A refused connection (the port between two workers) is retried, not counted as a close.
      if (opened) this.closes.push(client.close!);
      if (this.#stopped) return;
      setTimeout(() => {
        if (!this.#stopped) this.current = this.#open(this.lastId);
      }, 200);
    });
    return client;
  }
}

/** POST `body` as JSON to `path` on a fresh connection (no keep-alive); resolves with the JSON answer of a 200. */
export function postJSON<T = Record<string, unknown>>(port: number, path: string, body: unknown): Promise<T> {
  return new Promise((resolve, reject) => {
    const payload = JSON.stringify(body);
    const request = http.request({
      host: "127.0.0.1", port, path, method: "POST", agent: false,
      headers: { "content-type": "application/json", "content-length": Buffer.byteLength(payload) },
    }, (response) => {
      let text = "";
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => (text += chunk));
      response.on("end", () => (response.statusCode === 200 ? resolve(JSON.parse(text) as T) : reject(new Error(`${response.statusCode} ${text}`))));
    });
    request.on("error", reject);
    request.end(payload);
  });
}

/** `curl -sN` on the URL: resolves with its exit code (0: a clean end; 18: the body cut mid-transfer) and what it printed. */
export function curl(url: string, onData: (text: string) => void = () => {}): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn("curl", ["-sN", url], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => {
      out += chunk;
      onData(out);
    });
    child.on("close", (code) => resolve({ code, out }));
  });
}
