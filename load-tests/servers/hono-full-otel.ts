// hono-full with the OpenTelemetry SDK registered: the same spans, now recorded and exported.
import { exportedSpans } from "./otel-sdk.js";
import { startHonoFull } from "./hono-full-app.js";

startHonoFull(exportedSpans);
