import type { H3Event } from "h3";
import type { JWTPayload } from "jose";
import type { Span, Translator, Tracer } from "../integrations.js";
import type { Logger } from "../logging/logger.js";
import { RequestLogger } from "../logging/request-logger.js";
import { parsePagination, type PageQuery } from "../pagination.js";
import { NotJSONBody } from "./body.js";
import { negotiateLanguage } from "./language.js";
import { readQuery, type RawQuery } from "./query.js";
import { generateRequestId } from "./request-id.js";
import { logThreshold, type RequestState } from "./request-state.js";
import type { OpenStreams } from "./open-streams.js";

/** Who a request is, as an auth middleware established it: `ctx.auth`. */
export type AuthInfo =
  | {
    readonly type: "jwt";
    /** The token's `sub` claim (empty when it has none). */
    readonly subject: string;
    /** The token's scopes: its `scope` claim split on spaces, or its `scp` claim. */
    readonly scopes: readonly string[];
    /** Every claim of the verified token. */
    readonly claims: JWTPayload;
  }
  | {
    readonly type: "apiKey";
    /** The key's name (`keys`' property name), or what `verify` returned. */
    readonly subject: string;
    readonly scopes: readonly string[];
  }
  | {
    readonly type: "basic";
    /** The user name. */
    readonly subject: string;
    readonly scopes: readonly string[];
  };

declare module "h3" {
  interface H3EventContext {
    /** Set by keelson's auth middleware (`jwtAuth`, `apiKeyAuth`, `basicAuth`); read it as `ctx.auth`. */
    auth?: AuthInfo;
  }
}

/** What a handler context needs from its App; kept small so contexts stay cheap to build. */
export interface ContextServices {
  readonly logger: Logger;
  readonly tracer: Tracer;
  readonly translator: Translator | undefined;
  /** The App's open event streams and WebSockets. */
  readonly streams: OpenStreams;
}

/**
 * The argument of every route handler. One plain object per request: fields are set once in
 * the constructor; `query` and `lang` are computed on first use.
 */
export class HandlerContext<P = Record<string, string>, Q = RawQuery, B = unknown> {
  #event: H3Event | undefined;
  /** A lane's request (pipeline.ts): its state, which makes the event when it is first asked for. */
  readonly #state: RequestState | undefined;
  /** Path parameters, URL-decoded (validated when the route has a `params` schema). */
  readonly params: P;
  readonly #body: B | NotJSONBody;
  readonly #services: ContextServices;
  #parsedQuery: Q | undefined;
  #language: string | undefined;

  /** `event` undefined only with `state`: a request keelson's own listener serves without an h3 event (yet). */
  constructor(event: H3Event | undefined, services: ContextServices, params: P, query: Q | undefined, body: B | NotJSONBody, state?: RequestState) {
    this.#event = event;
    this.#state = state;
    this.#services = services;
    this.params = params;
    this.#parsedQuery = query;
    this.#body = body;
    this.#language = undefined;
  }

  /** The request's h3 event, for h3's own utilities (`getCookie(ctx.event, …)`, `setResponseStatus`, …). */
  get event(): H3Event {
    return this.#event ?? (this.#event = this.#state!.event);
  }

  /** keelson's state of the request, without making an event for it. */
  #keelson(): RequestState | undefined {
    return this.#state ?? this.#event!.context.keelson;
  }

  /**
   * Parsed JSON body (validated when the route has a `body` schema); undefined when empty. On a
   * route without a body schema, a body of another media type is left for h3's readers
   * (`readFormData`, `readBody`, `proxyRequest`), and reading `ctx.body` then throws a 415.
   */
  get body(): B {
    const body = this.#body;
    if (body instanceof NotJSONBody) throw body.error;
    return body;
  }

  /** Query parameters (coerced and validated when the route has a `query` schema). */
  get query(): Q {
    return (this.#parsedQuery ??= readQuery(this.event) as Q);
  }

  /**
   * The request logger: the App's logger with this request's `request_id` and `trace_id` on every
   * line, and the route's `logLevel` as its threshold; `child(fields)` adds fields.
   * **Its `error()` logs and returns**: unlike `app.logger.error()`, it never exits the process.
   *
   * @example
   * ctx.logger.child({ book_id: ctx.params.id }).warn("stock is low: %d left", 2);
   */
  get logger(): RequestLogger {
    const state = this.#keelson();
    if (state !== undefined) return state.logger(this.#services.logger);
    const base = this.#services.logger;
    return RequestLogger.forRequest(base, logThreshold(this.event, base), this.requestId, "");
  }

  /**
   * This request's id: the incoming `X-Request-Id` (or `KConfig.requestIdHeader`) when it is 1–128
   * characters of `A-Z a-z 0-9 . _ : -`, else one keelson generated. The response carries it in the
   * same header; the request line, the request logger's lines and 5xx bodies carry it as `request_id`.
   */
  get requestId(): string {
    // The App's onRequest always sets the state; a context built by hand outside an App gets a new id.
    return this.#keelson()?.requestId ?? generateRequestId();
  }

  /** The request's language: Accept-Language matched against the translator's languages. */
  get lang(): string {
    return (this.#language ??= negotiateLanguage(
      this.event.req.headers.get("accept-language"),
      this.#services.translator?.languages,
    ));
  }

  /** Translates `key` into `ctx.lang`; without a translator, returns the key. */
  t(key: string, ...args: unknown[]): string {
    const translator = this.#services.translator;
    return translator ? translator.translate(this.lang, key, ...args) : key;
  }

  /** `page` and `limit` of the query string, clamped (see parsePagination). */
  pagination(): PageQuery {
    return parsePagination(this.query as Record<string, string | string[]>);
  }

  /**
   * Who the request is, as an auth middleware of keelson/auth (`jwtAuth`, `apiKeyAuth`,
   * `basicAuth`) established it; undefined on a route without one.
   */
  get auth(): AuthInfo | undefined {
    // A lane's route has no middleware, so nothing set it unless the handler made the event.
    const event = this.#event ?? this.#state?.madeEvent;
    return event?.context.auth;
  }

  /** The request's server span (a no-op span unless a tracer is set). */
  get span(): Span {
    return this.#keelson()?.span ?? this.#services.tracer.startSpan("noop");
  }

  /** @internal The App's logger, for stream routes whose lines outlive the request's head. */
  get appLogger(): Logger {
    return this.#services.logger;
  }

  /** @internal The App's open event streams and WebSockets (for stream routes). */
  get openStreams(): OpenStreams {
    return this.#services.streams;
  }

  /** Starts a child span of the request's span; call `end()` on it. */
  startSpan(name: string): Span {
    return this.#services.tracer.startSpan(name, { parent: this.span });
  }
}
