// fastify with pino request logging to a file at keelson's work (one line per request): the logging
// cost alone, against the plain fastify target.
import { logFile } from "./common.js";
import { startFastify } from "./fastify-app.js";
import { oneLinePerRequest } from "./fastify-log.js";

await startFastify(oneLinePerRequest(logFile("fastify")));
