// fastify at the work keelson's full stack does, each part as fastify's docs recommend for
// production: pino request logging to a file (one JSON line per request), @fastify/cors (any
// origin, as keelson's default), fastify-metrics (prom-client request histogram per route and the
// default metrics, GET /metrics), @fastify/otel (a server span per request through the
// OpenTelemetry API) and JSON-schema body validation. `fastify-full-otel` registers the SDK first; `fastify-full` runs it as is.
import cors from "@fastify/cors";
import { FastifyOtelInstrumentation } from "@fastify/otel";
import Fastify, { type FastifyPluginAsync } from "fastify";
import metricsModule from "fastify-metrics";
import { announceReady, book, createdBook, HOST, logFile, newBookJsonSchema, port, type NewBook } from "./common.js";

// A CommonJS module whose `exports.default` is the plugin: Node's ESM import hands over `exports`.
const metrics = (metricsModule as unknown as { default: FastifyPluginAsync<{ endpoint: string }> }).default;

export async function startFastifyFull(): Promise<void> {
  const app = Fastify({ logger: { level: "info", file: logFile("fastify-full") } });
  await app.register(new FastifyOtelInstrumentation().plugin());
  await app.register(cors, { origin: "*" });
  await app.register(metrics, { endpoint: "/metrics" });
  app.get("/hello", (_req, reply) => reply.send({ hello: "world" }));
  app.get<{ Params: { id: string } }>("/books/:id", (req, reply) => reply.send(book(req.params.id)));
  app.post<{ Body: NewBook }>("/books", { schema: { body: newBookJsonSchema } }, (req, reply) => reply.code(201).send(createdBook(req.body)));
  app.get("/__cpu", (_req, reply) => reply.send(process.cpuUsage()));
  const listenPort = port();
  await app.listen({ port: listenPort, host: HOST });
  announceReady(listenPort);
}

