// keelson with response schemas on GET /books/:id and POST /books: their bodies are written by the
// compiled serializer of the declared schema (production: not re-validated), measured against the
// plain keelson target by `make bench-instructions TARGETS=keelson,keelson-schemas`.
import { buildApp, startApp } from "./keelson-app.js";

await startApp(buildApp({ responseSchemas: true }));
