import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import * as keelson from "../src/index.js";

/** Every name src/index.ts exports, types included, as the compiler sees them. */
function typeOnlyExports(): string[] {
  const entry = fileURLToPath(new URL("../src/index.ts", import.meta.url));
  const program = ts.createProgram([entry], {
    module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2023,
    strict: true, skipLibCheck: true, noEmit: true,
  });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(entry);
  const module = source && checker.getSymbolAtLocation(source);
  if (!module) throw new Error("cannot read the exports of src/index.ts");
  const runtime = new Set(Object.keys(keelson));
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
        "Group",
        "HandlerContext",
        "InMemoryRepository",
        "KError",
        "LogFormatJSON",
        "LogFormatText",
        "Logger",
        "MAX_LIMIT",
        "Route",
        "UNMATCHED_ROUTE",
        "badRequest",
        "buildOpenAPIDocument",
        "checkHealth",
        "conflict",
        "createError",
        "created",
        "del",
        "flushAllLoggers",
        "forbidden",
        "get",
        "internal",
        "isKError",
        "joinPath",
        "json",
        "newLogger",
        "newLoggerWithFormat",
        "newPage",
        "noContent",
        "noopTracer",
        "notFound",
        "pageOffset",
        "parsePagination",
        "patch",
        "post",
        "put",
        "serviceUnavailable",
        "tooManyRequests",
        "unauthorized",
        "validationError",
      ]
    `);
  });

  it("exports exactly these type-only names", () => {
    expect(typeOnlyExports()).toMatchInlineSnapshot(`
      [
        "ContextServices",
        "Controller",
        "CorsConfig",
        "DocsConfig",
        "DocsContact",
        "DocsLicense",
        "DocsTag",
        "Env",
        "ErrorCode",
        "ErrorCodeInfo",
        "FieldError",
        "Handler",
        "HandlerResult",
        "HealthChecker",
        "HealthReport",
        "KConfig",
        "LogFormat",
        "LogWriter",
        "MetricsCollector",
        "Module",
        "OpenAPIDocument",
        "OpenAPISecurityScheme",
        "Page",
        "PageQuery",
        "PathParams",
        "RawQuery",
        "RegisteredRoute",
        "Repository",
        "RequestLogEntry",
        "RequestSpanEnd",
        "ResolvedConfig",
        "ResponseDoc",
        "RouteMethod",
        "RouteOptions",
        "Router",
        "Scheduler",
        "ShutdownHook",
        "ShutdownReport",
        "Span",
        "SpanAttributeValue",
        "Tracer",
        "Translator",
      ]
    `);
  });

  it("exports no internal helper", () => {
    const internal = ["compileRoute", "readJSONBody", "createCors", "toKError", "errorResponse", "negotiateLanguage", "Lifecycle", "RequestState", "Sink"];
    for (const name of internal) expect(keelson).not.toHaveProperty(name);
  });
});
