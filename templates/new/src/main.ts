import { buildApp } from "./app.js";

const app = buildApp();
try {
  // Serves until SIGINT/SIGTERM, then drains in-flight requests and runs the shutdown hooks.
  await app.listen();
} catch (error) {
  app.logger.error("startup failed: %s", (error as Error).message);
}
