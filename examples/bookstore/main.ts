import { newLogger, type App } from "../../src/index.js";
import { buildApp } from "./app.js";
import { openBookstoreDatabase } from "./database.js";

function buildOrExit(): App {
  try {
    // One database for every worker: the SQLite file (or PostgreSQL with DATABASE_URL).
    return buildApp({}, openBookstoreDatabase());
  } catch (error) {
    // Bad configuration (an environment variable that is not a number, a delay longer than the
    // budget) is refused while the App is made: one line naming it, exit 1.
    return newLogger(process.env.NODE_ENV === "production").error("startup failed: %s", (error as Error).message);
  }
}

const app = buildOrExit();
try {
  await app.listen();
} catch (error) {
  // A startup failure (port taken, bad config) is fatal: one line, exit 1.
  app.logger.error("startup failed: %s", (error as Error).message);
}
