import type { StandardSchemaV1 } from "@standard-schema/spec";
import { checkOptionalNumber } from "../checks.js";
import type { HandlerContext } from "../http/context.js";
import { Route, type PathParams, type RawQuery, type RouteOptions } from "../http/route.js";
import { EventStream, eventStreamConnection, validateEventStreamOptions, type EventStreamOptions } from "./event-stream.js";
import { DEFAULT_WS_MAX_QUEUED_BYTES, acceptUpgrade, loadCrossws } from "./upgrades.js";
import { keelsonHooks, type WebSocketHooks, type WebSocketOptions } from "./websocket.js";

type Output<S, Fallback> = S extends StandardSchemaV1 ? StandardSchemaV1.InferOutput<S> : Fallback;

/** Route options of a stream route: those of a GET route (no body). */
type StreamRouteOptions<TParams, TQuery> = Omit<RouteOptions<TParams extends StandardSchemaV1 ? TParams : undefined, TQuery extends StandardSchemaV1 ? TQuery : undefined, undefined>, "body">;

/** The handler of an `sse()` route: sets the stream up (subscriptions, timers) and returns. */
export type EventStreamHandler<P = Record<string, string>, Q = RawQuery> = (
  ctx: HandlerContext<P, Q, undefined>,
  stream: EventStream,
) => void | Promise<void>;

/** The handler of a `websocket()` route: checks the upgrade request and returns the connection's hooks. */
export type WebSocketHandler<P = Record<string, string>, Q = RawQuery> = (
  ctx: HandlerContext<P, Q, undefined>,
) => WebSocketHooks | Promise<WebSocketHooks>;

const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache, no-transform",
  // nginx buffers responses unless told not to: events would arrive in bursts.
  "x-accel-buffering": "no",
};

/** The client's resume point: the Last-Event-ID header, or the `lastEventId` query parameter (EventSource polyfills, WebSockets). */
function lastEventIdOf(ctx: HandlerContext<unknown, unknown, unknown>): string | undefined {
  const header = ctx.event.req.headers.get("last-event-id");
  if (header !== null && header !== "") return header;
  const query = ctx.event.url.searchParams.get("lastEventId");
  return query === null || query === "" ? undefined : query;
}

function split<O extends object, K extends string>(options: O, keys: readonly K[]): [Pick<O, Extract<keyof O, K>>, Omit<O, K>] {
  const picked: Record<string, unknown> = {};
  const rest: Record<string, unknown> = { ...(options as Record<string, unknown>) };
  for (const key of keys) {
    if (key in rest) picked[key] = rest[key];
    delete rest[key];
  }
  return [picked as Pick<O, Extract<keyof O, K>>, rest as Omit<O, K>];
}

type DefineSSE = {
  <Path extends string>(path: Path, handler: EventStreamHandler<PathParams<Path>>): Route;
  <Path extends string, TParams extends StandardSchemaV1 | undefined = undefined, TQuery extends StandardSchemaV1 | undefined = undefined>(
    path: Path,
    options: StreamRouteOptions<TParams, TQuery> & EventStreamOptions,
    handler: EventStreamHandler<Output<TParams, PathParams<Path>>, Output<TQuery, RawQuery>>,
  ): Route;
};

/**
 * Declares a server-sent events route (GET, `text/event-stream`). The handler gets the stream
 * once params and query are validated; what it throws before returning is answered as any
 * route's error. The response starts when it returns; the stream then stays open until it calls
 * `close()`, the client leaves, or the App drains (final `shutdown` event with a `retry:` hint).
 * Logged once when it ends, with its duration; counted in `keelson_open_streams`.
 *
 * @example
 * app.route(sse("/rooms/:room/events", (ctx, stream) => {
 *   stream.subscribe(`room:${ctx.params.room}`);
 * }));
 */
export const sse: DefineSSE = ((path: string, a: object | EventStreamHandler, b?: EventStreamHandler) => {
  const [streamOptions, routeOptions] = split((typeof a === "function" ? {} : a) as EventStreamOptions & RouteOptions, ["maxQueuedBytes", "heartbeatMs", "retryMs", "onShutdown"] as const);
  validateEventStreamOptions(streamOptions);
  const handler = (typeof a === "function" ? a : b) as EventStreamHandler<unknown, unknown>;
  if (typeof handler !== "function") throw new TypeError(`sse("${path}"): the handler must be a function`);
  const responses = { 200: { description: "A stream of server-sent events.", contentType: "text/event-stream" }, ...(routeOptions as RouteOptions).responses };
  return new Route("GET", path, async (ctx: HandlerContext<unknown, unknown, undefined>) => {
    const stream = new EventStream(streamOptions, ctx.appLogger, lastEventIdOf(ctx));
    try {
      await handler(ctx, stream);
    } catch (error) {
      stream.close();
      throw error;
    }
    const route = ctx.event.context.matchedRoute?.route ?? path;
    eventStreamConnection(stream, route, ctx.openStreams);
    const state = ctx.event.context.keelson;
    if (state !== undefined) state.stream = stream.ended.then(() => 200);
    return new Response(stream.body, { headers: SSE_HEADERS });
  }, { ...routeOptions, responses });
}) as DefineSSE;

type DefineWebSocket = {
  <Path extends string>(path: Path, handler: WebSocketHandler<PathParams<Path>> | WebSocketHooks): Route;
  <Path extends string, TParams extends StandardSchemaV1 | undefined = undefined, TQuery extends StandardSchemaV1 | undefined = undefined>(
    path: Path,
    options: StreamRouteOptions<TParams, TQuery> & WebSocketOptions,
    handler: WebSocketHandler<Output<TParams, PathParams<Path>>, Output<TQuery, RawQuery>> | WebSocketHooks,
  ): Route;
};

/**
 * Declares a WebSocket route (GET with `Upgrade: websocket`, served by crossws on `app.listen()`).
 * The handler runs on the upgrade request, after the route's middleware and validation: throw to
 * refuse it (the client gets the error response), return the connection's hooks to accept it.
 * When the App drains, each socket gets the `shutdown` hook, then close frame 1001 "going away".
 * A plain GET gets 426 Upgrade Required. Options: `maxMessageBytes` (default the App's
 * `bodyLimit`; past it close 1009), `maxQueuedBytes` (1 MiB), `pingIntervalMs` (30000).
 *
 * @example
 * app.route(websocket("/rooms/:room/socket", (ctx) => ({
 *   open: (socket) => socket.subscribe(`room:${ctx.params.room}`),
 *   message: (socket, message) => void publish(`room:${ctx.params.room}`, message.text()),
 * })));
 */
// crossws (with the ws library it bundles) starts loading with the first WebSocket route, so that
// the first upgrade does not wait for it; an App without one loads it at its first upgrade, if any.
const preloadCrossws = (): void => void loadCrossws().catch(() => undefined);

export const websocket: DefineWebSocket = ((path: string, a: object, b?: object) => {
  const hasOptions = b !== undefined;
  const [wsOptions, routeOptions] = split((hasOptions ? a : {}) as WebSocketOptions & RouteOptions, ["maxQueuedBytes", "maxMessageBytes", "pingIntervalMs"] as const);
  const maxQueuedBytes = checkOptionalNumber(wsOptions.maxQueuedBytes, "maxQueuedBytes", { integer: true, min: 1 }) ?? DEFAULT_WS_MAX_QUEUED_BYTES;
  const limits = {
    maxQueuedBytes,
    maxMessageBytes: checkOptionalNumber(wsOptions.maxMessageBytes, "maxMessageBytes", { integer: true, min: 1 }),
    pingIntervalMs: checkOptionalNumber(wsOptions.pingIntervalMs, "pingIntervalMs", { integer: true, min: 0 }),
  };
  const handler = (hasOptions ? b : a) as WebSocketHandler<unknown, unknown> | WebSocketHooks;
  if (typeof handler !== "function" && (typeof handler !== "object" || handler === null)) {
    throw new TypeError(`websocket("${path}"): expected a handler function or a hooks object`);
  }
  preloadCrossws();
  const responses = {
    101: { description: "Switching Protocols: the WebSocket connection is open." },
    426: { description: "Upgrade Required: the request was not a WebSocket upgrade." },
    ...(routeOptions as RouteOptions).responses,
  };
  return new Route("GET", path, async (ctx: HandlerContext<unknown, unknown, undefined>) => {
    const request = ctx.event.req;
    if (request.headers.get("upgrade")?.toLowerCase() !== "websocket") {
      return new Response("WebSocket upgrade is required.", { status: 426, headers: { upgrade: "websocket" } });
    }
    const hooks = typeof handler === "function" ? await handler(ctx) : handler;
    const crossws = keelsonHooks({
      hooks, route: ctx.event.context.matchedRoute?.route ?? path, streams: ctx.openStreams, logger: ctx.appLogger,
      lastEventId: lastEventIdOf(ctx), limits, maxQueuedBytes,
    });
    // The server's upgrade handler (streams/upgrades.ts) takes the hooks from this answer.
    return acceptUpgrade(request, crossws);
  }, { ...routeOptions, responses });
}) as DefineWebSocket;
