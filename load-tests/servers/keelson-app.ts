// The keelson app shared by the plain and the OpenTelemetry targets.
import * as fs from "node:fs";
import { z } from "zod";
import { App, created, get, newLoggerWithFormat, post } from "../../src/index.js";
import { createPrometheus } from "../../src/entries/metrics.js";
import { createOtelTracer } from "../../src/entries/tracing.js";
import { announceReady, book, createdBook, HOST, logFile, port, waitUntilAccepting } from "./common.js";

const BookSchema = z.object({ title: z.string().min(1).max(200), author: z.string() });
const Book = z.object({ id: z.string(), title: z.string(), author: z.string() });

/**
 * The full stack a production keelson service runs: JSON request logs to a file (like
 * fastify-logger), CORS (on by default), the error handler, the Prometheus collector with its
 * default process metrics and GET /metrics, and the OpenTelemetry tracer adapter. The adapter
 * is installed here with only @opentelemetry/api registered (keelson-otel registers the SDK and
 * passes `spans`, served at GET /__spans).
 */
export function buildApp(options: { responseSchemas?: boolean; spans?: () => Promise<Record<string, number>> } = {}): App {
  // With response schemas (keelson-schemas), the bodies of GET /books/:id and POST /books are written by them.
  const books = options.responseSchemas === true ? { 200: Book, 201: Book } : undefined;
  const logger = newLoggerWithFormat(true, "json").withWriter(fs.createWriteStream(logFile("keelson")));
  const app = new App({ serviceName: "bench", env: "production", logger, host: HOST, port: port() });
  // /metrics on the service's port, as the peers serve it, so the bench can count the histogram's samples.
  app.use(createPrometheus({ serveOnAppPort: true }));
  app.setTracer(createOtelTracer());
  app.registerController({
    routes: () => [
      get("/hello", () => ({ hello: "world" })),
      get("/books/:id", { responses: books }, (ctx) => book(ctx.params.id)),
      post("/books", { body: BookSchema, responses: books }, (ctx) => created(createdBook(ctx.body))),
      get("/__cpu", () => process.cpuUsage()),
      ...(options.spans === undefined ? [] : [get("/__spans", options.spans)]),
    ],
  });
  return app;
}

export async function startApp(app: App): Promise<void> {
  // keelson's listen() settles when the server has shut down (serve until stopped),
  // so readiness is taken from the socket accepting connections instead.
  const serving = app.listen();
  serving.catch((error: unknown) => {
    console.error("keelson listen() failed:", error);
    process.exit(1);
  });
  await waitUntilAccepting(port());
  announceReady(port());
  await serving;
}
