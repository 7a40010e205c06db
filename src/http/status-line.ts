import { ServerResponse, STATUS_CODES, type IncomingMessage, type OutgoingHttpHeaders } from "node:http";


/**
 * node:http's response with the standard reason phrase (`HTTP/1.1 404 Not Found`) when none is
 * given, and a bag of headers that keelson's own steps (the request id, CORS, the rate limiter, /health) set for
 * whatever response the request ends with. srvx hands a web Response's `statusText` to `writeHead`
 * as is, and a Response built without one (nearly all of them, h3's too) has `""`, which node writes
 * verbatim: `HTTP/1.1 200 `. A reason phrase set on purpose is kept.
 *
 * The bag, not `setHeader`: once `setHeader` has been called, node's `writeHead` takes its slow
 * path, removing and re-adding (and re-validating) every header of the response one by one. The
 * bag's pairs are put in front of the response's own in the array `writeHead` is given, so it
 * takes the path of a response with no headers set beforehand. The response's own header of the
 * same name wins, as it does over `setHeader` in node. `getHeader()` does not see the bag's headers:
 * nothing in keelson reads them back before the head is written.
 */
export class StandardReasonResponse<Request extends IncomingMessage = IncomingMessage> extends ServerResponse<Request> {
  /**
   * The headers keelson set for the response before its head is written: flat name/value pairs,
   * names lower-case; null: empty. A field from the constructor on, so every response keeps one
   * shape; a named one, as a symbol-keyed field is defined through a keyed-define IC on every response.
   * @internal
   */
  keelsonPendingHeaders: string[] | null = null;
  /**
   * The `content-length` a head given as srvx's flat array ended with, until the first write: a
   * first write of exactly that many ASCII characters is the whole body. -1: none.
   * @internal
   */
  keelsonWholeLength = -1;
}

/**
 * Sets a header for the response's head if `res` has a header bag (keelson's own server): true
 * when done. A second value for the same name replaces the first, as `setHeader` does; the value
 * is checked as `setHeader` would, so a bad one fails where it is set.
 */
export function setPendingHeader(res: object, name: string, value: string): boolean {
  if (!(res instanceof StandardReasonResponse)) return false;
  const key = headerKey(name);
  if (INVALID_VALUE.test(value)) throw Object.assign(new TypeError(`Invalid character in header content ["${key}"]`), { code: "ERR_INVALID_CHAR" });
  return setCheckedPendingHeader(res, key, value);
}

/**
 * `setPendingHeader` for a name that is lower-case and a valid token and a value made of
 * characters node accepts, both checked by the caller once (the request id's header, and an id
 * that passed isValidRequestId or was generated): no lookup and no regex test on every request.
 */
export function setCheckedPendingHeader(res: object, key: string, value: string): boolean {
  if (!(res instanceof StandardReasonResponse)) return false;
  const bag = res.keelsonPendingHeaders;
  if (bag === null) {
    res.keelsonPendingHeaders = [key, value];
    return true;
  }
  for (let i = 0; i < bag.length; i += 2) {
    if (bag[i] === key) {
      bag[i + 1] = value;
      return true;
    }
  }
  bag.push(key, value);
  return true;
}

/** A header in the bag, or undefined (also when `res` has no bag). `name` must be lower-case. */
export function readPendingHeader(res: object, name: string): string | undefined {
  if (!(res instanceof StandardReasonResponse)) return undefined;
  const bag = res.keelsonPendingHeaders;
  if (bag === null) return undefined;
  for (let i = 0; i < bag.length; i += 2) if (bag[i] === name) return bag[i + 1];
  return undefined;
}

/** Takes a header back out of the bag (no-op when it is not there or `res` has none). */
export function removePendingHeader(res: object, name: string): void {
  if (!(res instanceof StandardReasonResponse)) return;
  const bag = res.keelsonPendingHeaders;
  if (bag === null) return;
  const key = name.toLowerCase();
  for (let i = 0; i < bag.length; i += 2) {
    if (bag[i] === key) {
      bag.splice(i, 2);
      return;
    }
  }
}

// node's own checks (the ones setHeader runs): ERR_INVALID_HTTP_TOKEN, ERR_INVALID_CHAR.
const TOKEN = /^[\^_`a-zA-Z\-0-9!#$%&'*+.|~]+$/;
const INVALID_VALUE = /[^\t\x20-\x7e\x80-\xff]/;

/** Checked, lower-cased names: keelson sets the same few on every request. Bounded, for names made at run time. */
const KEYS = new Map<string, string>();
const MAX_KEYS = 256;

function headerKey(name: string): string {
  let key = KEYS.get(name);
  if (key === undefined) {
    if (!TOKEN.test(name)) throw Object.assign(new TypeError(`Header name must be a valid HTTP token ["${name}"]`), { code: "ERR_INVALID_HTTP_TOKEN" });
    key = name.toLowerCase();
    if (KEYS.size < MAX_KEYS) KEYS.set(name, key);
  }
  return key;
}

/** Whether `headers` (a flat name/value array) has `name`; its names may be in any case. */
function hasName(headers: readonly unknown[], name: string): boolean {
  for (let i = 0; i < headers.length; i += 2) {
    const key = headers[i];
    if (key === name) return true;
    // Same length and the same first letter before lower-casing: content-type and x-request-id are
    // both 12 characters long, and most responses have the one while the bag has the other.
    if (typeof key === "string" && key.length === name.length && (key.charCodeAt(0) | 0x20) === (name.charCodeAt(0) | 0x20) && key.toLowerCase() === name) return true;
  }
  return false;
}

/**
 * The bag's pairs that neither the flat array `headers` nor the name `also` sets: the bag itself
 * (taken off the response already) in the usual case, where no name is in both, so that the
 * response's pairs are pushed after them, pushes that optimised code inlines where concat calls
 * into the runtime.
 */
function unshadowed(bag: string[], headers: readonly unknown[], also?: string): string[] {
  let shadowed = false;
  for (let i = 0; i < bag.length && !shadowed; i += 2) shadowed = bag[i] === also || hasName(headers, bag[i]!);
  if (!shadowed) return bag;
  const kept: string[] = [];
  for (let i = 0; i < bag.length; i += 2) if (bag[i] !== also && !hasName(headers, bag[i]!)) kept.push(bag[i]!, bag[i + 1]!);
  return kept;
}

/** The headers `writeHead` was given with the bag's in front, minus those the response sets itself. */
function withPending(res: StandardReasonResponse, bag: string[], headers: unknown): unknown {
  if (headers === undefined || headers === null) return bag;
  // A flat array, as srvx passes: merged by hand, so node sees one array and nothing set before.
  if (Array.isArray(headers) && (headers.length === 0 || !Array.isArray(headers[0]))) {
    const merged: unknown[] = unshadowed(bag, headers);
    for (let i = 0; i < headers.length; i++) merged.push(headers[i]);
    return merged;
  }
  // An object or [name, value] pairs (user code calling writeHead itself): node merges those with
  // setHeader's, the response's own winning.
  for (let i = 0; i < bag.length; i += 2) res.setHeader(bag[i]!, bag[i + 1]!);
  return headers as OutgoingHttpHeaders;
}

const writeHead = ServerResponse.prototype.writeHead;

// Assigned rather than declared with `override`: writeHead's overloads cannot be restated in a subclass.
// node's writeHead reads its arguments by position, never by count, so an undefined `headers` passed
// on is the same as one left out: a plain call, no argument array per response. node's own implicit
// head (res.end() or res.write() without writeHead) comes through here too.
StandardReasonResponse.prototype.writeHead = function (this: StandardReasonResponse, statusCode: number, reason?: unknown, headers?: unknown) {
  let phrase = reason;
  let fields = headers;
  // writeHead(status, headers): node tells the two forms apart by the type of the second argument.
  if (typeof reason !== "string" && reason !== undefined) {
    phrase = undefined;
    fields = reason;
  }
  const bag = this.keelsonPendingHeaders;
  if (bag !== null) {
    this.keelsonPendingHeaders = null;
    fields = withPending(this, bag, fields);
  }
  // srvx puts the length of a body it knows last: see write() below.
  if (Array.isArray(fields)) {
    const count = fields.length;
    if (count >= 2 && fields[count - 2] === "content-length") this.keelsonWholeLength = Number(fields[count - 1]);
  }
  return (writeHead as (this: ServerResponse, ...args: unknown[]) => ServerResponse).call(
    this, statusCode, phrase === "" ? (STATUS_CODES[statusCode] ?? "") : phrase, fields,
  );
} as StandardReasonResponse["writeHead"];

/**
 * The head of an answer keelson writes itself (the pipeline's JSON answers, pipeline.ts): the bag's
 * headers, then `headers`, then `content-length`, through node's own `writeHead`, which fills in
 * the reason phrase. It is the wrapper above for a flat array, less what the caller knows already:
 * the arguments' form, the phrase, and the length, which the wrapper would parse back out of the array.
 */
export function writeHeadWithLength(res: StandardReasonResponse, statusCode: number, headers: readonly string[], length: string): void {
  const bag = res.keelsonPendingHeaders;
  if (bag !== null) res.keelsonPendingHeaders = null;
  const fields = bag === null ? [] : unshadowed(bag, headers, "content-length");
  for (let i = 0; i < headers.length; i++) fields.push(headers[i]!);
  fields.push("content-length", length);
  (writeHead as (this: ServerResponse, statusCode: number, headers: string[]) => ServerResponse).call(res, statusCode, fields);
}

const write = ServerResponse.prototype.write as (this: ServerResponse, chunk: unknown, encoding?: unknown, callback?: unknown) => boolean;

/**
 * srvx sends a body it holds whole (every JSON answer) as `writeHead`, `write(body)`, `end()`. Node
 * corks the socket for a write, so head and body, then the empty chunk of `end()`, leave in one
 * `writev` of two strings, with a tick to uncork. A first write that is the whole declared body
 * (a string of exactly `content-length` ASCII characters, no callback) ends the response at once,
 * as `end(body)` would: the same bytes in one plain write. The `end()` that follows finds the
 * response finished and does nothing, as node's own `end()` does on a finished response.
 */
StandardReasonResponse.prototype.write = function (this: StandardReasonResponse, chunk: unknown, encoding?: unknown, callback?: unknown): boolean {
  const whole = this.keelsonWholeLength;
  if (whole !== -1) {
    this.keelsonWholeLength = -1;
    // A string's length equals its UTF-8 byte length only when it is all ASCII.
    if (typeof chunk === "string" && chunk.length === whole && encoding === undefined && callback === undefined && !this.writableEnded) {
      this.end(chunk);
      return true;
    }
  }
  return write.call(this, chunk, encoding, callback);
} as StandardReasonResponse["write"];
