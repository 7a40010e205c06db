// keelson with the OpenTelemetry SDK registered and a span per request, exported to
// nowhere: measures the tracing overhead itself, not a collector's.
import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  type ReadableSpan,
  type SpanExporter,
} from "@opentelemetry/sdk-trace-base";
import { buildApp, startApp } from "./keelson-app.js";

type ExportCallback = Parameters<SpanExporter["export"]>[1];

class NullExporter implements SpanExporter {
  export(_spans: ReadableSpan[], resultCallback: ExportCallback): void {
    resultCallback({ code: 0 }); // ExportResultCode.SUCCESS
  }
  async shutdown(): Promise<void> {}
  async forceFlush(): Promise<void> {}
}

const provider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(new NullExporter())] });
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
trace.setGlobalTracerProvider(provider);

// buildApp()'s createOtelTracer() follows the global provider: registered above, so every request gets a span.
await startApp(buildApp());
