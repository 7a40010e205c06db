import { HTTPResponse, type H3Event } from "h3";
import type { CorsConfig } from "../config.js";
import { setResponseHeader } from "./headers.js";

const DEFAULT_METHODS = ["GET", "HEAD", "PUT", "PATCH", "POST", "DELETE"];
const DEFAULT_MAX_AGE = 600;

/** The resolved CORS policy: `apply` runs on every request, `preflight` answers OPTIONS. */
export interface Cors {
  apply(event: H3Event): void;
  preflight(event: H3Event): HTTPResponse;
}

function originMatcher(origin: CorsConfig["origin"]): (value: string) => boolean {
  if (origin === undefined || origin === "*") return () => true;
  if (typeof origin === "function") return origin;
  const allowed = new Set(typeof origin === "string" ? [origin] : origin);
  return (value) => allowed.has(value);
}

/** Builds the CORS policy once; every per-request decision after that is a lookup. */
export function createCors(config: CorsConfig): Cors {
  const anyOrigin = config.origin === undefined || config.origin === "*";
  const credentials = config.credentials === true;
  const allows = originMatcher(config.origin);
  const methods = (config.methods ?? DEFAULT_METHODS).join(", ");
  const allowHeaders = config.allowHeaders?.join(", ");
  const exposeHeaders = config.exposeHeaders?.length ? config.exposeHeaders.join(", ") : undefined;
  const maxAge = String(config.maxAge ?? DEFAULT_MAX_AGE);
  // `*` is only valid without credentials; with them the origin is echoed (and Vary added).
  const wildcard = anyOrigin && !credentials;

  function allowOrigin(event: H3Event, origin: string): boolean {
    if (!allows(origin)) return false;
    setResponseHeader(event, "access-control-allow-origin", wildcard ? "*" : origin);
    if (credentials) setResponseHeader(event, "access-control-allow-credentials", "true");
    return true;
  }

  return {
    apply(event) {
      // When the answer depends on the Origin, every response says so, including those
      // without CORS headers: else a shared cache could hand one origin's answer to another.
      if (!wildcard) setResponseHeader(event, "vary", "Origin");
      const origin = event.req.headers.get("origin");
      if (origin === null) return;
      if (allowOrigin(event, origin) && exposeHeaders) {
        setResponseHeader(event, "access-control-expose-headers", exposeHeaders);
      }
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
