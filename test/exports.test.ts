import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import * as keelson from "../src/index.js";
import * as auth from "../src/entries/auth.js";
import * as metrics from "../src/entries/metrics.js";
import * as redis from "../src/entries/redis.js";
import * as sql from "../src/entries/sql.js";
import * as tracing from "../src/entries/tracing.js";
import * as supervisor from "../supervisor/index.js";

const entryPaths = ["../src/index.ts", "../src/entries/auth.ts", "../src/entries/metrics.ts", "../src/entries/tracing.ts", "../src/entries/sql.ts", "../src/entries/redis.ts",
  "../supervisor/index.ts"];
let program: ts.Program | undefined;

/** The names an entry point exports only as types (not at runtime), as the compiler sees them. */
function typeOnlyExports(path = "../src/index.ts", runtimeModule: object = keelson): string[] {
  const entry = fileURLToPath(new URL(path, import.meta.url));
  // One program for every entry point: building it is most of this file's run time.
  program ??= ts.createProgram(entryPaths.map((p) => fileURLToPath(new URL(p, import.meta.url))), {
    module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2023,
    strict: true, skipLibCheck: true, noEmit: true,
  });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(entry);
  const module = source && checker.getSymbolAtLocation(source);
  if (!module) throw new Error(`cannot read the exports of ${path}`);
  const runtime = new Set(Object.keys(runtimeModule));
  return checker.getExportsOfModule(module).map((symbol) => symbol.name).filter((name) => !runtime.has(name)).toSorted();
}

describe("the keelson barrel (src/index.ts)", () => {
  // Review any change to this list: every name here is public API that users will import.
  it("exports exactly these runtime names", () => {
    expect(Object.keys(keelson).toSorted()).toMatchInlineSnapshot(`
      [
        "App",
        "DEFAULT_LIMIT",
        "DEFAULT_PAGE",
        "ERROR_CODES",
        "EventStream",
        "GOING_AWAY",
        "Group",
        "HandlerContext",
        "IDEMPOTENCY_KEY_HEADER",
        "IDEMPOTENT_REPLAYED_HEADER",
        "IdempotencyStoreFullError",
        "InMemoryRepository",
        "KError",
        "KeelsonSocket",
        "LogFormatJSON",
        "LogFormatText",
        "Logger",
        "MAX_LIMIT",
        "MemoryIdempotencyStore",
        "MemoryRateLimitStore",
        "RequestLogger",
        "Route",
        "UNMATCHED_ROUTE",
        "addressKey",
        "badRequest",
        "buildOpenAPIDocument",
        "compress",
        "configureStreams",
        "conflict",
        "createError",
        "createTestLogger",
        "created",
        "defineJob",
        "del",
        "describeMiddleware",
        "envNumber",
        "flushAllLoggers",
        "forbidden",
        "get",
        "getMiddlewareContract",
        "idempotency",
        "internal",
        "isKError",
        "json",
        "newLogger",
        "newLoggerWithFormat",
        "newPage",
        "noContent",
        "noopTracer",
        "notFound",
        "pageOf",
        "pageOffset",
        "pageQuery",
        "parsePagination",
        "patch",
        "post",
        "publish",
        "put",
        "rateLimit",
        "serviceUnavailable",
        "sse",
        "tooManyRequests",
        "unauthorized",
        "validationError",
        "websocket",
      ]
    `);
  });

  it("exports exactly these type-only names", () => {
    expect(typeOnlyExports()).toMatchInlineSnapshot(`
      [
        "AuthInfo",
        "ChannelEvent",
        "CompressOptions",
        "CompressionEncoding",
        "Controller",
        "CorsConfig",
        "DocsConfig",
        "DocsContact",
        "DocsLicense",
        "DocsTag",
        "DocumentedSchema",
        "Env",
        "ErrorCode",
        "ErrorCodeInfo",
        "EventStreamHandler",
        "EventStreamOptions",
        "FieldError",
        "FormLimits",
        "Handler",
        "HealthChecker",
        "HealthReport",
        "IdempotencyBegin",
        "IdempotencyComplete",
        "IdempotencyOptions",
        "IdempotencyRelease",
        "IdempotencyState",
        "IdempotencyStore",
        "Job",
        "JobContext",
        "JobLeases",
        "JobOptions",
        "JobRunOn",
        "JobStore",
        "KConfig",
        "LoadSheddingOptions",
        "LogFieldValue",
        "LogFormat",
        "LogLevel",
        "LogWriter",
        "MemoryIdempotencyStoreOptions",
        "MetricsCollector",
        "MiddlewareContract",
        "MiddlewareHeaderDoc",
        "MiddlewareRequestHeaderDoc",
        "MiddlewareResponseDoc",
        "MiddlewareSecurity",
        "Missed",
        "Module",
        "NumberRule",
        "OpenAPIDocument",
        "OpenAPISecurityScheme",
        "Page",
        "PageOfOptions",
        "PageQuery",
        "PathParams",
        "RateLimitAlgorithm",
        "RateLimitGrant",
        "RateLimitOptions",
        "RateLimitStore",
        "RateLimitTake",
        "RawQuery",
        "RegisteredRoute",
        "Repository",
        "RequestLogEntry",
        "RequestSpanEnd",
        "ResolvedConfig",
        "ResponseDoc",
        "RouteLogLevel",
        "RouteMethod",
        "RouteOptions",
        "Router",
        "Scheduler",
        "SendOptions",
        "ShedReason",
        "ShutdownHook",
        "ShutdownReport",
        "Span",
        "SpanAttributeValue",
        "StoredResponse",
        "StreamsOptions",
        "TestLogger",
        "TestLoggerOptions",
        "Tracer",
        "Translator",
        "WebSocketHandler",
        "WebSocketHooks",
        "WebSocketOptions",
      ]
    `);
  });

  it("exports no internal helper", () => {
    const internal = ["compileRoute", "readJSONBody", "createCors", "toKError", "errorResponse", "negotiateLanguage", "Lifecycle", "RequestState", "Sink", "joinPath", "checkHealth"];
    for (const name of internal) expect(keelson).not.toHaveProperty(name);
  });
});

// The other entry points (package.json "exports"): same rule, every name is public API.
describe.each([
  ["keelson/auth", "../src/entries/auth.ts", auth],
  ["keelson/metrics", "../src/entries/metrics.ts", metrics],
  ["keelson/tracing", "../src/entries/tracing.ts", tracing],
  ["keelson/sql", "../src/entries/sql.ts", sql],
  ["keelson/redis", "../src/entries/redis.ts", redis],
  ["keelson/supervisor", "../supervisor/index.ts", supervisor],
] as const)("the %s entry point", (_name, path, runtimeModule) => {
  it("exports exactly these runtime and type-only names", () => {
    expect({ runtime: Object.keys(runtimeModule).toSorted(), types: typeOnlyExports(path, runtimeModule) }).toMatchSnapshot();
  });
});

describe("docs/reference.md", () => {
  it("names every export of every entry point", () => {
    const readme = readFileSync(fileURLToPath(new URL("../docs/reference.md", import.meta.url)), "utf8");
    const entries = [
      ["../src/index.ts", keelson], ["../src/entries/auth.ts", auth], ["../src/entries/metrics.ts", metrics],
      ["../src/entries/tracing.ts", tracing], ["../src/entries/sql.ts", sql], ["../src/entries/redis.ts", redis],
      ["../supervisor/index.ts", supervisor],
    ] as const;
    const names = entries.flatMap(([path, runtimeModule]) => [...Object.keys(runtimeModule), ...typeOnlyExports(path, runtimeModule)]);
    expect(names.filter((name) => !readme.includes(`\`${name}\``))).toEqual([]);
  });
});
