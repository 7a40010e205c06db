// The OpenTelemetry SDK registered globally with a span per request exported to nowhere: imported
// first by the `*-otel` targets, so each measures its framework's tracing, not a collector's.
import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BasicTracerProvider, BatchSpanProcessor, type ReadableSpan, type SpanExporter } from "@opentelemetry/sdk-trace-base";

type ExportCallback = Parameters<SpanExporter["export"]>[1];

/** Counts what it is handed, so a target can prove it traces (GET /__spans). */
export let exportedSpans = 0;

class NullExporter implements SpanExporter {
  export(spans: ReadableSpan[], resultCallback: ExportCallback): void {
    exportedSpans += spans.length;
    resultCallback({ code: 0 }); // ExportResultCode.SUCCESS
  }
  async shutdown(): Promise<void> {}
  async forceFlush(): Promise<void> {}
}

export const provider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(new NullExporter())] });
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
trace.setGlobalTracerProvider(provider);
