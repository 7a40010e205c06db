import { SpanKind, SpanStatusCode, context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan,
} from "@opentelemetry/sdk-trace-base";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { App, get, internal, notFound, post, serviceUnavailable } from "../src/index.js";
import { request as httpRequest } from "node:http";
import { splitHost } from "../src/tracing/otel-tracer.js";
import { getOtelSpan, createOtelTracer, withSpan } from "../src/entries/tracing.js";
import { readTraceparent } from "../src/tracing/traceparent.js";
import { listenOn } from "./helpers/listen.js";
import { captureLogs } from "./helpers/logs.js";

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const contextManager = new AsyncLocalStorageContextManager().enable();
context.setGlobalContextManager(contextManager);
afterAll(() => contextManager.disable());

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID = "00f067aa0ba902b7";

function buildApp() {
  const logs = captureLogs("json");
  const app = new App({ logger: logs.logger });
  app.setTracer(createOtelTracer({ tracerProvider: provider }));
  app.route(get("/books/:id", (ctx) => {
    if (ctx.params.id === "missing") throw notFound("no such book");
    if (ctx.params.id === "panic") throw new TypeError("a bug");
    if (ctx.params.id === "internal") throw internal("database down", new Error("ECONNREFUSED"));
    if (ctx.params.id === "busy") throw serviceUnavailable("try later");
    if (ctx.params.id === "string") throw "thrown string";
    const child = ctx.startSpan("load book");
    child.setAttribute("book.id", ctx.params.id);
    child.end();
    return { id: ctx.params.id };
  }));
  app.route(post("/books", { body: z.object({ title: z.string().min(1) }) }, (ctx) => ({ title: ctx.body.title })));
  return { app, logs };
}

const spans = (): ReadableSpan[] => exporter.getFinishedSpans();
const serverSpans = (): ReadableSpan[] => spans().filter((s) => s.kind === SpanKind.SERVER);
function onlyServerSpan(): ReadableSpan {
  const found = serverSpans();
  expect(found).toHaveLength(1);
  return found[0]!;
}

beforeEach(() => exporter.reset());

describe("server spans", () => {
  it("names a matched request {method} {route} with the stable HTTP attributes and status unset", async () => {
    const { app } = buildApp();
    const response = await app.request("http://books.example:8080/books/42?q=secret", { headers: { "user-agent": "vitest" } });
    expect(response.status).toBe(200);
    const span = onlyServerSpan();
    expect(span.name).toBe("GET /books/:id");
    expect(span.attributes).toEqual({
      "http.request.method": "GET",
      "url.path": "/books/42",
      "url.scheme": "http",
      "server.address": "books.example",
      "server.port": 8080,
      "user_agent.original": "vitest",
      "keelson.request_id": response.headers.get("x-request-id"),
      "http.route": "/books/:id",
      "http.response.status_code": 200,
    });
    expect(span.status.code).toBe(SpanStatusCode.UNSET);
    expect(span.instrumentationScope.name).toBe("keelson");
    expect(span.ended).toBe(true);
  });

  it("uses the default port of the scheme when the URL has none", async () => {
    const { app } = buildApp();
    await app.request("https://books.example/books/1");
    expect(onlyServerSpan().attributes["server.port"]).toBe(443);
    expect(onlyServerSpan().attributes["url.scheme"]).toBe("https");
  });

  it("reads server.address and server.port from the Host header on a real socket", async () => {
    const app = new App({ port: 0, logger: captureLogs("json").logger });
    app.setTracer(createOtelTracer({ tracerProvider: provider }));
    app.route(get("/books/:id", (ctx) => ({ id: ctx.params.id })));
    const server = await listenOn(app);
    const hostOf = async (host: string) => {
      exporter.reset();
      await new Promise<void>((resolve, reject) => {
        httpRequest({ port: server.port, host: "127.0.0.1", path: "/books/1?q=1", headers: { host } }, (res) => res.resume().on("end", resolve)).on("error", reject).end();
      });
      const { attributes } = onlyServerSpan();
      return [attributes["server.address"], attributes["server.port"], attributes["url.path"]];
    };
    try {
      expect(await hostOf("Books.Example:8080")).toEqual(["books.example", 8080, "/books/1"]);
      expect(await hostOf("books.example")).toEqual(["books.example", 80, "/books/1"]);
      expect(await hostOf("[::1]:9000")).toEqual(["[::1]", 9000, "/books/1"]);
      expect(await hostOf("[::1]")).toEqual(["[::1]", 80, "/books/1"]);
    } finally {
      await server.stop();
    }
  });

  it("reads user_agent.original on a real socket as Headers#get does: absent, one, or repeated ones joined", async () => {
    const app = new App({ port: 0, logger: captureLogs("json").logger });
    app.setTracer(createOtelTracer({ tracerProvider: provider }));
    app.route(get("/ua", () => ({ ok: true })));
    const server = await listenOn(app);
    // Raw header pairs: node's parser keeps only the first User-Agent, Headers joins them all.
    const userAgentOf = async (headers: string[]) => {
      exporter.reset();
      await new Promise<void>((resolve, reject) => {
        httpRequest({ port: server.port, host: "127.0.0.1", path: "/ua", headers: ["Host", "127.0.0.1", ...headers] }, (res) => res.resume().on("end", resolve)).on("error", reject).end();
      });
      return onlyServerSpan().attributes["user_agent.original"];
    };
    try {
      expect(await userAgentOf([])).toBeUndefined();
      expect(await userAgentOf(["User-Agent", "curl/8.5.0"])).toBe("curl/8.5.0");
      expect(await userAgentOf(["user-agent", "a/1", "USER-AGENT", "b/2"])).toBe("a/1, b/2");
    } finally {
      await server.stop();
    }
  });

  it("splits each host anew when it is a prefix of the last one or the last one is its prefix", () => {
    const sequence = ["http://h.example/x", "http://h.example:81/x", "http://h.example.org/", "http://h.example", "http://h.example?q", "http://h.ex/"];
    for (const href of sequence) {
      const url = new URL(href);
      expect([splitHost(href, url.protocol)[0], splitHost(href, url.protocol)[1]], href).toEqual([url.hostname, url.port === "" ? undefined : Number(url.port)]);
    }
  });

  it("splits a host the way URL does, without building a URL", () => {
    for (const href of ["http://a.example/x", "http://A.Example:81/x?y", "https://[::1]:8443/", "http://[2001:db8::1]/p", "http://h:1#f", "http://h?q", "https://h:0443/"]) {
      const url = new URL(href);
      const defaultPort = url.protocol === "https:" ? 443 : 80;
      const [hostname, port] = splitHost(href, url.protocol);
      expect([hostname, port ?? defaultPort], href).toEqual([url.hostname, url.port === "" ? defaultPort : Number(url.port)]);
      // A WHATWG URL's own href (what app.request() hands h3) splits the same way.
      expect(splitHost(url.href, url.protocol)[0], url.href).toBe(url.hostname);
    }
  });

  it("names an unmatched request by its method alone, with no http.route", async () => {
    const { app } = buildApp();
    expect((await app.request("/nothing/here")).status).toBe(404);
    const span = onlyServerSpan();
    expect(span.name).toBe("GET");
    expect(span.attributes["http.route"]).toBeUndefined();
    expect(span.attributes["http.response.status_code"]).toBe(404);
    expect(span.status.code).toBe(SpanStatusCode.UNSET);
  });

  it("reports an unknown method as _OTHER with the original kept, and names the span HTTP", async () => {
    const { app } = buildApp();
    await app.request("/nothing", { method: "PROPFIND" });
    const span = onlyServerSpan();
    expect(span.name).toBe("HTTP");
    expect(span.attributes["http.request.method"]).toBe("_OTHER");
    expect(span.attributes["http.request.method_original"]).toBe("PROPFIND");
  });

  it("leaves 4xx answers (404 thrown by a handler, 405, 422) unset, without error.type", async () => {
    const { app } = buildApp();
    expect((await app.request("/books/missing")).status).toBe(404);
    expect((await app.request("/books/1", { method: "DELETE" })).status).toBe(405);
    const invalid = await app.request("/books", { method: "POST", body: "{\"title\":\"\"}", headers: { "content-type": "application/json" } });
    expect(invalid.status).toBe(422);
    const found = serverSpans();
    expect(found.map((s) => s.attributes["http.response.status_code"]).toSorted()).toEqual([404, 405, 422]);
    for (const span of found) {
      expect(span.status.code).toBe(SpanStatusCode.UNSET);
      expect(span.attributes["error.type"]).toBeUndefined();
    }
    expect(found.find((s) => s.attributes["http.response.status_code"] === 422)?.name).toBe("POST /books");
  });

  it("marks a thrown error as Error with error.type, the exception recorded", async () => {
    const { app } = buildApp();
    expect((await app.request("/books/panic")).status).toBe(500);
    const span = onlyServerSpan();
    expect(span.status).toEqual({ code: SpanStatusCode.ERROR, message: "a bug" });
    expect(span.attributes["error.type"]).toBe("TypeError");
    expect(span.attributes["http.response.status_code"]).toBe(500);
    const event = span.events.find((e) => e.name === "exception");
    expect(event?.attributes?.["exception.type"]).toBe("TypeError");
    expect(event?.attributes?.["exception.message"]).toBe("a bug");
  });

  it("uses the KError code as error.type for 5xx KErrors, and the status for thrown non-errors", async () => {
    const { app } = buildApp();
    await app.request("/books/internal");
    await app.request("/books/busy");
    await app.request("/books/string");
    const byStatus = serverSpans().map((s) => [s.attributes["http.response.status_code"], s.attributes["error.type"], s.status.code]);
    expect(byStatus).toContainEqual([500, "INTERNAL_ERROR", SpanStatusCode.ERROR]);
    expect(byStatus).toContainEqual([503, "SERVICE_UNAVAILABLE", SpanStatusCode.ERROR]);
    expect(byStatus).toContainEqual([500, "500", SpanStatusCode.ERROR]);
  });
});

describe("trace context", () => {
  it("continues a valid traceparent: same trace, the caller's span as remote parent, tracestate kept", async () => {
    const { app } = buildApp();
    await app.request("/books/1", { headers: { traceparent: `00-${TRACE_ID}-${PARENT_ID}-01`, tracestate: "vendor=abc,other=x" } });
    const span = onlyServerSpan();
    expect(span.spanContext().traceId).toBe(TRACE_ID);
    expect(span.parentSpanContext?.spanId).toBe(PARENT_ID);
    expect(span.parentSpanContext?.isRemote).toBe(true);
    expect(span.spanContext().traceState?.get("vendor")).toBe("abc");
  });

  it("continues a traceparent on a real socket, where repeated tracestate headers are joined as one list", async () => {
    const app = new App({ port: 0, logger: captureLogs("json").logger });
    app.setTracer(createOtelTracer({ tracerProvider: provider }));
    app.route(get("/books/:id", (ctx) => ({ id: ctx.params.id })));
    const server = await listenOn(app);
    try {
      await new Promise<void>((resolve, reject) => {
        const req = httpRequest({ port: server.port, host: "127.0.0.1", path: "/books/1" }, (res) => res.resume().on("end", resolve));
        req.on("error", reject);
        req.setHeader("traceparent", `00-${TRACE_ID}-${PARENT_ID}-01`);
        req.setHeader("tracestate", ["vendor=abc", "other=x"]);
        req.end();
      });
      const span = onlyServerSpan();
      expect(span.spanContext().traceId).toBe(TRACE_ID);
      expect(span.parentSpanContext?.spanId).toBe(PARENT_ID);
      expect(span.spanContext().traceState?.get("vendor")).toBe("abc");
      expect(span.spanContext().traceState?.get("other")).toBe("x");
    } finally {
      await server.stop();
    }
  });

  it("makes handler spans children of the server span", async () => {
    const { app } = buildApp();
    await app.request("/books/7", { headers: { traceparent: `00-${TRACE_ID}-${PARENT_ID}-01` } });
    const server = onlyServerSpan();
    const child = spans().find((s) => s.name === "load book");
    expect(child?.spanContext().traceId).toBe(TRACE_ID);
    expect(child?.parentSpanContext?.spanId).toBe(server.spanContext().spanId);
    expect(child?.attributes["book.id"]).toBe("7");
    expect(child?.kind).toBe(SpanKind.INTERNAL);
  });

  const invalid: Record<string, string> = {
    "all-zero trace id": `00-${"0".repeat(32)}-${PARENT_ID}-01`,
    "all-zero parent id": `00-${TRACE_ID}-${"0".repeat(16)}-01`,
    "version ff": `ff-${TRACE_ID}-${PARENT_ID}-01`,
    "upper-case hex": `00-${TRACE_ID.toUpperCase()}-${PARENT_ID}-01`,
    "short trace id": `00-${TRACE_ID.slice(1)}-${PARENT_ID}-01`,
    "extra field on version 00": `00-${TRACE_ID}-${PARENT_ID}-01-extra`,
    "garbage": "not a traceparent",
  };
  for (const [what, header] of Object.entries(invalid)) {
    it(`starts a new trace for an invalid traceparent (${what})`, async () => {
      const { app } = buildApp();
      await app.request("/books/1", { headers: { traceparent: header } });
      const span = onlyServerSpan();
      expect(span.parentSpanContext).toBeUndefined();
      expect(span.spanContext().traceId).not.toBe(TRACE_ID);
      expect(span.spanContext().traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(span.spanContext().traceId).not.toBe("0".repeat(32));
    });
  }

  it("accepts a future version with extra fields, as the W3C spec asks", () => {
    expect(readTraceparent(`01-${TRACE_ID}-${PARENT_ID}-01-future`, null)?.traceId).toBe(TRACE_ID);
    expect(readTraceparent(`00-${TRACE_ID}-${PARENT_ID}-00`, null)?.traceFlags).toBe(0);
    expect(readTraceparent(null, "a=b")).toBeUndefined();
  });

  it("follows the caller's sampling decision: an unsampled parent records nothing, but the log keeps its trace id", async () => {
    const { app, logs } = buildApp();
    await app.request("/books/1", { headers: { traceparent: `00-${TRACE_ID}-${PARENT_ID}-00` } });
    expect(spans()).toHaveLength(0);
    expect(logs.entries().find((e) => e.path === "/books/1")?.trace_id).toBe(TRACE_ID);
  });

  it("can use the global propagator instead of the built-in W3C parser", async () => {
    const app = new App({ logger: captureLogs().logger });
    const seen: string[] = [];
    app.setTracer(createOtelTracer({
      tracerProvider: provider,
      propagator: { extract: (ctx, carrier, getter) => (seen.push(String(getter.get(carrier, "x-custom"))), ctx) },
    }));
    await app.request("/", { headers: { "x-custom": "hello" } });
    expect(seen).toEqual(["hello"]);
  });
});

describe("logs, child spans and the OpenTelemetry context", () => {
  it("puts the request's trace id in its JSON log line", async () => {
    const { app, logs } = buildApp();
    await app.request("/books/1");
    const traceId = onlyServerSpan().spanContext().traceId;
    const line = logs.entries().find((e) => e.path === "/books/1");
    expect(line?.trace_id).toBe(traceId);
  });

  it("app.tracer.startSpan takes an explicit parent and attributes", async () => {
    const { app } = buildApp();
    const parent = app.tracer.startSpan("job");
    const child = app.tracer.startSpan("step", { parent, attributes: { "step.n": 1 } });
    child.end();
    parent.end();
    const [step, job] = spans();
    expect(step?.name).toBe("step");
    expect(step?.attributes["step.n"]).toBe(1);
    expect(step?.parentSpanContext?.spanId).toBe(job?.spanContext().spanId);
    expect(parent.traceId).toBe(job?.spanContext().traceId);
  });

  it("withSpan makes a keelson span the active OpenTelemetry span", async () => {
    const { app } = buildApp();
    const span = app.tracer.startSpan("outer");
    const userTracer = provider.getTracer("user-code");
    await withSpan(span, async () => {
      await new Promise((resolve) => setTimeout(resolve, 1));
      expect(trace.getActiveSpan()).toBe(getOtelSpan(span));
      userTracer.startSpan("inner").end();
    });
    span.end();
    expect(trace.getActiveSpan()).toBeUndefined();
    const inner = spans().find((s) => s.name === "inner");
    expect(inner?.parentSpanContext?.spanId).toBe(getOtelSpan(span)?.spanContext().spanId);
  });

  it("recordException on a child marks it failed", async () => {
    const { app } = buildApp();
    const span = app.tracer.startSpan("risky");
    span.recordException(new RangeError("out of range"));
    span.end();
    expect(spans()[0]?.status).toEqual({ code: SpanStatusCode.ERROR, message: "out of range" });
  });
});

describe("without an SDK (only @opentelemetry/api)", () => {
  it("records nothing, reads no header and logs no trace id, even for an incoming traceparent", async () => {
    const logs = captureLogs("json");
    const app = new App({ logger: logs.logger });
    app.setTracer(createOtelTracer());
    app.route(get("/x", (ctx) => {
      const child = ctx.startSpan("child");
      child.setAttribute("a", 1);
      child.end();
      return { traceId: ctx.span.traceId, otel: getOtelSpan(ctx.span) !== undefined };
    }));
    expect(await (await app.request("/x")).json()).toEqual({ traceId: "", otel: false });
    const traced = await app.request("/x", { headers: { traceparent: `00-${TRACE_ID}-${PARENT_ID}-01` } });
    expect(await traced.json()).toEqual({ traceId: "", otel: false });
    const lines = logs.entries().filter((e) => e.path === "/x");
    expect(lines).toHaveLength(2);
    for (const line of lines) expect(line.trace_id).toBeUndefined();
    expect(spans()).toHaveLength(0);
  });

  it("picks up an SDK registered globally after the tracer was made", async () => {
    const app = new App({ logger: captureLogs().logger });
    app.setTracer(createOtelTracer());
    app.route(get("/late", () => ({ ok: true })));
    await app.request("/late");
    expect(spans()).toHaveLength(0);
    trace.setGlobalTracerProvider(provider);
    try {
      await app.request("/late");
      expect(onlyServerSpan().name).toBe("GET /late");
    } finally {
      trace.disable();
    }
  });

  it("treats a tracer from an SDK provider as recording even when nothing is registered globally", async () => {
    const app = new App({ logger: captureLogs().logger });
    app.setTracer(createOtelTracer(provider.getTracer("mine")));
    app.route(get("/own", () => ({ ok: true })));
    await app.request("/own");
    expect(onlyServerSpan().instrumentationScope.name).toBe("mine");
  });
});
