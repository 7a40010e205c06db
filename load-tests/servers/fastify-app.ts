// One fastify app for both fastify targets, so the logger is the only difference.
import Fastify, { type FastifyServerOptions } from "fastify";
import { announceReady, book, createdBook, HOST, newBookJsonSchema, port, type NewBook } from "./common.js";

export async function startFastify(options: Pick<FastifyServerOptions, "logger" | "logController">): Promise<void> {
  const app = Fastify(options);
  // reply.send from sync handlers: fastify's cheapest path (no promise per request).
  app.get("/hello", (_req, reply) => reply.send({ hello: "world" }));
  app.get<{ Params: { id: string } }>("/books/:id", (req, reply) => reply.send(book(req.params.id)));
  // The JSON-schema route option is how fastify users validate bodies (ajv, compiled once).
  app.post<{ Body: NewBook }>("/books", { schema: { body: newBookJsonSchema } }, (req, reply) =>
    reply.code(201).send(createdBook(req.body)),
  );
  app.get("/__cpu", (_req, reply) => reply.send(process.cpuUsage()));

  const listenPort = port();
  await app.listen({ port: listenPort, host: HOST });
  announceReady(listenPort);
}
