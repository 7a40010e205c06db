import type { MetricsCollector } from "../integrations.js";
import type { Logger } from "../logging/logger.js";
import { errorMessage } from "../errors.js";

/** How long the application's last message (`onShutdown`, a WebSocket's `shutdown`) is awaited at the drain. */
export const LAST_WORDS_MS = 1000;

/**
 * Runs the application's drain hook of one stream or socket, awaited at most `LAST_WORDS_MS`; a
 * failure is logged as `what`, and the drain goes on either way.
 */
export async function lastWords(hook: (() => void | Promise<void>) | undefined, logger: Logger, what: string): Promise<void> {
  if (hook === undefined) return;
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      Promise.resolve().then(hook),
      new Promise((resolve) => (timer = setTimeout(resolve, LAST_WORDS_MS))),
    ]);
  } catch (error) {
    logger.warn("%s failed: %s", what, errorMessage(error));
  } finally {
    clearTimeout(timer);
  }
}

/** Kinds of long-lived connection, as `kind` labels of `keelson_open_streams`. */
export type StreamKind = "sse" | "websocket";

/** One open event stream or WebSocket, as the App's drain sees it. */
export interface LongConnection {
  readonly kind: StreamKind;
  /** The route template (`/rooms/:room`). */
  readonly route: string;
  /**
   * Ends it on purpose: the application's last message, then the final event (or close frame
   * 1001), then the end. Resolves once it is closed, or when `graceMs` have passed (then a
   * WebSocket that has not answered the close is terminated).
   */
  end(reason: string, graceMs: number): Promise<void>;
}

/**
 * The event streams and WebSockets open on one App: counted in the metrics (`keelson_open_streams`),
 * ended on purpose when it drains. A connection opened once the drain has begun is ended at once.
 */
export class OpenStreams {
  readonly #open = new Set<LongConnection>();
  readonly #metrics: () => MetricsCollector | undefined;
  readonly #logger: Logger;
  #ending: { reason: string; graceMs: number } | undefined;

  constructor(metrics: () => MetricsCollector | undefined, logger: Logger) {
    this.#metrics = metrics;
    this.#logger = logger;
  }

  get size(): number {
    return this.#open.size;
  }

  add(connection: LongConnection): void {
    this.#open.add(connection);
    this.#observe(() => this.#metrics()?.streamOpened?.(connection.kind, connection.route));
    if (this.#ending !== undefined) void connection.end(this.#ending.reason, this.#ending.graceMs);
  }

  delete(connection: LongConnection): void {
    if (!this.#open.delete(connection)) return;
    this.#observe(() => this.#metrics()?.streamClosed?.(connection.kind, connection.route));
  }

  /** keelson closed a WebSocket of `route` at a limit (`keelson_websocket_limit_closes_total`). */
  limitClosed(route: string, reason: string): void {
    this.#observe(() => this.#metrics()?.webSocketLimitClosed?.(route, reason));
  }

  /** Ends every open connection (see `LongConnection.end`); resolves when all are closed or `graceMs` has passed. */
  async endAll(reason: string, graceMs: number): Promise<void> {
    this.#ending = { reason, graceMs };
    const open = Array.from(this.#open);
    if (open.length === 0) return;
    const sse = open.filter((c) => c.kind === "sse").length;
    this.#logger.info("ending %d event stream(s) and %d WebSocket(s): final event, close frame 1001", sse, open.length - sse);
    await Promise.all(open.map((connection) => connection.end(reason, graceMs).catch((error: unknown) => {
      this.#logger.warn("ending a %s on %s failed: %s", connection.kind, connection.route, errorMessage(error));
    })));
  }

  #observe(record: () => void): void {
    try {
      record();
    } catch (error) {
      console.error("keelson: recording a stream failed:", error);
    }
  }
}
