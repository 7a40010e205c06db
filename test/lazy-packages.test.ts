import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

// A fresh process: the module cache of this one holds whatever other tests loaded.
const ROOT = fileURLToPath(new URL("..", import.meta.url));

describe("packages loaded at first use (a fresh process)", () => {
  it("prom-client, @opentelemetry/api and fast-json-stringify stay unloaded until a request, a scrape or a response schema needs them; the first request is still counted", () => {
    const output = execFileSync(process.execPath, ["--import", "tsx", "test/fixtures/lazy-packages.ts"], { cwd: ROOT, encoding: "utf8", timeout: 60_000 });
    const steps = JSON.parse(output.split("\n").find((line) => line.startsWith("{\"built\"")) ?? "{}") as Record<string, unknown>;
    expect(steps).toEqual({
      // Importing keelson, keelson/metrics and keelson/tracing and building both Apps loads none of them.
      built: [],
      // A tracer with no SDK registered has nothing to record: the OpenTelemetry API is never loaded.
      tracerOnlyServed: [],
      firstStatus: 200,
      // The first response does not wait for prom-client: it is set up on the next turn of the event loop
      // (and prom-client requires the OpenTelemetry API itself, for exemplars).
      firstServed: [],
      afterTurn: ["prom-client", "@opentelemetry/api"],
      // The request answered before prom-client was loaded is in the histogram, and the default metrics are there.
      histogramCount: "1",
      defaultMetrics: ["process_cpu_user_seconds_total", "nodejs_eventloop_lag_seconds", "nodejs_heap_size_used_bytes", "keelson_log_lines_dropped_total"],
      sameRegistry: true,
      // The response schema's serializer is compiled (and fast-json-stringify loaded) by its first response.
      book: '{"title":"Dune"}',
      afterSchema: ["prom-client", "@opentelemetry/api", "fast-json-stringify"],
    });
  });
});
