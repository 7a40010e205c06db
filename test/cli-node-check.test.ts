// The `keelson` bin on a Node older than engines.node: one line saying what it needs, what it found
// and where to get it, exit 1, never a link error's stack trace. Run with a real Node 20 binary, the
// registry's node-linux-<arch>@20 package (cached in .cache/test-node/ after the first run).
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { writeProject } from "../cli/new-command.js";

const ROOT = resolve(import.meta.dirname, "..");
const keelsonPackage = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { engines: { node: string }; bin: { keelson: string } };
/** The package's bin (the bundled dist/lib/cli.js), and tsc's build of the same file (what this repository runs). */
const BINS = [keelsonPackage.bin.keelson, "dist/cli/cli.js"];
const BIN = join(ROOT, "dist", "cli", "cli.js");
const CACHE = join(ROOT, ".cache", "test-node");
const engines = keelsonPackage.engines.node;

/** A Node 20 binary from the npm registry (`npm pack node-linux-<arch>@20`), unpacked once into .cache/test-node/. */
function node20(): string {
  const found = existsSync(CACHE) ? readdirSync(CACHE).find((name) => /^v20\.\d+\.\d+$/.test(name)) : undefined;
  if (found !== undefined) return join(CACHE, found, "bin", "node");
  mkdirSync(CACHE, { recursive: true });
  const pack = spawnSync("npm", ["pack", `node-linux-${process.arch}@20`, "--json", "--pack-destination", CACHE], { encoding: "utf8", timeout: 300_000 });
  if (pack.status !== 0) throw new Error(`npm pack node-linux-${process.arch}@20 failed: ${pack.stderr}`);
  const [{ filename, version }] = JSON.parse(pack.stdout) as [{ filename: string; version: string }];
  const unpacked = join(CACHE, `unpacking-${process.pid}`);
  mkdirSync(unpacked, { recursive: true });
  const tar = spawnSync("tar", ["-xzf", join(CACHE, filename), "-C", unpacked, "package/bin/node"], { encoding: "utf8" });
  if (tar.status !== 0) throw new Error(`unpacking ${filename} failed: ${tar.stderr}`);
  // Renamed into place whole, so a run killed halfway never leaves a broken cached binary.
  renameSync(join(unpacked, "package"), join(CACHE, `v${version}`));
  rmSync(unpacked, { recursive: true, force: true });
  rmSync(join(CACHE, filename), { force: true });
  return join(CACHE, `v${version}`, "bin", "node");
}

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
