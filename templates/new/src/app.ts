import { App, type KConfig } from "keelson";
import { createPrometheus } from "keelson/metrics";
import { createDatabaseModule, openSQLite, type SQLDatabase } from "keelson/sql";
import { notesModule } from "./notes.js";

/**
 * Builds the App without listening: main.ts listens on the shared database, the tests call
 * `app.request()` on a private in-memory one (the default), and `keelson client src/app.ts` reads
 * its routes to generate a typed client.
 */
export function buildApp(config: KConfig = {}, database: SQLDatabase = openSQLite({ file: ":memory:" })): App {
  const app = new App({
    serviceName: "{{name}}",
    docs: { title: "{{name}}", version: "0.1.0", description: "The {{name}} service." },
    ...config,
  });
  // GET /metrics: request durations and process metrics; under `keelson start`, cluster-wide on port 9464.
  app.use(createPrometheus());
  // GET /health runs SELECT 1 on the database; it is closed in a shutdown hook, after the modules' own.
  app.use(createDatabaseModule(database));
  app.group("/api").use(notesModule(database));
  return app;
}
