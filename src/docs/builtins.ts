import { STATUS_CODES } from "node:http";
import { ERROR_CODES, type ErrorCode } from "../errors.js";
import type { JSONSchema } from "../http/json-schema.js";
import type { Route } from "../http/route.js";
import type { OpenAPIOperation, OpenAPIResponse } from "./types.js";

/** Component names keelson itself puts in every document; a user schema with the same id is renamed. */
export const ERROR_SCHEMA = "ErrorResponse";
export const FIELD_ERROR_SCHEMA = "FieldError";
export const HEALTH_SCHEMA = "HealthReport";

const ref = (name: string): JSONSchema => ({ $ref: `#/components/schemas/${name}` });

/** The JSON Schemas of keelson's own bodies: the error body and the health report. */
export const BUILTIN_SCHEMAS: Readonly<Record<string, JSONSchema>> = {
  [ERROR_SCHEMA]: {
    type: "object",
    description: "The body of every error response.",
    properties: {
      status_code: { type: "integer", description: "The HTTP status, repeated" },
      code: { type: "string", description: "Stable machine-readable code, e.g. `NOT_FOUND`" },
      message: { type: "string", description: "Human-readable message; never carries internal details" },
      errors: { type: "array", items: ref(FIELD_ERROR_SCHEMA), description: "Failing fields (422 only)" },
      request_id: {
        type: "string",
        description: "The request's id (5xx only), as in the request-id response header and the server's log lines: quote it when reporting the failure",
      },
    },
    required: ["status_code", "code", "message"],
  },
  [FIELD_ERROR_SCHEMA]: {
    type: "object",
    description: "One failing field of a 422 response.",
    properties: {
      path: { type: "string", description: "Part and dotted field path, e.g. `body.author.name`, `query.limit`" },
      message: { type: "string" },
    },
    required: ["path", "message"],
  },
  [HEALTH_SCHEMA]: {
    type: "object",
    properties: {
      status: { type: "string", enum: ["UP", "DOWN"] },
      service: { type: "string" },
      version: { type: "string" },
      checks: {
        type: "object",
        additionalProperties: { type: "string" },
        description: "Checker name → `UP` or `DOWN: <error message>`",
      },
    },
    required: ["status", "service", "version", "checks"],
  },
};

interface ErrorResponseInfo {
  readonly component: string;
  readonly code: ErrorCode;
  readonly description: string;
}

/** Statuses keelson answers by itself, each a shared `components.responses` entry. */
export const ERROR_RESPONSES: ReadonlyMap<number, ErrorResponseInfo> = new Map([
  [400, { component: "BadRequest", code: "INVALID_JSON", description: "Malformed JSON body, or JSON nested deeper than 256 levels" }],
  [401, { component: "Unauthorized", code: "UNAUTHORIZED", description: "Missing or invalid credentials" }],
  [403, { component: "Forbidden", code: "FORBIDDEN", description: "Not allowed" }],
  [404, { component: "NotFound", code: "NOT_FOUND", description: "No such resource" }],
  [409, { component: "Conflict", code: "CONFLICT", description: "Conflicts with the current state" }],
  [413, { component: "PayloadTooLarge", code: "PAYLOAD_TOO_LARGE", description: "Request body over the size limit" }],
  [415, { component: "UnsupportedMediaType", code: "UNSUPPORTED_MEDIA_TYPE", description: "Request body is not JSON" }],
  [422, { component: "ValidationError", code: "VALIDATION_ERROR", description: "Parameters, query or body failed validation" }],
  [429, { component: "TooManyRequests", code: "TOO_MANY_REQUESTS", description: "Rate limited" }],
  [500, { component: "InternalError", code: "INTERNAL_ERROR", description: "Unexpected failure; details are logged, never sent" }],
  [503, { component: "ServiceUnavailable", code: "SERVICE_UNAVAILABLE", description: "Temporarily unavailable" }],
]);

/**
 * An error response with the shared error schema, and an example: from the error catalogue, else
 * what keelson answers for a status outside it (code and message from the reason phrase).
 */
export function errorResponse(status: number, description: string, code?: ErrorCode): OpenAPIResponse {
  const info = code ? ERROR_CODES[code] : undefined;
  const reason = STATUS_CODES[status] ?? "Error";
  const example: Record<string, unknown> = info
    ? { status_code: status, code, message: info.message }
    : { status_code: status, code: reason.toUpperCase().replace(/\W+/g, "_"), message: reason };
  if (code === "VALIDATION_ERROR") example.errors = [{ path: "body.title", message: "Too small: expected string to have >=1 characters" }];
  if (status >= 500) example.request_id = "3f9c0a7b1e-42";
  return { description, content: { "application/json": { schema: ref(ERROR_SCHEMA), example } } };
}

/** `components.responses` for the statuses in `used`. */
export function errorComponents(used: ReadonlySet<number>): Record<string, OpenAPIResponse> {
  const out: Record<string, OpenAPIResponse> = {};
  for (const [status, info] of ERROR_RESPONSES) {
    if (used.has(status)) out[info.component] = errorResponse(status, info.description, info.code);
  }
  return out;
}

function healthResponse(description: string): OpenAPIResponse {
  return { description, content: { "application/json": { schema: ref(HEALTH_SCHEMA) } } };
}

const healthRoutes = new WeakSet<Route>();

/** Marks the App's own GET /health route: the document describes it with `healthOperation()`. */
export function documentAsHealth(route: Route): Route {
  healthRoutes.add(route);
  return route;
}

export function isHealthRoute(route: Route): boolean {
  return healthRoutes.has(route);
}

const healthOperations = new WeakSet<OpenAPIOperation>();

/** True for the operation healthOperation() built (a user's own `health` tag is left alone). */
export function isHealthOperation(operation: OpenAPIOperation): boolean {
  return healthOperations.has(operation);
}

/** GET /health, as the App registers it. */
export function healthOperation(): OpenAPIOperation {
  const operation: OpenAPIOperation = {
    operationId: "getHealth",
    summary: "Health check",
    description: "Runs every registered health checker in parallel, each under a timeout. "
      + "Answers 503 while any checker fails, times out, or while the service is shutting down.",
    tags: ["health"],
    responses: { 200: healthResponse("Every checker is UP"), 503: healthResponse("At least one checker is DOWN") },
  };
  healthOperations.add(operation);
  return operation;
}
