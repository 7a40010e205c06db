import type { App } from "../../src/index.js";
import { createPrometheus } from "../../src/entries/metrics.js";

/**
 * Metrics always (GET /metrics on the supervisor's metrics port, cluster-wide; on the App's port
 * too outside production); traces when the standard
 * `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set: spans are
 * batched and sent over OTLP/HTTP, and flushed by a shutdown hook within the shutdown budget.
 */
export function setupTelemetry(app: App, env: NodeJS.ProcessEnv = process.env): void {
  app.use(createPrometheus());
  if (!env.OTEL_EXPORTER_OTLP_ENDPOINT && !env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) return;
  // A module with an async register step: listen() waits for it, and the OpenTelemetry SDK and
  // the OTLP exporter (most of this service's start-up time) load only when traces are exported.
  app.use({ name: "telemetry", register: () => setupTracing(app, env) });
}

async function setupTracing(app: App, env: NodeJS.ProcessEnv): Promise<void> {
  // The API with them: neither keelson nor prom-client needs it before a span is recorded.
  const [{ trace }, { OTLPTraceExporter }, { resourceFromAttributes }, { BasicTracerProvider, BatchSpanProcessor }, { createOtelTracer }] = await Promise.all([
    import("@opentelemetry/api"),
    import("@opentelemetry/exporter-trace-otlp-http"),
    import("@opentelemetry/resources"),
    import("@opentelemetry/sdk-trace-base"),
    import("../../src/entries/tracing.js"),
  ]);
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({
      "service.name": env.OTEL_SERVICE_NAME || app.config.serviceName,
      "service.version": app.config.version,
    }),
    // The exporter reads the endpoint, headers and timeout from the OTEL_EXPORTER_OTLP_* variables.
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  // Global too, so spans started with the OpenTelemetry API in application code are exported.
  trace.setGlobalTracerProvider(provider);
  app.setTracer(createOtelTracer({ tracerProvider: provider }));
  app.onShutdown(async function flushSpans(signal) {
    // Hooks run after the drain: every request's span has ended and sits in the batch queue.
    await untilAborted(provider.shutdown(), signal, "span export did not finish within the shutdown budget");
  }, "telemetry: flush spans");
}

/** `work`, or a rejection as soon as `signal` aborts (the export goes on, the hook stops waiting). */
function untilAborted(work: Promise<void>, signal: AbortSignal, message: string): Promise<void> {
  if (signal.aborted) return Promise.reject(new Error(message));
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(new Error(message));
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}
