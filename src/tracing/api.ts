import { lazyPackage } from "../lazy-package.js";

type OtelApi = typeof import("@opentelemetry/api");

// @opentelemetry/api is ~45 CommonJS modules. keelson/tracing loads it when a span is first made
// or a tracer or provider is handed in, so an App whose tracer has nothing to record (no SDK
// registered) never loads it.
/** `@opentelemetry/api`, loaded at the first call. */
export const otelApi = lazyPackage<OtelApi>("@opentelemetry/api");

/** Where every copy of the API (version 1.x) keeps its global providers. */
const API_GLOBAL = Symbol.for("opentelemetry.js.api.1");

/**
 * Whether a global TracerProvider is registered (`trace.setGlobalTracerProvider`, as an SDK's
 * `register()` does), read from the API's global object without loading the API.
 */
export function hasGlobalTracerProvider(): boolean {
  const registry = (globalThis as unknown as Record<symbol, { trace?: unknown } | undefined>)[API_GLOBAL];
  return registry?.trace !== undefined;
}
