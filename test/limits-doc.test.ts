/**
 * docs/limits.md against the code: every option, metric and test the table names exists, and the
 * options that bound a client's input refuse a value that would make the limit unbounded.
 */
import { readdirSync, readFileSync, existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { App, idempotency, MemoryIdempotencyStore, post, rateLimit } from "../src/index.js";
import { jwtAuth } from "../src/entries/auth.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const page = readFileSync(join(ROOT, "docs/limits.md"), "utf8");

/** The table's rows as cells, header and separator left out. */
const rows = page.split("\n").filter((line) => line.startsWith("| ") && !line.startsWith("| input or resource") && !line.startsWith("|---"))
  .map((line) => line.slice(1, -1).split(" | ").map((cell) => cell.trim()));

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? sources(path) : path.endsWith(".ts") ? [path] : [];
  });
}
const code = ["src", "supervisor"].flatMap((dir) => sources(join(ROOT, dir))).map((file) => readFileSync(file, "utf8")).join("\n");
const ticked = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((match) => match[1]!);

describe("docs/limits.md", () => {
  it("has a row for every input the issue lists, each with six cells", () => {
    expect(rows.length).toBeGreaterThanOrEqual(30);
    for (const row of rows) expect(row, row[0]).toHaveLength(6);
  });

  it("names only options that exist: in keelson's code, or Node's own flags", () => {
    const options = rows.flatMap((row) => ticked(row[2]!));
    expect(options.length).toBeGreaterThan(20);
    for (const option of options) {
      if (option.startsWith("--")) {
        expect(process.allowedNodeEnvironmentFlags.has(option), option).toBe(true);
        continue;
      }
      // `formLimits.fileSize`, `loadShedding.maxInflight`, `breaker.resetMs`: each segment is a name in the code.
      for (const segment of option.replace(/\(\)$/, "").split(".")) {
        expect(new RegExp(`\\b${segment}\\b`).test(code), `${option}: ${segment} is not in src/ or supervisor/`).toBe(true);
      }
    }
  });

  it("names only metrics keelson exports", () => {
    const metrics = rows.flatMap((row) => ticked(row[4]!)).map((metric) => metric.replace(/\{.*$/, ""));
    expect(metrics.length).toBeGreaterThan(5);
    for (const metric of metrics) expect(code.includes(metric), metric).toBe(true);
  });

  it("names only tests that exist, each in the file named before it", () => {
    let named = 0;
    for (const row of rows) {
      const cell = row[5]!;
      // `test/x.test.ts` "a test", "another", `test/y.test.ts` "…"
      for (const [, file, titles] of cell.matchAll(/`(test\/[^`]+\.test\.ts)`((?:\s*,?\s*"[^"]+")*)/g)) {
        expect(existsSync(join(ROOT, file!)), file).toBe(true);
        const text = readFileSync(join(ROOT, file!), "utf8");
        for (const [, title] of titles!.matchAll(/"([^"]+)"/g)) {
          named++;
          expect(text.includes(title!), `${file}: no test named "${title}"`).toBe(true);
        }
      }
    }
    expect(named).toBeGreaterThan(20);
  });
});

const form = (formLimits: Record<string, unknown>) => () =>
  new App({ port: 0 }).route(post("/f", { bodyType: "form", body: z.object({}), formLimits }, () => null));

describe("options that bound a client's input refuse an unbounded value", () => {
  it.each([
    ["bodyLimit", () => new App({ port: 0, bodyLimit: Number.POSITIVE_INFINITY })],
    ["route bodyLimit", () => new App({ port: 0 }).route(post("/j", { bodyLimit: Number.POSITIVE_INFINITY }, () => null))],
    ["formLimits.fileSize", form({ fileSize: Number.POSITIVE_INFINITY })],
    ["formLimits.files", form({ files: Number.POSITIVE_INFINITY })],
    ["formLimits.fields", form({ fields: Number.NaN })],
    ["formLimits.fieldSize", form({ fieldSize: Number.POSITIVE_INFINITY })],
    ["jwks.maxBytes", () => jwtAuth({ jwksUrl: "https://x.test/jwks", jwks: { maxBytes: Number.POSITIVE_INFINITY } })],
    ["jwks.timeoutDuration", () => jwtAuth({ jwksUrl: "https://x.test/jwks", jwks: { timeoutDuration: Number.POSITIVE_INFINITY } })],
    ["cache.max", () => jwtAuth({ secret: "a-development-secret-of-32-bytes!", cache: { max: Number.POSITIVE_INFINITY } })],
    ["storeTimeoutMs", () => rateLimit({ limit: 1, windowMs: 1000, storeTimeoutMs: Number.POSITIVE_INFINITY })],
    ["breaker.resetMs", () => rateLimit({ limit: 1, windowMs: 1000, breaker: { resetMs: Number.POSITIVE_INFINITY } })],
    ["shutdownTimeout", () => new App({ port: 0, shutdownTimeout: Number.POSITIVE_INFINITY })],
    ["loadShedding.maxInflight", () => new App({ port: 0, loadShedding: { maxInflight: Number.POSITIVE_INFINITY } })],
    ["maxKeyLength", () => idempotency({ maxKeyLength: Number.POSITIVE_INFINITY })],
    ["maxBodyBytes", () => idempotency({ maxBodyBytes: Number.NaN })],
    ["maxResponseBytes", () => idempotency({ maxResponseBytes: Number.POSITIVE_INFINITY })],
    ["leaseMs", () => idempotency({ leaseMs: Number.POSITIVE_INFINITY })],
    ["maxBytes", () => new MemoryIdempotencyStore({ maxBytes: Number.POSITIVE_INFINITY })],
  ])("%s", (name, make) => {
    expect(make).toThrow(new RegExp(name.replace("route ", "").replace(".", "\\.")));
  });
});
