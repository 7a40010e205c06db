// fastify with its default pino request logging on, to a file: the realistic production setup.
import { logFile } from "./common.js";
import { startFastify } from "./fastify-app.js";

await startFastify({ level: "info", file: logFile("fastify") });
