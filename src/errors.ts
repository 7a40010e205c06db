/** One entry of the error catalogue: the stable code, its HTTP status and the default message. */
export interface ErrorCodeInfo {
  readonly status: number;
  readonly message: string;
}

/**
 * Every code keelson itself produces. docs/errors.md lists the same table; a test keeps them in step.
 * Application code may use any other code through `new KError(...)`.
 */
export const ERROR_CODES = {
  BAD_REQUEST: { status: 400, message: "Bad request" },
  INVALID_JSON: { status: 400, message: "Malformed JSON body" },
  IDEMPOTENCY_KEY_INVALID: { status: 400, message: "Idempotency-Key is missing or malformed" },
  UNAUTHORIZED: { status: 401, message: "Unauthorized" },
  FORBIDDEN: { status: 403, message: "Forbidden" },
  NOT_FOUND: { status: 404, message: "Not found" },
  METHOD_NOT_ALLOWED: { status: 405, message: "Method not allowed" },
  CONFLICT: { status: 409, message: "Conflict" },
  IDEMPOTENCY_KEY_IN_USE: { status: 409, message: "A request with this Idempotency-Key is still being processed: retry after Retry-After" },
  PAYLOAD_TOO_LARGE: { status: 413, message: "Request body too large" },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, message: "Unsupported media type" },
  VALIDATION_ERROR: { status: 422, message: "Validation failed" },
  IDEMPOTENCY_KEY_REUSED: { status: 422, message: "This Idempotency-Key was used with a different request" },
  TOO_MANY_REQUESTS: { status: 429, message: "Too many requests" },
  RATE_LIMITED: { status: 429, message: "Rate limit exceeded: retry after the time in Retry-After" },
  INTERNAL_ERROR: { status: 500, message: "Internal server error" },
  SERVICE_UNAVAILABLE: { status: 503, message: "Service unavailable" },
  UPLOAD_STORAGE_FAILED: { status: 507, message: "The server could not store the upload" },
} as const satisfies Record<string, ErrorCodeInfo>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** One failing field of a validation error. */
export interface FieldError {
  /** Dotted path of the field, e.g. `body.author.name` or `query.limit`. */
  path: string;
  message: string;
}

/**
 * The framework error value. Thrown (or returned as a rejection) by a handler, it becomes
 * `{"status_code", "code", "message"}` (+ `errors` for validation) with its status code.
 */
export class KError extends Error {
  readonly code: string;
  readonly statusCode: number;
  readonly errors: readonly FieldError[] | undefined;
  /** Headers the error response carries besides the JSON ones (e.g. `retry-after` on a 503). */
  readonly headers: Readonly<Record<string, string>> | undefined;

  constructor(
    code: string,
    statusCode: number,
    message: string,
    options?: { cause?: unknown; errors?: readonly FieldError[]; headers?: Record<string, string> },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "KError";
    this.code = code;
    this.statusCode = statusCode;
    this.errors = options?.errors;
    this.headers = options?.headers;
  }

  /** The JSON body the error handler sends. The cause is never part of it. */
  toJSON(): { status_code: number; code: string; message: string; errors?: readonly FieldError[] } {
    return this.errors
      ? { status_code: this.statusCode, code: this.code, message: this.message, errors: this.errors }
      : { status_code: this.statusCode, code: this.code, message: this.message };
  }
}

/** Builds a KError for a catalogue code, with the catalogue's message unless one is given. */
export function createError(code: ErrorCode, message?: string, cause?: unknown): KError {
  const info = ERROR_CODES[code];
  return new KError(code, info.status, message ?? info.message, { cause });
}

export const badRequest = (message?: string, cause?: unknown): KError => createError("BAD_REQUEST", message, cause);
export const unauthorized = (message?: string): KError => createError("UNAUTHORIZED", message);
export const forbidden = (message?: string): KError => createError("FORBIDDEN", message);
export const notFound = (message?: string): KError => createError("NOT_FOUND", message);
export const conflict = (message?: string, cause?: unknown): KError => createError("CONFLICT", message, cause);
export const tooManyRequests = (message?: string): KError => createError("TOO_MANY_REQUESTS", message);
export const serviceUnavailable = (message?: string): KError => createError("SERVICE_UNAVAILABLE", message);

/** A 422 with the list of failing fields. */
export function validationError(errors: readonly FieldError[], message?: string): KError {
  return new KError("VALIDATION_ERROR", 422, message ?? ERROR_CODES.VALIDATION_ERROR.message, { errors });
}

/**
 * The Internal KError (docs/errors.md): built from a message and the underlying cause. The response shows
 * only the message; the cause is logged with its stack.
 */
export function internal(message: string, cause?: unknown): KError {
  return createError("INTERNAL_ERROR", message, cause);
}

export function isKError(value: unknown): value is KError {
  return value instanceof KError;
}

/**
 * An error as one piece of text, for a log line or another error's message: an Error's message (its
 * name when the message is empty), a thrown string as it is, anything else as JSON (else String()).
 * The one way keelson turns a caught value into words.
 *
 * @example
 * logger.warn("reload failed: %s", errorMessage(error));
 */
export function errorMessage(error: unknown): string {
  const message = typeof error === "object" && error !== null ? (error as { message?: unknown }).message : undefined;
  if (typeof message === "string" && message !== "") return message;
  if (error instanceof Error) return error.name;
  if (typeof error === "string") return error;
  try {
    return JSON.stringify(error) ?? String(error);
  } catch {
    return String(error);
  }
}
