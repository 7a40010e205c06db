import { IncomingMessage } from "node:http";
import { assertBodySize, type H3Event } from "h3";
import { limitRequestBody } from "srvx/body-limit";
import { createError, type KError } from "../errors.js";
import type { RequestState } from "./request-state.js";

const JSON_TYPE = /^application\/(?:[\w.+-]*\+)?json\b/i;

/**
 * Deepest nesting of arrays and objects a JSON body may have. V8 parses a far deeper `[[[…]]]`
 * from a small body happily, but JSON.stringify, recursive validators and application code then overflow
 * the stack: a 500 the client could trigger at will.
 */
export const MAX_JSON_DEPTH = 256;

const OPEN_BRACKET = 0x5b, OPEN_BRACE = 0x7b, CLOSE_BRACKET = 0x5d, CLOSE_BRACE = 0x7d, QUOTE = 0x22, BACKSLASH = 0x5c;

/** True when `text` nests deeper than `max`; brackets inside strings do not count. */
export function exceedsDepth(text: string, max: number): boolean {
  // Nesting deeper than `max` needs more than `max` characters: small bodies skip the scan.
  if (text.length <= max) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) inString = true;
    else if (c === OPEN_BRACKET || c === OPEN_BRACE) {
      if (++depth > max) return true;
    } else if (c === CLOSE_BRACKET || c === CLOSE_BRACE) depth--;
  }
  return false;
}

function tooLarge(limit: number) {
  return createError("PAYLOAD_TOO_LARGE", `Request body exceeds the limit of ${limit} bytes`);
}

/**
 * The client stopped sending before the body was complete (it closed or reset the connection).
 * Its fault, not the server's: a 400, logged as a warn request line, never a 500 with a stack
 * trace and a 5xx observation that any client could trigger at will. Nobody reads the answer.
 */
export function bodyIncomplete(cause: unknown) {
  return createError("BAD_REQUEST", "Request body was not fully received: the client closed the connection", cause);
}

/** A body being read from node's request, found there by the listeners below (`keelsonBodyRead`). */
class NodeBodyRead {
  /** The first chunk; the rest, when there are more, in `more`: one chunk needs no array. */
  first: Buffer | undefined = undefined;
  more: Buffer[] | undefined = undefined;
  size = 0;
  readonly limit: number;
  readonly finish: (bytes: Buffer) => unknown;
  readonly resolve: (value: unknown) => void;
  readonly reject: (reason: unknown) => void;

  constructor(limit: number, finish: (bytes: Buffer) => unknown, resolve: (value: unknown) => void, reject: (reason: unknown) => void) {
    this.limit = limit;
    this.finish = finish;
    this.resolve = resolve;
    this.reject = reject;
  }
}

/**
 * Node's request on keelson's own server (lifecycle.ts passes it to `createServer`): the field the
 * body reader keeps its state in is there from the constructor on, so every request keeps one shape.
 * On another server the reader adds the same named property to the request when it starts.
 * @internal
 */
export class KeelsonIncomingMessage extends IncomingMessage {
  keelsonBodyRead: NodeBodyRead | undefined = undefined;
}

type ReadRequest = IncomingMessage & { keelsonBodyRead?: NodeBodyRead | undefined; rawBody?: Buffer };

// The listeners are the same four functions for every request (node calls them with the request as
// `this`), not four closures made for each: a POST allocates the read's state and its promise only.
function onBodyData(this: ReadRequest, chunk: Buffer): void {
  const read = this.keelsonBodyRead;
  if (read === undefined) return;
  read.size += chunk.length;
  if (read.size > read.limit) {
    stopReading(this);
    // Stop reading; the 413 response closes the connection, so the rest is never needed.
    this.pause();
    read.reject(tooLarge(read.limit));
    return;
  }
  if (read.first === undefined) read.first = chunk;
  else (read.more ??= [read.first]).push(chunk);
}

// Not cleaned up: after 'end' neither 'data' nor 'aborted' fires again, and a later 'error' finds
// no read. Four removals on every request bought nothing.
function onBodyEnd(this: ReadRequest): void {
  const read = this.keelsonBodyRead;
  if (read === undefined) return;
  this.keelsonBodyRead = undefined;
  const bytes = read.more !== undefined ? Buffer.concat(read.more, read.size) : read.first ?? Buffer.alloc(0);
  // srvx's request answers its body readers from `rawBody` once the stream is spent: h3's
  // readBody, readValidatedBody, readFormData and proxyRequest read these bytes again.
  this.rawBody = bytes;
  // `finish` may refuse the bytes (malformed JSON): a rejection, never a throw out of 'end'.
  let value: unknown;
  try {
    value = read.finish(bytes);
  } catch (error) {
    read.reject(error);
    return;
  }
  read.resolve(value);
}

function onBodyError(this: ReadRequest, error: Error): void {
  const read = this.keelsonBodyRead;
  if (read === undefined) return;
  stopReading(this);
  read.reject(bodyIncomplete(error));
}

function onBodyAborted(this: ReadRequest): void {
  onBodyError.call(this, new Error("request aborted"));
}

function stopReading(req: ReadRequest): void {
  req.keelsonBodyRead = undefined;
  req.off("data", onBodyData);
  req.off("end", onBodyEnd);
  req.off("error", onBodyError);
  req.off("aborted", onBodyAborted);
}

/**
 * Reads a Node request stream straight into one Buffer. Going through the web `Request`
 * (srvx's NodeRequest → ReadableStream, plus h3's size-limiting TransformStream) cost more than
 * the rest of a small POST together; this stays on Node streams and stops at the limit. The caller
 * has checked that nothing reads the stream yet (it is not flowing), so no other read is under way.
 */
function readNodeBody<T>(req: ReadRequest, limit: number, finish: (bytes: Buffer) => T): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    req.keelsonBodyRead = new NodeBodyRead(limit, finish, resolve as (value: unknown) => void, reject);
    req.on("data", onBodyData);
    req.on("end", onBodyEnd);
    req.on("error", onBodyError);
    req.on("aborted", onBodyAborted);
  });
}

const parseBytes = (bytes: Buffer) => parseJSON(bytes.toString("utf8"));

/** The body parsed as it is read: on Node, in the step that ends the stream, with no promise between. */
function readParsed(event: H3Event, limit: number): Promise<unknown> {
  const early = event.context.keelsonBody;
  if (early !== undefined) {
    if (early.byteLength > limit) return Promise.reject(tooLarge(limit));
    try {
      return Promise.resolve(parseBytes(early));
    } catch (error) {
      return Promise.reject(error);
    }
  }
  return readBytes(event, limit, parseBytes, (req) => req.text().then(parseJSON));
}

function readBytes<T>(event: H3Event, limit: number, finish: (bytes: Buffer) => T, web: (copy: Request) => Promise<T>): Promise<T> {
  const nodeReq = event.runtime?.node?.req as IncomingMessage | undefined;
  if (nodeReq && !nodeReq.readableEnded && !nodeReq.readableFlowing) {
    // Bytes that arrived while a middleware awaited wait in the stream's buffer and come first.
    // A client that left meanwhile: its 'aborted' and 'error' have fired already, none would again.
    if (nodeReq.destroyed) return Promise.reject(bodyIncomplete(nodeReq.errored ?? new Error("request aborted")));
    return readNodeBody(nodeReq, limit, finish);
  }
  assertBodySize(event, limit);
  // A copy is read, so that the request's own body is still there for h3's readers.
  // The web-stream path reports a client that went away as an AbortError, or as Node's own
  // `aborted` error (ECONNRESET) when the Node request failed first.
  return web(event.req.clone()).catch((error: unknown) => {
    const { name, code } = (error ?? {}) as { name?: string; code?: string };
    throw name === "AbortError" || code === "ECONNRESET" ? bodyIncomplete(error) : error;
  });
}

function parseJSON(text: string): unknown {
  if (text.length === 0) return undefined;
  if (exceedsDepth(text, MAX_JSON_DEPTH)) {
    throw createError("INVALID_JSON", `JSON body is nested deeper than ${MAX_JSON_DEPTH} levels`);
  }
  try {
    return JSON.parse(text);
  } catch {
    throw createError("INVALID_JSON");
  }
}

/**
 * Content-Length, Content-Type and whether Transfer-Encoding is present. On Node, read from the
 * parsed header object: Headers#get lower-cases the name and, for these two, scans every raw header
 * for a repeat to join, on every POST. The answers are the same: llhttp refuses a
 * request with two Content-Lengths, and the Content-Type check looks only at the start of the value,
 * which is the first header's either way.
 */
function bodyHeaders(event: H3Event): { length: string | null; type: string | null; chunked: boolean } {
  const nodeReq = event.runtime?.node?.req as IncomingMessage | undefined;
  if (nodeReq !== undefined) {
    const { "content-length": length, "content-type": type, "transfer-encoding": encoding } = nodeReq.headers;
    return { length: length ?? null, type: type ?? null, chunked: encoding !== undefined };
  }
  const headers = event.req.headers;
  const length = headers.get("content-length");
  return { length, type: headers.get("content-type"), chunked: length === null && event.req.body !== null };
}

/**
 * A body that says it is not JSON, on a route without a body schema: keelson leaves it to the
 * handler (h3's readFormData, readBody, proxyRequest…); `ctx.body` throws this 415 when read.
 */
export class NotJSONBody {
  readonly error: KError;
  constructor(error: KError) {
    this.error = error;
  }
}

const BODY_READERS = new Set(["arrayBuffer", "blob", "bytes", "formData", "json", "text"]);

/**
 * Puts the request's body behind `limit` bytes for h3's readers (413 past it), as h3's own
 * assertBodySize does with srvx's limitRequestBody; and keeps `formData()` working, which that
 * reads from a Response without the request's Content-Type and so can never parse.
 */
function limitUnreadBody(event: H3Event, limit: number, type: string): void {
  const limited = limitRequestBody(event.req, limit, { createError: () => tooLarge(limit) });
  let body: Response | undefined;
  const read = (): Response => (body ??= new Response(limited.body, { headers: { "content-type": type } }));
  // h3's assertBodySize replaces the request the same way.
  (event as { req: H3Event["req"] }).req = new Proxy(limited, {
    get(target, prop) {
      if (typeof prop === "string" && BODY_READERS.has(prop)) return () => read()[prop as "text"]();
      if (prop === "body") return read().body;
      if (prop === "bodyUsed") return body?.bodyUsed ?? false;
      return Reflect.get(target, prop, target) as unknown;
    },
  });
}

/** The body's parsed value, or undefined when there is none; throws for what headers alone rule out. */
function startReading(event: H3Event, limit: number, strict: boolean): Promise<unknown> | NotJSONBody | undefined {
  const { length, type, chunked } = bodyHeaders(event);
  if (length === "0") return undefined;
  if (length === null) {
    if (!chunked) return undefined;
  } else if (Number(length) > limit) {
    throw tooLarge(limit);
  }
  // The usual value is compared before the regex runs: the answer is the same, the test costs more.
  if (type !== null && type !== "application/json" && !JSON_TYPE.test(type)) {
    const error = createError("UNSUPPORTED_MEDIA_TYPE", "Request body must be application/json");
    if (strict) throw error;
    // A Content-Length within the limit bounds the body already (Node refuses more bytes than it
    // announced); a streamed one is read through a limit, whoever reads it.
    if (length === null) limitUnreadBody(event, limit, type);
    return new NotJSONBody(error);
  }
  return readParsed(event, limit);
}

/**
 * Reads a request's body before the route does (idempotency's fingerprint needs its bytes),
 * whatever its media type, with a 413 over `limit`. The route's JSON reader then gets the same
 * bytes (413 past its own limit), and h3's readers the same bytes (srvx's `rawBody`; elsewhere a copy was read). A media
 * type the route does not take is still the route's to refuse. Empty when there is no body.
 */
export function readBodyEarly(event: H3Event, limit: number): Promise<Buffer> {
  const { length, chunked } = bodyHeaders(event);
  if (length === "0" || (length === null && !chunked)) return Promise.resolve(Buffer.alloc(0));
  if (length !== null && Number(length) > limit) return Promise.reject(tooLarge(limit));
  // Kept as the read ends, in the step that ends the stream: no promise after the read's own.
  const keep = (bytes: Buffer) => (event.context.keelsonBody = bytes);
  return readBytes(event, limit, keep, async (req) => keep(Buffer.from(await req.arrayBuffer())));
}

declare module "h3" {
  interface H3EventContext {
    /** The body a middleware read before the route (readBodyEarly). */
    keelsonBody?: Buffer;
  }
}

/**
 * Reads and parses a JSON request body under `limit` bytes. Empty body → undefined.
 * 413 over the limit (by Content-Length up front, or while streaming a chunked body),
 * 415 for a body that says it is not JSON, 400 for malformed JSON or JSON nested deeper than
 * MAX_JSON_DEPTH. A body without a Content-Type is parsed as JSON: clients such as curl forget
 * it more often than not. Never throws: every failure is a rejection.
 *
 * `strict` is false on a route without a body schema: a body of another media type is then left
 * unread (a NotJSONBody) rather than refused, for the handler to read with h3's readers.
 * What keelson reads stays readable by them (srvx's `rawBody`, or a copy of a web request).
 */
export function readJSONBody(event: H3Event, limit: number, strict = true): Promise<unknown> {
  try {
    const body = startReading(event, limit, strict);
    return body === undefined || body instanceof NotJSONBody ? Promise.resolve(body) : body;
  } catch (error) {
    return Promise.reject(error);
  }
}

/**
 * `readJSONBody` for a lane's request (pipeline.ts), which has no h3 event yet: the usual body (a
 * Content-Length within the limit, a JSON media type or none, a stream nothing reads yet) is read
 * straight from node's request into srvx's `rawBody`, as `readJSONBody` reads it. Anything else
 * makes the event and takes `readJSONBody` itself, so every other case is answered by the same code.
 */
export function readLaneJSONBody(req: IncomingMessage, state: RequestState, limit: number, strict: boolean): Promise<unknown> {
  const { "content-length": length, "content-type": type } = req.headers;
  if (length !== undefined && length !== "0" && Number(length) <= limit && (type === undefined || type === "application/json" || JSON_TYPE.test(type)) &&
    !req.readableEnded && !req.readableFlowing && !req.destroyed) {
    return readNodeBody(req, limit, parseBytes);
  }
  return readJSONBody(state.event, limit, strict);
}
