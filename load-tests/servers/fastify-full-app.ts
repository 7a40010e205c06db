// fastify at exactly the work keelson's full stack does, each part as fastify's docs recommend for
// production: pino request logging to a file reduced to keelson's one JSON line per request
// (fastify-log.ts), @fastify/cors (any origin, as keelson's default), fastify-metrics (prom-client
// request histogram per route and the default metrics, GET /metrics), @fastify/otel reduced to
// keelson's one server span per request (its defaults add a span per lifecycle hook and one for the
// handler) and JSON-schema body validation. `fastify-full-otel` registers the SDK first and serves
// GET /__spans; `fastify-full` runs it as is. The bench counts log lines, histogram samples and spans
// against the responses after every run (load-tests/lib/work.ts).
import cors from "@fastify/cors";
import { FastifyOtelInstrumentation } from "@fastify/otel";
import Fastify, { type FastifyPluginAsync } from "fastify";
import metricsModule from "fastify-metrics";
import { announceReady, book, createdBook, HOST, logFile, newBookJsonSchema, port, type NewBook } from "./common.js";
import { oneLinePerRequest } from "./fastify-log.js";

// A CommonJS module whose `exports.default` is the plugin: Node's ESM import hands over `exports`.
const metrics = (metricsModule as unknown as { default: FastifyPluginAsync<{ endpoint: string }> }).default;

export async function startFastifyFull(spans?: () => Promise<Record<string, number>>): Promise<void> {
  const app = Fastify(oneLinePerRequest(logFile("fastify-full")));
  await app.register(new FastifyOtelInstrumentation({ instrumentHooks: false, instrumentHandler: false }).plugin());
  await app.register(cors, { origin: "*" });
  await app.register(metrics, { endpoint: "/metrics" });
  app.get("/hello", (_req, reply) => reply.send({ hello: "world" }));
  app.get<{ Params: { id: string } }>("/books/:id", (req, reply) => reply.send(book(req.params.id)));
  app.post<{ Body: NewBook }>("/books", { schema: { body: newBookJsonSchema } }, (req, reply) => reply.code(201).send(createdBook(req.body)));
  app.get("/__cpu", (_req, reply) => reply.send(process.cpuUsage()));
  if (spans !== undefined) app.get("/__spans", async () => await spans());
  const listenPort = port();
  await app.listen({ port: listenPort, host: HOST });
  announceReady(listenPort);
}

