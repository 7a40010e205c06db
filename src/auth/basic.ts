import type { H3Event, Middleware } from "h3";
import { describeMiddleware } from "../http/middleware-contract.js";
import { safeEqual } from "./compare.js";
import { checkRealm, checkSchemeName, quoted, setAuth, unauthorizedResponse } from "./principal.js";

/** Options of {@link basicAuth}: exactly one of `users` or `verify`. */
export interface BasicAuthOptions {
  /** User names and their passwords (compared in constant time). */
  users?: Readonly<Record<string, string>>;
  /** Checks a user name and password (e.g. against a password hash): true to accept. */
  verify?: (username: string, password: string, event: H3Event) => boolean | Promise<boolean>;
  /** `realm` of the `WWW-Authenticate` challenge (default `"api"`). */
  realm?: string;
  /** The security scheme's name in the OpenAPI document (default `"basic"`). */
  schemeName?: string;
}

/** Decodes `Basic <base64(user:password)>` (RFC 7617, UTF-8); undefined when it is not that. */
function credentialsOf(header: string | null): { username: string; password: string } | undefined {
  const match = header === null ? null : /^Basic +([A-Za-z0-9+/]+=*) *$/i.exec(header);
  if (!match) return undefined;
  const decoded = Buffer.from(match[1]!, "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  return colon < 0 ? undefined : { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

/**
 * HTTP Basic authentication (RFC 7617). Missing or wrong credentials get 401 with
 * `WWW-Authenticate: Basic realm="…", charset="UTF-8"`; the user name is `ctx.auth.subject`.
 * Passwords are compared in constant time and never logged. Use it over TLS only.
 *
 * @example
 * app.group("/admin", basicAuth({ users: { admin: process.env.ADMIN_PASSWORD! } })).route(get("/stats", stats));
 */
export function basicAuth(options: BasicAuthOptions): Middleware {
  if ((options.users === undefined) === (options.verify === undefined)) throw new TypeError("basicAuth: give exactly one of users or verify");
  if (options.verify !== undefined && typeof options.verify !== "function") throw new TypeError("basicAuth: verify must be a function");
  const users = new Map(Object.entries(options.users ?? {}));
  if (options.users !== undefined) {
    if (users.size === 0) throw new TypeError("basicAuth: users must name at least one user");
    for (const [name, password] of users) {
      if (name === "" || name.includes(":")) throw new TypeError(`basicAuth: user name ${JSON.stringify(name)} must be non-empty and without ':'`);
      if (typeof password !== "string" || password === "") throw new TypeError(`basicAuth: users.${name} must be a non-empty password`);
    }
  }
  const realm = checkRealm("basicAuth", options.realm, "api");
  const schemeName = checkSchemeName("basicAuth", options.schemeName, "basic");
  const challenge = `Basic realm=${quoted(realm)}, charset="UTF-8"`;

  const check = async (username: string, password: string, event: H3Event): Promise<boolean> => {
    if (options.verify !== undefined) return (await options.verify(username, password, event)) === true;
    const expected = users.get(username);
    // A user that does not exist costs the same comparison as one that does.
    return safeEqual(password, expected ?? "\u0000") && expected !== undefined;
  };

  const middleware: Middleware = async function basicAuthMiddleware(event) {
    const credentials = credentialsOf(event.req.headers.get("authorization"));
    if (credentials === undefined) return unauthorizedResponse(challenge, "credentials are required");
    if (!(await check(credentials.username, credentials.password, event))) return unauthorizedResponse(challenge, "the user name or password is wrong");
    setAuth(event, { type: "basic", subject: credentials.username, scopes: [] });
    return undefined;
  };
  return describeMiddleware(middleware, {
    security: { name: schemeName, scheme: { type: "http", scheme: "basic" } },
    responses: { 401: { description: "Missing or wrong user name and password" } },
  });
}
