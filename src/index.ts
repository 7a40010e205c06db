export { App, Group, type Module, type ResolvedConfig, type Router } from "./app.js";
export type { Env, KConfig } from "./config.js";
export type { CorsConfig } from "./http/cors.js";
export type { DocsConfig, DocsContact, DocsLicense, DocsTag } from "./docs/types.js";
export { envNumber, type NumberRule } from "./checks.js";
export type { LoadSheddingOptions, ShedReason } from "./http/load-shed.js";
export { HandlerContext } from "./http/context.js";
export { buildOpenAPIDocument, type OpenAPIDocument } from "./docs/index.js";
export {
  ERROR_CODES, KError, badRequest, conflict, createError, forbidden, internal, isKError, notFound,
  serviceUnavailable, tooManyRequests, unauthorized, validationError,
  type ErrorCode, type ErrorCodeInfo, type FieldError,
} from "./errors.js";
export type { HealthReport } from "./health.js";
export {
  UNMATCHED_ROUTE, noopTracer,
  type HealthChecker, type MetricsCollector, type RequestSpanEnd, type Scheduler, type ShutdownHook, type Span,
  type SpanAttributeValue, type Tracer, type Translator,
} from "./integrations.js";
export type { ShutdownReport } from "./lifecycle/lifecycle.js";
export { defineJob, type Job, type JobContext, type JobLeases, type JobOptions, type JobRunOn, type JobStore } from "./jobs/define.js";
export {
  LogFormatJSON, LogFormatText, Logger, flushAllLoggers, newLogger, newLoggerWithFormat,
  type LogFormat, type LogLevel, type LogWriter, type RequestLogEntry, type RouteLogLevel,
} from "./logging/logger.js";
export { RequestLogger, type LogFieldValue } from "./logging/request-logger.js";
export { createTestLogger, type TestLogger, type TestLoggerOptions } from "./logging/test-logger.js";
export {
  DEFAULT_LIMIT, DEFAULT_PAGE, MAX_LIMIT, newPage, pageOffset, parsePagination, type Page, type PageQuery,
} from "./pagination.js";
export { pageOf, pageQuery, type DocumentedSchema, type PageOfOptions } from "./page-schema.js";
export {
  MemoryRateLimitStore, rateLimit,
  type RateLimitAlgorithm, type RateLimitGrant, type RateLimitOptions, type RateLimitStore, type RateLimitTake,
} from "./rate-limit/rate-limit.js";
export { addressKey } from "./rate-limit/address.js";
export { compress, type CompressOptions, type CompressionEncoding } from "./compress/compress.js";
export { IDEMPOTENCY_KEY_HEADER, IDEMPOTENT_REPLAYED_HEADER, idempotency, type IdempotencyOptions } from "./idempotency/idempotency.js";
export {
  IdempotencyStoreFullError, MemoryIdempotencyStore,
  type IdempotencyBegin, type IdempotencyComplete, type IdempotencyRelease, type IdempotencyState, type IdempotencyStore,
  type MemoryIdempotencyStoreOptions, type StoredResponse,
} from "./idempotency/store.js";
export { InMemoryRepository, type Repository } from "./repository.js";
export { created, json, noContent } from "./http/results.js";
export type { FormLimits } from "./http/form.js";
export {
  describeMiddleware, getMiddlewareContract,
  type MiddlewareContract, type MiddlewareHeaderDoc, type MiddlewareRequestHeaderDoc, type MiddlewareResponseDoc, type MiddlewareSecurity, type OpenAPISecurityScheme,
} from "./http/middleware-contract.js";
export type { AuthInfo } from "./http/context.js";
export {
  Route, del, get, patch, post, put,
  type Controller, type Handler, type PathParams, type RawQuery, type RegisteredRoute, type ResponseDoc,
  type RouteMethod, type RouteOptions,
} from "./http/route.js";
export { EventStream, type EventStreamOptions, type SendOptions } from "./streams/event-stream.js";
export type { ChannelEvent, Missed } from "./streams/event.js";
export { configureStreams, publish, type StreamsOptions } from "./streams/hub.js";
export { sse, websocket, type EventStreamHandler, type WebSocketHandler } from "./streams/routes.js";
export { GOING_AWAY, KeelsonSocket, type WebSocketHooks, type WebSocketOptions } from "./streams/websocket.js";
