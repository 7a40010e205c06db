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

/**
 * Reduces whatever was thrown to a KError that is safe to show. A KError passes through;
 * an h3 HTTPError thrown on purpose keeps its status (message from the catalogue or the
 * status's reason phrase, since h3's messages can echo the URL with its query string);
 * anything else is a 500 with a generic message.
 */
export function toKError(error: HTTPError): { kerror: KError; original: unknown } {
  // h3 wraps a thrown non-HTTPError value as `cause`; its own errors carry their init object there.
  if (error.cause instanceof KError) return { kerror: error.cause, original: error.cause };
  if (error.unhandled) return { kerror: createError("INTERNAL_ERROR"), original: error.cause };
  // Thrown on purpose (by h3 or by application code): keep its status, 503 included.
  return { kerror: fromStatus(error.status), original: error };
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
export function logServerError(logger: RequestLogger, event: H3Event, original: unknown): void {
  const cause = original instanceof KError ? (original.cause ?? original) : original;
  const detail = cause instanceof Error ? (cause.stack ?? cause.message) : safeString(cause);
  logger.error("%s %s failed: %s", event.req.method, event.url.pathname, redactQuery(detail, event.url.search));
}

function safeString(value: unknown): string {
  try {
    return typeof value === "string" ? value : (JSON.stringify(value) ?? String(value));
  } catch {
    return String(value);
  }
}

/**
 * The JSON error response; `extra` headers (Allow, Connection) are added to it. A 5xx body also
 * carries `request_id`, for the user to quote to whoever reads the logs.
 */
export function errorResponse(kerror: KError, extra?: Record<string, string>, requestId?: string): HTTPResponse {
  const body = requestId !== undefined && kerror.statusCode >= 500 ? { ...kerror.toJSON(), request_id: requestId } : kerror;
  return new HTTPResponse(JSON.stringify(body), {
    status: kerror.statusCode,
    headers: extra ? { ...JSON_HEADERS, ...extra } : JSON_HEADERS,
  });
}
