import { buildApp } from "./app.js";

const app = buildApp();
try {
  await app.listen();
} catch (error) {
  // A startup failure (port taken, bad config) is fatal: one line, exit 1.
  app.logger.error("startup failed: %s", (error as Error).message);
}
