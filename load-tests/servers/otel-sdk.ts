// The OpenTelemetry SDK registered globally with a span per request exported to nowhere: imported
// first by the `*-otel` targets, so each measures its framework's tracing, not a collector's.
import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BasicTracerProvider, BatchSpanProcessor, type ReadableSpan, type SpanExporter } from "@opentelemetry/sdk-trace-base";

type ExportCallback = Parameters<SpanExporter["export"]>[1];

/** Spans handed to the exporter by route (`http.route`, else the span's name), for GET /__spans. */
const exported = new Map<string, number>();

class NullExporter implements SpanExporter {
  export(spans: ReadableSpan[], resultCallback: ExportCallback): void {
    for (const span of spans) {
      const route = span.attributes["http.route"];
      const key = typeof route === "string" ? route : span.name;
      exported.set(key, (exported.get(key) ?? 0) + 1);
    }
    resultCallback({ code: 0 }); // ExportResultCode.SUCCESS
  }
  async shutdown(): Promise<void> {}
  async forceFlush(): Promise<void> {}
}

export const provider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(new NullExporter())] });
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
trace.setGlobalTracerProvider(provider);

/**
 * The spans exported so far by route, after a flush of the batch processor: what the bench
 * counts against the responses and the other targets' log lines (GET /__spans on every `*-otel` target).
 */
export async function exportedSpans(): Promise<Record<string, number>> {
  await provider.forceFlush();
  return Object.fromEntries(exported);
}
