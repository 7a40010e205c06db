import { createRequire } from "node:module";
import type {
  Context, SpanOptions, Tracer as ApiTracer, TextMapGetter, TextMapPropagator, TracerProvider,
} from "@opentelemetry/api";
import type { H3Event } from "h3";
import { isKError } from "../errors.js";
import { readRequestHeader, readSingleRequestHeader } from "../http/headers.js";
import { noopTracer, RECORDS_NOTHING, type RequestSpanEnd, type Span, type SpanAttributeValue, type Tracer } from "../integrations.js";
import { OTHER_METHOD, normalizeMethod } from "../http/method.js";
import {
  ATTR_ERROR_TYPE, ATTR_HTTP_REQUEST_METHOD, ATTR_HTTP_REQUEST_METHOD_ORIGINAL, ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE, ATTR_SERVER_ADDRESS, ATTR_SERVER_PORT, ATTR_URL_PATH, ATTR_URL_SCHEME, ATTR_USER_AGENT_ORIGINAL,
  OTHER_METHOD_SPAN_NAME,
} from "./semconv.js";
import { hasGlobalTracerProvider, otelApi } from "./api.js";
import { OtelSpan, RequestSpan, toException } from "./span.js";
import { readTraceparent } from "./traceparent.js";

/** Settings of `createOtelTracer`; with none, spans go to the global TracerProvider. */
export interface OtelTracerOptions {
  /** The OpenTelemetry tracer to use. Default: `tracerProvider.getTracer("keelson", version)`. */
  tracer?: ApiTracer;
  /** Default: the global provider (`trace.getTracerProvider()`), also when registered later. */
  tracerProvider?: TracerProvider;
  /**
   * Reads the parent from request headers. Default: keelson's W3C Trace Context parser
   * (`traceparent` + `tracestate`); pass `propagation` from `@opentelemetry/api` to use the
   * globally registered propagator (B3, Jaeger, …) instead.
   */
  propagator?: Pick<TextMapPropagator, "extract">;
}

let serverSpan: SpanOptions | undefined;
/** What the API's proxy provider delegates to while no SDK is registered. */
let noopProvider: TracerProvider | undefined;
const NOOP_SPAN = noopTracer.startSpan("noop");
const DEFAULT_PORTS: Readonly<Record<string, number>> = { "http:": 80, "https:": 443 };
// `url.scheme` without slicing `protocol` on every request.
const SCHEMES: Readonly<Record<string, string>> = { "http:": "http", "https:": "https" };

const HEADERS_GETTER: TextMapGetter<Headers> = {
  get: (headers, key) => headers.get(key) ?? undefined,
  keys: (headers) => [...headers.keys()],
};

/** keelson's own version, reported as the instrumentation scope version. */
function readVersion(): string | undefined {
  try {
    return (createRequire(import.meta.url)("keelson/package.json") as { version?: string }).version;
  } catch {
    return undefined;
  }
}

function isApiTracer(value: unknown): value is ApiTracer {
  return typeof (value as ApiTracer | undefined)?.startSpan === "function";
}

/**
 * keelson's `Tracer` (docs/tracing.md) on the OpenTelemetry API: one SERVER span per request named
 * `{method} {route}` with the stable HTTP semantic-convention attributes, W3C traceparent
 * continued, and child spans through `ctx.startSpan()` / `app.tracer.startSpan()`.
 * Accepts options or an OpenTelemetry Tracer.
 */
export function createOtelTracer(options: OtelTracerOptions | ApiTracer = {}): Tracer {
  const settings: OtelTracerOptions = isApiTracer(options) ? { tracer: options } : options;
  const { tracer, tracerProvider } = settings;
  // Which provider decides whether anything records: a given tracer that is not the API's proxy
  // belongs to an SDK, so there is nothing to check (null). With neither given, the API is not
  // loaded until a global provider is registered.
  const decides = tracer === undefined ? (tracerProvider ?? "global") : tracer instanceof otelApi().ProxyTracer ? "global" : null;
  return new OpenTelemetryTracer(
    tracer ?? tracerProvider?.getTracer("keelson", readVersion()),
    settings.propagator,
    decides,
  );
}

class OpenTelemetryTracer implements Tracer {
  #tracer: ApiTracer | undefined;
  readonly #propagator: Pick<TextMapPropagator, "extract"> | undefined;
  readonly #decides: TracerProvider | "global" | null;

  constructor(tracer: ApiTracer | undefined, propagator: Pick<TextMapPropagator, "extract"> | undefined, decides: TracerProvider | "global" | null) {
    this.#tracer = tracer;
    this.#propagator = propagator;
    this.#decides = decides;
  }

  /** The global provider's tracer (a proxy that follows the provider registered later), made at the first span. */
  get #apiTracer(): ApiTracer {
    return (this.#tracer ??= otelApi().trace.getTracerProvider().getTracer("keelson", readVersion()));
  }

  /**
   * True while only the API is there (no SDK registered): then no header is read and no span
   * object is made. Checked per request, so an SDK registered after startup is picked up.
   */
  #inert(): boolean {
    if (this.#decides === null) return false;
    if (this.#decides === "global") return !hasGlobalTracerProvider();
    const { ProxyTracerProvider } = otelApi();
    noopProvider ??= new ProxyTracerProvider().getDelegate();
    return this.#decides instanceof ProxyTracerProvider && this.#decides.getDelegate() === noopProvider;
  }

  /** startRequestSpan would return the no-op span now (`RECORDS_NOTHING`). */
  [RECORDS_NOTHING](): boolean {
    return this.#inert();
  }

  startRequestSpan(event: H3Event): Span {
    if (this.#inert()) return NOOP_SPAN;
    const method = event.req.method;
    const known = normalizeMethod(method) !== OTHER_METHOD;
    const methodName = known ? method : OTHER_METHOD_SPAN_NAME;
    serverSpan ??= Object.freeze({ kind: otelApi().SpanKind.SERVER });
    const span = new RequestSpan(this.#apiTracer.startSpan(methodName, serverSpan, this.#parent(event)), methodName);
    // Nothing records it (no SDK, or sampled out): skip the attribute work entirely.
    if (!span.recording) return span;
    const url = event.url;
    const otel = span.otel;
    otel.setAttribute(ATTR_HTTP_REQUEST_METHOD, known ? method : OTHER_METHOD);
    if (!known) otel.setAttribute(ATTR_HTTP_REQUEST_METHOD_ORIGINAL, method);
    otel.setAttribute(ATTR_URL_PATH, url.pathname);
    otel.setAttribute(ATTR_URL_SCHEME, SCHEMES[url.protocol] ?? url.protocol.slice(0, -1));
    const [hostname, explicitPort] = splitHost(url.href, url.protocol);
    otel.setAttribute(ATTR_SERVER_ADDRESS, hostname);
    const port = explicitPort ?? DEFAULT_PORTS[url.protocol];
    if (port !== undefined) otel.setAttribute(ATTR_SERVER_PORT, port);
    const userAgent = readSingleRequestHeader(event, "user-agent");
    if (userAgent !== null) otel.setAttribute(ATTR_USER_AGENT_ORIGINAL, userAgent);
    return span;
  }

  endRequestSpan(span: Span, end: RequestSpanEnd): void {
    if (!(span instanceof RequestSpan) || !span.recording) {
      span.end();
      return;
    }
    const { route, status, error } = end;
    const otel = span.otel;
    if (route !== undefined) {
      otel.updateName(`${span.methodName} ${route}`);
      otel.setAttribute(ATTR_HTTP_ROUTE, route);
    }
    otel.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status);
    // Server spans: 5xx and thrown errors fail the span; 4xx is the client's problem (status unset).
    if (error !== undefined) {
      const exception = toException(error);
      otel.recordException(exception);
      otel.setAttribute(ATTR_ERROR_TYPE, readErrorType(error, status));
      otel.setStatus({ code: otelApi().SpanStatusCode.ERROR, message: typeof exception === "string" ? exception : exception.message });
    } else if (status >= 500) {
      otel.setAttribute(ATTR_ERROR_TYPE, String(status));
      otel.setStatus({ code: otelApi().SpanStatusCode.ERROR });
    }
    otel.end();
  }

  startSpan(name: string, options?: { parent?: Span; attributes?: Record<string, SpanAttributeValue> }): Span {
    if (this.#inert()) return NOOP_SPAN;
    const parent = options?.parent;
    const { context, trace } = otelApi();
    const active = context.active();
    const parentContext = parent instanceof OtelSpan ? trace.setSpan(active, parent.otel) : active;
    return new OtelSpan(this.#apiTracer.startSpan(name, options?.attributes ? { attributes: options.attributes } : {}, parentContext));
  }

  /** The incoming trace context, or the root (a new trace) when absent or invalid. */
  #parent(event: H3Event): Context {
    const { ROOT_CONTEXT, trace } = otelApi();
    if (this.#propagator !== undefined) return this.#propagator.extract(ROOT_CONTEXT, event.req.headers, HEADERS_GETTER);
    const traceparent = readRequestHeader(event, "traceparent");
    if (traceparent === null) return ROOT_CONTEXT;
    const remote = readTraceparent(traceparent, () => readRequestHeader(event, "tracestate"));
    return remote === undefined ? ROOT_CONTEXT : trace.setSpanContext(ROOT_CONTEXT, remote);
  }
}

// A server answers under one or two host names: the last split is kept and reused.
let lastHost: string | undefined;
let lastSplit: readonly [hostname: string, port: number | undefined] = ["", undefined];

/**
 * The host name (lower case) and explicit port of a request URL, read from its `href`. Asking
 * srvx's URL for `hostname` or `port` builds a full WHATWG URL on every request; its
 * `href` and `protocol` are plain strings it already has. IPv6 hosts keep their brackets, as
 * `URL#hostname` does.
 */
export function splitHost(href: string, protocol: string): readonly [hostname: string, port: number | undefined] {
  const start = protocol.length + 2;
  // The usual request names the last host again: compared in place, with no scan and no slice.
  if (lastHost !== undefined && href.startsWith(lastHost, start) && endsHost(href, start + lastHost.length)) return lastSplit;
  let end = start;
  while (end < href.length && href[end] !== "/" && href[end] !== "?" && href[end] !== "#") end++;
  const host = href.slice(start, end);
  const colon = host.lastIndexOf(":");
  const hasPort = colon !== -1 && colon > host.lastIndexOf("]");
  const port = hasPort ? host.slice(colon + 1) : "";
  lastSplit = [(hasPort ? host.slice(0, colon) : host).toLowerCase(), port === "" ? undefined : Number(port)];
  lastHost = host;
  return lastSplit;
}

/** Whether a URL's host ends at `index`: the end of the href, or a `/`, `?` or `#`. */
function endsHost(href: string, index: number): boolean {
  if (index === href.length) return true;
  const code = href.charCodeAt(index);
  return code === 0x2f || code === 0x3f || code === 0x23;
}

/** `error.type`: a KError's code, an exception's class name, else the status code. */
function readErrorType(error: unknown, status: number): string {
  if (isKError(error)) return error.code;
  if (error instanceof Error) return error.name === "Error" ? error.constructor.name : error.name;
  return String(status);
}
