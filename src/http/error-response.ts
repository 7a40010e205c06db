import { STATUS_CODES } from "node:http";
import { HTTPError, HTTPResponse, type H3Event } from "h3";
import { ERROR_CODES, KError, createError, type ErrorCode } from "../errors.js";
import type { RequestLogger } from "../logging/request-logger.js";
import { JSON_HEADERS } from "./headers.js";
import { redactQuery } from "../logging/redact-query.js";

const CODE_BY_STATUS = new Map<number, ErrorCode>();
for (const [code, info] of Object.entries(ERROR_CODES) as [ErrorCode, { status: number }][]) {
  if (!CODE_BY_STATUS.has(info.status)) CODE_BY_STATUS.set(info.status, code);
}

/** h3's own not-found: thrown when no route matched, as opposed to a handler's 404. */
export function isRouteNotFound(error: HTTPError, event: H3Event): boolean {
  return error.status === 404 && event.context.matchedRoute === undefined && !error.unhandled && !(error.cause instanceof KError);
}

/** What keelson answers for a thrown value, and what it logs. */
export interface ReducedError {
  kerror: KError;
  original: unknown;
  /** Headers of the HTTPError (`WWW-Authenticate`, `Allow`, `Retry-After`…) for the response. */
  headers: Headers | undefined;
  /** Not thrown on purpose: logged with its stack whatever the status, as h3 logs it. */
  unhandled: boolean;
}

/**
 * Reduces whatever was thrown to a KError that is safe to show. A KError passes through;
 * an h3 HTTPError thrown on purpose keeps its status and its headers (message from the catalogue
 * or the status's reason phrase, since h3's messages can echo the URL with its query string);
 * an error whose cause is such an HTTPError keeps that status too, as in h3;
 * anything else is a 500 with a generic message.
 */
export function toKError(error: HTTPError): ReducedError {
  // h3 wraps a thrown non-HTTPError value as `cause`; its own errors carry their init object there.
  if (error.cause instanceof KError) return { kerror: error.cause, original: error.cause, headers: undefined, unhandled: false };
  if (error.unhandled) {
    // h3 takes the status of an Error's `cause` when that is an HTTPError (`new HTTPError(err)`).
    // Not of any Error with a `status`: a library's error (an upstream's 404) is not this service's answer.
    const inner = (error.cause as { cause?: unknown } | undefined)?.cause;
    const kerror = HTTPError.isError(inner) && error.status < 500 ? fromStatus(error.status) : createError("INTERNAL_ERROR");
    return { kerror, original: error.cause, headers: kerror.statusCode < 500 ? error.headers : undefined, unhandled: true };
  }
  // Thrown on purpose (by h3 or by application code): keep its status, 503 included.
  return { kerror: fromStatus(error.status), original: error, headers: error.headers, unhandled: false };
}

/** The catalogue entry for a status, else a code and message from the status's reason phrase. */
function fromStatus(status: number): KError {
  const code = CODE_BY_STATUS.get(status);
  if (code) return createError(code);
  const reason = STATUS_CODES[status] ?? "Request failed";
  return new KError(reason.toUpperCase().replace(/\W+/g, "_"), status, reason);
}

/**
 * Logs the cause of a 5xx with its stack, through the request's logger (so with its request id and
 * trace id): the response never carries it. The request's query string and its values are cut out
 * (see redactQuery): they can hold tokens, and messages quote them (h3's quote the whole URL,
 * application code the value it choked on).
 */
export function logServerError(logger: RequestLogger, event: H3Event, original: unknown, what = "failed"): void {
  const cause = original instanceof KError ? (original.cause ?? original) : original;
  const detail = cause instanceof Error ? (cause.stack ?? cause.message) : safeString(cause);
  logger.error("%s %s %s: %s", event.req.method, event.url.pathname, what, redactQuery(detail, event.url.search));
}

function safeString(value: unknown): string {
  try {
    return typeof value === "string" ? value : (JSON.stringify(value) ?? String(value));
  } catch {
    return String(value);
  }
}

/** Headers of an error that never reach keelson's JSON body: it is keelson's, and so is its framing. */
const BODY_HEADERS = new Set(["content-type", "content-length", "transfer-encoding", "content-encoding", "x-content-type-options"]);

/**
 * The JSON error response; `extra` headers (Allow, Connection) are added to it, and then those of
 * the HTTPError (`thrown`) but the ones describing a body. A 5xx body also carries `request_id`,
 * for the user to quote to whoever reads the logs.
 */
export function errorResponse(kerror: KError, extra?: Record<string, string>, requestId?: string, thrown?: Headers): HTTPResponse {
  const body = requestId !== undefined && kerror.statusCode >= 500 ? { ...kerror.toJSON(), request_id: requestId } : kerror;
  let headers: HeadersInit = extra ? { ...JSON_HEADERS, ...extra } : JSON_HEADERS;
  if (thrown !== undefined) {
    const merged = new Headers(headers);
    for (const [name, value] of thrown) {
      if (BODY_HEADERS.has(name)) continue;
      if (name === "set-cookie") merged.append(name, value);
      else merged.set(name, value);
    }
    headers = merged;
  }
  return new HTTPResponse(JSON.stringify(body), { status: kerror.statusCode, headers });
}
