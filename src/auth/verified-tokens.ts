import type { JWTPayload } from "jose";

/** How {@link jwtAuth}'s verified tokens are remembered; `false` verifies every request anew. */
export interface JwtCacheOptions {
  /** How many tokens are remembered; the least recently used is forgotten first (default 1000). */
  max?: number;
  /** The longest a token is remembered, ms (default 60 000); never past its `exp`. */
  maxAge?: number;
}

/** Checks `jwtAuth`'s `cache` option at construction; undefined when caching is off. */
export function checkCacheOptions(cache: unknown): Required<JwtCacheOptions> | undefined {
  if (cache === false) return undefined;
  if (cache !== undefined && (typeof cache !== "object" || cache === null || Array.isArray(cache))) {
    throw new TypeError(`jwtAuth: cache must be false or { max?, maxAge? }, got ${JSON.stringify(cache)}`);
  }
  const { max = 1000, maxAge = 60_000 } = (cache ?? {}) as JwtCacheOptions;
  if (typeof max !== "number" || !Number.isInteger(max) || max < 1) throw new TypeError(`jwtAuth: cache.max must be an integer >= 1, got ${String(max)}`);
  if (typeof maxAge !== "number" || !Number.isFinite(maxAge) || maxAge <= 0) {
    throw new TypeError(`jwtAuth: cache.maxAge must be a finite number of ms > 0, got ${String(maxAge)}`);
  }
  return { max, maxAge };
}

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value)) deepFreeze(inner);
  }
  return value;
}

/** The token's claims, frozen: the same object may serve every request that carries the token. */
export const freezeClaims = deepFreeze<JWTPayload>;

/**
 * Tokens that verified, by their exact text, with their claims, until they must be verified again:
 * a signature check costs far more than the rest of a request, and clients send the same token
 * request after request. Only a verified token gets in, so a forged one can only be verified (and
 * refused) again; an entry ends at the token's `exp` (with the clock tolerance, as the verification
 * would) or after `maxAge`, whichever is first, and the least recently used goes first when full.
 */
export class VerifiedTokens {
  readonly #max: number;
  readonly #maxAge: number;
  readonly #toleranceMs: number;
  readonly #entries = new Map<string, { claims: JWTPayload; until: number }>();

  constructor(options: Required<JwtCacheOptions>, clockToleranceSeconds: number) {
    this.#max = options.max;
    this.#maxAge = options.maxAge;
    this.#toleranceMs = clockToleranceSeconds * 1000;
  }

  /** The claims of a token verified before and still remembered at `now` (ms). */
  get(token: string, now: number): JWTPayload | undefined {
    const entry = this.#entries.get(token);
    if (entry === undefined) return undefined;
    // Re-inserted to keep the Map in least-recently-used order.
    this.#entries.delete(token);
    if (now >= entry.until) return undefined;
    this.#entries.set(token, entry);
    return entry.claims;
  }

  /** Remembers a token that has just verified at `now` (ms). */
  set(token: string, claims: JWTPayload, now: number): void {
    const expires = typeof claims.exp === "number" ? claims.exp * 1000 + this.#toleranceMs : Number.POSITIVE_INFINITY;
    const until = Math.min(now + this.#maxAge, expires);
    if (until <= now) return;
    if (this.#entries.size >= this.#max) this.#entries.delete(this.#entries.keys().next().value!);
    this.#entries.set(token, { claims, until });
  }

  /** Forgets every token: the keys they were verified with may have changed. */
  clear(): void {
    this.#entries.clear();
  }
}
