import { createHash, randomBytes } from "node:crypto";
import { HTTPError, HTTPResponse, type H3Event, type Middleware } from "h3";
import { checkOptionalNumber, MS_ABOVE_0, show } from "../checks.js";
import { createError, errorMessage, KError } from "../errors.js";
import { readBodyEarly } from "../http/body.js";
import { errorResponse, toKError } from "../http/error-response.js";
import { describeMiddleware, type MiddlewareContract } from "../http/middleware-contract.js";
import { getPrimaryChannel } from "../cluster/worker-link.js";
import { primaryIdempotencyStore } from "./ipc.js";
import { MemoryIdempotencyStore, type IdempotencyState, type IdempotencyStore, type StoredResponse } from "./store.js";

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

const digest = (text: string) => createHash("sha256").update(text).digest("base64url");

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

/** The response's own headers worth replaying, plus those the handler staged on the event. */
function keptHeaders(own: Headers, staged: Headers, before: ReadonlyMap<string, string>): [string, string][] {
  const kept = new Map<string, string>();
  staged.forEach((value, name) => {
    if (before.get(name) !== value && !NOT_STORED_HEADERS.has(name)) kept.set(name, value);
  });
  own.forEach((value, name) => {
    if (!NOT_STORED_HEADERS.has(name)) kept.set(name, value);
  });
  return [...kept];
}

/** The bytes of a body as a route returned it: "over" past `max`, undefined when it is a stream (not kept). */
async function bodyBytes(result: HTTPResponse | Response, max: number): Promise<Buffer | undefined | "over"> {
  const bytes = await readBody(result, max);
  return bytes !== undefined && bytes !== "over" && bytes.byteLength > max ? "over" : bytes;
}

async function readBody(result: HTTPResponse | Response, max: number): Promise<Buffer | undefined | "over"> {
  if (result instanceof Response) {
    if (result.body === null) return Buffer.alloc(0);
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
  const body = (result as HTTPResponse).body as unknown;
  if (body === null || body === undefined) return Buffer.alloc(0);
  if (typeof body === "string") return Buffer.from(body);
  if (body instanceof Uint8Array) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  if (body instanceof ArrayBuffer) return Buffer.from(body);
  return undefined;
}

/** What a replay sends: the stored status, headers and bytes, marked. */
function replay(response: StoredResponse): HTTPResponse {
  const headers = new Headers(response.headers);
  headers.set(IDEMPOTENT_REPLAYED_HEADER, "true");
  const body = response.body === "" ? null : Buffer.from(response.body, "base64");
  return new HTTPResponse(body, { status: response.status, headers });
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
  const clock = options.clock ?? Date.now;
  const scopeOf = options.scope ?? principalOf;
  // The primary frees a dead worker's claims by this prefix; the random part and the counter keep tokens unique.
  const tokenPrefix = `${process.pid}:${randomBytes(6).toString("base64url")}:`;
  let claims = 0;
  let store: IdempotencyStore | undefined;
  // An in-memory store is answered in this turn: no promise, no timer.
  let local: MemoryIdempotencyStore | undefined;
  let failures = 0;
  const open = (): IdempotencyStore => {
    const channel = getPrimaryChannel();
    return options.store ?? (channel ? primaryIdempotencyStore(channel) : new MemoryIdempotencyStore());
  };
  const storeFailed = (event: H3Event, error: unknown) => {
    if (failures++ % 100 === 0) console.error(`keelson: idempotency: ${errorMessage(error)} (answering 503)`);
    note(event, "store_error");
    return errorResponse(createError("SERVICE_UNAVAILABLE", "the idempotency store is unavailable: retry later"), { "retry-after": "1" }, event.context.keelson?.requestId);
  };

  const middleware = async function idempotencyMiddleware(event: H3Event, next: () => unknown): Promise<unknown> {
    if (!o.methods.has(event.req.method)) return next();
    const raw = headerOf(event);
    if (raw === undefined) {
      if (!o.required) return next();
      note(event, "invalid");
      return errorResponse(createError("IDEMPOTENCY_KEY_INVALID", "Idempotency-Key is required on this route"));
    }
    const key = parseKey(raw, o.maxKeyLength);
    if (key === undefined) {
      note(event, "invalid");
      return errorResponse(createError("IDEMPOTENCY_KEY_INVALID", `Idempotency-Key must be 1 to ${o.maxKeyLength} printable ASCII characters without quotes or backslashes`));
    }
    const body = await readBodyEarly(event, o.maxBodyBytes);
    const url = event.url;
    const fingerprint = createHash("sha256").update(`${event.req.method}\n${url.pathname}${url.search}\n`).update(body).digest("base64url");
    const name = options.name ?? `${event.req.method} ${event.context.matchedRoute?.route ?? url.pathname}`;
    const scoped = digest(`${name}\n${scopeOf(event) ?? ""}\n${key}`);
    const token = tokenPrefix + String(++claims);
    if (store === undefined) {
      store = open();
      local = store instanceof MemoryIdempotencyStore ? store : undefined;
    }
    let state: IdempotencyState;
    try {
      const begin = { key: scoped, fingerprint, token, leaseMs: o.leaseMs, now: clock() };
      state = local !== undefined ? local.beginNow(begin) : await withTimeout(store.begin(begin), o.storeTimeoutMs);
    } catch (error) {
      return storeFailed(event, error);
    }
    if (state.state !== "acquired") {
      if (state.fingerprint !== fingerprint) {
        note(event, "mismatch");
        return errorResponse(createError("IDEMPOTENCY_KEY_REUSED"));
      }
      if (state.state === "running") {
        note(event, "conflict");
        return errorResponse(createError("IDEMPOTENCY_KEY_IN_USE"), { "retry-after": "1" });
      }
      note(event, "replayed");
      return replay(state.response);
    }
    const held = store;
    const release = (outcome: string) => {
      note(event, outcome);
      // Not awaited: the answer need not wait; a release that fails leaves the key to its lease.
      void held.release({ key: scoped, token }).catch((error: unknown) => console.error(`keelson: idempotency: releasing a key failed: ${errorMessage(error)}`));
    };
    const staged = new Map<string, string>();
    event.res.headers.forEach((value, header) => staged.set(header, value));
    let result: unknown;
    try {
      result = await next();
    } catch (error) {
      const kerror = error instanceof KError ? error : toKError(error instanceof HTTPError ? error : new HTTPError({ status: 500, unhandled: true, cause: error })).kerror;
      if (kerror.statusCode >= 500 || NOTHING_RAN.has(kerror.code)) release("released");
      else await keep(errorResponse(kerror), "stored");
      throw error;
    }
    const status = (result as { status?: number } | null)?.status ?? 200;
    if (!(result instanceof HTTPResponse || result instanceof Response) || status >= 500) {
      // Not a response keelson can read back (a stream, a raw value): keeping nothing is the honest answer.
      release("released");
      return result;
    }
    await keep(result, "stored");
    return result;

    async function keep(response: HTTPResponse | Response, outcome: string): Promise<void> {
      const bytes = await bodyBytes(response, o.maxResponseBytes);
      if (bytes === undefined) return release("released");
      const headers = keptHeaders(response.headers, event.res.headers, staged);
      const stored: StoredResponse = bytes === "over"
        ? { status: response.status ?? 200, headers, body: "", omitted: true }
        : { status: response.status ?? 200, headers, body: bytes.toString("base64") };
      note(event, bytes === "over" ? "oversize" : outcome);
      try {
        const complete = { key: scoped, token, response: stored, ttlMs: o.ttlMs, now: clock() };
        if (local !== undefined) local.completeNow(complete);
        else await withTimeout(held.complete(complete), o.storeTimeoutMs);
      } catch (error) {
        // The write happened; the key stays claimed until its lease ends, so a retry meanwhile gets 409, not a second run.
        if (failures++ % 100 === 0) console.error(`keelson: idempotency: keeping a response failed: ${errorMessage(error)}`);
      }
    }
  };
  return describeMiddleware(middleware as Middleware, idempotencyContract(o));
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
