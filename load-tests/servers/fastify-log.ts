// Fastify's request logging at keelson's work: one JSON line per request, written when the response
// completes, through pino's destination in its synchronous mode. Fastify's default writes two
// ("incoming request" and "request completed"). It measured cheaper than pino's asynchronous mode
// without `minLength`, which hands nearly every line to libuv's thread pool (BENCHMARKS.md, "The log
// outputs of keelson and fastify-full"); with `minLength` that mode holds the last lines back, so
// they could not be counted against the responses.
import { LogController, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from "fastify";
import pino from "pino";

class OneLinePerRequest extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (this.isLogDisabled(request)) return;
    const line = { method: request.method, path: request.url, status: reply.statusCode, responseTime: reply.elapsedTime };
    if (error) reply.log.error({ ...line, err: error }, "request errored");
    else reply.log.info(line, "request completed");
  }
}

/** Fastify options that log one line per request to `file`. */
export function oneLinePerRequest(file: string): Pick<FastifyServerOptions, "logger" | "logController"> {
  return { logger: { level: "info", stream: pino.destination({ dest: file, sync: true }) }, logController: new OneLinePerRequest() };
}
