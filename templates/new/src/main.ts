import { buildApp } from "./app.js";
import { openDatabase } from "./database.js";

const app = buildApp({}, openDatabase());
try {
  // Serves until SIGINT/SIGTERM, then drains in-flight requests and runs the shutdown hooks.
  await app.listen();
} catch (error) {
  app.logger.error("startup failed: %s", (error as Error).message);
}
