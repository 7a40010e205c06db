import { hash, randomBytes } from "node:crypto";
import { HTTPError, HTTPResponse, type H3Event, type Middleware } from "h3";
import { checkOptionalNumber, MS_ABOVE_0, show } from "../checks.js";
import { createError, errorMessage, KError } from "../errors.js";
import { readBodyEarly } from "../http/body.js";
import { errorResponse, toKError } from "../http/error-response.js";
import { frozenHeaderList } from "../http/results.js";
import { describeMiddleware, type MiddlewareContract } from "../http/middleware-contract.js";
import { getPrimaryChannel } from "../cluster/worker-link.js";
import { primaryIdempotencyStore } from "./ipc.js";
import { MemoryIdempotencyStore, storedResponse, type HeldKey, type IdempotencyState, type IdempotencyStore, type StoredResponse } from "./store.js";

/** Options of `idempotency()`. */
export interface IdempotencyOptions {
  /** Answer 400 to a request without `Idempotency-Key` (default false: such a request runs unguarded). */
  required?: boolean;
  /** How long a finished request's response is kept and replayed (default 24 h). */
  ttlMs?: number;
  /**
   * How long a claimed key stays locked when its request never finishes (its worker or pod died):
   * after it, a retry runs (default 60 s). Longer than the slowest handler, or a retry may run it twice.
   */
  leaseMs?: number;
  /** Where keys live (default: the supervisor's primary under `keelson start`, else this process's memory). */
  store?: IdempotencyStore;
  /**
   * Whose keys these are: requests with the same key but different scopes never meet. Default: the
   * authenticated principal (`ctx.auth`'s type and subject), else none (every client shares one key space).
   */
  scope?: (event: H3Event) => string | undefined;
  /** Keeps this middleware's keys apart from others' (default: the route's method and path). */
  name?: string;
  /** The methods it guards; others pass through (default `["POST", "PATCH"]`, as the IETF draft). */
  methods?: readonly string[];
  /** The longest key accepted, in characters (default 255); longer → 400. */
  maxKeyLength?: number;
  /** The largest response body kept (default 1 MiB); a larger one is kept without its body. */
  maxResponseBytes?: number;
  /** The largest request body read to fingerprint it (default 1 MiB, the App's default `bodyLimit`); larger → 413. */
  maxBodyBytes?: number;
  /** How long a request waits for the store (default 1000 ms); then 503: a request never runs unguarded. */
  storeTimeoutMs?: number;
  /** The time, for tests (default `Date.now`). */
  clock?: () => number;
}

/** The request header, as the IETF draft names it. */
export const IDEMPOTENCY_KEY_HEADER = "Idempotency-Key";
/** The header a replayed response carries (Stripe's name): `Idempotent-Replayed: true`. */
export const IDEMPOTENT_REPLAYED_HEADER = "Idempotent-Replayed";

const DAY_MS = 24 * 3600 * 1000;
const MIB = 1024 * 1024;
/** Printable ASCII but the quote and the backslash: anything a client sends as a UUID or a token, nothing a log or a store must escape. */
const KEY_CHARS = /^[\x21\x23-\x5b\x5d-\x7e]+$/;
/** Per-connection and per-message headers: the replay gets fresh ones, never the first response's. */
const NOT_STORED_HEADERS = new Set(["connection", "keep-alive", "transfer-encoding", "content-length", "date", "set-cookie"]);
/** Refusals of a request before its handler ran: nothing happened, so nothing is kept and a corrected retry may use the key. */
const NOTHING_RAN = new Set(["BAD_REQUEST", "INVALID_JSON", "PAYLOAD_TOO_LARGE", "UNSUPPORTED_MEDIA_TYPE", "VALIDATION_ERROR"]);

interface Checked {
  required: boolean;
  ttlMs: number;
  leaseMs: number;
  methods: ReadonlySet<string>;
  maxKeyLength: number;
  maxResponseBytes: number;
  maxBodyBytes: number;
  storeTimeoutMs: number;
}

const named = (name: string) => `idempotency: ${name}`;

function checkOptions(options: IdempotencyOptions): Checked {
  if (typeof options !== "object" || options === null) throw new TypeError(`idempotency: options must be an object, got ${show(options)}`);
  for (const name of ["store", "scope", "clock"] as const) {
    const value = options[name];
    if (value !== undefined && (name === "store" ? typeof (value as IdempotencyStore).begin !== "function" : typeof value !== "function")) {
      throw new TypeError(`${named(name)} must be ${name === "store" ? "an IdempotencyStore" : "a function"}, got ${show(value)}`);
    }
  }
  if (options.required !== undefined && typeof options.required !== "boolean") throw new TypeError(`${named("required")} must be a boolean, got ${show(options.required)}`);
  if (options.name !== undefined && (typeof options.name !== "string" || options.name === "")) throw new TypeError(`${named("name")} must be a non-empty string, got ${show(options.name)}`);
  const methods = options.methods ?? ["POST", "PATCH"];
  if (!Array.isArray(methods) || methods.length === 0 || methods.some((m) => typeof m !== "string" || !["POST", "PUT", "PATCH", "DELETE"].includes(m.toUpperCase()))) {
    throw new TypeError(`${named("methods")} must be a non-empty list of POST, PUT, PATCH, DELETE, got ${show(JSON.stringify(methods))}`);
  }
  return {
    required: options.required ?? false,
    ttlMs: checkOptionalNumber(options.ttlMs, named("ttlMs"), { integer: true, min: 1000, max: 366 * DAY_MS }) ?? DAY_MS,
    leaseMs: checkOptionalNumber(options.leaseMs, named("leaseMs"), { integer: true, min: 100, max: DAY_MS }) ?? 60_000,
    methods: new Set(methods.map((m) => m.toUpperCase())),
    maxKeyLength: checkOptionalNumber(options.maxKeyLength, named("maxKeyLength"), { integer: true, min: 1, max: 1024 }) ?? 255,
    maxResponseBytes: checkOptionalNumber(options.maxResponseBytes, named("maxResponseBytes"), { integer: true, min: 0 }) ?? MIB,
    maxBodyBytes: checkOptionalNumber(options.maxBodyBytes, named("maxBodyBytes"), { integer: true, min: 0 }) ?? MIB,
    storeTimeoutMs: checkOptionalNumber(options.storeTimeoutMs, named("storeTimeoutMs"), MS_ABOVE_0) ?? 1000,
  };
}

/** The key as sent: a Structured Field string (`"…"`, the draft's form) or the bare token most clients send. */
function parseKey(raw: string, max: number): string | undefined {
  const key = raw.length >= 2 && raw.startsWith('"') && raw.endsWith('"') ? raw.slice(1, -1) : raw;
  return key.length > 0 && key.length <= max && KEY_CHARS.test(key) ? key : undefined;
}

/**
 * The key header as sent, undefined when absent. On Node, from the parsed header object: Headers#get
 * scans every raw header on each call. A repeated header is joined with ", " either way (then refused).
 */
function headerOf(event: H3Event): string | undefined {
  const nodeReq = event.runtime?.node?.req;
  if (nodeReq !== undefined) {
    const value = nodeReq.headers["idempotency-key"];
    return Array.isArray(value) ? value.join(", ") : value;
  }
  return event.req.headers.get("idempotency-key") ?? undefined;
}

/** Names the outcome in the request's log line and metrics. */
function note(event: H3Event, outcome: string): void {
  const state = event.context.keelson;
  if (state !== undefined) state.idempotency = outcome;
}

/** A line through the App's logger, tagged with the request's id; `console.error` only outside an App. */
function logFailure(event: H3Event, line: string): void {
  const state = event.context.keelson;
  if (state === undefined) console.error(`keelson: ${line}`);
  else state.logger(state.appLogger).error(line);
}

/** The default scope: whoever the auth middleware established, else none. */
function principalOf(event: H3Event): string | undefined {
  const auth = event.context.auth;
  return auth === undefined ? undefined : `${auth.type}:${auth.subject}`;
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the idempotency store did not answer within ${ms}ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/**
 * h3 keeps the headers staged on `event.res` under this registered symbol, made on first read of
 * `event.res.headers`: reading the symbol looks without making a `Headers` that h3 would then
 * merge into every response.
 */
const STAGED_HEADERS = Symbol.for("h3.internal.event.res.headers");

/** The headers staged on the event before the handler ran, flat (name, value…); empty when none. */
function stagedBefore(event: H3Event): readonly string[] {
  const staged = (event.res as { [STAGED_HEADERS]?: Headers })[STAGED_HEADERS];
  if (staged === undefined) return NONE;
  const flat: string[] = [];
  staged.forEach((value, name) => flat.push(name, value));
  return flat;
}

const NONE: readonly string[] = [];

/** Sets `name` in a flat header list, replacing an earlier value. */
function setFlat(flat: string[], name: string, value: string): void {
  for (let i = 0; i < flat.length; i += 2) {
    if (flat[i] === name) {
      flat[i + 1] = value;
      return;
    }
  }
  flat.push(name, value);
}

/** The kept headers of the last frozen list met with nothing staged: the same list every time. */
let frozenSeen: readonly string[] | undefined;
let frozenKept: readonly string[] = NONE;

/**
 * The response's own headers worth replaying, plus those the handler staged on the event, flat.
 * A json()/created() response's frozen headers are read as a list, and with nothing staged the
 * kept list is made once and shared by every record (a record never changes its list).
 */
function keptHeaders(own: Headers, event: H3Event, before: readonly string[]): readonly string[] {
  const staged = (event.res as { [STAGED_HEADERS]?: Headers })[STAGED_HEADERS];
  const frozen = frozenHeaderList(own);
  if (staged === undefined && frozen !== undefined) {
    if (frozen !== frozenSeen) {
      frozenKept = ownKept([], frozen);
      frozenSeen = frozen;
    }
    return frozenKept;
  }
  const kept: string[] = [];
  staged?.forEach((value, name) => {
    if (NOT_STORED_HEADERS.has(name)) return;
    for (let i = 0; i < before.length; i += 2) if (before[i] === name && before[i + 1] === value) return;
    setFlat(kept, name, value);
  });
  if (frozen !== undefined) return ownKept(kept, frozen);
  own.forEach((value, name) => {
    if (!NOT_STORED_HEADERS.has(name)) setFlat(kept, name, value);
  });
  return kept;
}

/** `kept` with the headers of a flat list worth replaying set over it. */
function ownKept(kept: string[], list: readonly string[]): string[] {
  for (let i = 0; i < list.length; i += 2) if (!NOT_STORED_HEADERS.has(list[i]!)) setFlat(kept, list[i]!, list[i + 1]!);
  return kept;
}

type Body = string | Uint8Array | undefined | "over";

/**
 * The body of a response as a route returned it: its text or bytes; "over" past `max`; undefined
 * when it is a stream or a value keelson cannot read back (not kept). A promise only for a web
 * `Response`, whose body must be read: a route's own result is answered in this turn.
 */
function bodyOf(result: HTTPResponse | Response, max: number): Body | Promise<Body> {
  if (result instanceof Response) return result.body === null ? EMPTY : readStream(result, max);
  const body = (result as HTTPResponse).body as unknown;
  if (body === null || body === undefined) return EMPTY;
  if (typeof body === "string") return body.length > max || (body.length * 3 > max && Buffer.byteLength(body) > max) ? "over" : body;
  const bytes = body instanceof Uint8Array ? body : body instanceof ArrayBuffer ? new Uint8Array(body) : undefined;
  return bytes !== undefined && bytes.byteLength > max ? "over" : bytes;
}

async function readStream(result: Response, max: number): Promise<Body> {
  const reader = result.clone().body!.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return Buffer.concat(chunks, size);
    size += value.byteLength;
    if (size > max) {
      void reader.cancel();
      return "over";
    }
    chunks.push(value);
  }
}

const EMPTY = new Uint8Array(0);

/** What a replay sends: the stored status, headers and bytes, marked. */
function replay(status: number, flat: readonly string[], body: Buffer | null): HTTPResponse {
  const headers = new Headers();
  for (let i = 0; i < flat.length; i += 2) headers.set(flat[i]!, flat[i + 1]!);
  headers.set(IDEMPOTENT_REPLAYED_HEADER, "true");
  // Buffers of this process are never over a SharedArrayBuffer.
  return new HTTPResponse(body === null || body.byteLength === 0 ? null : (body as Buffer<ArrayBuffer>), { status, headers });
}

function replayStored(response: StoredResponse): HTTPResponse {
  return replay(response.status, response.headers.flat(), response.body === "" ? null : Buffer.from(response.body, "base64"));
}

function replayHeld(held: HeldKey): HTTPResponse {
  const body = held.body;
  return replay(held.status, held.headers, body === undefined ? null : typeof body === "string" ? Buffer.from(body) : Buffer.from(body.buffer, body.byteOffset, body.byteLength));
}

const SHA256 = "sha256";

/**
 * Request bodies up to this many bytes are fingerprinted for the in-process store by their own
 * text (method, path and query, the bytes as Latin-1): comparing it on a replay costs less than
 * hashing it on every request, and the record is not much longer than with a digest.
 */
const TEXT_FINGERPRINT_BYTES = 128;

/**
 * The fingerprint: SHA-256 over the method, the path with its query and the body's bytes; for the
 * in-process store and a small body, that text itself (it never leaves the process, and equal
 * texts are exactly equal requests; a text always holds a newline, a digest never).
 */
function fingerprintOf(event: H3Event, body: Buffer, local: boolean): string {
  const url = event.url;
  if (local && body.byteLength <= TEXT_FINGERPRINT_BYTES) return headOf(event.req.method, url.pathname, url.search) + body.toString("latin1");
  const head = Buffer.from(`${event.req.method}\n${url.pathname}${url.search}\n`, "latin1");
  return hash(SHA256, body.byteLength === 0 ? head : Buffer.concat([head, body]), "base64url");
}

let headMethod = "";
let headPath = "";
let headSearch = "";
let head = "\n\n";

/**
 * A text fingerprint's first part, `${method}\n${path}${query}\n`: the last one made when the
 * request matches it. Kept fingerprints of one route then share it, and each record holds only
 * its body's text of its own (less for the collector to copy and mark).
 */
function headOf(method: string, path: string, search: string): string {
  if (method !== headMethod || path !== headPath || search !== headSearch) {
    headMethod = method;
    headPath = path;
    headSearch = search;
    head = `${method}\n${path}${search}\n`;
  }
  return head;
}

/**
 * Counts the claims of every middleware of the process: a number from it names a claim in an
 * in-memory store on its own, even in a store that several middleware share.
 */
let claims = 0;

/**
 * One middleware's state: its options and its store, shared by its requests. A request's own
 * values travel as arguments, so a request makes no closures.
 */
class Guard {
  readonly o: Checked;
  readonly clock: () => number;
  readonly scopeOf: (event: H3Event) => string | undefined;
  readonly name: string | undefined;
  readonly options: IdempotencyOptions;
  // The primary frees a dead worker's claims by this prefix; the random part and the counter keep tokens unique.
  readonly tokenPrefix = `${process.pid}:${randomBytes(6).toString("base64url")}:`;
  store: IdempotencyStore | undefined;
  /** An in-memory store is answered in this turn: no promise, no timer, no base64 and a numeric token. */
  local: MemoryIdempotencyStore | undefined;
  failures = 0;
  // The last key prefix made, and what it was made of: see prefixOf.
  #method = "";
  #route = "";
  #scope = "";
  #prefix = "";

  constructor(o: Checked, options: IdempotencyOptions) {
    this.o = o;
    this.options = options;
    this.clock = options.clock ?? Date.now;
    this.scopeOf = options.scope ?? principalOf;
    this.name = options.name;
  }

  /**
   * A scoped key's prefix, `${name}\n${scope}\n`: the last one made when the request matches it.
   * Keys of one route and scope then share it, so a kept key holds only the client's key of its
   * own (less for the collector to copy and mark), and a request concatenates once.
   */
  prefixOf(event: H3Event, scope: string): string {
    const method = event.req.method;
    const route = this.name ?? event.context.matchedRoute?.route ?? event.url.pathname;
    if (method !== this.#method || route !== this.#route || scope !== this.#scope) {
      this.#method = method;
      this.#route = route;
      this.#scope = scope;
      this.#prefix = this.name === undefined ? `${method} ${route}\n${scope}\n` : `${route}\n${scope}\n`;
    }
    return this.#prefix;
  }

  open(): IdempotencyStore {
    const channel = getPrimaryChannel();
    const store = this.options.store ?? (channel ? primaryIdempotencyStore(channel) : new MemoryIdempotencyStore());
    this.local = store instanceof MemoryIdempotencyStore ? store : undefined;
    return (this.store = store);
  }

  storeFailed(event: H3Event, error: unknown): HTTPResponse {
    if (this.failures++ % 100 === 0) logFailure(event, `idempotency: ${errorMessage(error)} (answering 503)`);
    note(event, "store_error");
    return errorResponse(createError("SERVICE_UNAVAILABLE", "the idempotency store is unavailable: retry later"), { "retry-after": "1" }, event.context.keelson?.requestId);
  }

  release(event: H3Event, store: IdempotencyStore, key: string, token: string | number, outcome: string): void {
    note(event, outcome);
    if (this.local !== undefined) return this.local.free(key, token);
    // Not awaited: the answer need not wait; a release that fails leaves the key to its lease.
    store.release({ key, token: token as string }).catch((error: unknown) => {
      if (this.failures++ % 100 === 0) logFailure(event, `idempotency: releasing a key failed: ${errorMessage(error)}`);
    });
  }

  /** Keeps the response: in this turn for a route's own result and the in-memory store, else a promise. */
  keep(event: H3Event, store: IdempotencyStore, key: string, token: string | number, response: HTTPResponse | Response, before: readonly string[], outcome: string): Promise<void> | undefined {
    const read = bodyOf(response, this.o.maxResponseBytes);
    if (read instanceof Promise) return read.then((body) => this.kept(event, store, key, token, response, before, outcome, body));
    return this.kept(event, store, key, token, response, before, outcome, read);
  }

  kept(event: H3Event, store: IdempotencyStore, key: string, token: string | number, response: HTTPResponse | Response, before: readonly string[], outcome: string, read: Body): Promise<void> | undefined {
    if (read === undefined) {
      this.release(event, store, key, token, "released");
      return undefined;
    }
    const body = read === "over" ? undefined : read;
    const headers = keptHeaders(response.headers, event, before);
    const status = response.status ?? 200;
    note(event, read === "over" ? "oversize" : outcome);
    const local = this.local;
    if (local !== undefined) {
      // Text is immutable; bytes are copied: the route may reuse its buffer, or it may be a view of a larger one.
      local.keep(key, token, status, headers, body === undefined || typeof body === "string" ? body : Buffer.from(body), this.o.ttlMs, this.clock());
      return undefined;
    }
    const complete = { key, token: token as string, response: storedResponse(status, headers, body), ttlMs: this.o.ttlMs, now: this.clock() };
    return withTimeout(store.complete(complete), this.o.storeTimeoutMs).catch((error: unknown) => {
      // The write happened; the key stays claimed until its lease ends, so a retry meanwhile gets 409, not a second run.
      if (this.failures++ % 100 === 0) logFailure(event, `idempotency: keeping a response failed: ${errorMessage(error)}`);
    });
  }
}

/**
 * Makes a write happen once: the first request with an `Idempotency-Key` runs and its response
 * (status, headers, body) is kept for `ttlMs`; a repeat with the same key and the same request
 * gets that response again, marked `Idempotent-Replayed: true`, without running the handler. The
 * same key with another request: 422 `IDEMPOTENCY_KEY_REUSED`; while the first is still running:
 * 409 `IDEMPOTENCY_KEY_IN_USE` with `Retry-After`. A 5xx, or a request refused before its handler
 * ran (400, 413, 415, 422), keeps nothing: the key is free for a retry. Under the supervisor the
 * keys are the cluster's (see docs/idempotency.md).
 *
 * @example
 * app.route(post("/orders", { body: Order }, (ctx) => created(orders.create(ctx.body)))
 *   .use(idempotency({ required: true })));
 */
export function idempotency(options: IdempotencyOptions = {}): Middleware {
  const o = checkOptions(options);
  const guard = new Guard(o, options);

  const middleware = async function idempotencyMiddleware(event: H3Event, next: () => unknown): Promise<unknown> {
    if (!o.methods.has(event.req.method)) return next();
    const raw = headerOf(event);
    if (raw === undefined) {
      if (!o.required) return next();
      note(event, "invalid");
      return errorResponse(createError("IDEMPOTENCY_KEY_INVALID", "Idempotency-Key is required on this route"));
    }
    const clientKey = parseKey(raw, o.maxKeyLength);
    if (clientKey === undefined) {
      note(event, "invalid");
      return errorResponse(createError("IDEMPOTENCY_KEY_INVALID", `Idempotency-Key must be 1 to ${o.maxKeyLength} printable ASCII characters without quotes or backslashes`));
    }
    const bodyBytes = await readBodyEarly(event, o.maxBodyBytes);
    const store = guard.store ?? guard.open();
    const local = guard.local;
    const fingerprint = fingerprintOf(event, bodyBytes, local !== undefined);
    // The same text as `${name}\n${scope}\n${key}`, the name defaulting to the route's method and path.
    // The in-process store keys by this text itself: no digest to make, and no collision possible.
    const scoped = guard.prefixOf(event, guard.scopeOf(event) ?? "") + clientKey;
    const key = local !== undefined ? scoped : hash(SHA256, scoped, "base64url");
    const claim = ++claims;
    const token = local !== undefined ? claim : guard.tokenPrefix + String(claim);
    if (local !== undefined) {
      let held: HeldKey | undefined;
      try {
        held = local.claim(key, fingerprint, token, o.leaseMs, guard.clock());
      } catch (error) {
        return guard.storeFailed(event, error);
      }
      if (held !== undefined) return refuseHeld(event, fingerprint, held.fingerprint, held.status === 0) ?? replayHeld(held);
    } else {
      let state: IdempotencyState;
      try {
        state = await withTimeout(store.begin({ key, fingerprint, token: token as string, leaseMs: o.leaseMs, now: guard.clock() }), o.storeTimeoutMs);
      } catch (error) {
        return guard.storeFailed(event, error);
      }
      if (state.state === "running") return refuseHeld(event, fingerprint, state.fingerprint, true)!;
      if (state.state === "done") return refuseHeld(event, fingerprint, state.fingerprint, false) ?? replayStored(state.response);
    }
    const before = stagedBefore(event);
    let result: unknown;
    try {
      result = await next();
    } catch (error) {
      const kerror = error instanceof KError ? error : toKError(error instanceof HTTPError ? error : new HTTPError({ status: 500, unhandled: true, cause: error })).kerror;
      if (kerror.statusCode >= 500 || NOTHING_RAN.has(kerror.code)) guard.release(event, store, key, token, "released");
      else await guard.keep(event, store, key, token, errorResponse(kerror), before, "stored");
      throw error;
    }
    const status = (result as { status?: number } | null)?.status ?? 200;
    if (!(result instanceof HTTPResponse || result instanceof Response) || status >= 500) {
      // Not a response keelson can read back (a stream, a raw value): keeping nothing is the honest answer.
      guard.release(event, store, key, token, "released");
      return result;
    }
    const keeping = guard.keep(event, store, key, token, result, before, "stored");
    if (keeping !== undefined) await keeping;
    return result;
  };
  return describeMiddleware(middleware as Middleware, idempotencyContract(o));
}

/**
 * The refusal of a request whose key another request holds: 422 for another request, 409 while
 * that one runs; undefined when its kept response is to be replayed (noted as such).
 */
function refuseHeld(event: H3Event, fingerprint: string, heldFingerprint: string, running: boolean): HTTPResponse | undefined {
  if (heldFingerprint !== fingerprint) {
    note(event, "mismatch");
    return errorResponse(createError("IDEMPOTENCY_KEY_REUSED"));
  }
  if (running) {
    note(event, "conflict");
    return errorResponse(createError("IDEMPOTENCY_KEY_IN_USE"), { "retry-after": "1" });
  }
  note(event, "replayed");
  return undefined;
}

/** What an idempotent route adds to its document: the header parameter, the 400/409/422 and the replay header. */
function idempotencyContract(o: Checked): MiddlewareContract {
  return {
    methods: [...o.methods],
    requestHeaders: {
      [IDEMPOTENCY_KEY_HEADER]: {
        description: "A unique key (a UUID) per intended write: a retry with the same key and request gets the first response again instead of running twice",
        required: o.required,
        schema: { type: "string", minLength: 1, maxLength: o.maxKeyLength },
      },
    },
    responses: {
      400: { description: "Idempotency-Key missing (when required) or malformed", code: "IDEMPOTENCY_KEY_INVALID" },
      409: {
        description: "A request with this Idempotency-Key is still being processed: retry after Retry-After",
        code: "IDEMPOTENCY_KEY_IN_USE",
        headers: { "Retry-After": { description: "Seconds to wait before retrying", schema: { type: "integer", minimum: 1 } } },
      },
      422: { description: "This Idempotency-Key was used with a different request", code: "IDEMPOTENCY_KEY_REUSED" },
      503: { description: "The idempotency store is unavailable: retry after Retry-After", headers: { "Retry-After": { description: "Seconds to wait before retrying", schema: { type: "integer", minimum: 1 } } } },
    },
    headers: { [IDEMPOTENT_REPLAYED_HEADER]: { description: "`true` on a response replayed for a repeated Idempotency-Key" } },
    checkRoute: (method) => {
      if (method === "GET" || method === "HEAD") {
        return "a GET route (event streams and WebSockets included) cannot be idempotent: its response is not kept and replayed; put idempotency() on the writes";
      }
      return o.methods.has(method) ? undefined : `idempotency() guards ${[...o.methods].join(", ")}; pass methods to guard ${method}`;
    },
  };
}
