import { createPublicKey, type KeyObject } from "node:crypto";
import type { Middleware } from "h3";
import { createRemoteJWKSet, customFetch, errors, jwtVerify, type FetchImplementation, type JWK, type JWTPayload, type JWTVerifyGetKey } from "jose";
import { errorMessage, createError } from "../errors.js";
import { errorResponse } from "../http/error-response.js";
import { describeMiddleware, type MiddlewareResponseDoc } from "../http/middleware-contract.js";
import { checkCacheOptions, freezeClaims, VerifiedTokens, type JwtCacheOptions } from "./verified-tokens.js";
import { countLimitHit } from "../limit-hits.js";
import {
  checkRealm, checkSchemeName, checkScopes, forbiddenResponse, missingScopes, quoted, setAuth, unauthorizedResponse,
} from "./principal.js";

/** Options of {@link jwtAuth}: exactly one of `secret`, `publicKey` or `jwksUrl`. */
export interface JwtAuthOptions {
  /** The shared secret of HS256/HS384/HS512 tokens: at least 32 bytes (RFC 7518 §3.2). */
  secret?: string | Uint8Array;
  /** The issuer's public key: a PEM (SPKI) string, a public JWK, or a `KeyObject`. */
  publicKey?: string | JWK | KeyObject;
  /** The issuer's JWKS document: fetched on first use, cached, refetched when a token names an unknown `kid`. */
  jwksUrl?: string | URL;
  /**
   * How the JWKS is fetched and cached: jose's `createRemoteJWKSet` options in ms (`cacheMaxAge`,
   * `cooldownDuration`, `timeoutDuration`), plus keelson's `maxBytes`, the largest JWKS response read
   * (default 256 KiB; a bigger one is a failed fetch), and `failureBackoff`, how long a failed fetch
   * is remembered before the next try, ms (default 1000, doubling with each failure in a row up to
   * a minute; 0 tries again on the next request).
   */
  jwks?: { cacheMaxAge?: number; cooldownDuration?: number; timeoutDuration?: number; maxBytes?: number; failureBackoff?: number };
  /**
   * Accepted `alg` values. Default: HS256/384/512 with `secret`; every RSA, RSA-PSS, ECDSA and EdDSA
   * algorithm with `publicKey` or `jwksUrl` (the key's type narrows it further). `none` is never accepted.
   */
  algorithms?: string[];
  /** Required `iss` (one of these). */
  issuer?: string | string[];
  /** Required `aud` (one of these). */
  audience?: string | string[];
  /** Leeway for `exp` and `nbf`, seconds (default 0). */
  clockTolerance?: number;
  /** Scopes every request must carry (`scope` claim, space-separated, or `scp`); a token without one gets 403. */
  scopes?: string[];
  /** `realm` of the `WWW-Authenticate` challenge (default `"api"`). */
  realm?: string;
  /** The security scheme's name in the OpenAPI document (default `"bearer"`). */
  schemeName?: string;
  /**
   * Verified tokens are remembered, so a token sent again is not verified again: at most `max`
   * (default 1000), each for at most `maxAge` ms (default 60 000) and never past its `exp`; with
   * `jwksUrl`, all are forgotten when the fetched key set changes. `false` verifies every request.
   */
  cache?: false | JwtCacheOptions;
}

const DEFAULT_JWKS_MAX_BYTES = 256 * 1024;
const DEFAULT_FAILURE_BACKOFF_MS = 1000;
const MAX_FAILURE_BACKOFF_MS = 60_000;

const HMAC = ["HS256", "HS384", "HS512"];
const ASYMMETRIC = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"];
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;

/** The JWKS could not be fetched or read: the token may be fine, so this is the service's failure, not the client's. */
class KeySourceError extends Error {
  constructor(cause: unknown) {
    super(`the JWKS could not be read: ${errorMessage(cause)}`, { cause });
  }
}

/** The key to verify with; `keysChanged` is called when a JWKS fetch brings a different key set. */
function keyOf(options: JwtAuthOptions, keysChanged: () => void): { key: Uint8Array | KeyObject | JWTVerifyGetKey; algorithms: string[] } {
  const given = (["secret", "publicKey", "jwksUrl"] as const).filter((name) => options[name] !== undefined);
  if (given.length !== 1) throw new TypeError(`jwtAuth: give exactly one of secret, publicKey or jwksUrl (got ${given.length === 0 ? "none" : given.join(", ")})`);
  if (options.secret !== undefined) {
    const secret = typeof options.secret === "string" ? new TextEncoder().encode(options.secret) : options.secret;
    if (!(secret instanceof Uint8Array) || secret.byteLength < 32) {
      throw new TypeError(`jwtAuth: secret must be a string or Uint8Array of at least 32 bytes, got ${secret instanceof Uint8Array ? `${secret.byteLength} bytes` : typeof options.secret}`);
    }
    return { key: secret, algorithms: HMAC };
  }
  if (options.publicKey !== undefined) {
    let key: KeyObject;
    try {
      const pub = options.publicKey;
      key = typeof pub === "string" ? createPublicKey(pub) : "asymmetricKeyType" in pub ? pub as KeyObject : createPublicKey({ key: pub as JWK & Record<string, unknown>, format: "jwk" });
    } catch (error) {
      throw new TypeError(`jwtAuth: publicKey is not a public key (PEM, JWK or KeyObject): ${errorMessage(error)}`, { cause: error });
    }
    if (key.type !== "public") throw new TypeError(`jwtAuth: publicKey must be a public key, got a ${key.type} key`);
    return { key, algorithms: ASYMMETRIC };
  }
  let url: URL;
  try {
    url = new URL(options.jwksUrl!);
  } catch (error) {
    throw new TypeError(`jwtAuth: jwksUrl must be an absolute URL, got ${JSON.stringify(String(options.jwksUrl))}`, { cause: error });
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") throw new TypeError(`jwtAuth: jwksUrl must be http(s), got ${url.protocol}`);
  const { maxBytes = DEFAULT_JWKS_MAX_BYTES, failureBackoff = DEFAULT_FAILURE_BACKOFF_MS, ...joseOptions } = options.jwks ?? {};
  for (const [name, value] of Object.entries(joseOptions)) {
    if (value !== undefined && (typeof value !== "number" || !Number.isFinite(value) || value < 0)) {
      throw new TypeError(`jwtAuth: jwks.${name} must be a finite number of ms >= 0, got ${String(value)}`);
    }
  }
  if (!Number.isSafeInteger(maxBytes) || maxBytes < 1) throw new TypeError(`jwtAuth: jwks.maxBytes must be an integer number of bytes >= 1, got ${String(maxBytes)}`);
  if (typeof failureBackoff !== "number" || !Number.isFinite(failureBackoff) || failureBackoff < 0) {
    throw new TypeError(`jwtAuth: jwks.failureBackoff must be a finite number of ms >= 0, got ${String(failureBackoff)}`);
  }
  const remote = createRemoteJWKSet(url, { ...joseOptions, [customFetch]: boundedFetch(maxBytes, failureBackoff) });
  let seen: string | undefined;
  const fromJwks: JWTVerifyGetKey = async (header, token) => {
    try {
      const found = await remote(header, token);
      // A retired key must stop verifying remembered tokens too, once the set without it is fetched.
      const keys = JSON.stringify(remote.jwks());
      if (seen !== undefined && keys !== seen) keysChanged();
      seen = keys;
      return found;
    } catch (error) {
      // What the token itself caused stays the client's fault; anything else is the key source's.
      if (error instanceof errors.JWKSNoMatchingKey || error instanceof errors.JWKSMultipleMatchingKeys || error instanceof errors.JOSENotSupported) throw error;
      throw new KeySourceError(error);
    }
  };
  return { key: fromJwks, algorithms: ASYMMETRIC };
}

/**
 * The JWKS fetch jose makes, bounded: a response over `maxBytes` is cut off and is a failure, and
 * a failure (the network, the timeout, a status other than 200, a body that is not a key set) is
 * remembered, so a broken issuer is not fetched again on every request that needs the keys: until
 * the backoff ends such requests fail at once, without a fetch.
 */
function boundedFetch(maxBytes: number, backoffMs: number): FetchImplementation {
  let failures = 0;
  let retryAt = 0;
  let last = "";
  return async (url, init) => {
    const wait = retryAt - Date.now();
    if (wait > 0) {
      countLimitHit("jwks_backoff");
      throw new Error(`the last fetch failed (${last}); not fetched again for ${wait}ms`);
    }
    try {
      const response = await fetch(url, init);
      if (response.status !== 200) {
        await response.body?.cancel().catch(() => {});
        throw new Error(`the JWKS answered ${response.status}`);
      }
      const text = await readAtMost(response, maxBytes);
      const parsed = JSON.parse(text) as { keys?: unknown };
      if (parsed === null || typeof parsed !== "object" || !Array.isArray(parsed.keys)) throw new Error("the JWKS is not a key set ({ keys: [...] })");
      failures = 0;
      retryAt = 0;
      return new Response(text, { status: 200, headers: { "content-type": "application/json" } });
    } catch (error) {
      failures++;
      last = errorMessage(error);
      retryAt = Date.now() + Math.min(Math.max(MAX_FAILURE_BACKOFF_MS, backoffMs), backoffMs * 2 ** (failures - 1));
      throw error;
    }
  };
}

/** The body as text, refused (and the download stopped) past `maxBytes`. */
async function readAtMost(response: Response, maxBytes: number): Promise<string> {
  const tooBig = () => {
    countLimitHit("jwks_bytes");
    return new Error(`the JWKS is larger than jwks.maxBytes (${maxBytes} bytes)`);
  };
  if (Number(response.headers.get("content-length") ?? 0) > maxBytes) {
    await response.body?.cancel().catch(() => {});
    throw tooBig();
  }
  const reader = response.body?.getReader();
  if (reader === undefined) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel().catch(() => {});
      throw tooBig();
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString("utf8");
}

function checkAlgorithms(algorithms: unknown, allowed: readonly string[]): string[] {
  if (!Array.isArray(algorithms) || algorithms.length === 0 || algorithms.some((alg) => typeof alg !== "string" || !allowed.includes(alg))) {
    throw new TypeError(`jwtAuth: algorithms must be a non-empty subset of ${allowed.join(", ")} for this key, got ${JSON.stringify(algorithms)}`);
  }
  return algorithms as string[];
}

function checkStrings(name: string, value: unknown): void {
  const list = Array.isArray(value) ? value : [value];
  if (value !== undefined && (list.length === 0 || list.some((v) => typeof v !== "string" || v === ""))) {
    throw new TypeError(`jwtAuth: ${name} must be a non-empty string or array of them, got ${JSON.stringify(value)}`);
  }
}

/** The token's scopes: the `scope` claim (RFC 8693, space-separated) or `scp` (a string or an array). */
function scopesOf(claims: JWTPayload): string[] {
  const raw = claims.scope ?? claims.scp;
  if (typeof raw === "string") return raw.split(" ").filter(Boolean);
  return Array.isArray(raw) ? raw.filter((s): s is string => typeof s === "string") : [];
}

/** Why a token was refused, in words safe to send back (never the token itself). */
function reasonOf(error: unknown): string {
  if (error instanceof errors.JWTExpired) return "token expired";
  if (error instanceof errors.JWTClaimValidationFailed) {
    if (error.claim === "nbf") return "token not yet valid";
    return `token claim ${error.claim} is not accepted`;
  }
  if (error instanceof errors.JOSEAlgNotAllowed) return "token algorithm not accepted";
  if (error instanceof errors.JWSSignatureVerificationFailed) return "token signature is invalid";
  if (error instanceof errors.JWKSNoMatchingKey) return "no key matches the token";
  return "token is malformed";
}

/**
 * Bearer JWT authentication (RFC 6750) verified with `jose`: HS*, RS*, PS*, ES* and EdDSA tokens,
 * a shared secret, a public key or a JWKS URL (cached, refetched on an unknown `kid`), `exp`/`nbf`
 * with `clockTolerance`, `iss`, `aud` and required scopes. A missing or invalid token gets 401 with
 * a `WWW-Authenticate: Bearer` challenge, a missing scope 403 (`error="insufficient_scope"`); the
 * verified token is `ctx.auth`. The route's OpenAPI operation gets the security requirement and
 * its 401/403 responses by itself. The token is never logged or echoed.
 *
 * @example
 * const writer = jwtAuth({ secret: process.env.JWT_SECRET!, audience: "books", scopes: ["books:write"] });
 * app.group("/api").route(post("/books", { body: NewBook }, create).use(writer));
 */
export function jwtAuth(options: JwtAuthOptions): Middleware {
  const cacheOptions = checkCacheOptions(options.cache);
  let verified: VerifiedTokens | undefined;
  const { key, algorithms: allowed } = keyOf(options, () => verified?.clear());
  const algorithms = options.algorithms === undefined ? allowed : checkAlgorithms(options.algorithms, allowed);
  checkStrings("issuer", options.issuer);
  checkStrings("audience", options.audience);
  const tolerance = options.clockTolerance ?? 0;
  if (typeof tolerance !== "number" || !Number.isFinite(tolerance) || tolerance < 0) {
    throw new TypeError(`jwtAuth: clockTolerance must be a finite number of seconds >= 0, got ${String(options.clockTolerance)}`);
  }
  if (cacheOptions !== undefined) verified = new VerifiedTokens(cacheOptions, tolerance);
  const scopes = checkScopes("jwtAuth", options.scopes);
  const realm = checkRealm("jwtAuth", options.realm, "api");
  const schemeName = checkSchemeName("jwtAuth", options.schemeName, "bearer");
  const verify = { algorithms, issuer: options.issuer, audience: options.audience, clockTolerance: tolerance };
  const challenge = `Bearer realm=${quoted(realm)}`;
  const invalid = (reason: string) => `${challenge}, error="invalid_token", error_description=${quoted(reason)}`;
  const insufficient = `${challenge}, error="insufficient_scope", scope=${quoted(scopes.join(" "))}`;
  let keyFailures = 0;

  const middleware: Middleware = async function jwtAuthMiddleware(event) {
    const header = event.req.headers.get("authorization");
    if (header === null || !/^Bearer(?: |$)/i.test(header)) return unauthorizedResponse(challenge, "a bearer token is required");
    const token = BEARER.exec(header)?.[1];
    if (token === undefined) return unauthorizedResponse(invalid("token is malformed"), "token is malformed");
    let claims = verified?.get(token, Date.now());
    if (claims === undefined) try {
      // One call site per key kind keeps jose's overloads apart.
      claims = freezeClaims((typeof key === "function" ? await jwtVerify(token, key, verify) : await jwtVerify(token, key, verify)).payload);
      verified?.set(token, claims, Date.now());
    } catch (error) {
      if (error instanceof KeySourceError) {
        // Logged once per 100 failures: a JWKS that is down would otherwise log every request.
        if (keyFailures++ % 100 === 0) console.error(`keelson: jwtAuth: ${error.message}`);
        return errorResponse(createError("SERVICE_UNAVAILABLE", "token keys are unavailable: retry later"), { "retry-after": "5" });
      }
      const reason = reasonOf(error);
      return unauthorizedResponse(invalid(reason), reason);
    }
    const granted = scopesOf(claims);
    const missing = missingScopes(scopes, granted);
    if (missing.length > 0) return forbiddenResponse(missing, insufficient);
    setAuth(event, { type: "jwt", subject: typeof claims.sub === "string" ? claims.sub : "", scopes: granted, claims });
    return undefined;
  };
  const responses: Record<number, MiddlewareResponseDoc> = {
    401: { description: "Missing or invalid bearer token (see `WWW-Authenticate`)", headers: { "WWW-Authenticate": { description: "The bearer challenge (RFC 6750)" } } },
  };
  if (scopes.length > 0) responses[403] = { description: `The token lacks a required scope: ${scopes.join(", ")}` };
  return describeMiddleware(middleware, {
    security: { name: schemeName, scheme: { type: "http", scheme: "bearer", bearerFormat: "JWT" }, scopes },
    responses,
  });
}
