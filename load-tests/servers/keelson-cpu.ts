// keelson with a CPU-heavy route, for the load-shedding scenario: GET /cpu spins CPU_MS ms
// (default 5) of synchronous work. SHED=1 turns load shedding on (maxEventLoopDelay SHED_DELAY_MS, default 50;
// maxQueueDelay SHED_QUEUE_MS, default 1).
import * as diagnostics from "node:diagnostics_channel";
import * as fs from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { App, get, newLoggerWithFormat } from "../../src/index.js";
import { createPrometheus } from "../../src/entries/metrics.js";
import { HOST, logFile, port } from "./common.js";
import { startApp } from "./keelson-app.js";

const cpuMs = Number(process.env.CPU_MS ?? 5);
const logger = newLoggerWithFormat(true, "json").withWriter(fs.createWriteStream(logFile("keelson-cpu")));
const app = new App({
  serviceName: "bench-cpu", env: "production", logger, host: HOST, port: port(),
  loadShedding: process.env.SHED === "1" ? { maxEventLoopDelay: Number(process.env.SHED_DELAY_MS ?? 50), maxQueueDelay: Number(process.env.SHED_QUEUE_MS ?? 1) } : false,
});
app.use(createPrometheus({ defaultMetrics: false }));
app.route(get("/cpu", () => {
  const until = performance.now() + cpuMs;
  let spins = 0;
  while (performance.now() < until) spins++;
  return { spins };
}));
// Server-side time of each answer, from the moment Node parsed the request (its bytes were read
// from the socket in the same step) to the moment the response was handed to the socket; printed
// on exit as one `SERVER_TIMES {status: ms[]}` line for the scenario.
const started = new WeakMap<IncomingMessage, number>();
const times: Record<string, number[]> = {};
diagnostics.subscribe("http.server.request.start", (message) => {
  started.set((message as { request: IncomingMessage }).request, performance.now());
});
diagnostics.subscribe("http.server.response.finish", (message) => {
  const { request, response } = message as { request: IncomingMessage; response: ServerResponse };
  const start = started.get(request);
  if (start !== undefined) (times[response.statusCode] ??= []).push(performance.now() - start);
});
process.on("exit", () => process.stdout.write(`SERVER_TIMES ${JSON.stringify(times)}\n`));
await startApp(app);
