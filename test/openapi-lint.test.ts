// The example's OpenAPI document under Redocly CLI's recommended ruleset (`redocly lint`, what API
// teams run in CI): no error. The one warning left is /health's (a GET without input has no 4xx).
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, expect, it } from "vitest";
import { buildApp } from "../examples/bookstore/app.js";
import { buildOpenAPIDocument } from "../src/index.js";
import { captureLogs } from "./helpers/logs.js";

const ROOT = resolve(import.meta.dirname, "..");
const dir = mkdtempSync(join(tmpdir(), "keelson-lint-"));

afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Problem {
  ruleId: string;
  severity: "error" | "warn";
  message: string;
  location: { pointer?: string }[];
}

it("passes `redocly lint` (recommended rules) without errors", async () => {
  const app = buildApp({ logger: captureLogs().logger });
  const file = join(dir, "openapi.json");
  writeFileSync(file, JSON.stringify(buildOpenAPIDocument(app.routes, app.config.docs)));
  await app.close();
  // Telemetry and the update check off: the tests use loopback only.
  const { code, stdout } = await new Promise<{ code: number; stdout: string }>((done) => {
    execFile(process.execPath, [join(ROOT, "node_modules", "@redocly", "cli", "bin", "cli.js"), "lint", file, "--format=json"], {
      cwd: dir, timeout: 120_000, env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" },
    }, (error, out) => done({ code: typeof error?.code === "number" ? error.code : error ? -1 : 0, stdout: out }));
  });
  const report = JSON.parse(stdout) as { totals: { errors: number }; problems: Problem[] };
  const describe = (p: Problem) => `${p.severity} ${p.ruleId} ${p.location[0]?.pointer ?? ""}: ${p.message}`;
  expect(report.problems.filter((p) => p.severity === "error").map(describe)).toEqual([]);
  expect(report.problems.map(describe)).toEqual(["warn operation-4xx-response #/paths/~1health/get/responses: Operation must have at least one `4XX` response."]);
  expect([code, report.totals.errors]).toEqual([0, 0]);
});
