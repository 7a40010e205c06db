// hono at the work keelson's full stack does, each part as hono's docs show it: a JSON line per
// request to a file (hono's logger() prints text to the console, so a middleware writes what
// keelson writes), hono/cors (any origin, as keelson's default), @hono/prometheus (prom-client
// request histogram and GET /metrics, plus prom-client's default metrics), @hono/otel (a server
// span per request through the OpenTelemetry API) and zod body validation (keelson validates with
// zod too). `hono-full-otel` registers the SDK first and serves GET /__spans.
import * as fs from "node:fs";
import { serve } from "@hono/node-server";
import { httpInstrumentationMiddleware } from "@hono/otel";
import { prometheus } from "@hono/prometheus";
import { Hono } from "hono";
import { cors } from "hono/cors";
import { collectDefaultMetrics, Registry } from "prom-client";
import { z } from "zod";
import { announceReady, book, createdBook, HOST, logFile, port } from "./common.js";

const BookSchema = z.object({ title: z.string().min(1).max(200), author: z.string() });

export function startHonoFull(spans?: () => Promise<Record<string, number>>): void {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const { printMetrics, registerMetrics } = prometheus({ registry });
  const log = fs.createWriteStream(logFile("hono-full"));
  const app = new Hono();
  app.use(httpInstrumentationMiddleware({ serviceName: "bench" }));
  app.use(async (c, next) => {
    const start = performance.now();
    await next();
    log.write(`${JSON.stringify({ time: new Date().toISOString(), level: "info", method: c.req.method, path: c.req.path, status: c.res.status, duration_ms: performance.now() - start })}\n`);
  });
  app.use(cors({ origin: "*" }));
  app.use(registerMetrics);
  app.get("/metrics", printMetrics);
  app.get("/hello", (c) => c.json({ hello: "world" }));
  app.get("/books/:id", (c) => c.json(book(c.req.param("id"))));
  app.post("/books", async (c) => {
    const parsed = BookSchema.safeParse(await c.req.json().catch(() => undefined));
    if (!parsed.success) return c.json({ error: "invalid book", issues: parsed.error.issues }, 422);
    return c.json(createdBook(parsed.data), 201);
  });
  app.get("/__cpu", (c) => c.json(process.cpuUsage()));
  if (spans !== undefined) app.get("/__spans", async (c) => c.json(await spans()));
  const listenPort = port();
  serve({ fetch: app.fetch, port: listenPort, hostname: HOST }, () => announceReady(listenPort));
}

