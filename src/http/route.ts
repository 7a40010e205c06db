import type { StandardSchemaV1 } from "@standard-schema/spec";
import type { Middleware } from "h3";
import { parseLogLevel, type RouteLogLevel } from "../logging/level.js";
import type { HandlerContext } from "./context.js";
import type { FormLimits } from "./form.js";
import type { RawQuery } from "./query.js";

export type { RawQuery } from "./query.js";

/** Methods a keelson route can declare. */
export type RouteMethod = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

/** Documentation of one response status: a schema, a description, or both. */
export interface ResponseDoc {
  description?: string;
  schema?: StandardSchemaV1;
  /**
   * The media type(s) of a body that is not JSON (an image, a CSV): documented as binary
   * (`format: binary`) unless `schema` says more. Default: `application/json` with `schema`.
   */
  contentType?: string | string[];
}

/** Everything a route can declare besides its method, path and handler. */
export interface RouteOptions<
  TParams extends StandardSchemaV1 | undefined = StandardSchemaV1 | undefined,
  TQuery extends StandardSchemaV1 | undefined = StandardSchemaV1 | undefined,
  TBody extends StandardSchemaV1 | undefined = StandardSchemaV1 | undefined,
> {
  params?: TParams;
  query?: TQuery;
  body?: TBody;
  /**
   * What the body is: `"json"` (default) or `"form"`, a `multipart/form-data` or
   * `application/x-www-form-urlencoded` body whose fields (strings) and files (`File`) `body` validates.
   */
  bodyType?: "json" | "form";
  /** The largest body this route reads, bytes (default: the App's `bodyLimit`). */
  bodyLimit?: number;
  /** Limits of a form body: file size and count, field count and size, where files are kept. */
  formLimits?: FormLimits;
  /** Per-status response schemas (or docs), e.g. `{ 200: Book, 404: { description: "no such book" } }`. */
  responses?: Record<number, StandardSchemaV1 | ResponseDoc>;
  summary?: string;
  description?: string;
  tags?: string[];
  /** Names of security schemes this route requires (see docs/validation-and-docs.md). */
  security?: string[];
  deprecated?: boolean;
  /** Default: derived from method and path (`getBooksById`). */
  operationId?: string;
  /** Leave the route out of the OpenAPI document. */
  hidden?: boolean;
  /** h3 middleware run after the app's and the group's, before the handler. */
  middleware?: Middleware[];
  /**
   * This route's log threshold instead of the App logger's level, as Fastify's per-route `logLevel`:
   * its request line (info below 400, warn for 4xx, error for 5xx) and its `ctx.logger` lines below
   * it are not written. `"warn"` keeps a probe's 200s out of the log and its failures in;
   * `"silent"` writes nothing for the route. Metrics and traces still count every request.
   */
  logLevel?: RouteLogLevel;
}

type ParamNames<P extends string> = P extends `${string}:${infer Name}/${infer Rest}`
  ? Name | ParamNames<`/${Rest}`>
  : P extends `${string}:${infer Name}`
    ? Name
    : never;

/** `{ id: string }` for `/books/:id`: the decoded path parameters a path declares. */
export type PathParams<P extends string> = { [K in ParamNames<P>]: string };

type Output<S, Fallback> = S extends StandardSchemaV1 ? StandardSchemaV1.InferOutput<S> : Fallback;


/** The handler's return: a JSON value (200), `created(v)` (201), `noContent()` (204), or a Response. */
export type HandlerResult = unknown;

export type Handler<P = Record<string, string>, Q = RawQuery, B = unknown> = (
  ctx: HandlerContext<P, Q, B>,
) => HandlerResult | Promise<HandlerResult>;

/** A route as registered on an App: its declaration and the full path after group prefixes. */
export interface RegisteredRoute {
  readonly method: string;
  readonly path: string;
  readonly route: Route;
  /** The middleware it runs besides the App's global middleware: its groups', then its own. */
  readonly middleware: readonly Middleware[];
  /**
   * The App's global middleware (`app.use(fn)`), which runs before it: one list shared by every
   * route, so middleware added after the route counts too. The document reads their contracts.
   */
  readonly appMiddleware?: readonly Middleware[];
}

/**
 * A declared route. Returned by `get`/`post`/`put`/`patch`/`del`; its chainable methods add
 * documentation and middleware. Schemas given in the options object type the handler's context.
 */
export class Route {
  readonly method: RouteMethod;
  readonly path: string;
  readonly handler: Handler<never, never, never>;
  readonly options: RouteOptions;

  constructor(method: RouteMethod, path: string, handler: Handler<never, never, never>, options: RouteOptions = {}) {
    this.method = method;
    this.path = path;
    this.handler = handler;
    this.options = { ...options, tags: [...(options.tags ?? [])], middleware: [...(options.middleware ?? [])] };
    if (options.logLevel !== undefined) parseLogLevel(options.logLevel, `logLevel of ${method} ${path}`, true);
  }

  /** Adds OpenAPI tags. */
  tag(...tags: string[]): this {
    this.options.tags!.push(...tags);
    return this;
  }

  /** Sets the summary (and description) of the operation. */
  describe(summary: string, description?: string): this {
    this.options.summary = summary;
    if (description !== undefined) this.options.description = description;
    return this;
  }

  /** Adds per-route h3 middleware. */
  use(...middleware: Middleware[]): this {
    this.options.middleware!.push(...middleware);
    return this;
  }

  /** Marks the route as requiring the named security schemes (default `bearer`). */
  secured(...schemes: string[]): this {
    this.options.security = schemes.length > 0 ? schemes : ["bearer"];
    return this;
  }

  deprecated(flag = true): this {
    this.options.deprecated = flag;
    return this;
  }

  operationId(id: string): this {
    this.options.operationId = id;
    return this;
  }

  /** Documents (and, for 2xx, describes the schema of) one response status. */
  response(status: number, schema?: StandardSchemaV1, description?: string): this {
    this.options.responses = { ...this.options.responses, [status]: { schema, description } };
    return this;
  }

  /**
   * Sets the route's log threshold (the `logLevel` option): `"silent"` leaves the route out of the
   * request log, `"warn"` keeps only its 4xx/5xx lines, `"debug"` shows its debug lines.
   *
   * @example
   * app.route(get("/ready", () => ({ ok: true })).logLevel("silent")); // still counted in metrics
   */
  logLevel(level: RouteLogLevel): this {
    this.options.logLevel = parseLogLevel(level, `logLevel of ${this.method} ${this.path}`, true);
    return this;
  }

  hide(): this {
    this.options.hidden = true;
    return this;
  }
}

type Define = {
  <Path extends string>(path: Path, handler: Handler<PathParams<Path>>): Route;
  <
    Path extends string,
    TParams extends StandardSchemaV1 | undefined = undefined,
    TQuery extends StandardSchemaV1 | undefined = undefined,
    TBody extends StandardSchemaV1 | undefined = undefined,
  >(
    path: Path,
    options: RouteOptions<TParams, TQuery, TBody>,
    handler: Handler<Output<TParams, PathParams<Path>>, Output<TQuery, RawQuery>, Output<TBody, unknown>>,
  ): Route;
};

function define(method: RouteMethod): Define {
  return ((path: string, a: RouteOptions | Handler, b?: Handler) =>
    typeof a === "function"
      ? new Route(method, path, a as Handler<never, never, never>)
      : new Route(method, path, b as Handler<never, never, never>, a)) as Define;
}

/** Declares a GET route (HEAD is answered by it too). */
export const get: Define = define("GET");
export const post: Define = define("POST");
export const put: Define = define("PUT");
export const patch: Define = define("PATCH");
/** Declares a DELETE route (`delete` is a reserved word). */
export const del: Define = define("DELETE");

/** A set of routes registered together (a controller: docs/routing.md). */
export interface Controller {
  routes(): Route[];
}
