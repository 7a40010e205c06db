// fastify at keelson's full-stack work (see fastify-full-app.ts).
import { startFastifyFull } from "./fastify-full-app.js";

await startFastifyFull();
