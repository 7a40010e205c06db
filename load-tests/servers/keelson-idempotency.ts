// keelson with idempotency() on the App (it guards POST /books; GETs pass through), the default store
// in this one process: the cost of an idempotent POST against the same POST without the middleware,
// measured by `make bench-instructions TARGETS=keelson,keelson-idempotency`. With that target named,
// every target also gets "POST /books keyed": the same POST with a fresh Idempotency-Key per request.
import { idempotency } from "../../src/index.js";
import { buildApp, startApp } from "./keelson-app.js";

const app = buildApp();
app.use(idempotency());
await startApp(app);
