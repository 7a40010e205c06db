// Type-check time of a typed client as the API grows: `node --import tsx load-tests/client-typecheck.ts [ROUTES]`.
// keelson: an App with ROUTES routes (default 500; half GET with a path parameter, half POST with a
// body, each with its own response schema), `keelson client`'s output (openapi.json → openapi-typescript),
// and a file calling 10 routes through openapi-fetch. Hono, for comparison: the same routes chained on
// one Hono app (typed validator, c.json) and the same calls through `hc<typeof app>`, its inferred client.
// Each case is `tsc --noEmit` in a fresh process, best of 3, minus tsc on an empty file.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import openapiTS, { astToString } from "openapi-typescript";
import { z } from "zod";
import { App, buildOpenAPIDocument, get, post, type Route } from "../src/index.js";

const ROOT = resolve(import.meta.dirname, "..");
const ROUTES = Number(process.argv[2] ?? 500);
const CALLS = 10;

function keelsonRoutes(count: number): Route[] {
  return Array.from({ length: count }, (_, i) => {
    const item = z.object({ id: z.string(), [`field${i}`]: z.number(), tags: z.array(z.string()) }).meta({ id: `Item${i}` });
    return i % 2 === 0
      ? get(`/items${i}/:id`, { params: z.object({ id: z.string() }), responses: { 200: item, 404: { description: "missing" } } }, (ctx) => ({
        id: ctx.params.id, [`field${i}`]: i, tags: [],
      }))
      : post(`/items${i}`, { body: z.object({ name: z.string(), count: z.number() }), responses: { 201: item } }, (ctx) => ({
        id: ctx.body.name, [`field${i}`]: ctx.body.count, tags: [],
      }));
  });
}

function call(i: number, client: "openapi-fetch" | "hono"): string {
  if (client === "openapi-fetch") {
    return i % 2 === 0
      ? `  { const { data } = await client.GET("/items${i}/{id}", { params: { path: { id: "x" } } }); total += data?.field${i} ?? 0; }`
      : `  { const { data } = await client.POST("/items${i}", { body: { name: "x", count: 1 } }); total += data?.field${i} ?? 0; }`;
  }
  return i % 2 === 0
    ? `  { const res = await client.items${i}[":id"].$get({ param: { id: "x" } }); const data = await res.json(); total += data.field${i}; }`
    : `  { const res = await client.items${i}.$post({ json: { name: "x", count: 1 } }); const data = await res.json(); total += data.field${i}; }`;
}

function honoApp(count: number): string {
  const lines = [`import { Hono } from "hono";`, `import { validator } from "hono/validator";`, `export const app = new Hono()`];
  for (let i = 0; i < count; i++) {
    lines.push(i % 2 === 0
      ? `  .get("/items${i}/:id", (c) => c.json({ id: c.req.param("id"), field${i}: ${i}, tags: [] as string[] }))`
      : `  .post("/items${i}", validator("json", (v) => v as { name: string; count: number }), (c) => c.json({ id: c.req.valid("json").name, field${i}: ${i}, tags: [] as string[] }, 201))`);
  }
  return `${lines.join("\n")};\nexport type AppType = typeof app;\n`;
}

const picks = Array.from({ length: CALLS }, (_, k) => Math.floor((k * ROUTES) / CALLS));

/** Seconds of `tsc --noEmit` over `file`: the best of 3 fresh processes. */
function timeTsc(file: string): number {
  const tsc = join(ROOT, "node_modules", "typescript", "bin", "tsc");
  const args = [tsc, "--noEmit", "--strict", "--skipLibCheck", "--target", "es2023", "--module", "nodenext", "--moduleResolution", "nodenext", "--types", "node", file];
  let best = Infinity;
  for (let run = 0; run < 3; run++) {
    const started = performance.now();
    try {
      execFileSync(process.execPath, args, { cwd: ROOT, stdio: "pipe" });
    } catch (error) {
      const output = String((error as { stdout?: Buffer }).stdout ?? "").slice(0, 600);
      console.error(`tsc ${file} failed:\n${output}`);
      return Number.NaN;
    }
    best = Math.min(best, (performance.now() - started) / 1000);
  }
  return best;
}

// Inside the repository so that openapi-fetch and hono resolve from its node_modules.
const dir = mkdtempSync(join(ROOT, "load-tests", ".client-typecheck-"));
try {
  const app = new App({ serviceName: "many" });
  for (const route of keelsonRoutes(ROUTES)) app.route(route);
  const started = performance.now();
  const document = buildOpenAPIDocument(app.routes, app.config.docs);
  writeFileSync(join(dir, "api.d.ts"), astToString(await openapiTS(document as Parameters<typeof openapiTS>[0])));
  const generation = (performance.now() - started) / 1000;
  writeFileSync(join(dir, "empty.ts"), "export const x = 1;\n");
  writeFileSync(join(dir, "keelson.ts"), [
    `import createClient from "openapi-fetch";`, `import type { paths } from "./api.js";`,
    `const client = createClient<paths>({ baseUrl: "http://localhost" });`, `export async function run() {`, `  let total = 0;`,
    ...picks.map((i) => call(i, "openapi-fetch")), `  return total;`, `}`,
  ].join("\n"));
  writeFileSync(join(dir, "hono-app.ts"), honoApp(ROUTES));
  writeFileSync(join(dir, "hono.ts"), [
    `import { hc } from "hono/client";`, `import type { AppType } from "./hono-app.js";`,
    `const client = hc<AppType>("http://localhost");`, `export async function run() {`, `  let total = 0;`,
    ...picks.map((i) => call(i, "hono")), `  return total;`, `}`,
  ].join("\n"));
  const baseline = timeTsc(join(dir, "empty.ts"));
  const keelson = timeTsc(join(dir, "keelson.ts"));
  const hono = timeTsc(join(dir, "hono.ts"));
  const fmt = (s: number) => (Number.isNaN(s) ? "failed" : `${s.toFixed(2)} s (${(s - baseline).toFixed(2)} s over an empty file)`);
  console.log(`routes: ${ROUTES}, calls type-checked: ${CALLS}, tsc on an empty file: ${baseline.toFixed(2)} s`);
  console.log(`keelson client (openapi-typescript + openapi-fetch): generation ${generation.toFixed(2)} s, tsc ${fmt(keelson)}`);
  console.log(`hono RPC (hc<typeof app>, inferred): tsc ${fmt(hono)}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
