import type { Middleware } from "h3";
import { SignJWT } from "jose";
import { jwtAuth } from "../../src/entries/auth.js";

/** Who issues and who accepts the bookstore's tokens (checked as `iss` and `aud`). */
export const TOKEN_ISSUER = "keelson-bookstore";
export const TOKEN_AUDIENCE = "bookstore";
/** The scope the write routes (POST, PUT, DELETE under /api/books) require. */
export const WRITE_SCOPE = "books:write";

/**
 * The key used when BOOKSTORE_JWT_SECRET is unset: public (it is in this file), so a token signed
 * with it proves nothing. For development, tests and `make token` only.
 */
export const DEVELOPMENT_SECRET = "keelson-bookstore-development-key-not-secret";

/** BOOKSTORE_JWT_SECRET, or the development key (with a warning to log in production). */
export function bookstoreSecret(env: NodeJS.ProcessEnv = process.env): { secret: string; warning?: string } {
  const secret = env.BOOKSTORE_JWT_SECRET;
  if (secret !== undefined && secret !== "") return { secret };
  const warning = env.NODE_ENV === "production"
    ? "BOOKSTORE_JWT_SECRET is not set: the write routes accept tokens signed with the public development key (set it from a Secret)"
    : undefined;
  return { secret: DEVELOPMENT_SECRET, warning };
}

/** The middleware of the write routes: a bearer token of this bookstore with the `books:write` scope. */
export function requireWriter(secret: string): Middleware {
  return jwtAuth({ secret, issuer: TOKEN_ISSUER, audience: TOKEN_AUDIENCE, scopes: [WRITE_SCOPE] });
}

/**
 * A token for the write routes, signed with `secret`: what `make token` prints.
 *
 * @example
 * const token = await signBookstoreToken(bookstoreSecret().secret, { subject: "me" });
 */
export function signBookstoreToken(secret: string, options: { subject?: string; scopes?: string[]; expiresIn?: string } = {}): Promise<string> {
  return new SignJWT({ scope: (options.scopes ?? [WRITE_SCOPE]).join(" ") })
    .setProtectedHeader({ alg: "HS256", typ: "JWT" })
    .setSubject(options.subject ?? "developer")
    .setIssuer(TOKEN_ISSUER)
    .setAudience(TOKEN_AUDIENCE)
    .setIssuedAt()
    .setExpirationTime(options.expiresIn ?? "12h")
    .sign(new TextEncoder().encode(secret));
}
