// fastify with its logger off: its best case.
import { startFastify } from "./fastify-app.js";

await startFastify({ logger: false });
