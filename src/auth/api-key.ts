import type { H3Event, Middleware } from "h3";
import { describeMiddleware } from "../http/middleware-contract.js";
import { safeEqual } from "./compare.js";
import { checkRealm, checkSchemeName, checkScopes, quoted, setAuth, unauthorizedResponse } from "./principal.js";

/** What `verify` answers for a key it accepts: the subject, and optionally the key's scopes. */
export type ApiKeyPrincipal = string | { subject: string; scopes?: readonly string[] };

/** Options of {@link apiKeyAuth}: exactly one of `keys` or `verify`. */
export interface ApiKeyAuthOptions {
  /** The request header that carries the key (default `"x-api-key"`). */
  header?: string;
  /** Accepted keys by name: `{ billing: process.env.BILLING_KEY! }`; the name is `ctx.auth.subject`. */
  keys?: Readonly<Record<string, string>>;
  /** Looks a key up (a database, a secrets store): the principal, or undefined to refuse it. */
  verify?: (key: string, event: H3Event) => ApiKeyPrincipal | undefined | Promise<ApiKeyPrincipal | undefined>;
  /** `realm` of the `WWW-Authenticate` challenge (default `"api"`). */
  realm?: string;
  /** The security scheme's name in the OpenAPI document (default `"apiKey"`). */
  schemeName?: string;
}

const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const KEY_SHAPE = /^[\x21-\x7e]{1,512}$/;

/**
 * API-key authentication from a request header. A missing or unknown key gets 401 with a
 * `WWW-Authenticate: APIKey realm="…", header="…"` challenge; the accepted key's name (or what
 * `verify` returned) is `ctx.auth`. Keys in `keys` are compared in constant time; the key is never
 * logged or echoed. The route's OpenAPI operation gets an `apiKey` security requirement and 401.
 *
 * @example
 * app.group("/internal", apiKeyAuth({ keys: { reporting: process.env.REPORTING_KEY! } })).route(get("/stats", stats));
 */
export function apiKeyAuth(options: ApiKeyAuthOptions): Middleware {
  const header = options.header ?? "x-api-key";
  if (typeof header !== "string" || !HEADER_NAME.test(header)) throw new TypeError(`apiKeyAuth: header must be a header name, got ${JSON.stringify(options.header)}`);
  if ((options.keys === undefined) === (options.verify === undefined)) throw new TypeError("apiKeyAuth: give exactly one of keys or verify");
  if (options.verify !== undefined && typeof options.verify !== "function") throw new TypeError("apiKeyAuth: verify must be a function");
  const keys = Object.entries(options.keys ?? {});
  if (options.keys !== undefined) {
    if (keys.length === 0) throw new TypeError("apiKeyAuth: keys must name at least one key");
    for (const [name, key] of keys) {
      if (typeof key !== "string" || key.length < 16 || !KEY_SHAPE.test(key)) {
        throw new TypeError(`apiKeyAuth: keys.${name} must be at least 16 visible ASCII characters (got ${typeof key === "string" ? `${key.length} characters` : typeof key})`);
      }
    }
  }
  const realm = checkRealm("apiKeyAuth", options.realm, "api");
  const schemeName = checkSchemeName("apiKeyAuth", options.schemeName, "apiKey");
  const challenge = `APIKey realm=${quoted(realm)}, header=${quoted(header)}`;

  const lookup = async (key: string, event: H3Event): Promise<{ subject: string; scopes: readonly string[] } | undefined> => {
    if (options.verify === undefined) {
      // Every key is compared, so the time taken does not say which one matched.
      let match: string | undefined;
      for (const [name, expected] of keys) if (safeEqual(key, expected) && match === undefined) match = name;
      return match === undefined ? undefined : { subject: match, scopes: [] };
    }
    const found = await options.verify(key, event);
    if (found === undefined || (found as unknown) === false || (found as unknown) === null) return undefined;
    return typeof found === "string" ? { subject: found, scopes: [] } : { subject: found.subject, scopes: checkScopes("apiKeyAuth verify()", found.scopes) };
  };

  const middleware: Middleware = async function apiKeyAuthMiddleware(event) {
    const key = event.req.headers.get(header);
    if (key === null || key === "") return unauthorizedResponse(challenge, `an API key is required in ${header}`);
    const principal = KEY_SHAPE.test(key) ? await lookup(key, event) : undefined;
    if (principal === undefined) return unauthorizedResponse(challenge, "the API key is not accepted");
    setAuth(event, { type: "apiKey", ...principal });
    return undefined;
  };
  return describeMiddleware(middleware, {
    security: { name: schemeName, scheme: { type: "apiKey", in: "header", name: header } },
    responses: { 401: { description: `Missing or unknown API key in \`${header}\`` } },
  });
}
