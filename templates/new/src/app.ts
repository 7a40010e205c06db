import { App } from "keelson";
import { createPrometheus } from "keelson/metrics";
import { notesModule } from "./notes.js";

/**
 * Builds the App without listening: main.ts listens, the tests call `app.request()`, and
 * `keelson client src/app.ts` reads its routes to generate a typed client.
 */
export function buildApp(): App {
  const app = new App({
    serviceName: "{{name}}",
    docs: { title: "{{name}}", version: "0.1.0", description: "The {{name}} service." },
  });
  // GET /metrics: request durations and process metrics; under `keelson start`, cluster-wide on port 9464.
  app.use(createPrometheus());
  app.group("/api").use(notesModule);
  return app;
}
