// Raw node:http doing by hand the work keelson's full stack does per request, as a careful service
// without a framework would: the floor of that work, to read keelson's "× node:http" against.
// Per response: the request id (the client's when well formed, else a per-process prefix and a
// counter) echoed in `x-request-id`; `x-content-type-options: nosniff`; CORS's
// `access-control-allow-origin: *` when an Origin is sent; one JSON request line with keelson's
// fields, batched per event-loop turn into one synchronous write to a file (as keelson's sink);
// one prom-client histogram observation (GET /metrics, with prom-client's default metrics, as
// keelson's createPrometheus); a server span through the OpenTelemetry API (no SDK: a no-op, as
// the `keelson` target's adapter); the POST body validated with the same zod schema.
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import * as http from "node:http";
import { performance } from "node:perf_hooks";
import { SpanKind, trace } from "@opentelemetry/api";
import { collectDefaultMetrics, Histogram, Registry } from "prom-client";
import { z } from "zod";
import { announceReady, book, collectJSONBody, createdBook, HOST, logFile, port } from "./common.js";

const BookSchema = z.object({ title: z.string().min(1).max(200), author: z.string() });

const registry = new Registry();
collectDefaultMetrics({ register: registry });
const histogram = new Histogram({
  name: "http_request_duration_seconds",
  help: "HTTP request duration in seconds",
  labelNames: ["method", "route", "status_code"],
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  registers: [registry],
});
const tracer = trace.getTracer("bench");

// The request line: the same JSON fields as keelson's, one write per event-loop turn.
const logFd = fs.openSync(logFile("node-http-full"), "a");
let pending = "";
let flushScheduled = false;
function flush(): void {
  flushScheduled = false;
  const chunk = pending;
  pending = "";
  if (chunk.length > 0) fs.writeSync(logFd, chunk);
}
let isoMs = 0;
let isoText = "";
function logRequest(method: string, path: string, status: number, durationMs: number, requestId: string): void {
  const now = Date.now();
  if (now !== isoMs) {
    isoMs = now;
    isoText = new Date(now).toISOString();
  }
  const level = status >= 500 ? "error" : status >= 400 ? "warn" : "info";
  pending += `{"level":"${level}","time":"${isoText}","method":"${method}","path":${JSON.stringify(path)},"status":${status},"duration":"${durationMs.toFixed(2)}ms","request_id":"${requestId}"}\n`;
  if (!flushScheduled) {
    flushScheduled = true;
    setImmediate(flush);
  }
}

const idPrefix = randomBytes(5).toString("hex") + "-";
let idCounter = 0;
const VALID_ID = /^[\w.:-]{1,128}$/;

function send(req: http.IncomingMessage, res: http.ServerResponse, route: string, path: string, start: number, requestId: string, status: number, data: unknown): void {
  const body = JSON.stringify(data);
  const headers: string[] = ["x-request-id", requestId];
  if (req.headers.origin !== undefined) headers.push("access-control-allow-origin", "*");
  headers.push("content-type", "application/json;charset=UTF-8", "x-content-type-options", "nosniff", "content-length", String(Buffer.byteLength(body)));
  res.writeHead(status, headers);
  res.end(body);
  const durationMs = performance.now() - start;
  logRequest(req.method ?? "GET", path, status, durationMs, requestId);
  histogram.observe({ method: req.method ?? "GET", route, status_code: status }, durationMs / 1000);
}

function createBook(req: http.IncomingMessage, done: (status: number, data: unknown) => void): void {
  collectJSONBody(req, (parsed, status, error) => {
    if (status !== undefined) return done(status, { error });
    const result = BookSchema.safeParse(parsed);
    if (!result.success) return done(422, { error: "invalid book", issues: result.error.issues });
    done(201, createdBook(result.data));
  });
}

const server = http.createServer((req, res) => {
  const start = performance.now();
  const incoming = req.headers["x-request-id"];
  const requestId = typeof incoming === "string" && VALID_ID.test(incoming) ? incoming : idPrefix + ++idCounter;
  const url = req.url ?? "/";
  const queryAt = url.indexOf("?");
  const path = queryAt === -1 ? url : url.slice(0, queryAt);
  let route = "";
  if (req.method === "GET") {
    if (path === "/hello") route = "/hello";
    else if (path === "/__cpu") route = "/__cpu";
    else if (path === "/metrics") route = "/metrics";
    else if (path.startsWith("/books/") && path.length > "/books/".length && !path.includes("/", "/books/".length)) route = "/books/:id";
  } else if (req.method === "POST" && path === "/books") route = "/books";
  const span = tracer.startSpan(`${req.method ?? "GET"} ${route || "unmatched"}`, { kind: SpanKind.SERVER });
  const answer = (status: number, data: unknown) => {
    send(req, res, route || "unmatched", path, start, requestId, status, data);
    span.end();
  };
  switch (route) {
    case "/hello":
      return answer(200, { hello: "world" });
    case "/__cpu":
      return answer(200, process.cpuUsage());
    case "/books/:id": {
      let id: string;
      try {
        id = decodeURIComponent(path.slice("/books/".length));
      } catch {
        return answer(400, { error: "malformed path" });
      }
      return answer(200, book(id));
    }
    case "/books":
      return createBook(req, answer);
    case "/metrics":
      registry.metrics().then(
        (text) => {
          res.writeHead(200, { "content-type": registry.contentType });
          res.end(text);
          span.end();
        },
        () => {
          res.writeHead(500).end();
          span.end();
        },
      );
      return;
    default:
      return answer(404, { error: "not found" });
  }
});

const listenPort = port();
server.listen(listenPort, HOST, () => announceReady(listenPort));
