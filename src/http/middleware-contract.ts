import type { Middleware } from "h3";
import type { ErrorCode } from "../errors.js";

/** A security scheme of `components.securitySchemes` (the OpenAPI 3.1 shapes). */
export type OpenAPISecurityScheme =
  | { type: "http"; scheme: string; bearerFormat?: string; description?: string }
  | { type: "apiKey"; name: string; in: "query" | "header" | "cookie"; description?: string }
  | { type: "oauth2"; flows: Record<string, unknown>; description?: string }
  | { type: "openIdConnect"; openIdConnectUrl: string; description?: string }
  | { type: "mutualTLS"; description?: string };

/** A response header a middleware sets, as the OpenAPI document lists it. */
export interface MiddlewareHeaderDoc {
  description: string;
  /** JSON Schema of the header's value (default `{ "type": "string" }`). */
  schema?: Record<string, unknown>;
}

/** A status a middleware can answer by itself (with keelson's KError body), and the headers it sends with it. */
export interface MiddlewareResponseDoc {
  description?: string;
  /** The KError code of the body, for the document's example (default: the status's usual code). */
  code?: ErrorCode;
  headers?: Record<string, MiddlewareHeaderDoc>;
}

/** A request header a middleware reads, as the OpenAPI document lists it (a header parameter). */
export interface MiddlewareRequestHeaderDoc extends MiddlewareHeaderDoc {
  required?: boolean;
}

/** The credential a middleware requires: a security scheme of the document, and the scopes it checks. */
export interface MiddlewareSecurity {
  /** The scheme's name in `components.securitySchemes` (a scheme of that name in `docs.securitySchemes` wins). */
  name: string;
  scheme: OpenAPISecurityScheme;
  scopes?: readonly string[];
}

/**
 * What a middleware adds to the contract of every route it runs on, so the OpenAPI document lists
 * it without the route repeating it: the statuses it can answer, the headers it sets on every
 * response, the credential it requires.
 */
export interface MiddlewareContract {
  /** Statuses the middleware answers itself, e.g. `{ 401: { description: "…" } }`. */
  responses?: Readonly<Record<number, MiddlewareResponseDoc>>;
  /** Headers the middleware sets on every response it lets through. */
  headers?: Readonly<Record<string, MiddlewareHeaderDoc>>;
  security?: MiddlewareSecurity;
  /** Request headers the middleware reads, listed as header parameters. */
  requestHeaders?: Readonly<Record<string, MiddlewareRequestHeaderDoc>>;
  /** The methods it acts on (upper case); on other routes it passes through and adds nothing. Default: all. */
  methods?: readonly string[];
  /**
   * Asked when the middleware is put on a route itself (`route.use()`): a reason to refuse the
   * route, thrown at registration with the route's name, or undefined.
   */
  checkRoute?: (method: string) => string | undefined;
}

const CONTRACTS = new WeakMap<Middleware, MiddlewareContract>();

/**
 * Attaches a contract to a middleware and returns the same function. Routes (and groups) that use
 * it are documented with its statuses, headers and security requirement.
 *
 * @example
 * const requireTenant = describeMiddleware(function requireTenant(event) {
 *   if (!event.req.headers.has("x-tenant")) throw badRequest("X-Tenant is required");
 * }, { responses: { 400: { description: "No X-Tenant header" } } });
 */
export function describeMiddleware<M extends Middleware>(middleware: M, contract: MiddlewareContract): M {
  CONTRACTS.set(middleware, contract);
  return middleware;
}

/** The contract attached to a middleware by {@link describeMiddleware}, if any. */
export function getMiddlewareContract(middleware: Middleware): MiddlewareContract | undefined {
  return CONTRACTS.get(middleware);
}
