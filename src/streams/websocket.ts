import type { Hooks, Message, Peer } from "crossws";
import type { Logger } from "../logging/logger.js";
import type { ChannelEvent, Missed } from "./event.js";
import { hub } from "./hub.js";
import { lastWords, type OpenStreams } from "../http/open-streams.js";
import { GOING_AWAY, SOCKET_SETTINGS, type SocketSettings } from "./upgrades.js";

export { GOING_AWAY };

/** Settings of a WebSocket route (`websocket()`); every one is optional. */
export interface WebSocketOptions {
  /**
   * Bytes that may wait in a socket's send buffer, the app's messages and the pongs it owes
   * (default 1 MiB). Past it the client is dropped: the socket is terminated, the reason logged
   * and counted (`keelson_websocket_limit_closes_total{reason="backlog"}`).
   */
  maxQueuedBytes?: number;
  /**
   * The largest message a client may send, in bytes (default: the App's `bodyLimit`). Past it the
   * socket is closed with 1009 "message too big" and counted (`reason="message_too_big"`).
   */
  maxMessageBytes?: number;
  /**
   * A ping every this many ms (default 30000); a client from which nothing (a pong, a message, a
   * ping) arrived during a whole interval after one is dropped and counted (`reason="ping_timeout"`).
   * 0 sends no ping: a half-open client then stays until the OS gives up on the connection.
   */
  pingIntervalMs?: number;
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
  readonly #dropped: () => void;
  readonly #cleanups: (() => void)[] = [];
  #resumed = false;
  #closed = false;

  /** @internal Made by a `websocket()` route when its connection opens. */
  constructor(peer: Peer, lastEventId: string | undefined, maxQueuedBytes: number, logger: Logger, dropped: () => void = () => {}) {
    this.peer = peer;
    this.lastEventId = lastEventId;
    this.#maxQueuedBytes = maxQueuedBytes;
    this.#logger = logger;
    this.#dropped = dropped;
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
      this.#dropped();
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
 * The crossws hooks of one accepted upgrade of a `websocket()` route: they give the application's
 * hooks a `KeelsonSocket` and carry the route's limits and its goodbye at the drain for
 * `streams/upgrades.ts`, which tracks the socket (log line, metrics, drain, ping).
 */
export function keelsonHooks(options: {
  hooks: WebSocketHooks;
  route: string;
  streams: OpenStreams;
  logger: Logger;
  lastEventId: string | undefined;
  limits: Omit<SocketSettings, "goAway">;
  maxQueuedBytes: number;
}): Partial<Hooks> & { [SOCKET_SETTINGS]: SocketSettings } {
  const { hooks, route, streams, logger, lastEventId, limits, maxQueuedBytes } = options;
  let socket: KeelsonSocket | undefined;
  const fail = (what: string) => (error: unknown) => logger.logError("WebSocket %s hook on %s failed: %s", what, route, (error as Error)?.stack ?? String(error));
  return {
    [SOCKET_SETTINGS]: {
      ...limits,
      goAway: (peer, reason) => socket === undefined ? Promise.resolve(peer.close(GOING_AWAY, "going away")) : socket.goAway(hooks.shutdown, reason, logger),
    },
    open(peer) {
      const current = socket = new KeelsonSocket(peer, lastEventId, maxQueuedBytes, logger, () => streams.limitClosed(route, "backlog"));
      return Promise.resolve().then(() => hooks.open?.(current)).catch(fail("open"));
    },
    message(_peer, message) {
      if (socket !== undefined) return Promise.resolve().then(() => hooks.message?.(socket!, message)).catch(fail("message"));
    },
    error(_peer, error) {
      if (socket !== undefined) return Promise.resolve().then(() => hooks.error?.(socket!, error)).catch(fail("error"));
    },
    close(_peer, details) {
      const current = socket;
      if (current === undefined) return;
      current.release();
      return Promise.resolve().then(() => hooks.close?.(current, details)).catch(fail("close"));
    },
  };
}
