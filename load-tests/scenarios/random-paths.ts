// 10,000 requests to random unknown paths, with random methods, against a keelson App with
// createPrometheus(), listening on a real socket (127.0.0.1, port 0) in this process: the series
// of http_request_duration_seconds may grow only by a fixed set (method label × status, on the
// route labels `__unmatched__` and `/**`, the CORS preflight route that answers OPTIONS on any
// path), never with the number of distinct paths, and no path ever shows up in /metrics.
import { randomBytes, randomInt } from "node:crypto";
import * as http from "node:http";
import { App, get, newLoggerWithFormat, post, UNMATCHED_ROUTE } from "../../src/index.js";
import { createPrometheus } from "../../src/entries/metrics.js";
import { normalizeMethod } from "../../src/http/method.js";
import { request, sleep } from "../lib/http.js";
import { table, verdict, type Context, type Verdict } from "./common.js";

const NAME = "random-paths";
const REQUESTS = 10_000;
const CONCURRENCY = 16;
/** keelson's CORS preflight route (app.ts: `httpEngine.options("/**", …)`): OPTIONS on any path is 204 on it. */
const PREFLIGHT_ROUTE = "/**";
const SERIES = /^http_request_duration_seconds_count\{([^}]*)\}/gm;
// Every method Node's HTTP parser accepts (invented ones never reach an App), except CONNECT,
// which turns the connection into a tunnel.
const METHODS = http.METHODS.filter((m) => m !== "CONNECT");

/** Label sets (`method="GET",route="/x",status_code="200"`) of the request histogram. */
function series(exposition: string): Set<string> {
  return new Set([...exposition.matchAll(SERIES)].map((m) => m[1] ?? ""));
}

function randomPath(token: string, i: number): { path: string; method: string } {
  const method = METHODS[randomInt(METHODS.length)] ?? "GET";
  const shapes = [
    () => `/${token}`,
    () => `/api/v${i % 7}/${token}/${randomBytes(3).toString("hex")}`,
    () => `/${token}?q=${randomBytes(4).toString("hex")}&page=${i}`,
    () => `/${encodeURIComponent(`ü-${token}-✓`)}`,
    () => `/hello/${token}`,
    // A path that matches the /books/:id template, with any method but GET and HEAD: 405, unmatched.
    () => `/books/${token}`,
  ];
  const shape = i % shapes.length;
  const path = (shapes[shape] ?? shapes[0])!();
  return { path, method: shape === 5 && (method === "GET" || method === "HEAD") ? "PATCH" : method };
}

function send(agent: http.Agent, port: number, method: string, path: string): Promise<number> {
  return new Promise((resolve) => {
    const req = http.request({ host: "127.0.0.1", port, method, path, agent, timeout: 5_000 }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", () => resolve(0));
    req.end();
  });
}

export async function randomPaths(_context: Context): Promise<Verdict> {
  const logger = newLoggerWithFormat(true, "json").withWriter({ write: () => undefined });
  const app = new App({ serviceName: "random-paths", env: "production", host: "127.0.0.1", port: 0, logger, shutdownTimeout: 3_000 });
  app.use(createPrometheus());
  app.route(get("/hello", () => ({ hello: "world" })));
  app.route(get("/books/:id", (ctx) => ({ id: ctx.params.id })));
  app.route(post("/books", () => ({ ok: true })));
  const serving = app.listen();
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  try {
    for (let waited = 0; app.port === undefined; waited += 10) {
      if (waited > 10_000) throw new Error("the App did not listen within 10 s");
      await sleep(10);
    }
    const port = app.port;
    const origin = `http://127.0.0.1:${port}`;
    // The baseline: the matched routes once each, then two scrapes, so GET /metrics' own series is in it.
    for (const path of ["/hello", "/books/1"]) await request(`${origin}${path}`);
    await request(`${origin}/metrics`);
    const before = series((await request(`${origin}/metrics`)).body);

    const tokens: string[] = [];
    const statuses = new Map<number, number>();
    const methodLabels = new Set<string>();
    const paths = new Set<string>();
    let next = 0;
    const started = performance.now();
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
      while (next < REQUESTS && performance.now() - started < 120_000) {
        const i = next++;
        const token = `zq${randomBytes(6).toString("hex")}`;
        const { path, method } = randomPath(token, i);
        tokens.push(token);
        paths.add(path);
        methodLabels.add(normalizeMethod(method));
        const status = await send(agent, port, method, path);
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
      }
    }));
    const sentSec = (performance.now() - started) / 1000;
    const exposition = (await request(`${origin}/metrics`, { timeoutMs: 5_000 })).body;
    const after = series(exposition);

    const added = [...after].filter((s) => !before.has(s));
    const foreign = added.filter((s) => !s.includes(`route="${UNMATCHED_ROUTE}"`) && !s.includes(`route="${PREFLIGHT_ROUTE}"`));
    const answered = [...statuses.keys()].filter((s) => s !== 0);
    const bound = methodLabels.size * answered.length;
    const leaked = tokens.filter((t) => exposition.includes(t)).length;
    const failed = statuses.get(0) ?? 0;
    const fiveXx = answered.filter((s) => s >= 500).reduce((n, s) => n + (statuses.get(s) ?? 0), 0);

    table(["requests", "distinct paths", "method labels", "statuses", "series before", "series after", "new series", "bound", "new, other route", "paths in /metrics"], [[
      next, paths.size, methodLabels.size, [...statuses].toSorted(([a], [b]) => a - b).map(([s, c]) => `${s || "error"}×${c}`).join(" "),
      before.size, after.size, added.length, bound, foreign.length, leaked,
    ]]);
    console.log(`${next} requests in ${sentSec.toFixed(1)} s over ${CONCURRENCY} keep-alive connections; method labels: ${[...methodLabels].toSorted().join(" ")}`);
    console.log(`new series: ${added.join("; ")}`);
    const pass = next === REQUESTS && failed === 0 && fiveXx === 0 && foreign.length === 0 && added.length <= bound && leaked === 0;
    return verdict(NAME, pass,
      `${next} requests to ${paths.size} distinct random paths (${failed} failed, ${fiveXx} 5xx) grew the http_request_duration_seconds series ` +
      `from ${before.size} to ${after.size} (+${added.length}, ${foreign.length} on a route label other than "${UNMATCHED_ROUTE}" or the preflight "${PREFLIGHT_ROUTE}"), ` +
      `within the fixed bound of ${methodLabels.size} method labels × ${answered.length} statuses = ${bound}; ${leaked} random paths appear in /metrics.`);
  } finally {
    agent.destroy();
    await app.close();
    await serving.catch(() => undefined);
  }
}
