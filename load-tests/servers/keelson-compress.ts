// keelson with compress() on every route, threshold 0: the benchmark's bodies (20 to 100 bytes) are
// under the default 1 KiB, and this target measures the encoding path itself on every response.
// Without --accept-encoding it measures the path a request that accepts nothing takes (the checks and
// Vary); with it, the encoding: `make bench-instructions TARGETS=keelson,keelson-compress ACCEPT_ENCODING=gzip`.
import { compress } from "../../src/index.js";
import { buildApp, startApp } from "./keelson-app.js";

const app = buildApp();
app.use(compress({ threshold: 0 }));
await startApp(app);
