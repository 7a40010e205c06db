import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { describe, expect, it } from "vitest";

// A fresh process: the module cache of this one holds whatever other tests loaded.
const ROOT = fileURLToPath(new URL("..", import.meta.url));

describe("packages loaded at first use (a fresh process)", () => {
  it("prom-client, @opentelemetry/api and fast-json-stringify stay unloaded until a request, a scrape or a response schema needs them; the first request is still counted", () => {
    const output = execFileSync(process.execPath, ["--import", "tsx", "test/fixtures/lazy-packages.ts"], { cwd: ROOT, encoding: "utf8", timeout: 60_000 });
    const steps = JSON.parse(output.split("\n").find((line) => line.startsWith("{\"built\"")) ?? "{}") as Record<string, unknown>;
    expect(steps).toEqual({
      // Importing keelson, keelson/metrics and keelson/tracing and building both Apps loads none of them.
      built: [],
      // A tracer with no SDK registered has nothing to record: the OpenTelemetry API is never loaded.
      tracerOnlyServed: [],
      firstStatus: 200,
      // The first response does not wait for prom-client: it is set up on the next turn of the event loop
      // (and prom-client requires the OpenTelemetry API itself, for exemplars).
      firstServed: [],
      afterTurn: ["prom-client", "@opentelemetry/api"],
      // The request answered before prom-client was loaded is in the histogram, and the default metrics are there.
      histogramCount: "1",
      defaultMetrics: ["process_cpu_user_seconds_total", "nodejs_eventloop_lag_seconds", "nodejs_heap_size_used_bytes", "keelson_log_lines_dropped_total"],
      sameRegistry: true,
      // The response schema's serializer is compiled (and fast-json-stringify loaded) by its first response.
      book: '{"title":"Dune"}',
      afterSchema: ["prom-client", "@opentelemetry/api", "fast-json-stringify"],
    });
  });

  it("crossws (the WebSocket server, with the ws library) loads with the first WebSocket route, not with keelson", () => {
    const output = execFileSync(process.execPath, ["--import", "tsx", "test/fixtures/lazy-crossws.ts"], { cwd: ROOT, encoding: "utf8", timeout: 60_000 });
    expect(JSON.parse(output.split("\n").find((line) => line.startsWith("{\"built\"")) ?? "{}")).toEqual({ built: false, websocketRoute: true });
  });

  it("an App with no keelson WebSocket route loads crossws at its first upgrade, not when it listens, and serves h3's WebSocket handler", () => {
    const output = execFileSync(process.execPath, ["--import", "tsx", "test/fixtures/lazy-crossws.ts", "upgrade"], { cwd: ROOT, encoding: "utf8", timeout: 60_000 });
    expect(JSON.parse(output.split("\n").find((line) => line.startsWith("{\"listening\"")) ?? "{}")).toEqual({ listening: false, echo: "ping", upgraded: true });
  });

  it.each([
    ["createPrometheus()", 'import { createPrometheus } from "./src/entries/metrics.js";\ncreatePrometheus();', "createPrometheus() needs the package prom-client"],
    ["a route with a response schema", 'import { z } from "zod";\nimport { App, get } from "./src/index.js";\n' +
      'new App({ port: 0 }).route(get("/b", { responses: { 200: z.object({ t: z.string() }) } }, () => ({ t: "x" })));',
      "GET /b's response schemas needs the package fast-json-stringify"],
  ])("%s in a bundle shipped without node_modules fails at start-up, naming the package, not after its first request", async (_, source, message) => {
    const dir = mkdtempSync(join(tmpdir(), "keelson-lazy-bundle-"));
    try {
      const entry = join(ROOT, `lazy-bundle-entry-${process.pid}.ts`);
      writeFileSync(entry, `${source}\nconsole.log("STARTED");\n`);
      try {
        await build({ entryPoints: [entry], outfile: join(dir, "app.mjs"), bundle: true, platform: "node", format: "esm", logLevel: "silent" });
      } finally {
        rmSync(entry, { force: true });
      }
      const run = spawnSync(process.execPath, [join(dir, "app.mjs")], { cwd: dir, encoding: "utf8", timeout: 30_000 });
      expect(run.stdout).not.toContain("STARTED");
      expect(run.status).toBe(1);
      expect(run.stderr).toContain(message);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
