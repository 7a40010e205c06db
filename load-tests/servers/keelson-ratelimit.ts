// keelson with a global rate limiter whose budget is never spent (one key, the loopback client):
// the cost of the middleware itself on the hot path, leases included (one in-memory lease of 10
// per 10 requests), measured by `make bench-instructions TARGETS=keelson,keelson-ratelimit`.
import { rateLimit } from "../../src/index.js";
import { buildApp, startApp } from "./keelson-app.js";

const app = buildApp();
app.use(rateLimit({ limit: 1_000_000_000, windowMs: 3_600_000 }));
await startApp(app);
