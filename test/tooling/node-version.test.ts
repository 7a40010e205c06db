import { execFile, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { once } from "node:events";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readDockerfile } from "./dockerfile.js";

const ROOT = resolve(import.meta.dirname, "..", "..");
const pinned = readFileSync(join(ROOT, ".node-version"), "utf8").trim();
const ciVersions = readFileSync(join(ROOT, ".ci/node-versions"), "utf8").split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#"));
const engines = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { engines: { node: string } }).engines.node;
const makePath = spawnSync("/bin/sh", ["-c", "command -v make"], { encoding: "utf8" }).stdout.trim();
// The nested make must not inherit the override of a `make test NODE_VERSION=…` this suite may run under.
const { MAKEFLAGS: _flags, MFLAGS: _mflags, MAKELEVEL: _level, ...cleanEnv } = process.env;
const temps: string[] = [];

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "keelson-node-"));
  temps.push(dir);
  return dir;
}

function writeScript(path: string, body: string): void {
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
}

const parse = (version: string) => version.split(".").map(Number) as [number, number, number];
const floor = parse(/^>=(\d+\.\d+)$/.exec(engines)?.[1] + ".0");
const atLeastFloor = ([major, minor]: number[]) => (major ?? 0) > floor[0] || (major === floor[0] && (minor ?? 0) >= floor[1]);

/** `make -n -B install` with a fake `node` that reports `version` (or no node at all) first on PATH. */
function dryRun(version: string | undefined, args: string[] = []) {
  const bin = tempDir();
  if (version) writeScript(join(bin, "node"), `echo "${version.split(".")[0]}"`);
  for (const tool of ["cat", "sh", "bash"]) writeScript(join(bin, tool), `exec /bin/${tool} "$@"`);
  return spawnSync(makePath, ["--no-print-directory", "-n", "-B", "install", ...args], {
    cwd: ROOT, encoding: "utf8", env: { ...cleanEnv, PATH: bin },
  });
}

function ensureLine(version: string): string {
  return `scripts/ensure-node.sh ${version} ${ROOT}/.cache/node/${version}`;
}

/** A registry tarball (package/...) with `files` (path → content, all executable). */
function pack(files: Record<string, string>): Buffer {
  const dir = tempDir();
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(dir, "package", path, ".."), { recursive: true });
    writeFileSync(join(dir, "package", path), content, { mode: 0o755 });
  }
  const result = spawnSync("tar", ["-czf", "-", "-C", dir, "package"]);
  expect(result.status).toBe(0);
  return result.stdout;
}

function sha512(data: Buffer): string {
  return "sha512-" + createHash("sha512").update(data).digest("base64");
}

/** Runs the script with fake `id` (uid) and `apt-get` (creates `creates` when it installs) first on PATH. */
function ensure(path: string, options: { uid: number; creates?: string }) {
  const bin = tempDir();
  writeScript(join(bin, "id"), `echo ${options.uid}`);
  writeScript(join(bin, "apt-get"), `echo "$@" >> "${bin}/apt.log"\n[ "$1" = install ] && ${options.creates ? `touch "${options.creates}" && chmod +x "${options.creates}"` : "true"}\nexit 0`);
  writeScript(join(bin, "sudo"), "exit 1");
  const result = spawnSync(join(ROOT, "scripts/ensure-apt.sh"), [path, "chromium"], { encoding: "utf8", env: { ...cleanEnv, PATH: `${bin}:/usr/bin:/bin` } });
  const log = existsSync(join(bin, "apt.log")) ? readFileSync(join(bin, "apt.log"), "utf8").trim().split("\n") : [];
  return { ...result, apt: log };
}

afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
});

describe(".node-version, the one pinned Node", () => {
  it("is an exact LTS release at or above engines.node, which is the node:sqlite floor", () => {
    expect(pinned).toMatch(/^\d+\.\d+\.\d+$/);
    expect(parse(pinned)[0] % 2).toBe(0);
    expect(engines).toBe(">=22.13");
    expect(atLeastFloor(parse(pinned))).toBe(true);
  });

  it("is the Dockerfile's default NODE_VERSION, and every stage is built on it", () => {
    const dockerfile = readDockerfile(join(ROOT, "docker/Dockerfile"));
    expect(dockerfile.globalArgs.NODE_VERSION).toBe(pinned);
    for (const stage of dockerfile.stages) expect(stage.image).toMatch(new RegExp(`^node:${pinned.replaceAll(".", "\\.")}-`));
  });

  it("CI's other lines are the exact releases of the other LTS majors, each at or above the floor", () => {
    const majors = ciVersions.map((v) => parse(v)[0]);
    for (const version of ciVersions) {
      expect(version).toMatch(/^\d+\.\d+\.\d+$/);
      expect(atLeastFloor(parse(version)), version).toBe(true);
    }
    expect(majors.every((m) => m % 2 === 0)).toBe(true);
    expect(new Set([...majors, parse(pinned)[0]]).size).toBe(ciVersions.length + 1);
  });
});

describe("the Makefile's Node", () => {

  it("installs the pinned Node first when the system Node is older, or missing", () => {
    for (const system of ["20.20.2", undefined]) {
      const result = dryRun(system);
      expect(result.status, result.stderr).toBe(0);
      const lines = result.stdout.trim().split("\n");
      expect(lines[0], String(system)).toBe(ensureLine(pinned));
      expect(lines[1]).toMatch(/^npm ci\b/);
    }
  });

  it("uses a system Node of the pinned major as is", () => {
    const result = dryRun(`${parse(pinned)[0]}.0.0`);
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).not.toContain("ensure-node");
    expect(result.stdout).toMatch(/^npm ci\b/);
  });

  it("takes NODE_VERSION from the command line, as CI does for its other lines", () => {
    const other = ciVersions[0] as string;
    const result = dryRun(pinned, [`NODE_VERSION=${other}`]);
    expect(result.stdout.split("\n")[0]).toBe(ensureLine(other));
  });

  it("installs devDependencies under NODE_ENV=production too: the build (tsc) needs them", () => {
    const result = spawnSync(makePath, ["--no-print-directory", "-n", "-B", "install"], { cwd: ROOT, encoding: "utf8", env: { ...cleanEnv, NODE_ENV: "production" } });
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout.split("\n").find((l) => /^npm ci\b/.test(l))).toMatch(/^npm ci --include=dev\b/);
  });

  it("checks the system packages before any lint, typecheck or suite runs", () => {
    const result = spawnSync(makePath, ["--no-print-directory", "-n", "test"], { cwd: ROOT, encoding: "utf8", env: cleanEnv });
    expect(result.status, result.stderr).toBe(0);
    const lines = result.stdout.trim().split("\n").filter((l) => !l.startsWith("scripts/ensure-node.sh") && !/^npm ci\b|^touch /.test(l));
    expect(lines[0]).toBe("scripts/ensure-apt.sh /usr/bin/chromium chromium");
    expect(lines.findIndex((l) => /vitest run/.test(l))).toBe(lines.length - 1);
  });
});

describe("scripts/ensure-node.sh, against a local registry", () => {
  let server: Server;
  let registry = "";
  /** Per-package answers: the tarball and the integrity the manifest claims for it. */
  const packages = new Map<string, { tarball: Buffer; integrity: string }>();


  beforeAll(async () => {
    server = createServer((req, res) => {
      const url = req.url ?? "";
      const name = url.split("/")[1] ?? "";
      const entry = packages.get(name.startsWith("node-") ? "node" : name);
      if (!entry) return void res.writeHead(404).end();
      if (url.includes("/-/")) return void res.writeHead(200).end(entry.tarball);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ name, dist: { integrity: entry.integrity, tarball: `${registry}/${name}/-/${name}.tgz` } }));
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    registry = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const npm = pack({ "bin/npm-cli.js": "#!/bin/sh\necho 11.0.0-fake\n", "bin/npx-cli.js": "#!/bin/sh\necho npx\n" });
    packages.set("npm", { tarball: npm, integrity: sha512(npm) });
  });
  afterAll(() => {
    server.close();
  });

  // Asynchronous: the registry answers from this process's event loop.
  const run = (dir: string) =>
    new Promise<{ status: number | null; stderr: string }>((done) => {
      execFile(join(ROOT, "scripts/ensure-node.sh"), ["24.21.0", dir], { encoding: "utf8", timeout: 20_000, env: { ...cleanEnv, npm_config_registry: registry } }, (error, _stdout, stderr) => {
        done({ status: error ? (typeof error.code === "number" ? error.code : -1) : 0, stderr });
      });
    });

  it("installs node, npm and npx from tarballs that match the registry's sha512 integrity", async () => {
    const node = pack({ "bin/node": "#!/bin/sh\necho v24.21.0\n" });
    packages.set("node", { tarball: node, integrity: sha512(node) });
    const dir = join(tempDir(), "24.21.0");
    const result = await run(dir);
    expect(result.status, result.stderr).toBe(0);
    const version = (tool: string) => spawnSync(join(dir, "bin", tool), { encoding: "utf8" }).stdout.trim();
    expect(version("node")).toBe("v24.21.0");
    expect(version("npm")).toBe("11.0.0-fake");
    expect(version("npx")).toBe("npx");
  });

  it("refuses a tarball that does not match its integrity, and installs nothing", async () => {
    const node = pack({ "bin/node": "#!/bin/sh\necho v24.21.0\n" });
    packages.set("node", { tarball: node, integrity: sha512(Buffer.from("something else")) });
    const parent = tempDir();
    const result = await run(join(parent, "24.21.0"));
    expect(result.status).not.toBe(0);
    expect(result.stderr).toMatch(/does not match the registry's sha512 integrity/);
    expect(existsSync(join(parent, "24.21.0"))).toBe(false);
    // No half-unpacked temporary folder is left behind either.
    expect(spawnSync("ls", ["-A", parent], { encoding: "utf8" }).stdout.trim()).toBe("");
  });

  it("refuses a binary that is not the version asked for", async () => {
    const node = pack({ "bin/node": "#!/bin/sh\necho v20.20.2\n" });
    packages.set("node", { tarball: node, integrity: sha512(node) });
    const result = await run(join(tempDir(), "24.21.0"));
    expect(result.status).not.toBe(0);
    expect(result.stderr).toMatch(/runs as v20\.20\.2/);
  });
});

describe("scripts/ensure-apt.sh", () => {

  it("installs for make test exactly the packages docs/getting-started.md names under System packages", () => {
    const makefile = readFileSync(join(ROOT, "Makefile"), "utf8");
    const installed = [...makefile.matchAll(/^\t@scripts\/ensure-apt\.sh \S+ (\S+)$/gm)].map((match) => match[1]);
    expect(installed.length).toBeGreaterThanOrEqual(5);
    const page = readFileSync(join(ROOT, "docs", "getting-started.md"), "utf8");
    const paragraph = /^\*\*System packages\.\*\*[\s\S]*?\n\n/m.exec(page)?.[0] ?? "";
    const named = ["chromium", "postgresql", "prometheus", "redis-server", "haproxy", "valgrind", "docker"].filter((name) => paragraph.includes(`\`${name}\``));
    expect(named.toSorted()).toEqual(installed.toSorted());
  });

  it("does nothing when the program is there (a glob works too)", () => {
    const dir = tempDir();
    writeScript(join(dir, "chromium"), "true");
    expect(ensure(join(dir, "chromium"), { uid: 0 }).apt).toEqual([]);
    expect(ensure(join(dir, "chrom*"), { uid: 0 }).apt).toEqual([]);
  });

  it("installs the Debian package as root, then checks the program is there", () => {
    const target = join(tempDir(), "chromium");
    const result = ensure(target, { uid: 0, creates: target });
    expect(result.status, result.stderr).toBe(0);
    expect(result.apt[0]).toMatch(/^update\b/);
    expect(result.apt[1]).toMatch(/^install -y .*\bchromium$/);

    const stillMissing = ensure(join(tempDir(), "chromium"), { uid: 0 });
    expect(stillMissing.status).not.toBe(0);
    expect(stillMissing.stderr).toMatch(/installed chromium but .* is still missing/);
  });

  it("stops at once with the command to run when it is neither root nor allowed to sudo", () => {
    const result = ensure(join(tempDir(), "chromium"), { uid: 1000 });
    expect(result.status).not.toBe(0);
    expect(result.stderr).toContain("sudo apt-get update && sudo apt-get install -y chromium");
    expect(result.apt).toEqual([]);
  });
});

describe(".ci/run", () => {
  it("runs `make test` on the pinned Node and on every other line, and fails if any one fails", () => {
    const bin = tempDir();
    // A fake make that logs its arguments and fails on the first of CI's other lines.
    writeScript(join(bin, "make"), `echo "$@" >> "${bin}/make.log"\ncase "$*" in *NODE_VERSION=${ciVersions[0]}*) exit 1;; esac\nexit 0`);
    const result = spawnSync(join(ROOT, ".ci/run"), { encoding: "utf8", env: { ...cleanEnv, PATH: `${bin}:/usr/bin:/bin` } });
    expect(result.status).toBe(1);
    const calls = readFileSync(join(bin, "make.log"), "utf8").trim().split("\n");
    expect(calls).toEqual([...[pinned, ...ciVersions].map((v) => `test NODE_VERSION=${v}`), "check-h3-latest"]);
    expect(result.stderr).toContain(`CI failed: ${ciVersions[0]}`);
  });
});
