import { Counter, Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { App, UNMATCHED_ROUTE, created, get, notFound, post, type KConfig } from "../src/index.js";
import { PROMETHEUS_CONTENT_TYPE, createPrometheus, type PrometheusOptions } from "../src/entries/metrics.js";
import { normalizeMethod } from "../src/http/method.js";
import { HTTP_SERVER_DURATION_BUCKETS, RequestHistogram } from "../src/metrics/request-histogram.js";
import { listenOn } from "./helpers/listen.js";
import { captureLogs } from "./helpers/logs.js";
import { parseExposition, type Exposition } from "./fixtures/metrics-exposition.js";

const DURATION = "http_request_duration_seconds";

function buildApp(options: PrometheusOptions = {}, config: KConfig = {}) {
  const app = new App({ logger: captureLogs().logger, ...config });
  const prometheus = createPrometheus({ defaultMetrics: false, ...options });
  app.use(prometheus);
  app.route(get("/books/:id", (ctx) => {
    if (ctx.params.id === "missing") throw notFound("no such book");
    if (ctx.params.id === "panic") throw new TypeError("a bug");
    if (ctx.params.id === "string") throw "not even an Error";
    return { id: ctx.params.id };
  }));
  app.route(post("/books", { body: z.object({ title: z.string().min(1) }) }, (ctx) => created({ title: ctx.body.title })));
  return { app, prometheus };
}

async function scrape(app: App, path = "/metrics"): Promise<Exposition> {
  const response = await app.request(path);
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toBe(PROMETHEUS_CONTENT_TYPE);
  return parseExposition(await response.text());
}

function countOf(exposition: Exposition, labels: Record<string, string>): number {
  return exposition.value(`${DURATION}_count`, labels);
}

describe("http_request_duration_seconds", () => {
  it("counts every request by method, route template and status: 200, 201, 404, 405, 422, 500", async () => {
    const { app } = buildApp();
    await app.request("/books/1");
    await app.request("/books/2");
    await app.request("/books/missing");
    await app.request("/books/panic");
    await app.request("/books/string");
    await app.request("/books", { method: "POST", body: JSON.stringify({ title: "Dune" }), headers: { "content-type": "application/json" } });
    await app.request("/books", { method: "POST", body: JSON.stringify({ title: "" }), headers: { "content-type": "application/json" } });
    await app.request("/books", { method: "DELETE" });
    await app.request("/no/such/path");
    const statuses = [200, 201, 404, 405, 422, 500];
    expect(statuses.length).toBe(6);

    const metrics = await scrape(app);
    expect(metrics.types.get(DURATION)).toBe("histogram");
    expect(countOf(metrics, { method: "GET", route: "/books/:id", status_code: "200" })).toBe(2);
    expect(countOf(metrics, { method: "GET", route: "/books/:id", status_code: "404" })).toBe(1);
    expect(countOf(metrics, { method: "GET", route: "/books/:id", status_code: "500" })).toBe(2);
    expect(countOf(metrics, { method: "POST", route: "/books", status_code: "201" })).toBe(1);
    expect(countOf(metrics, { method: "POST", route: "/books", status_code: "422" })).toBe(1);
    expect(countOf(metrics, { method: "DELETE", route: UNMATCHED_ROUTE, status_code: "405" })).toBe(1);
    expect(countOf(metrics, { method: "GET", route: UNMATCHED_ROUTE, status_code: "404" })).toBe(1);
    // Nine requests, nine observations: the raw paths never appear.
    expect(metrics.sum(`${DURATION}_count`)).toBe(9);
    expect(metrics.samples.some((s) => Object.values(s.labels).some((v) => v.includes("/books/1") || v.includes("/no/such")))).toBe(false);
  });

  it("exports the OpenTelemetry HTTP server buckets, cumulative, with +Inf equal to the count and a positive sum", async () => {
    const { app } = buildApp();
    for (let i = 0; i < 3; i++) await app.request("/books/1");
    const metrics = await scrape(app);
    const labels = { method: "GET", route: "/books/:id", status_code: "200" };
    const buckets = metrics.find(`${DURATION}_bucket`, labels);
    expect(buckets.map((b) => b.labels.le)).toEqual([...HTTP_SERVER_DURATION_BUCKETS.map(String), "+Inf"]);
    expect(HTTP_SERVER_DURATION_BUCKETS).toEqual([0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10]);
    for (let i = 1; i < buckets.length; i++) expect(buckets[i]!.value).toBeGreaterThanOrEqual(buckets[i - 1]!.value);
    expect(buckets.at(-1)!.value).toBe(3);
    expect(metrics.value(`${DURATION}_count`, labels)).toBe(3);
    expect(metrics.value(`${DURATION}_sum`, labels)).toBeGreaterThan(0);
  });

  it("puts a duration in the first bucket whose bound is >= it (le is inclusive)", async () => {
    const histogram = new RequestHistogram("h");
    histogram.observeRequest("GET", "/x", 200, 0.03);
    histogram.observeRequest("GET", "/x", 200, 0.1);
    histogram.observeRequest("GET", "/x", 200, 42);
    const registry = new Registry();
    registry.registerMetric(histogram as never);
    const metrics = parseExposition(await registry.metrics());
    const le = (bound: string) => metrics.value("h_bucket", { route: "/x", le: bound });
    expect([le("0.025"), le("0.05"), le("0.075"), le("0.1"), le("10"), le("+Inf")]).toEqual([0, 1, 1, 2, 2, 3]);
    expect(metrics.value("h_sum", { route: "/x" })).toBeCloseTo(42.13, 10);
  });

  it("adds no series for 10,000 requests to random unknown paths with invented methods", async () => {
    const { app } = buildApp();
    await app.request("/warm-up-unknown");
    await app.request("/warm-up-unknown", { method: "PROPFIND" });
    const before = (await scrape(app)).samples.length;
    for (let i = 0; i < 10_000; i++) {
      const method = i % 3 === 0 ? `X${Math.random().toString(36).slice(2, 8).toUpperCase()}` : "GET";
      await app.request(`/${Math.random().toString(36).slice(2)}/${i}`, { method });
    }
    const after = await scrape(app);
    // The first scrape itself adds the /metrics series once; nothing else is new.
    const scrapeSeries = after.find(`${DURATION}_count`, { route: "/metrics" }).length;
    expect(scrapeSeries).toBe(1);
    expect(after.samples.length).toBe(before + scrapeSeries * (HTTP_SERVER_DURATION_BUCKETS.length + 3));
    expect(countOf(after, { method: "_OTHER", route: UNMATCHED_ROUTE, status_code: "404" })).toBe(1 + 3334);
    expect(countOf(after, { method: "GET", route: UNMATCHED_ROUTE, status_code: "404" })).toBe(1 + 6666);
  });

  it("collapses methods outside the standard set to _OTHER and keeps the standard ones", () => {
    for (const method of ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE", "QUERY"]) {
      expect(normalizeMethod(method)).toBe(method);
    }
    for (const method of ["PROPFIND", "get", "FOO", ""]) expect(normalizeMethod(method)).toBe("_OTHER");
  });
});

describe("createPrometheus", () => {
  it("serves prom-client's default process and Node.js metrics with the prefix, and a custom metric on its registry", async () => {
    const { app, prometheus } = buildApp({ defaultMetrics: true, prefix: "shop_" });
    const orders = new Counter({ name: "shop_orders_total", help: "Orders.", registers: [prometheus.registry] });
    orders.inc(3);
    await app.request("/books/1");
    const metrics = await scrape(app);
    expect(metrics.types.get("shop_process_cpu_user_seconds_total")).toBe("counter");
    expect(metrics.types.get("shop_nodejs_heap_size_used_bytes")).toBe("gauge");
    expect(metrics.types.get("shop_http_request_duration_seconds")).toBe("histogram");
    expect(metrics.types.has(DURATION)).toBe(false);
    expect(metrics.value("shop_orders_total")).toBe(3);
  });

  it("leaves default metrics out when asked", async () => {
    const { app } = buildApp({ defaultMetrics: false });
    const metrics = await scrape(app);
    expect([...metrics.types.keys()]).toEqual([DURATION]);
  });

  it("serves a configurable path, hidden from the OpenAPI document, and records the scrape like any request", async () => {
    const { app } = buildApp({ path: "/internal/prom" });
    expect((await app.request("/metrics")).status).toBe(404);
    await scrape(app, "/internal/prom");
    const metrics = await scrape(app, "/internal/prom");
    expect(countOf(metrics, { method: "GET", route: "/internal/prom", status_code: "200" })).toBe(1);
    const route = app.routes.find((r) => r.path === "/internal/prom");
    expect(route?.route.options.hidden).toBe(true);
    expect((await app.request("/internal/prom")).headers.get("cache-control")).toBe("no-store");
  });

  it("outside the supervisor (no KEELSON_WORKER_ID) serves its own registry with no cluster comment", async () => {
    const { app, prometheus } = buildApp();
    const text = await prometheus.readExposition();
    expect(text).not.toMatch(/^# keelson/m);
    const own = parseExposition(await prometheus.registry.metrics());
    expect(parseExposition(text).samples.length).toBe(own.samples.length);
    expect((await app.request("/metrics")).status).toBe(200);
  });

  it("rejects a non-positive cluster timeout at definition", () => {
    expect(() => createPrometheus({ clusterTimeoutMs: 0 })).toThrow(/clusterTimeoutMs/);
  });

  it("records each request once, with a duration that covers the handler", async () => {
    const app = new App({ logger: captureLogs().logger });
    app.use(createPrometheus({ defaultMetrics: false }));
    app.route(get("/slow", async () => {
      await new Promise((resolve) => setTimeout(resolve, 60));
      return { ok: true };
    }));
    await app.request("/slow");
    const metrics = await scrape(app);
    const labels = { method: "GET", route: "/slow", status_code: "200" };
    expect(metrics.value(`${DURATION}_count`, labels)).toBe(1);
    expect(metrics.value(`${DURATION}_sum`, labels)).toBeGreaterThanOrEqual(0.055);
    expect(metrics.value(`${DURATION}_bucket`, { ...labels, le: "0.05" })).toBe(0);
  });
});

describe("metrics off the public port", () => {
  it("in production the App's own port has no /metrics unless asked for, and the scrape never carries CORS headers", async () => {
    const { app, prometheus } = buildApp({}, { env: "production" });
    expect((await app.request("/metrics")).status).toBe(404);
    expect(app.routes.some((r) => r.path === "/metrics")).toBe(false);
    // Still recording: the numbers are there for a scrape on the metrics port.
    await app.request("/books/1");
    expect(countOf(parseExposition(await prometheus.readExposition()), { method: "GET", route: "/books/:id", status_code: "200" })).toBe(1);

    const { app: opted } = buildApp({ serveOnAppPort: true }, { env: "production", cors: { origin: "*" } });
    const res = await opted.request("/metrics", { headers: { origin: "https://evil.example" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
    // Other routes keep the App's CORS policy.
    expect((await opted.request("/books/1", { headers: { origin: "https://evil.example" } })).headers.get("access-control-allow-origin")).toBe("*");
  });

  it("outside production the App's port serves it by default, and serveOnAppPort: false turns it off", async () => {
    expect((await buildApp({}, { env: "development" }).app.request("/metrics")).status).toBe(200);
    expect((await buildApp({ serveOnAppPort: false }, { env: "development" }).app.request("/metrics")).status).toBe(404);
  });

  it("createPrometheus({ port }) serves a listener of its own, opened by listen() and closed by the shutdown (real sockets)", async () => {
    const { app, prometheus } = buildApp({ port: 0, host: "127.0.0.1" }, { env: "production", port: 0 });
    expect(prometheus.listener).toBeUndefined();
    const server = await listenOn(app);
    const metricsPort = prometheus.listener?.port;
    expect(metricsPort).toBeGreaterThan(0);
    expect(metricsPort).not.toBe(server.port);
    expect((await server.fetch("/books/1")).status).toBe(200);
    expect((await server.fetch("/metrics")).status).toBe(404);

    const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`, { headers: { origin: "https://evil.example" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe(PROMETHEUS_CONTENT_TYPE);
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
    expect(countOf(parseExposition(await res.text()), { method: "GET", route: "/books/:id", status_code: "200" })).toBe(1);
    expect((await fetch(`http://127.0.0.1:${metricsPort}/other`)).status).toBe(404);
    expect((await fetch(`http://127.0.0.1:${metricsPort}/metrics`, { method: "POST" })).status).toBe(405);

    // A scraper's keep-alive connection must not hold the shutdown.
    const report = await server.stop();
    expect(report.clean).toBe(true);
    expect(prometheus.listener).toBeUndefined();
    await expect(fetch(`http://127.0.0.1:${metricsPort}/metrics`)).rejects.toThrow();
  });

  it("a taken metrics port fails listen() with the reason", async () => {
    const { app: first, prometheus } = buildApp({ port: 0, host: "127.0.0.1" }, { port: 0 });
    const running = await listenOn(first);
    const { app: second } = buildApp({ port: prometheus.listener?.port, host: "127.0.0.1" }, { port: 0 });
    await expect(second.listen()).rejects.toThrow(/cannot serve metrics on 127\.0\.0\.1:\d+: already in use \(EADDRINUSE\)/);
    await running.stop();
  });

  it("rejects an invalid port at definition", () => {
    expect(() => createPrometheus({ port: 70_000 })).toThrow("port must be an integer from 0 to 65535, got 70000");
  });
});
