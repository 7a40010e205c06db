import { buildApp } from "./app.js";
import { openBookstoreDatabase } from "./database.js";

// One database for every worker: the SQLite file (or PostgreSQL with DATABASE_URL).
const app = buildApp({}, openBookstoreDatabase());
try {
  await app.listen();
} catch (error) {
  // A startup failure (port taken, bad config) is fatal: one line, exit 1.
  app.logger.error("startup failed: %s", (error as Error).message);
}
