// The smallest keelson service: GET /hello in production, as one process or as the worker entry of
// `keelson start` (the cluster bench). No request lines unless BENCH_REQUEST_LINES=1 (the App's
// level, not LOG_LEVEL: the supervisor's own lines, which the bench waits for, stay).
import { App, get } from "../../src/index.js";
import { startApp } from "./keelson-app.js";
import { HOST, port } from "./common.js";

const app = new App({
  serviceName: "bench", env: "production", host: HOST, port: port(), logLevel: process.env.BENCH_REQUEST_LINES === "1" ? "info" : "warn",
});
app.registerController({ routes: () => [get("/hello", () => ({ hello: "world" }))] });
// Under the supervisor, readiness is the supervisor's "worker(s) ready" line; from a worker, a probe
// of the port would wait on the primary's accept (slow under valgrind, where the bench profiles it).
if (process.env.KEELSON_WORKER_ID === undefined) await startApp(app);
else await app.listen();
