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
 * A kept response as one byte string: status (2 bytes), flags (1: the body was omitted), the
 * header count (2), each header's name and value as a length (4) and its Latin-1 bytes, then the
 * body. Latin-1 is exact: a header a `Headers` holds or replays is a byte string (no code point
 * past 255), and it is written without measuring or transcoding it.
 * One buffer per record, its bytes off the JavaScript heap: the collector moves and marks one small
 * object per kept response instead of a string per header and a base64 body.
 */
const HEAD_BYTES = 5;
const OMITTED = 1;

/**
 * Packs a response for the in-memory store. `headers` is flat: name, value, name, value…, byte
 * strings; `body` is the body's text (written as UTF-8) or bytes, or undefined when it was omitted.
 * @internal
 */
export function packResponse(status: number, headers: readonly string[], body: string | Uint8Array | undefined): Buffer {
  let size = HEAD_BYTES;
  for (const text of headers) size += 4 + text.length;
  const bodyLength = body === undefined ? 0 : typeof body === "string" ? Buffer.byteLength(body) : body.byteLength;
  const packed = Buffer.allocUnsafe(size + bodyLength);
  packed.writeUInt16BE(status, 0);
  packed[2] = body === undefined ? OMITTED : 0;
  packed.writeUInt16BE(headers.length >> 1, 3);
  let at = HEAD_BYTES;
  for (const text of headers) {
    packed.writeUInt32BE(text.length, at);
    packed.write(text, at + 4, "latin1");
    at += 4 + text.length;
  }
  if (typeof body === "string") packed.write(body, at);
  else if (body !== undefined) packed.set(body, at);
  return packed;
}

/** A packed response read back: its headers flat (name, value…) and where its body starts. */
interface Unpacked {
  status: number;
  omitted: boolean;
  headers: string[];
  bodyAt: number;
}

/** @internal */
export function unpackResponse(packed: Uint8Array): Unpacked {
  const bytes = Buffer.from(packed.buffer, packed.byteOffset, packed.byteLength);
  const count = bytes.readUInt16BE(3) * 2;
  const headers: string[] = [];
  let at = HEAD_BYTES;
  for (let i = 0; i < count; i++) {
    const length = bytes.readUInt32BE(at);
    headers.push(bytes.toString("latin1", at + 4, at + 4 + length));
    at += 4 + length;
  }
  return { status: bytes.readUInt16BE(0), omitted: (bytes[2]! & OMITTED) !== 0, headers, bodyAt: at };
}

/** The packed form of a response as the other stores and IPC carry it (base64 body). */
function packStored(response: StoredResponse): Buffer {
  return packResponse(response.status, response.headers.flat(), response.omitted === true ? undefined : Buffer.from(response.body, "base64"));
}

/**
 * The response as the stores outside this process keep it: header pairs and the body in base64.
 * @internal
 */
export function storedResponse(status: number, headers: readonly string[], body: string | Uint8Array | undefined): StoredResponse {
  const pairs: [string, string][] = [];
  for (let i = 0; i < headers.length; i += 2) pairs.push([headers[i]!, headers[i + 1]!]);
  if (body === undefined) return { status, headers: pairs, body: "", omitted: true };
  const bytes = typeof body === "string" ? Buffer.from(body) : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  return { status, headers: pairs, body: bytes.toString("base64") };
}

/** The stored form of a packed response, for `begin`'s answer outside this process's middleware. */
function storedOf(packed: Uint8Array): StoredResponse {
  const { status, omitted, headers, bodyAt } = unpackResponse(packed);
  return storedResponse(status, headers, omitted ? undefined : packed.subarray(bodyAt));
}

/** The same response without its body, marked omitted: what a store over its bound keeps. */
function withoutBody(packed: Uint8Array): Buffer {
  const { status, headers } = unpackResponse(packed);
  return packResponse(status, headers, undefined);
}

/** The bytes a record holds in memory, roughly: what `maxBytes` counts. */
const sizeOf = (key: string, response: Uint8Array | undefined) => key.length + 128 + (response === undefined ? 0 : response.byteLength);

/**
 * One key's record. `token` is a string from `begin`, or a number from this process's own
 * middleware (`claim`): a claim's counter, which needs no string of its own.
 */
interface MemoryRecord {
  token: string | number;
  fingerprint: string;
  expiresAt: number;
  response: Buffer | undefined;
  size: number;
}

/** What holds a key, as `claim` answers it: its fingerprint and, once complete, its packed response. */
export interface HeldKey {
  readonly fingerprint: string;
  readonly response: Buffer | undefined;
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
    this.#sweep(now);
    const record = this.#records.get(key);
    if (record !== undefined) {
      if (record.expiresAt > now) return record;
      this.#delete(key, record);
    }
    const size = sizeOf(key, undefined);
    if (this.#bytes + size > this.#maxBytes) {
      // Expired records may still hold room a sweep has not given back yet.
      this.#sweep(now, true);
      if (this.#bytes + size > this.#maxBytes) throw new IdempotencyStoreFullError("the idempotency store is full");
    }
    this.#records.set(key, { token, fingerprint, expiresAt: now + leaseMs, response: undefined, size });
    this.#bytes += size;
    return undefined;
  }

  /**
   * `complete` with a packed response (`packResponse`), for this process's middleware.
   * @internal
   */
  keep(key: string, token: string | number, packed: Buffer, ttlMs: number, now: number): void {
    const record = this.#records.get(key);
    if (record === undefined || record.token !== token || record.response !== undefined) return;
    // Over the bound the record stays, without its body: dropping it would let a retry run again.
    const response = this.#bytes - record.size + sizeOf(key, packed) > this.#maxBytes ? withoutBody(packed) : packed;
    const kept = sizeOf(key, response);
    this.#bytes += kept - record.size;
    record.size = kept;
    record.response = response;
    record.expiresAt = now + ttlMs;
  }

  /**
   * `release` for this process's middleware.
   * @internal
   */
  free(key: string, token: string | number): void {
    const record = this.#records.get(key);
    if (record !== undefined && record.token === token && record.response === undefined) this.#delete(key, record);
  }

  beginNow(begin: IdempotencyBegin): IdempotencyState {
    const held = this.claim(begin.key, begin.fingerprint, begin.token, begin.leaseMs, begin.now);
    if (held === undefined) return { state: "acquired" };
    return held.response === undefined
      ? { state: "running", fingerprint: held.fingerprint }
      : { state: "done", fingerprint: held.fingerprint, response: storedOf(held.response) };
  }

  completeNow(complete: IdempotencyComplete): void {
    this.keep(complete.key, complete.token, packStored(complete.response), complete.ttlMs, complete.now);
  }

  releaseNow(release: IdempotencyRelease): void {
    this.free(release.key, release.token);
  }

  /** Releases every unfinished claim whose token starts with `prefix`: the primary's way to free a dead worker's keys at once. */
  releaseHeldBy(prefix: string): number {
    let released = 0;
    for (const [key, record] of this.#records) {
      if (record.response === undefined && typeof record.token === "string" && record.token.startsWith(prefix)) {
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
    for (const [key, record] of this.#records) if (record.expiresAt <= now) this.#delete(key, record);
  }
}
