import type { H3Event } from "h3";
import { describe, expect, it } from "vitest";
import {
  App, UNMATCHED_ROUTE, get, noopTracer, post, type RequestSpanEnd, type Scheduler, type Span, type SpanAttributeValue,
  type Tracer, type Translator,
} from "../src/index.js";
import { listenOn } from "./helpers/listen.js";
import { captureLogs } from "./helpers/logs.js";

type Observation = [method: string, route: string, status: number, durationSeconds: number];

function measuredApp(): { app: App; observed: Observation[] } {
  const observed: Observation[] = [];
  const app = new App({ port: 0, logger: captureLogs().logger });
  app.setMetricsCollector({ observeRequest: (...args) => void observed.push(args) });
  app.route(get("/books/:id", (ctx) => ({ id: ctx.params.id })));
  app.route(post("/books", () => ({})));
  app.route(get("/boom", () => {
    throw new Error("boom");
  }));
  app.route(get("/slow", async () => {
    await new Promise((resolve) => setTimeout(resolve, 60));
    return {};
  }));
  return { app, observed };
}

describe("metrics collector", () => {
  it("is called once per request with method, route template, status and duration in seconds", async () => {
    const { app, observed } = measuredApp();
    await app.request("/books/b1?x=1");
    await app.request("/books/b2", { method: "HEAD" });
    await app.request("/no/such/path");
    await app.request("/books/b1", { method: "DELETE" });
    await app.request("/boom");
    await app.request("/health");
    expect(observed.map(([method, route, status]) => [method, route, status])).toEqual([
      ["GET", "/books/:id", 200],
      ["HEAD", "/books/:id", 200],
      ["GET", UNMATCHED_ROUTE, 404],
      ["DELETE", UNMATCHED_ROUTE, 405],
      ["GET", "/boom", 500],
      ["GET", "/health", 200],
    ]);
    for (const [, , , seconds] of observed) {
      expect(seconds).toBeGreaterThanOrEqual(0);
      expect(seconds).toBeLessThan(5);
    }
    expect(UNMATCHED_ROUTE).toBe("__unmatched__");
  });

  it("measures the handler's time, in seconds", async () => {
    const { app, observed } = measuredApp();
    await app.request("/slow");
    const seconds = observed[0]?.[3] ?? 0;
    expect(seconds).toBeGreaterThanOrEqual(0.05);
    expect(seconds).toBeLessThan(5);
  });

  it("is called for requests over a real socket too, and only the last collector set is used", async () => {
    const { app, observed } = measuredApp();
    const replaced: Observation[] = [];
    const server = await listenOn(app);
    try {
      await server.fetch("/books/1");
      app.setMetricsCollector({ observeRequest: (...args) => void replaced.push(args) });
      await server.fetch("/books", { method: "POST" });
    } finally {
      await server.stop();
    }
    expect(observed.map((o) => o.slice(0, 3))).toEqual([["GET", "/books/:id", 200]]);
    expect(replaced.map((o) => o.slice(0, 3))).toEqual([["POST", "/books", 200]]);
  });
});

/** A tracer that records what keelson asks of it. */
class RecordingTracer implements Tracer {
  readonly started: string[] = [];
  readonly ended: RequestSpanEnd[] = [];
  readonly children: { name: string; parent: Span | undefined }[] = [];
  #next = 1;

  #span(traceId: string): Span & { attributes: Record<string, SpanAttributeValue>; ended: boolean } {
    return {
      traceId,
      attributes: {},
      ended: false,
      setAttribute(key, value) {
        this.attributes[key] = value;
      },
      recordException() {},
      end() {
        this.ended = true;
      },
    };
  }

  startRequestSpan(event: H3Event): Span {
    this.started.push(`${event.req.method} ${event.url.pathname}`);
    return this.#span(`trace-${this.#next++}`);
  }

  endRequestSpan(_span: Span, end: RequestSpanEnd): void {
    this.ended.push(end);
  }

  startSpan(name: string, options?: { parent?: Span }): Span {
    this.children.push({ name, parent: options?.parent });
    return this.#span(options?.parent?.traceId ?? "orphan");
  }
}

describe("tracer", () => {
  it("is the no-op tracer by default, never undefined, and its spans are inert", () => {
    const app = new App();
    expect(app.tracer).toBe(noopTracer);
    const span = app.tracer.startSpan("x");
    expect(span.traceId).toBe("");
    expect(() => {
      span.setAttribute("k", 1);
      span.recordException(new Error("e"));
      span.end();
    }).not.toThrow();
  });

  it("setTracer replaces it; each request gets a server span ended with route, status and error", async () => {
    const logs = captureLogs("json");
    const app = new App({ logger: logs.logger });
    const tracer = new RecordingTracer();
    app.setTracer(tracer);
    expect(app.tracer).toBe(tracer);
    let seenSpan: Span | undefined;
    app.route(get("/books/:id", (ctx) => {
      seenSpan = ctx.span;
      ctx.startSpan("db.query").end();
      return { id: ctx.params.id };
    }));
    const boom = new Error("boom");
    app.route(get("/boom", () => {
      throw boom;
    }));
    await app.request("/books/7?q=1");
    await app.request("/boom");
    await app.request("/nowhere");
    expect(tracer.started).toEqual(["GET /books/7", "GET /boom", "GET /nowhere"]);
    expect(tracer.ended).toEqual([
      { route: "/books/:id", status: 200, error: undefined },
      { route: "/boom", status: 500, error: boom },
      { route: undefined, status: 404, error: undefined },
    ]);
    expect(seenSpan?.traceId).toBe("trace-1");
    expect(tracer.children).toEqual([{ name: "db.query", parent: seenSpan }]);
    const requests = logs.entries().filter((entry) => "method" in entry);
    expect(requests.map((entry) => entry.trace_id)).toEqual(["trace-1", "trace-2", "trace-3"]);
  });

  it("leaves trace_id out of request lines with the no-op tracer", async () => {
    const logs = captureLogs("json");
    const app = new App({ logger: logs.logger });
    await app.request("/health");
    expect(Object.keys(logs.entries()[0] ?? {})).toEqual(["level", "time", "method", "path", "status", "duration", "request_id"]);
  });
});

const messages: Record<string, Record<string, string>> = {
  en: { hello: "Hello, {0}!" },
  fr: { hello: "Bonjour, {0} !" },
  "pt-BR": { hello: "Olá, {0}!" },
};

const translator: Translator = {
  languages: Object.keys(messages),
  translate: (lang, key, ...args) => (messages[lang]?.[key] ?? key).replace("{0}", String(args[0])),
};

describe("translator", () => {
  const app = new App({ logger: captureLogs().logger });
  app.setTranslator(translator);
  app.route(get("/hello", (ctx) => ({ lang: ctx.lang, text: ctx.t("hello", "Ana"), missing: ctx.t("nope") })));

  const hello = async (acceptLanguage?: string) =>
    (await app.request("/hello", acceptLanguage === undefined ? undefined : { headers: { "accept-language": acceptLanguage } })).json();

  it.each([
    [undefined, "en"],
    ["fr", "fr"],
    ["fr-CH, fr;q=0.9, en;q=0.8", "fr"],
    ["de-AT, de;q=0.9, fr;q=0.5", "fr"],
    ["en;q=0.2, fr;q=0.9", "fr"],
    ["pt-br", "pt-BR"],
    ["pt-PT", "pt-BR"],
    ["fr;q=0, en", "en"],
    ["*", "en"],
    ["ja, zh", "en"],
    ["", "en"],
  ])("Accept-Language %j picks %s", async (header, lang) => {
    expect((await hello(header)).lang).toBe(lang);
  });

  it("translates into the negotiated language and falls back to the key", async () => {
    expect(await hello("fr")).toEqual({ lang: "fr", text: "Bonjour, Ana !", missing: "nope" });
    expect(await hello("pt-BR")).toEqual({ lang: "pt-BR", text: "Olá, Ana!", missing: "nope" });
  });

  it("without a translator, t() returns the key and lang is the best requested tag (default en)", async () => {
    const bare = new App({ logger: captureLogs().logger });
    bare.route(get("/t", (ctx) => ({ lang: ctx.lang, text: ctx.t("hello") })));
    expect(await (await bare.request("/t", { headers: { "accept-language": "de-DE;q=0.5, it" } })).json()).toEqual({ lang: "it", text: "hello" });
    expect(await (await bare.request("/t")).json()).toEqual({ lang: "en", text: "hello" });
  });
});

/** A scheduler that records its calls. */
class RecordingScheduler implements Scheduler {
  readonly calls: string[] = [];
  stopSignal: AbortSignal | undefined;
  async start(): Promise<void> {
    this.calls.push("start");
  }
  async stop(signal: AbortSignal): Promise<void> {
    this.calls.push("stop");
    this.stopSignal = signal;
  }
}

describe("scheduler", () => {
  it("starts with listen(), not before, and stops on close() with the shutdown signal", async () => {
    const app = new App({ port: 0, logger: captureLogs().logger });
    const scheduler = new RecordingScheduler();
    app.registerScheduler(scheduler);
    await app.request("/health");
    expect(scheduler.calls).toEqual([]);
    const server = await listenOn(app);
    await expect.poll(() => scheduler.calls).toEqual(["start"]);
    const report = await server.stop();
    expect(scheduler.calls).toEqual(["start", "stop"]);
    expect(scheduler.stopSignal).toBeInstanceOf(AbortSignal);
    expect(scheduler.stopSignal?.aborted).toBe(false);
    expect(report.clean).toBe(true);
  });

  it("is stopped from a shutdown hook that keeps its registration order", async () => {
    const app = new App({ logger: captureLogs().logger });
    const order: string[] = [];
    app.onShutdown(() => void order.push("before"));
    app.registerScheduler({ start: () => undefined, stop: () => void order.push("scheduler") });
    app.onShutdown(() => void order.push("after"));
    await app.close();
    expect(order).toEqual(["before", "scheduler", "after"]);
  });

  it("a scheduler that fails to start fails listen() and takes the listener down", async () => {
    const app = new App({ port: 0, logger: captureLogs().logger });
    let port: number | undefined;
    app.registerScheduler({
      start() {
        // The listener is up when schedulers start: remember where, to check it is gone after.
        port = app.port;
        throw new Error("cron expression invalid");
      },
      stop: () => undefined,
    });
    await expect(app.listen()).rejects.toThrow("scheduler failed to start: cron expression invalid");
    expect(port).toBeGreaterThan(0);
    await expect(fetch(`http://127.0.0.1:${port}/health`)).rejects.toThrow();
  });
});
