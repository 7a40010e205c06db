// fastify-full with the OpenTelemetry SDK registered: the same spans, now recorded and exported.
import { exportedSpans } from "./otel-sdk.js";
import { startFastifyFull } from "./fastify-full-app.js";

await startFastifyFull(exportedSpans);
