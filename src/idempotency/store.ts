/**
 * What an idempotency store keeps, and the in-memory store: the one a single process uses and
 * the authoritative one the supervisor's primary keeps for all its workers. Every store follows
 * the same three steps, so they all agree on what a client sees.
 */

/** A response as stored: what a replay sends back. */
export interface StoredResponse {
  status: number;
  /** The response's own headers (name, value), in order. */
  headers: [string, string][];
  /** The body, base64: it crosses IPC, SQL text columns and Redis strings unchanged (the in-memory store keeps bytes). */
  body: string;
  /** True when the body was over `maxResponseBytes` and not kept: a replay has status and headers only. */
  omitted?: boolean;
}

/** The first step of a request with a key: claim the key for `leaseMs`, or learn what holds it. */
export interface IdempotencyBegin {
  /** The scoped key (a digest of the middleware's name, the principal and the client's key). */
  key: string;
  /** A digest of what the request asked for (method, path and query, body). */
  fingerprint: string;
  /** Names this claim: only its holder may complete or release it. */
  token: string;
  /** How long the claim holds when its holder neither completes nor releases it (a dead worker). */
  leaseMs: number;
  /** Milliseconds since the epoch, from the middleware's clock. */
  now: number;
}

/** A store's answer to `begin`. */
export type IdempotencyState =
  /** The key is this request's until it completes, releases, or the lease ends. */
  | { state: "acquired" }
  /** Another request holds the key and has not finished. */
  | { state: "running"; fingerprint: string }
  /** A request with this key finished: its response. */
  | { state: "done"; fingerprint: string; response: StoredResponse };

/** The last step of a request that ran: keep its response for `ttlMs`. */
export interface IdempotencyComplete {
  key: string;
  token: string;
  response: StoredResponse;
  ttlMs: number;
  now: number;
}

/** The last step of a request whose outcome is not kept (5xx, validation failure): the key is free again. */
export interface IdempotencyRelease {
  key: string;
  token: string;
}

/**
 * Where `idempotency()` keeps its keys. `begin` claims a key atomically (one claim wins however
 * many requests race); `complete` and `release` act only when `token` still holds the key, so a
 * request that outlived its lease never overwrites the request that took the key over.
 * keelson ships the in-memory store, the supervisor's (automatic under `keelson start`),
 * `createSQLIdempotencyStore` (keelson/sql) and `createRedisIdempotencyStore` (keelson/redis).
 */
export interface IdempotencyStore {
  begin(begin: IdempotencyBegin): Promise<IdempotencyState>;
  complete(complete: IdempotencyComplete): Promise<void>;
  release(release: IdempotencyRelease): Promise<void>;
}

/** A store that refuses a new key because it is full: the middleware answers 503, never runs unguarded. */
export class IdempotencyStoreFullError extends Error {}

/**
 * The response as the stores outside this process keep it: header pairs and the body in base64.
 * `headers` is flat: name, value, name, value…; `body` is the body's text (UTF-8) or bytes, or
 * undefined when it was omitted.
 * @internal
 */
export function storedResponse(status: number, headers: readonly string[], body: string | Uint8Array | undefined): StoredResponse {
  const pairs: [string, string][] = [];
  for (let i = 0; i < headers.length; i += 2) pairs.push([headers[i]!, headers[i + 1]!]);
  if (body === undefined) return { status, headers: pairs, body: "", omitted: true };
  const bytes = typeof body === "string" ? Buffer.from(body) : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  return { status, headers: pairs, body: bytes.toString("base64") };
}

/** A SHA-256 digest in base64url: the fingerprint the record's fixed share of `maxBytes` covers. */
const DIGEST_LENGTH = 43;

/**
 * The bytes a record holds in memory, roughly: what `maxBytes` counts. 128 for the record with a
 * digest-long fingerprint (a longer one adds its excess), the key, and once kept the response as
 * it was counted packed: 5 bytes, each header's length and 4, the body's bytes (a text's UTF-8).
 */
function sizeOf(key: string, fingerprint: string, headers: readonly string[] | undefined, body: string | Uint8Array | undefined): number {
  let size = key.length + 128 + Math.max(0, fingerprint.length - DIGEST_LENGTH);
  if (headers === undefined) return size;
  size += 5;
  for (let i = 0; i < headers.length; i++) size += 4 + headers[i]!.length;
  return body === undefined ? size : size + (typeof body === "string" ? Buffer.byteLength(body) : body.byteLength);
}

const NO_HEADERS: readonly string[] = [];

/**
 * One key's record, and the response it keeps. `token` is a string from `begin`, or a number from
 * this process's own middleware (`claim`): a claim's counter, which needs no string of its own.
 * The response is kept as the route gave it: its text or bytes, and its headers flat (a list the
 * middleware may share between records, never changed), so keeping it copies nothing.
 */
class MemoryRecord implements HeldKey {
  token: string | number;
  readonly fingerprint: string;
  /**
   * When the lease or the time to live ends, in milliseconds after the store's epoch: a small
   * integer, held in the record itself, where an epoch time would be a number object of its own.
   */
  endsAt: number;
  status = 0;
  headers = NO_HEADERS;
  body: string | Uint8Array | undefined = undefined;
  size: number;

  constructor(token: string | number, fingerprint: string, endsAt: number, size: number) {
    this.token = token;
    this.fingerprint = fingerprint;
    this.endsAt = endsAt;
    this.size = size;
  }
}

/**
 * What holds a key, as `claim` answers it: its fingerprint and, once complete, its response
 * (`status` is 0 while the request that holds it runs; `body` undefined when it was omitted).
 */
export interface HeldKey {
  readonly fingerprint: string;
  readonly status: number;
  readonly headers: readonly string[];
  readonly body: string | Uint8Array | undefined;
}

/** Options of `new MemoryIdempotencyStore()`. */
export interface MemoryIdempotencyStoreOptions {
  /** The most bytes of keys and stored responses held (default 64 MiB); past it new keys are refused. */
  maxBytes?: number;
}

const DEFAULT_MAX_BYTES = 64 * 1024 * 1024;
const SWEEP_EVERY_MS = 60_000;

/**
 * The in-memory store. Records whose lease or time to live has ended are swept about once a
 * minute, and at once before a new key would be refused; a store over `maxBytes` refuses new keys
 * (the middleware answers 503) rather than dropping kept responses, which would let a retry run twice.
 *
 * @example
 * // a test that must not share keys with others
 * app.route(post("/orders", create).use(idempotency({ store: new MemoryIdempotencyStore() })));
 */
export class MemoryIdempotencyStore implements IdempotencyStore {
  readonly #records = new Map<string, MemoryRecord>();
  readonly #maxBytes: number;
  #bytes = 0;
  #sweepAt = 0;
  /** The clock's first reading: records' times are counted from it (see MemoryRecord's endsAt). */
  #epoch: number | undefined;

  constructor(options: MemoryIdempotencyStoreOptions = {}) {
    const maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
    if (!Number.isSafeInteger(maxBytes) || maxBytes <= 0) throw new TypeError(`MemoryIdempotencyStore: maxBytes must be a positive integer, got ${String(maxBytes)}`);
    this.#maxBytes = maxBytes;
  }

  /** Bytes held now, as `maxBytes` counts them. */
  get bytes(): number {
    return this.#bytes;
  }

  /** Records held now: claims and kept responses. */
  get size(): number {
    return this.#records.size;
  }

  /**
   * `begin` answered in this turn for this process's middleware: undefined when the key is now
   * `token`'s, else what holds it (its `response` undefined while it runs).
   * @internal
   */
  claim(key: string, fingerprint: string, token: string | number, leaseMs: number, now: number): HeldKey | undefined {
    this.#epoch ??= now;
    this.#sweep(now);
    const record = this.#records.get(key);
    if (record !== undefined) {
      if (record.endsAt > now - this.#epoch) return record;
      this.#delete(key, record);
    }
    const size = sizeOf(key, fingerprint, undefined, undefined);
    if (this.#bytes + size > this.#maxBytes) {
      // Expired records may still hold room a sweep has not given back yet.
      this.#sweep(now, true);
      if (this.#bytes + size > this.#maxBytes) throw new IdempotencyStoreFullError("the idempotency store is full");
    }
    this.#records.set(key, new MemoryRecord(token, fingerprint, now - this.#epoch + leaseMs, size));
    this.#bytes += size;
    return undefined;
  }

  /**
   * `complete` for this process's middleware: `headers` flat (name, value…, never changed after),
   * `body` the body's text or bytes, undefined when it was omitted. Kept as given, not copied.
   * @internal
   */
  keep(key: string, token: string | number, status: number, headers: readonly string[], body: string | Uint8Array | undefined, ttlMs: number, now: number): void {
    const record = this.#records.get(key);
    if (record === undefined || record.token !== token || record.status !== 0) return;
    let kept = sizeOf(key, record.fingerprint, headers, body);
    // Over the bound the record stays, without its body: dropping it would let a retry run again.
    if (body !== undefined && this.#bytes - record.size + kept > this.#maxBytes) {
      body = undefined;
      kept = sizeOf(key, record.fingerprint, headers, undefined);
    }
    this.#bytes += kept - record.size;
    record.size = kept;
    record.status = status;
    record.headers = headers;
    record.body = body;
    record.endsAt = now - this.#epoch! + ttlMs;
  }

  /**
   * `release` for this process's middleware.
   * @internal
   */
  free(key: string, token: string | number): void {
    const record = this.#records.get(key);
    if (record !== undefined && record.token === token && record.status === 0) this.#delete(key, record);
  }

  beginNow(begin: IdempotencyBegin): IdempotencyState {
    const held = this.claim(begin.key, begin.fingerprint, begin.token, begin.leaseMs, begin.now);
    if (held === undefined) return { state: "acquired" };
    return held.status === 0
      ? { state: "running", fingerprint: held.fingerprint }
      : { state: "done", fingerprint: held.fingerprint, response: storedResponse(held.status, held.headers, held.body) };
  }

  completeNow(complete: IdempotencyComplete): void {
    const { status, headers, body, omitted } = complete.response;
    this.keep(complete.key, complete.token, status, headers.flat(), omitted === true ? undefined : Buffer.from(body, "base64"), complete.ttlMs, complete.now);
  }

  releaseNow(release: IdempotencyRelease): void {
    this.free(release.key, release.token);
  }

  /** Releases every unfinished claim whose token starts with `prefix`: the primary's way to free a dead worker's keys at once. */
  releaseHeldBy(prefix: string): number {
    let released = 0;
    for (const [key, record] of this.#records) {
      if (record.status === 0 && typeof record.token === "string" && record.token.startsWith(prefix)) {
        this.#delete(key, record);
        released++;
      }
    }
    return released;
  }

  begin(begin: IdempotencyBegin): Promise<IdempotencyState> {
    try {
      return Promise.resolve(this.beginNow(begin));
    } catch (error) {
      return Promise.reject(error as Error);
    }
  }

  complete(complete: IdempotencyComplete): Promise<void> {
    this.completeNow(complete);
    return Promise.resolve();
  }

  release(release: IdempotencyRelease): Promise<void> {
    this.releaseNow(release);
    return Promise.resolve();
  }

  #delete(key: string, record: MemoryRecord): void {
    this.#records.delete(key);
    this.#bytes -= record.size;
  }

  #sweep(now: number, force = false): void {
    if (now < this.#sweepAt && !force) return;
    this.#sweepAt = now + SWEEP_EVERY_MS;
    const at = now - (this.#epoch ?? now);
    for (const [key, record] of this.#records) if (record.endsAt <= at) this.#delete(key, record);
  }
}
