// Per-request cost of keelson's observability, in-process (`app.request()` in a loop, no
// socket, every request carrying a traceparent): the no-op tracer against createOtelTracer() with
// only @opentelemetry/api (no SDK), createOtelTracer() on the SDK with a batch processor and an
// exporter that drops everything, and the Prometheus collector. A second table times the
// tracer's own per-request calls (startRequestSpan + endRequestSpan on one captured event) and
// the collector's observeRequest in a tight loop: small numbers that end-to-end noise hides.
// Variants run interleaved,
// round after round, so machine noise hits them alike. Cost is CPU time of this process per
// request (less sensitive to other processes than wall time); median and best round reported.
// With --expose-gc, a collection before each run keeps one variant's garbage out of the next.
//
//   node --expose-gc --import tsx load-tests/bench.ts tracing [--requests 5000] [--rounds 15]
import { parseArgs } from "node:util";
import { BasicTracerProvider, BatchSpanProcessor, type ReadableSpan, type SpanExporter } from "@opentelemetry/sdk-trace-base";
import { H3, type H3Event } from "h3";
import { Histogram, Registry } from "prom-client";
import { App, Logger, get, noopTracer, type MetricsCollector, type Tracer } from "../../src/index.js";
import { createPrometheus } from "../../src/entries/metrics.js";
import { createOtelTracer } from "../../src/entries/tracing.js";

const { values } = parseArgs({ options: { requests: { type: "string", default: "5000" }, rounds: { type: "string", default: "15" } } });
const REQUESTS = Number(values.requests);
const ROUNDS = Number(values.rounds);
const TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

class DroppingExporter implements SpanExporter {
  exported = 0;
  export(spans: ReadableSpan[], done: Parameters<SpanExporter["export"]>[1]): void {
    this.exported += spans.length;
    done({ code: 0 });
  }
  async shutdown(): Promise<void> {}
}

interface Variant {
  name: string;
  app: App;
  samples: number[];
}

function buildApp(setup: (app: App) => void): App {
  // JSON request lines into a writer that drops them: the log line costs the same in every variant.
  const logger = new Logger({ isProduction: true, format: "json", output: { write() {} } });
  const app = new App({ logger, env: "production" });
  setup(app);
  app.route(get("/books/:id", (ctx) => ({ id: ctx.params.id, title: "Dune" })));
  return app;
}

const exporter = new DroppingExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter, { maxQueueSize: 65_536 })] });
const variants: Variant[] = [
  { name: "noop tracer (default)", app: buildApp(() => {}), samples: [] },
  { name: "createOtelTracer(), API only, no SDK", app: buildApp((app) => app.setTracer(createOtelTracer())), samples: [] },
  { name: "createOtelTracer(), SDK + batch + dropping exporter", app: buildApp((app) => app.setTracer(createOtelTracer({ tracerProvider: provider }))), samples: [] },
  { name: "createPrometheus() collector (no tracer)", app: buildApp((app) => app.use(createPrometheus({ defaultMetrics: false }))), samples: [] },
];
// Every variant gets the same request, from a traced caller: only the app differs.
const REQUEST_INIT: RequestInit = { headers: { traceparent: TRACEPARENT } };

const collect = (globalThis as { gc?: () => void }).gc;

/** CPU nanoseconds (user + system) per request. */
async function run(variant: Variant, count: number): Promise<number> {
  collect?.();
  const started = process.cpuUsage();
  for (let i = 0; i < count; i++) {
    const response = await variant.app.request("http://localhost/books/42", REQUEST_INIT);
    if (response.status !== 200) throw new Error(`${variant.name}: status ${response.status}`);
    await response.arrayBuffer();
  }
  const used = process.cpuUsage(started);
  return ((used.user + used.system) * 1000) / count;
}

for (const variant of variants) await run(variant, Math.min(REQUESTS, 5000));
for (let round = 0; round < ROUNDS; round++) {
  for (const variant of variants) variant.samples.push(await run(variant, REQUESTS));
}
await provider.forceFlush();

const median = (samples: number[]) => {
  const sorted = samples.toSorted((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
};
const baseline = median(variants[0]!.samples);
const best = (samples: number[]) => Math.min(...samples);
const relative = (value: number, base: number) => `${value >= base ? "+" : ""}${(((value - base) / base) * 100).toFixed(1)} %`;
const baseBest = best(variants[0]!.samples);
console.log(`${REQUESTS} requests x ${ROUNDS} rounds per variant, Node ${process.version}, gc between runs: ${collect ? "yes" : "no"}; spans exported by the SDK variant: ${exporter.exported}\n`);
console.log("| variant | median CPU µs/request | vs noop (median) | best CPU µs/request | vs noop (best) |");
console.log("| --- | --- | --- | --- | --- |");
for (const variant of variants) {
  const m = median(variant.samples);
  const b = best(variant.samples);
  const first = variant === variants[0];
  console.log(`| ${variant.name} | ${(m / 1000).toFixed(2)} | ${first ? "—" : relative(m, baseline)} | ${(b / 1000).toFixed(2)} | ${first ? "—" : relative(b, baseBest)} |`);
}

/** Nanoseconds per call of `body`, best of 5 runs of `count` calls. */
function time(count: number, body: () => void): number {
  let fastest = Number.POSITIVE_INFINITY;
  for (let attempt = 0; attempt < 5; attempt++) {
    const started = process.hrtime.bigint();
    for (let i = 0; i < count; i++) body();
    fastest = Math.min(fastest, Number(process.hrtime.bigint() - started) / count);
  }
  return fastest;
}

async function captureEvent(init?: RequestInit): Promise<H3Event> {
  let captured: H3Event | undefined;
  const h3 = new H3({ onRequest: (event) => void (captured = event) });
  h3.get("/books/:id", () => "ok");
  await h3.request("http://localhost/books/42", init);
  if (captured === undefined) throw new Error("no event captured");
  return captured;
}

const plain = await captureEvent();
const traced = await captureEvent({ headers: { traceparent: TRACEPARENT } });
const end = { route: "/books/:id", status: 200, error: undefined };
const spanCost = (tracer: Tracer, event: H3Event) => time(200_000, () => tracer.endRequestSpan(tracer.startRequestSpan(event), end));
const sdkTracer = createOtelTracer({ tracerProvider: provider });
const histogram: MetricsCollector = createPrometheus({ defaultMetrics: false }).collector;
const promHistogram = new Histogram({ name: "h", help: "h", labelNames: ["method", "route", "status_code"], registers: [new Registry()] });
const promChild = promHistogram.labels("GET", "/books/:id", "200");
const isolated: Array<[string, number]> = [
  ["noop tracer", spanCost(noopTracer, plain)],
  ["createOtelTracer(), API only, no SDK", spanCost(createOtelTracer(), plain)],
  ["createOtelTracer(), API only, with traceparent", spanCost(createOtelTracer(), traced)],
  ["createOtelTracer(), SDK (batch, dropping exporter)", spanCost(sdkTracer, plain)],
  ["createOtelTracer(), SDK, with traceparent", spanCost(sdkTracer, traced)],
  ["raw SDK tracer.startSpan().end() for comparison", time(200_000, () => provider.getTracer("raw").startSpan("x").end())],
  ["Prometheus observeRequest (cached series)", time(2_000_000, () => histogram.observeRequest("GET", "/books/:id", 200, 0.003))],
  ["prom-client histogram.labels(...).observe(), for comparison", time(200_000, () => promChild.observe(0.003))],
];
console.log("\n| per-request call, in isolation | ns |");
console.log("| --- | --- |");
for (const [name, ns] of isolated) console.log(`| ${name} | ${ns.toFixed(0)} |`);
await provider.shutdown();
