import { randomUUID } from "node:crypto";
import { HTTPResponse, type H3Event } from "h3";
import { nodeRequestHeaders, setCheckedResponseHeader, setResponseHeader } from "./headers.js";
import { setCheckedPendingHeader, setPendingHeader, type StandardReasonResponse } from "./status-line.js";

const DEFAULT_METHODS = ["GET", "HEAD", "PUT", "PATCH", "POST", "DELETE"];
const DEFAULT_MAX_AGE = 600;

/** Cross-origin policy. `false` turns CORS handling off entirely. */
export interface CorsConfig {
  /** `"*"` (default), one origin, a list, or a predicate. */
  origin?: string | readonly string[] | ((origin: string) => boolean);
  /** Default: GET, HEAD, PUT, PATCH, POST, DELETE. */
  methods?: readonly string[];
  /** Default: echo the request's Access-Control-Request-Headers. */
  allowHeaders?: readonly string[];
  exposeHeaders?: readonly string[];
  /**
   * Default false. When true, `origin` must name the allowed origins (a list, one origin, or a
   * predicate that refuses unknown origins): with any origin the App refuses to be created.
   * `Origin: null` is never allowed with credentials.
   */
  credentials?: boolean;
  /** Preflight cache lifetime in seconds. Default 600. */
  maxAge?: number;
}

/** The resolved CORS policy: `apply` runs on every request, `preflight` answers OPTIONS. */
export interface Cors {
  apply(event: H3Event): void;
  /**
   * `apply` for a request keelson's own listener serves without an h3 event (pipeline.ts): the same
   * headers, from node's `Origin` header into the response's header bag.
   */
  applyToNode(origin: string | undefined, res: StandardReasonResponse): void;
  preflight(event: H3Event): HTTPResponse;
}

function originMatcher(origin: CorsConfig["origin"]): (value: string) => boolean {
  if (origin === undefined || origin === "*") return () => true;
  if (typeof origin === "function") return origin;
  const allowed = new Set(typeof origin === "string" ? [origin] : origin);
  return (value) => allowed.has(value);
}

/**
 * Whether a predicate lets in origins nobody could have listed: it is asked about a few made-up
 * origins (random names under the reserved `.invalid` domain). A real allow-list refuses them;
 * `() => true`, a deny-list or a check that only looks at the scheme does not.
 */
function acceptsUnknownOrigins(allows: (origin: string) => boolean): boolean {
  const probes = ["https", "http", "https"].map((scheme) => `${scheme}://${randomUUID()}.invalid`);
  return probes.some((probe) => {
    try {
      return Boolean(allows(probe));
    } catch {
      return false;
    }
  });
}

/**
 * Credentials with any origin would let every web site send requests carrying the user's cookies
 * and read the answers: refused when the App is created rather than echoed at run time.
 */
function refuseAnyOriginWithCredentials(config: CorsConfig, allows: (origin: string) => boolean): void {
  const origin = config.origin;
  const any = origin === undefined || origin === "*" || (typeof origin === "function" && acceptsUnknownOrigins(allows));
  if (!any) return;
  const what = origin === undefined ? "no cors.origin (any origin)" : origin === "*" ? 'cors.origin "*"' : "a cors.origin function that accepts any origin";
  throw new TypeError(
    `cors.credentials: true with ${what} would let every web site make requests with your users' credentials; ` +
      'set cors.origin to the allowed origins (e.g. ["https://app.example.com"]) or to a function that accepts only those, ' +
      "or drop cors.credentials",
  );
}

/** How CORS's headers are set: `checked` for constant names and values, `any` for one the client sent. */
interface HeaderSetters<T> {
  checked(target: T, name: string, value: string): void;
  any(target: T, name: string, value: string): void;
}
const EVENT_SETTERS: HeaderSetters<H3Event> = { checked: setCheckedResponseHeader, any: setResponseHeader };
/** Into the bag of keelson's own response, checked as `setResponseHeader` checks a value there. */
const NODE_SETTERS: HeaderSetters<StandardReasonResponse> = {
  checked: (res, name, value) => void setCheckedPendingHeader(res, name, value),
  any: (res, name, value) => void setPendingHeader(res, name, value),
};

/** Builds the CORS policy once; every per-request decision after that is a lookup. */
export function createCors(config: CorsConfig): Cors {
  const credentials = config.credentials === true;
  const matches = originMatcher(config.origin);
  if (credentials) refuseAnyOriginWithCredentials(config, matches);
  // `Origin: null` is sent by sandboxed iframes, file: pages and some redirects: any page can
  // claim it, so it is never an origin to trust with credentials, even when listed.
  const allows = credentials ? (origin: string) => origin !== "null" && matches(origin) : matches;
  const methods = (config.methods ?? DEFAULT_METHODS).join(", ");
  const allowHeaders = config.allowHeaders?.join(", ");
  const exposeHeaders = config.exposeHeaders?.length ? config.exposeHeaders.join(", ") : undefined;
  const maxAge = String(config.maxAge ?? DEFAULT_MAX_AGE);
  // Any origin never comes with credentials (refused above), so it is always answered with `*`.
  const wildcard = config.origin === undefined || config.origin === "*";

  /** The response headers for `origin` (null: none sent), set on `target` through `set`. */
  function applyTo<T>(target: T, origin: string | null, set: HeaderSetters<T>): void {
    // When the answer depends on the Origin, every response says so, including those
    // without CORS headers: else a shared cache could hand one origin's answer to another.
    if (!wildcard) set.checked(target, "vary", "Origin");
    if (origin === null || !allows(origin)) return;
    // The constant names and values skip the checks a value the client sent still gets.
    if (wildcard) set.checked(target, "access-control-allow-origin", "*");
    else set.any(target, "access-control-allow-origin", origin);
    if (credentials) set.checked(target, "access-control-allow-credentials", "true");
    if (exposeHeaders) set.any(target, "access-control-expose-headers", exposeHeaders);
  }

  return {
    apply(event) {
      // Most requests (same-origin, servers, probes) carry no Origin: on Node, one property read.
      const headers = nodeRequestHeaders(event);
      applyTo(event, headers === undefined ? event.req.headers.get("origin") : (headers.origin ?? null), EVENT_SETTERS);
    },
    applyToNode(origin, res) {
      applyTo(res, origin ?? null, NODE_SETTERS);
    },
    preflight(event) {
      const headers: Record<string, string> = {};
      const origin = event.req.headers.get("origin");
      if (origin !== null && event.req.headers.has("access-control-request-method") && allows(origin)) {
        headers["access-control-allow-methods"] = methods;
        const requested = event.req.headers.get("access-control-request-headers");
        const allowed = allowHeaders ?? requested;
        if (allowed) headers["access-control-allow-headers"] = allowed;
        // Through setResponseHeader, like apply()'s Vary, so this value replaces that one.
        if (allowHeaders === undefined) setResponseHeader(event, "vary", wildcard ? "Access-Control-Request-Headers" : "Origin, Access-Control-Request-Headers");
        headers["access-control-max-age"] = maxAge;
      }
      return new HTTPResponse(null, { status: 204, headers });
    },
  };
}
