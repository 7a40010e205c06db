import type { IncomingMessage } from "node:http";
import { STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import type { Hooks, Peer } from "crossws";
import type { NodeAdapter } from "crossws/adapters/node";
import type { H3EventContext } from "h3";
import { NodeRequest } from "srvx/node";
import type { ServerRequest } from "srvx";
import { UNMATCHED_ROUTE, type MetricsCollector } from "../integrations.js";
import { markUpgrade } from "../http/request-state.js";
import type { Logger } from "../logging/logger.js";
import type { LongConnection, OpenStreams } from "../http/open-streams.js";
import { lazyImport } from "../lazy-package.js";

/**
 * crossws's Node adapter (with the ws library it bundles), loaded by the first WebSocket route or
 * upgrade: a service without WebSockets never loads it.
 */
export const loadCrossws = lazyImport("crossws", async () => (await import("crossws/adapters/node")).default);

/** Close code 1001: the server is going away (RFC 6455 §7.4.1). */
export const GOING_AWAY = 1001;

/** What one WebSocket may take from the process; a `websocket()` route sets them, h3's handlers get the App's. */
export interface SocketLimits {
  /** The largest message the peer may send, in bytes; past it the socket is closed with 1009. */
  maxMessageBytes: number;
  /** Bytes that may wait in the socket's send buffer (the app's messages and the pongs); past it the peer is dropped. */
  maxQueuedBytes: number;
  /** A ping every this many ms; a peer from which nothing arrived for a whole interval after one is dropped (0: no ping). */
  pingIntervalMs: number;
}

/** What a `websocket()` route attaches to its hooks: its limits, and its own goodbye at the drain. */
export interface SocketSettings extends Partial<SocketLimits> {
  /** The app's last message, then close 1001 (default: close 1001 alone). */
  goAway?(peer: Peer, reason: string): Promise<void>;
}

/** The key under which a hooks object carries its `SocketSettings`. */
export const SOCKET_SETTINGS = Symbol("keelson.websocket.settings");

/** Why keelson closed a WebSocket on its own: the `reason` label of `keelson_websocket_limit_closes_total`. */
export type SocketLimitReason = "message_too_big" | "backlog" | "ping_timeout";

export const DEFAULT_WS_MAX_QUEUED_BYTES = 1024 * 1024;
export const DEFAULT_WS_PING_INTERVAL_MS = 30_000;

// A net.Socket's default writableHighWaterMark: below it a write goes out without back-pressure, and
// at or above it a 'drain' follows (crossws's `drain` hook).
const SOCKET_HIGH_WATER_MARK = 16 * 1024;
// A pong's frame header: a ping's payload is at most 125 bytes.
const PONG_HEADER_BYTES = 2;

// crossws and h3 put the hooks of an accepted upgrade on the answer and on the request under this key.
const HOOKS = Symbol.for("crossws.hooks");

/**
 * The answer of a route that accepts a WebSocket upgrade, with its hooks attached to it and to the
 * request (the answer may be rebuilt on its way out), as h3's `defineWebSocketHandler` does.
 */
export function acceptUpgrade(request: object, hooks: AnyHooks): Response {
  (request as { [HOOKS]?: AnyHooks })[HOOKS] = hooks;
  return Object.assign(new Response("WebSocket upgrade is required.", { status: 426 }), { crossws: hooks });
}

/** The part of ws's WebSocket (behind crossws's `peer.websocket`) keelson drives itself. */
interface RawSocket {
  readonly bufferedAmount: number;
  on(event: "ping" | "pong" | "message", listener: (data: Buffer) => void): void;
  on(event: "error", listener: (error: Error & { code?: string }) => void): void;
  removeAllListeners(event: "ping"): void;
  ping(data?: Buffer): void;
  pong(data?: Buffer): void;
  terminate(): void;
}

type AnyHooks = Partial<Hooks> & { [SOCKET_SETTINGS]?: SocketSettings };

export interface UpgradeOptions {
  /** The App's fetch: the handshake request goes through the pipeline as any request. */
  fetch: (request: ServerRequest) => Response | Promise<Response>;
  streams: OpenStreams;
  logger: Logger;
  metrics: () => MetricsCollector | undefined;
  /** Limits of sockets whose route sets none (h3's own WebSocket handlers). */
  defaults: SocketLimits;
}

/**
 * The WebSocket side of one App's server: every `Upgrade: websocket` request goes through the App's
 * pipeline (routing, middleware, the route's checks), and when the answer carries WebSocket hooks
 * (keelson's `websocket()` or h3's `defineWebSocketHandler`) the connection is handed to crossws,
 * loaded at the first upgrade. Every socket, whoever defined it, is tracked: logged as 101 at its
 * end, closed with 1001 at the drain, and held to its limits (message size, send buffer, ping).
 */
export class Upgrades {
  readonly #options: UpgradeOptions;
  // One crossws adapter (one ws server) per message limit: ws applies maxPayload per server.
  readonly #adapters = new Map<number, Promise<NodeAdapter>>();
  readonly #pending = new WeakMap<object, AnyHooks>();

  constructor(options: UpgradeOptions) {
    this.#options = options;
  }

  /** The node server's `upgrade` listener. */
  readonly handle = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    this.#handle(req, socket, head).catch((error: unknown) => {
      this.#options.logger.logError("WebSocket upgrade of %s failed: %s", req.url ?? "", (error as Error)?.stack ?? String(error));
      socket.destroy();
    });
  };

  async #handle(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const request = new NodeRequest({ req, upgrade: { socket, head } } as ConstructorParameters<typeof NodeRequest>[0]);
    markUpgrade(request);
    const response = await this.#options.fetch(request);
    const context = request.context as H3EventContext | undefined;
    const state = context?.keelson;
    const route = context?.matchedRoute?.route ?? UNMATCHED_ROUTE;
    const hooks = upgradeHooks(response, request);
    const record = (status: number) => {
      if (state === undefined) return;
      this.#observe(request.method, route, status, state.start);
      state.upgraded?.(status);
    };
    if (hooks === undefined) {
      // Not a WebSocket route: its answer goes out as it is, and the connection ends with it.
      await writeResponse(socket, response);
      record(response.status);
      return;
    }
    const settings = hooks[SOCKET_SETTINGS] ?? {};
    const limits: SocketLimits = {
      maxMessageBytes: settings.maxMessageBytes ?? this.#options.defaults.maxMessageBytes,
      maxQueuedBytes: settings.maxQueuedBytes ?? this.#options.defaults.maxQueuedBytes,
      pingIntervalMs: settings.pingIntervalMs ?? this.#options.defaults.pingIntervalMs,
    };
    const tracked = new TrackedSocket(hooks, settings, limits, route, this.#options, {
      opened: () => this.#observe(request.method, route, 101, state?.start),
      ended: (status) => state?.upgraded?.(status),
      refused: record,
    });
    this.#pending.set(request, tracked.hooks);
    const adapter = await this.#adapter(limits.maxMessageBytes);
    await adapter.handleUpgrade(req, socket, head, request as unknown as Request);
    // ws answered the handshake itself (a bad key or version) or the hooks' `upgrade` refused it.
    if (!tracked.opened && (socket.destroyed || socket.writableEnded)) tracked.refused();
  }

  #adapter(maxPayload: number): Promise<NodeAdapter> {
    let adapter = this.#adapters.get(maxPayload);
    if (adapter === undefined) {
      adapter = loadCrossws().then((nodeAdapter) => nodeAdapter({
        resolve: (request) => this.#pending.get(request) ?? {},
        // keelson pings itself (TrackedSocket): per route, with a metric and a log line.
        idleTimeout: 0,
        // autoPong off: a pong is sent only while the peer reads (TrackedSocket's ping handler).
        serverOptions: { maxPayload, autoPong: false } as NonNullable<Parameters<typeof nodeAdapter>[0]>["serverOptions"],
      }));
      this.#adapters.set(maxPayload, adapter);
    }
    return adapter;
  }

  #observe(method: string, route: string, status: number, start: number | undefined): void {
    if (start === undefined) return;
    try {
      this.#options.metrics()?.observeRequest(method, route, status, (performance.now() - start) / 1000);
    } catch (error) {
      console.error("keelson: recording a WebSocket upgrade failed:", error);
    }
  }
}

/** The hooks an answer carries: h3's and keelson's WebSocket handlers answer 426 with them attached. */
function upgradeHooks(response: Response, request: ServerRequest): AnyHooks | undefined {
  if (response.status !== 426) return undefined;
  return (response as { crossws?: AnyHooks }).crossws ?? (request as { [HOOKS]?: AnyHooks })[HOOKS];
}

/** An HTTP answer on the raw socket of an upgrade request, then its end. */
async function writeResponse(socket: Duplex, response: Response): Promise<void> {
  const body = Buffer.from(await response.arrayBuffer());
  const head = [`HTTP/1.1 ${response.status} ${response.statusText || STATUS_CODES[response.status] || ""}`];
  for (const [name, value] of response.headers) {
    if (name !== "content-length" && name !== "transfer-encoding" && name !== "connection") head.push(`${name}: ${value}`);
  }
  head.push(`content-length: ${body.length}`, "connection: close", "", "");
  await new Promise<void>((resolve) => {
    socket.once("close", resolve);
    socket.end(Buffer.concat([Buffer.from(head.join("\r\n"), "latin1"), body]), () => {
      socket.destroy();
      resolve();
    });
  });
}

/** One upgrade's socket: wraps its hooks with the tracking and the limits. */
class TrackedSocket {
  readonly hooks: AnyHooks;
  opened = false;
  #refusedStatus = 400;
  readonly #refused: (status: number) => void;

  constructor(
    inner: AnyHooks,
    settings: SocketSettings,
    limits: SocketLimits,
    route: string,
    options: UpgradeOptions,
    events: { opened(): void; ended(status: number): void; refused(status: number): void },
  ) {
    this.#refused = events.refused;
    const { logger, streams } = options;
    let connection: LongConnection | undefined;
    let closed = false;
    let closedAt!: () => void;
    const closing = new Promise<void>((resolve) => (closedAt = resolve));
    let timer: NodeJS.Timeout | undefined;
    let alive = true;
    let owed: Buffer | undefined;
    let owedBytes = 0;
    const count = (reason: SocketLimitReason) => streams.limitClosed(route, reason);
    // Pings ws has already parsed keep arriving after terminate(): one drop is logged and counted once.
    let dropped = false;
    const drop = (raw: RawSocket, reason: SocketLimitReason, why: string, ...args: unknown[]) => {
      if (dropped) return;
      dropped = true;
      logger.warn(`WebSocket client on %s dropped: ${why}`, route, ...args);
      count(reason);
      raw.terminate();
    };
    this.hooks = {
      upgrade: async (request) => {
        try {
          const answer = await inner.upgrade?.(request);
          if (answer instanceof Response) this.#refusedStatus = answer.status;
          return answer;
        } catch (error) {
          const answer = (error as { response?: unknown }).response ?? error;
          if (answer instanceof Response) this.#refusedStatus = answer.status;
          throw error;
        }
      },
      open: (peer) => {
        this.opened = true;
        events.opened();
        const raw = peer.websocket as unknown as RawSocket;
        raw.on("message", () => (alive = true));
        raw.on("pong", () => (alive = true));
        // crossws hands every ping to the hooks through a chain of promises: under a ping flood that
        // garbage alone grew the heap by tens of MB. Pings are answered here, and passed on only to
        // hooks that ask for them.
        raw.removeAllListeners("ping");
        const onPing = inner.ping;
        raw.on("ping", (data) => {
          alive = true;
          if (onPing !== undefined) {
            Promise.resolve().then(() => onPing(peer, data)).catch((error: unknown) => {
              logger.logError("WebSocket ping hook on %s failed: %s", route, (error as Error)?.stack ?? String(error));
            });
          }
          // A pong is written only while the socket takes writes without back-pressure; behind it,
          // only the latest ping is answered, at the drain (RFC 6455 §5.5.3 allows it). Written
          // one by one, the pongs a peer that never reads is owed grow the process without bound.
          if (owed === undefined && raw.bufferedAmount < SOCKET_HIGH_WATER_MARK) {
            raw.pong(data);
            return;
          }
          owed = data;
          // ...but they count against what the peer may queue, as if they had been written.
          owedBytes += PONG_HEADER_BYTES + data.length;
          if (raw.bufferedAmount + owedBytes > limits.maxQueuedBytes) {
            drop(raw, "backlog", "%d bytes waiting, over maxQueuedBytes (%d): it sends pings and does not read", raw.bufferedAmount + owedBytes, limits.maxQueuedBytes);
          }
        });
        raw.on("error", (error) => {
          if (error.code !== "WS_ERR_UNSUPPORTED_MESSAGE_LENGTH") return;
          logger.warn("WebSocket client on %s closed with 1009: a message over maxMessageBytes (%d)", route, limits.maxMessageBytes);
          count("message_too_big");
        });
        if (limits.pingIntervalMs > 0) {
          timer = setInterval(() => {
            if (!alive) {
              drop(raw, "ping_timeout", "no answer to a ping within pingIntervalMs (%dms)", limits.pingIntervalMs);
              return;
            }
            alive = false;
            raw.ping();
          }, limits.pingIntervalMs);
          timer.unref();
        }
        connection = {
          kind: "websocket",
          route,
          end: async (reason, graceMs) => {
            await (settings.goAway ? settings.goAway(peer, reason) : Promise.resolve(peer.close(GOING_AWAY, "going away")));
            let grace: NodeJS.Timeout | undefined;
            await Promise.race([closing, new Promise<void>((resolve) => (grace = setTimeout(resolve, graceMs)))]);
            clearTimeout(grace);
            // The client did not answer the close frame in time: the drain does not wait for it.
            if (!closed) peer.terminate();
          },
        };
        streams.add(connection);
        return inner.open?.(peer);
      },
      close: (peer, details) => {
        closed = true;
        clearInterval(timer);
        if (connection !== undefined) streams.delete(connection);
        closedAt();
        events.ended(101);
        return inner.close?.(peer, details);
      },
    };
    this.hooks.drain = (peer) => {
      if (owed !== undefined && peer.bufferedAmount < SOCKET_HIGH_WATER_MARK) {
        (peer.websocket as unknown as RawSocket).pong(owed);
        owed = undefined;
        owedBytes = 0;
      }
      return inner.drain?.(peer);
    };
    for (const name of ["message", "error", "pong"] as const) {
      const hook = inner[name];
      if (hook !== undefined) (this.hooks as Record<string, unknown>)[name] = hook;
    }
  }

  /** The handshake never completed: one log line with the status the client got. */
  refused(): void {
    this.#refused(this.#refusedStatus);
  }
}
