import type { Hooks, Message, Peer } from "crossws";
import type { Logger } from "../logging/logger.js";
import type { ChannelEvent, Missed } from "./event.js";
import { hub } from "./hub.js";
import { lastWords, type LongConnection, type OpenStreams } from "./open-streams.js";

/** Settings of a WebSocket route (`websocket()`); every one is optional. */
export interface WebSocketOptions {
  /**
   * Bytes that may wait in a socket's send buffer when a channel event arrives (default 1 MiB).
   * Past it the client is dropped: the socket is terminated, the reason logged.
   */
  maxQueuedBytes?: number;
}

/** The hooks of one WebSocket connection, returned by a `websocket()` route's handler. */
export interface WebSocketHooks {
  open?(socket: KeelsonSocket): void | Promise<void>;
  message?(socket: KeelsonSocket, message: Message): void | Promise<void>;
  close?(socket: KeelsonSocket, details: { code?: number; reason?: string }): void | Promise<void>;
  error?(socket: KeelsonSocket, error: Error): void | Promise<void>;
  /**
   * Called when the App drains (shutdown, or this worker's turn in a rolling reload), before the
   * close frame 1001 "going away": send your own last message here. Awaited at most 1 s.
   */
  shutdown?(socket: KeelsonSocket, reason: string): void | Promise<void>;
}

export const DEFAULT_WS_MAX_QUEUED_BYTES = 1024 * 1024;
/** Close code 1001: the server is going away (RFC 6455 §7.4.1). */
export const GOING_AWAY = 1001;

/**
 * One open WebSocket of a `websocket()` route: crossws's `peer` plus channel subscriptions.
 * Channel events arrive as text frames `{"channel","id","data"}`.
 */
export class KeelsonSocket {
  /** crossws's peer: `send`, `close`, `request`, `remoteAddress`, `context`, … */
  readonly peer: Peer;
  /** The `Last-Event-ID` header or `lastEventId` query parameter of the upgrade request, if any. */
  readonly lastEventId: string | undefined;
  readonly #maxQueuedBytes: number;
  readonly #logger: Logger;
  readonly #cleanups: (() => void)[] = [];
  #resumed = false;
  #closed = false;

  constructor(peer: Peer, lastEventId: string | undefined, maxQueuedBytes: number, logger: Logger) {
    this.peer = peer;
    this.lastEventId = lastEventId;
    this.#maxQueuedBytes = maxQueuedBytes;
    this.#logger = logger;
  }

  /** Sends a text frame: a string as is, any other value as JSON. False once closed. */
  send(data: unknown): boolean {
    if (this.#closed) return false;
    this.peer.send(typeof data === "string" ? data : JSON.stringify(data));
    return true;
  }

  /**
   * Sends the events published to `channel` from now on as `{"channel","id","data"}` frames. The
   * first subscription resumes after the upgrade request's Last-Event-ID (a browser passes it as
   * the `lastEventId` query parameter), as an event stream does; a `{"channel","missed"}` frame
   * says how many fell out of the replay buffer, if any.
   */
  subscribe(channel: string, options: { lastEventId?: string } = {}): void {
    if (this.#closed) return;
    const resume = options.lastEventId ?? (this.#resumed ? undefined : this.lastEventId);
    this.#resumed = true;
    const prefix = `{"channel":${JSON.stringify(channel)},`;
    this.#cleanups.push(hub.subscribe(channel, {
      deliver: (event: ChannelEvent) => this.#deliver(`${prefix}"id":"${event.id}","data":${event.data}}`),
      missed: (_name: string, missed: Missed) => this.#deliver(`${prefix}"missed":${JSON.stringify(missed)}}`),
    }, resume));
  }

  /** Sends a close frame (default 1000). */
  close(code?: number, reason?: string): void {
    this.peer.close(code, reason);
  }

  #deliver(frame: string): void {
    if (this.#closed) return;
    if (this.peer.bufferedAmount > this.#maxQueuedBytes) {
      this.#logger.warn("WebSocket client dropped: %d bytes waiting, over maxQueuedBytes (%d): the client does not read",
        this.peer.bufferedAmount, this.#maxQueuedBytes);
      this.release();
      this.peer.terminate();
      return;
    }
    this.peer.send(frame);
  }

  /** @internal Ends its subscriptions (the socket closed). */
  release(): void {
    this.#closed = true;
    for (const cleanup of this.#cleanups.splice(0)) cleanup();
  }

  /** @internal The App's drain: the application's last message, then the close frame 1001. */
  async goAway(hook: WebSocketHooks["shutdown"], reason: string, logger: Logger): Promise<void> {
    if (this.#closed) return;
    await lastWords(hook && (() => hook(this, reason)), logger, "WebSocket shutdown hook");
    this.release();
    this.peer.close(GOING_AWAY, "going away");
  }
}

/**
 * The crossws hooks of one upgrade request: they wrap the application's, track the socket on the
 * App (metrics, drain) and settle `ended` with the status to log (101) when it closes.
 */
export function trackedHooks(options: {
  hooks: WebSocketHooks;
  route: string;
  streams: OpenStreams;
  logger: Logger;
  lastEventId: string | undefined;
  maxQueuedBytes: number;
  /** Settles the request's record: the status to log. */
  ended: (status: number) => void;
}): Partial<Hooks> {
  const { hooks, route, streams, logger, lastEventId, maxQueuedBytes, ended } = options;
  let socket: KeelsonSocket | undefined;
  let connection: LongConnection | undefined;
  let isClosed = false;
  let closedAt: (() => void) | undefined;
  const closed = new Promise<void>((resolve) => (closedAt = resolve));
  // An upgrade that crossws refuses or that the client abandons never opens: still one log line.
  const never = setTimeout(() => ended(socket === undefined ? 400 : 101), 10_000);
  never.unref();
  const fail = (what: string) => (error: unknown) => logger.logError("WebSocket %s hook on %s failed: %s", what, route, (error as Error)?.stack ?? String(error));
  return {
    open(peer) {
      clearTimeout(never);
      socket = new KeelsonSocket(peer, lastEventId, maxQueuedBytes, logger);
      const current = socket;
      connection = {
        kind: "websocket",
        route,
        end: async (reason, graceMs) => {
          await current.goAway(hooks.shutdown, reason, logger);
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([closed, new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)))]);
          clearTimeout(timer);
          // The client did not answer the close frame in time: the drain does not wait for it.
          if (!isClosed) peer.terminate();
        },
      };
      streams.add(connection);
      return Promise.resolve().then(() => hooks.open?.(current)).catch(fail("open"));
    },
    message(_peer, message) {
      if (socket !== undefined) return Promise.resolve().then(() => hooks.message?.(socket!, message)).catch(fail("message"));
    },
    error(_peer, error) {
      if (socket !== undefined) return Promise.resolve().then(() => hooks.error?.(socket!, error)).catch(fail("error"));
    },
    close(_peer, details) {
      clearTimeout(never);
      const current = socket;
      if (current === undefined) return;
      isClosed = true;
      current.release();
      if (connection !== undefined) streams.delete(connection);
      closedAt?.();
      ended(101);
      return Promise.resolve().then(() => hooks.close?.(current, details)).catch(fail("close"));
    },
  };
}
