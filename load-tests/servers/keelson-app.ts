// The keelson app shared by the plain and the OpenTelemetry targets.
import * as fs from "node:fs";
import { z } from "zod";
import { App, created, get, Logger, post } from "../../src/index.js";
import { createPrometheus } from "../../src/entries/metrics.js";
import { createOtelTracer } from "../../src/entries/tracing.js";
import { announceReady, book, createdBook, HOST, logFile, port, waitUntilAccepting } from "./common.js";

const BookSchema = z.object({ title: z.string().min(1).max(200), author: z.string() });
const Book = z.object({ id: z.string(), title: z.string(), author: z.string() });

/**
 * The full stack a production keelson service runs: JSON request logs to a file descriptor (like
 * fastify-logger's file), CORS (on by default), the error handler, the Prometheus collector with its
 * default process metrics and GET /metrics, and the OpenTelemetry tracer adapter. The adapter
 * is installed here with only @opentelemetry/api registered (keelson-otel registers the SDK and
 * passes `spans`, served at GET /__spans).
 */
export function buildApp(options: { responseSchemas?: boolean; spans?: () => Promise<Record<string, number>>; without?: ReadonlySet<Feature> } = {}): App {
  // With response schemas (keelson-schemas), the bodies of GET /books/:id and POST /books are written by them.
  const books = options.responseSchemas === true ? { 200: Book, 201: Book } : undefined;
  const without = options.without ?? new Set<Feature>();
  // At level warn a 2xx request line is not written: what remains of it is the level check.
  const level = without.has("log") ? "warn" : "info";
  // A descriptor, as keelson writes its stdout in production: one synchronous write per event-loop
  // turn through the bounded sink. A stream would put Node's thread pool in the path, which keelson
  // only uses for a writer the application hands it.
  const logger = new Logger({ isProduction: true, format: "json", level, output: fs.openSync(logFile("keelson"), "a") });
  const app = new App({ serviceName: "bench", env: "production", logger, host: HOST, port: port(), ...(without.has("cors") ? { cors: false } : {}) });
  // /metrics on the service's port, as the peers serve it, so the bench can count the histogram's samples.
  if (!without.has("metrics")) app.use(createPrometheus({ serveOnAppPort: true }));
  if (!without.has("tracer")) app.setTracer(createOtelTracer());
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

/** The parts of the full stack a user can leave out (keelson-ablate: issue 35's per-feature costs). */
export const FEATURES = ["log", "metrics", "tracer", "cors"] as const;
export type Feature = (typeof FEATURES)[number];

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
