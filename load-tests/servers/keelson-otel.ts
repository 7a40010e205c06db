// keelson with the OpenTelemetry SDK registered and a span per request, exported to
// nowhere: measures the tracing overhead itself, not a collector's.
import { exportedSpans } from "./otel-sdk.js";
import { buildApp, startApp } from "./keelson-app.js";

// buildApp()'s createOtelTracer() follows the global provider: registered above, so every request gets a span.
await startApp(buildApp({ spans: exportedSpans }));
