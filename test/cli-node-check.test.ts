// The `keelson` bin on a Node older than engines.node: one line saying what it needs, what it found
// and where to get it, exit 1, never a link error's stack trace; the library's entries refuse it at
// import with the same line. Run with a real Node 20 binary, the registry's node-linux-<arch>@20
// package (cached in .cache/test-node/ after the first run).
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { writeProject } from "../cli/new-command.js";
import { node20 } from "./node20.js";

const ROOT = resolve(import.meta.dirname, "..");
const keelsonPackage = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
  engines: { node: string }; bin: { keelson: string }; exports: Record<string, string | { default: string }>;
};
/** The package's bin (the bundled dist/lib/cli.js), and tsc's build of the same file (what this repository runs). */
const BINS = [keelsonPackage.bin.keelson, "dist/cli/cli.js"];
const BIN = join(ROOT, "dist", "cli", "cli.js");
const engines = keelsonPackage.engines.node;

describe("the keelson bin checks the Node version first", () => {
  it.each(BINS)("on a real Node 20: one line (needs, found, where to get it), exit 1, for every verb (%s)", (name) => {
    const bin = join(ROOT, name);
    expect(existsSync(bin), `${name}: run \`npm run build\` first`).toBe(true);
    const node = node20();
    const version = spawnSync(node, ["--version"], { encoding: "utf8" }).stdout.trim();
    expect(version).toMatch(/^v20\.\d+\.\d+$/);
    for (const args of [["--help"], ["status"], ["start", "nothing.js"], ["client", "x.ts"], ["new", "x"]]) {
      const result = spawnSync(node, [bin, ...args], { cwd: ROOT, encoding: "utf8", timeout: 30_000 });
      expect(result.status, args.join(" ")).toBe(1);
      expect(result.stdout).toBe("");
      const lines = result.stderr.trimEnd().split("\n");
      expect(lines, result.stderr).toHaveLength(1);
      expect(lines[0]).toBe(
        `keelson: needs Node.js ${engines}, found ${version} (${node}); install a current LTS from https://nodejs.org/en/download (or: nvm install --lts)`,
      );
    }
  }, 360_000);

  it("the bundled CLI (keelson bundle, what the image runs) says the same on Node 20", () => {
    const out = mkdtempSync(join(tmpdir(), "keelson-bundle-node-"));
    try {
      const bundled = spawnSync(process.execPath, [BIN, "bundle", "dist/examples/bookstore/main.js", "--out", out], { cwd: ROOT, encoding: "utf8", timeout: 120_000 });
      expect(bundled.status, bundled.stderr).toBe(0);
      const node = node20();
      const result = spawnSync(node, [join(out, "keelson.mjs"), "start", join(out, "main.mjs")], { cwd: out, encoding: "utf8", timeout: 30_000 });
      expect(result.status).toBe(1);
      expect(result.stderr.trimEnd().split("\n")).toEqual([expect.stringMatching(new RegExp(`^keelson: needs Node\\.js ${engines}, found v20\\.`))]);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  }, 360_000);

  it.each(BINS)("on this Node (at or above engines.node) it goes on to the real CLI (%s)", (name) => {
    const result = spawnSync(process.execPath, [join(ROOT, name), "--help"], { cwd: ROOT, encoding: "utf8", timeout: 30_000 });
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^Usage: keelson /);
  });

  it("the bin's floor, package.json's engines and a new project's engines say the same", () => {
    const source = readFileSync(join(ROOT, "cli", "cli.ts"), "utf8");
    const [, major, minor] = /const REQUIRED = \{ major: (\d+), minor: (\d+) \}/.exec(source) ?? [];
    expect(`>=${major}.${minor}`).toBe(engines);
    // No static import: nothing can fail to link before the check runs.
    expect(source).not.toMatch(/^\s*import\s/m);
    const dir = join(mkdtempSync(join(tmpdir(), "keelson-engines-")), "svc");
    try {
      writeProject(dir, { name: "svc" });
      const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { engines: { node: string } };
      expect(manifest.engines.node).toBe(engines);
    } finally {
      rmSync(join(dir, ".."), { recursive: true, force: true });
    }
  });
});

/** `node` importing `file` (a path in the checkout), then running `then`, as a program's first lines. */
const importIn = (node: string, file: string, then = "") =>
  spawnSync(node, ["--input-type=module", "-e", `await import(${JSON.stringify(pathToFileURL(join(ROOT, file)).href)});${then}`], { cwd: ROOT, encoding: "utf8", timeout: 30_000 });

describe("the library checks the Node version at import", () => {
  /** Every entry of package.json's exports (the built files a user's import loads). */
  const entries = Object.entries(keelsonPackage.exports).flatMap(([name, target]) => (typeof target === "string" ? [] : [[name, target.default] as const]));

  it.each(entries)("on a real Node 20, %s throws one line at import (needs, found, where to get it), before any of its modules runs", (_name, file) => {
    expect(existsSync(join(ROOT, file)), `${file}: run \`npm run build\` first`).toBe(true);
    const node = node20();
    const version = spawnSync(node, ["--version"], { encoding: "utf8" }).stdout.trim();
    const result = importIn(node, file);
    expect(result.status).toBe(1);
    const errors = result.stderr.split("\n").filter((line) => /^\w*Error\b/.test(line));
    expect(errors, result.stderr).toEqual([
      `Error: keelson: needs Node.js ${engines}, found ${version} (${node}); install a current LTS from https://nodejs.org/en/download (or: nvm install --lts)`,
    ]);
  }, 360_000);

  it("on a real Node 20, a program that opens SQLite through keelson/sql meets that line, not a TypeError of node:sqlite", () => {
    const result = importIn(node20(), "dist/lib/sql.js", 'const { openSQLite } = await import("keelson/sql"); openSQLite({ file: ":memory:" });');
    expect(result.stderr).toContain(`Error: keelson: needs Node.js ${engines}`);
    expect(result.stderr).not.toMatch(/TypeError|DatabaseSync/);
  }, 360_000);

  it.each(entries)("on this Node, %s imports", (_name, file) => {
    const result = importIn(process.execPath, file);
    expect(result.status, result.stderr).toBe(0);
  });
});
