/**
 * Request identity: the id a client (or a proxy in front) sent, when it is safe to echo and log,
 * else one made here. Generated ids are a random per-process prefix and a counter: no call into
 * the random generator per request, and no two processes share a prefix, so ids stay unique
 * across the supervisor's workers and across restarts of a worker slot.
 */
import { randomBytes } from "node:crypto";
import { show } from "../checks.js";

/** Longest incoming request id kept; a longer one is replaced. */
export const MAX_REQUEST_ID_LENGTH = 128;

/** The header read and echoed unless `KConfig.requestIdHeader` says otherwise. */
export const DEFAULT_REQUEST_ID_HEADER = "x-request-id";

/**
 * True for an id that can go into a header, a log line (either format) and a JSON body as it is:
 * 1 to 128 characters of `A-Z a-z 0-9 . _ : -`. That covers UUIDs, ULIDs, hex and base-36 ids,
 * W3C trace ids and `host:1234`-style ids; anything else (spaces, commas of a repeated header,
 * quotes, `=`, control characters, non-ASCII) is replaced, never logged.
 */
export function isValidRequestId(value: string): boolean {
  const length = value.length;
  if (length === 0 || length > MAX_REQUEST_ID_LENGTH) return false;
  for (let i = 0; i < length; i++) {
    const c = value.charCodeAt(i);
    // 0-9 : (0x30-0x3a), A-Z (0x41-0x5a), a-z (0x61-0x7a), - . (0x2d-0x2e), _ (0x5f)
    if (!((c >= 0x30 && c <= 0x3a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c === 0x2d || c === 0x2e || c === 0x5f)) {
      return false;
    }
  }
  return true;
}

/** 40 random bits as 10 hex digits: two processes share a prefix with probability 2^-40. */
export function newRequestIdPrefix(): string {
  return randomBytes(5).toString("hex") + "-";
}

const prefix = newRequestIdPrefix();
let counter = 0;

/**
 * A new id, `<10 hex digits>-<counter>` (`3f9c0a7b1e-1`, `3f9c0a7b1e-2`, …). The
 * counter starts at 1 in each process and the prefix is drawn once per process (every worker is
 * a process of its own, with its own module state).
 */
export function generateRequestId(): string {
  return prefix + ++counter;
}

/**
 * The server span's attribute for the request id. keelson's own name, not the semantic conventions'
 * `http.request.header.x-request-id`: that one is a list of what the client sent, and a generated
 * or replaced id was never in a header.
 */
export const ATTR_REQUEST_ID = "keelson.request_id";

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** `KConfig.requestIdHeader`, lower-cased; an empty or non-token name is refused with its value. */
export function resolveRequestIdHeader(value: unknown): string {
  if (value === undefined) return DEFAULT_REQUEST_ID_HEADER;
  if (typeof value !== "string" || !TOKEN.test(value)) {
    throw new Error(`requestIdHeader must be an HTTP header name such as "x-request-id", got ${show(value)}`);
  }
  return value.toLowerCase();
}
