// A TypeScript entry run without a loader: `keelson start` and `keelson client` say what to run
// instead (NODE_OPTIONS="--import tsx", or build first), not only Node's ERR_MODULE_NOT_FOUND.
// Runs the built CLI (dist/): from the sources, tsx would be the loader.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { typeScriptEntryHint } from "../supervisor/entry-hint.js";

const ROOT = resolve(import.meta.dirname, "..");
const BIN = join(ROOT, "dist", "cli", "cli.js");
const project = mkdtempSync(join(tmpdir(), "keelson-hint-"));
mkdirSync(join(project, "src"));
writeFileSync(join(project, "src", "app.ts"), "export const answer: number = 42;\n");
writeFileSync(join(project, "src", "main.ts"), 'import { answer } from "./app.js";\nconsole.log(answer);\n');
afterAll(() => rmSync(project, { recursive: true, force: true }));

const HINT = (verb: string) =>
  `src/main.ts is TypeScript and no loader is on: run NODE_OPTIONS="--import tsx" keelson ${verb} src/main.ts (npm install --save-dev tsx), or build first (npx tsc) and give keelson the compiled .js`;

function keelson(args: string[]) {
  expect(existsSync(BIN), "dist/cli/cli.js: run `npm run build` first").toBe(true);
  const { NODE_OPTIONS: _options, ...env } = process.env;
  return spawnSync(process.execPath, [BIN, ...args], { cwd: project, encoding: "utf8", timeout: 60_000, env: { ...env, NODE_ENV: "development" } });
}

describe("a TypeScript entry without a loader", () => {
  it("keelson start: the startup failure ends with the hint, exit 1", () => {
    const result = keelson(["start", "src/main.ts", "--workers", "1", "--port", "0", "--metrics-port", "off", "--control-socket", join(project, "c.sock")]);
    expect(result.status).toBe(1);
    const last = result.stdout.trim().split("\n").at(-1) ?? "";
    expect(last).toMatch(/startup failed: worker 1 \(pid \d+\) exited \(code 1\) before it was ready: .*(ERR_MODULE_NOT_FOUND|ERR_UNKNOWN_FILE_EXTENSION)/);
    expect(last).toContain(`Hint: ${HINT("start")}`);
  });

  it("keelson client: the error, then the hint, exit 1", () => {
    const result = keelson(["client", "src/main.ts", "--out", join(project, "client")]);
    expect(result.status).toBe(1);
    expect(result.stderr).toContain(`\nHint: ${HINT("client")}\n`);
  });

  it("no hint when the module is really missing under a loader, or the entry is JavaScript", () => {
    const error = "Error [ERR_MODULE_NOT_FOUND]: Cannot find module '/x/src/app.js'";
    expect(typeScriptEntryHint("start", "src/main.ts", error, [], "")).toBe(HINT("start"));
    expect(typeScriptEntryHint("start", "src/main.ts", error, ["--import", "tsx"], "")).toBeUndefined();
    expect(typeScriptEntryHint("start", "src/main.ts", error, [], "--import tsx")).toBeUndefined();
    expect(typeScriptEntryHint("start", "dist/main.js", error, [], "")).toBeUndefined();
    expect(typeScriptEntryHint("start", "src/main.ts", "Error: boom", [], "")).toBeUndefined();
  });
});
