// keelson with a CPU-heavy route, for the load-shedding scenario: GET /cpu spins CPU_MS ms
// (default 5) of synchronous work. SHED=1 turns load shedding on (maxEventLoopDelay SHED_DELAY_MS, default 50).
import * as fs from "node:fs";
import { App, get, newLoggerWithFormat } from "../../src/index.js";
import { definePrometheus } from "../../src/metrics/index.js";
import { HOST, logFile, port } from "./common.js";
import { startApp } from "./keelson-app.js";

const cpuMs = Number(process.env.CPU_MS ?? 5);
const logger = newLoggerWithFormat(true, "json").withWriter(fs.createWriteStream(logFile("keelson-cpu")));
const app = new App({
  serviceName: "bench-cpu", env: "production", logger, host: HOST, port: port(),
  loadShedding: process.env.SHED === "1" ? { maxEventLoopDelay: Number(process.env.SHED_DELAY_MS ?? 50) } : false,
});
app.use(definePrometheus({ defaultMetrics: false }));
app.route(get("/cpu", () => {
  const until = performance.now() + cpuMs;
  let spins = 0;
  while (performance.now() < until) spins++;
  return { spins };
}));
await startApp(app);
