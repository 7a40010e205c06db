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
  /** The body, base64: it crosses IPC, SQL text columns and Redis strings unchanged. */
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

/** The bytes a record holds in memory, roughly: what `maxBytes` counts. */
function sizeOf(key: string, response: StoredResponse | undefined): number {
  let size = key.length + 128;
  if (response !== undefined) {
    size += response.body.length;
    for (const [name, value] of response.headers) size += name.length + value.length;
  }
  return size;
}

interface MemoryRecord {
  token: string;
  fingerprint: string;
  expiresAt: number;
  response: StoredResponse | undefined;
  size: number;
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
 * minute; a store over `maxBytes` refuses new keys (the middleware answers 503) rather than
 * dropping kept responses, which would let a retry run twice.
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

  constructor(options: MemoryIdempotencyStoreOptions = {}) {
    const maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
    if (!Number.isSafeInteger(maxBytes) || maxBytes <= 0) throw new TypeError(`MemoryIdempotencyStore: maxBytes must be a positive integer, got ${String(maxBytes)}`);
    this.#maxBytes = maxBytes;
  }

  /** Bytes held now, as `maxBytes` counts them. */
  get bytes(): number {
    return this.#bytes;
  }

  beginNow(begin: IdempotencyBegin): IdempotencyState {
    this.#sweep(begin.now);
    const record = this.#records.get(begin.key);
    if (record !== undefined && record.expiresAt > begin.now) {
      return record.response === undefined
        ? { state: "running", fingerprint: record.fingerprint }
        : { state: "done", fingerprint: record.fingerprint, response: record.response };
    }
    if (record !== undefined) this.#delete(begin.key, record);
    const size = sizeOf(begin.key, undefined);
    if (this.#bytes + size > this.#maxBytes) throw new IdempotencyStoreFullError("the idempotency store is full");
    this.#records.set(begin.key, { token: begin.token, fingerprint: begin.fingerprint, expiresAt: begin.now + begin.leaseMs, response: undefined, size });
    this.#bytes += size;
    return { state: "acquired" };
  }

  completeNow(complete: IdempotencyComplete): void {
    const record = this.#records.get(complete.key);
    if (record === undefined || record.token !== complete.token) return;
    const size = sizeOf(complete.key, complete.response);
    // Over the bound the record stays, without its body: dropping it would let a retry run again.
    const response = this.#bytes - record.size + size > this.#maxBytes ? { ...complete.response, body: "", omitted: true } : complete.response;
    const kept = sizeOf(complete.key, response);
    this.#bytes += kept - record.size;
    record.size = kept;
    record.response = response;
    record.expiresAt = complete.now + complete.ttlMs;
  }

  releaseNow(release: IdempotencyRelease): void {
    const record = this.#records.get(release.key);
    if (record !== undefined && record.token === release.token && record.response === undefined) this.#delete(release.key, record);
  }

  /** Releases every unfinished claim whose token starts with `prefix`: the primary's way to free a dead worker's keys at once. */
  releaseHeldBy(prefix: string): number {
    let released = 0;
    for (const [key, record] of this.#records) {
      if (record.response === undefined && record.token.startsWith(prefix)) {
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

  #sweep(now: number): void {
    if (now < this.#sweepAt) return;
    this.#sweepAt = now + SWEEP_EVERY_MS;
    for (const [key, record] of this.#records) if (record.expiresAt <= now) this.#delete(key, record);
  }
}
