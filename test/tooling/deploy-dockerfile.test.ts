import { spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { DEFAULT_DB_FILE } from "../../examples/bookstore/database.js";
import {
  getBundleCommand, getHealthcheck, getImageCommand, getInstructions, getStageArgs, getStageEnv, parseDockerfile, readDockerfile, readDuration,
  readMakeBuildRecipe, type Stage,
} from "./dockerfile.js";
import { DEFAULT_METRICS_PORT } from "../../src/metrics/port-settings.js";
import { workerLinkCopies } from "./pack.js";

const ROOT = resolve(import.meta.dirname, "..", "..");
const dockerfile = readDockerfile(join(ROOT, "docker/Dockerfile"));
const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
  version: string; bin: Record<string, string>; engines: { node: string }; dependencies: Record<string, string>;
};
const runtime = dockerfile.stages.at(-1) as Stage;
const temps: string[] = [];

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "keelson-deploy-"));
  temps.push(dir);
  return dir;
}

/** A fake command that appends its arguments to `<dir>/<name>.log`, exits with `$<NAME>_EXIT` for `info`. */
function fakeCommand(dir: string, name: string): string {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\necho "$@" >> "${dir}/${name}.log"\n[ "$1" = info ] && exit "\${FAKE_INFO_EXIT:-0}"\nexit 0\n`);
  chmodSync(path, 0o755);
  return path;
}

function readLog(dir: string, name: string): string[] {
  try {
    return readFileSync(join(dir, `${name}.log`), "utf8").trim().split("\n").filter(Boolean);
  } catch {
    return [];
  }
}

/** The stage a `COPY --from=<stage> <src> <dest>` of the runtime stage takes `dest` from. */
function copiedFrom(stage: Stage, dest: string): string | undefined {
  for (const copy of getInstructions(stage, "COPY")) {
    const from = /--from=(\S+)/.exec(copy.args)?.[1];
    const words = copy.args.split(/\s+/).filter((w) => !w.startsWith("--"));
    if (from && words.at(-1)?.replace(/\/$/, "").endsWith(dest)) return from.toLowerCase();
  }
  return undefined;
}

/** A .dockerignore glob (`*`, `?`, `**`) as an anchored RegExp over slash-separated paths. */
function toRegExp(glob: string): RegExp {
  const escaped = glob.replace(/^\//, "").replace(/[.+^${}()|[\]]/g, "\\$&");
  return new RegExp("^" + escaped.replace(/\*\*\/?/g, "\u0000").replace(/\*/g, "[^/]*").replace(/\?/g, "[^/]").replaceAll("\u0000", "(?:.*/)?") + "$");
}

afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
});

describe("the Dockerfile parser", () => {
  it("joins continuations, skips comments inside them, and tells exec form from shell form", () => {
    const parsed = parseDockerfile([
      "# syntax=docker/dockerfile:1",
      "ARG V=1.2.3",
      "FROM node:${V}-slim AS Build",
      "RUN echo a \\",
      "  # a comment inside the continuation",
      "  && echo b",
      'ENV A=1 B="two words" C=x\\ y',
      "ENV LEGACY some value",
      'ENTRYPOINT ["node", "x.js"]',
      "CMD node y.js",
    ].join("\n"));
    const stage = parsed.stages[0] as Stage;
    expect(stage.name).toBe("build");
    expect(stage.image).toBe("node:1.2.3-slim");
    expect(getInstructions(stage, "RUN")[0]?.args).toBe("echo a   && echo b");
    expect(getStageEnv(stage)).toEqual({ A: "1", B: "two words", C: "x y", LEGACY: "some value" });
    expect(getInstructions(stage, "ENTRYPOINT")[0]?.exec).toEqual(["node", "x.js"]);
    expect(() => getImageCommand(stage)).toThrow(/CMD is in shell form/);
    expect(readDuration("1m30s")).toBe(90_000);
  });
});

describe("docker/Dockerfile", () => {
  it("is multi-stage on one pinned Node LTS version that satisfies package.json engines", () => {
    expect(dockerfile.stages.length).toBeGreaterThanOrEqual(2);
    const versions = dockerfile.stages.map((s) => /^node:(\d+)\.(\d+)\.(\d+)-[a-z]+(-slim)?$/.exec(s.image));
    for (const [i, match] of versions.entries()) expect(match, dockerfile.stages[i]?.image).not.toBeNull();
    expect(new Set(versions.map((m) => m?.slice(1, 4).join("."))).size).toBe(1);
    const [major, minor] = (versions[0]?.slice(1, 3) ?? []).map(Number) as [number, number];
    // Even majors are the LTS lines; engines says >= 22.13 (node:sqlite without a flag).
    expect(major % 2).toBe(0);
    expect(pkg.engines.node).toBe(">=22.13");
    expect(major > 22 || (major === 22 && minor >= 13)).toBe(true);
    expect(runtime.image).toMatch(/-slim$/);
  });

  it("builds with every dependency and `make build`, and runs with production dependencies only", () => {
    const build = dockerfile.stages.find((s) => getInstructions(s, "RUN").some((r) => /\bmake build\b|npm run build\b/.test(r.args)));
    expect(build, "a stage runs `make build`").toBeDefined();
    const buildRuns = getInstructions(build as Stage, "RUN").map((r) => r.args).join("\n");
    expect(buildRuns).toMatch(/npm ci\b/);
    expect(buildRuns).not.toMatch(/--omit=dev|--production/);

    expect(copiedFrom(runtime, "dist")).toBe(build?.name);
    const depsName = copiedFrom(runtime, "node_modules");
    expect(depsName, "node_modules comes from another stage").toBeDefined();
    expect(depsName).not.toBe(build?.name);
    const deps = dockerfile.stages.find((s) => s.name === depsName) as Stage;
    const installs = getInstructions(deps, "RUN").flatMap((r) => r.args.split(/&&|;/)).filter((c) => /\bnpm (ci|install|i)\b/.test(c));
    expect(installs.some((c) => /\bnpm ci\b/.test(c))).toBe(true);
    for (const command of installs) {
      expect(command).toMatch(/--omit=dev/);
      if (/\bnpm (install|i)\b/.test(command)) expect(command).toMatch(/--no-save/);
    }
    // Nothing in the runtime stage installs packages, and nothing else is copied in from the build stage.
    expect(getInstructions(runtime, "RUN").filter((r) => /\bnpm\b/.test(r.args))).toEqual([]);
    const fromBuild = getInstructions(runtime, "COPY").filter((c) => c.args.includes(`--from=${build?.name ?? ""}`));
    expect(fromBuild).toHaveLength(1);
  });

  it("installs the example's runtime packages at the exact versions of package-lock.json (the RUN line, executed)", () => {
    const deps = dockerfile.stages.find((s) => s.name === copiedFrom(runtime, "node_modules")) as Stage;
    const run = getInstructions(deps, "RUN").find((r) => r.args.includes("npm ci"));
    const args = getStageArgs(deps);
    const packages = (args.EXAMPLE_PACKAGES ?? "").split(/\s+/).filter(Boolean);
    expect(packages.length).toBeGreaterThan(0);
    // Not keelson dependencies (npm ci --omit=dev has those already): the example's own extras.
    for (const name of packages) expect(pkg.dependencies[name], name).toBeUndefined();

    const lock = JSON.parse(readFileSync(join(ROOT, "package-lock.json"), "utf8")) as { packages: Record<string, { version: string }> };
    const exec = (examplePackages: string) => {
      const dir = tempDir();
      copyFileSync(join(ROOT, "package.json"), join(dir, "package.json"));
      copyFileSync(join(ROOT, "package-lock.json"), join(dir, "package-lock.json"));
      fakeCommand(dir, "npm");
      const result = spawnSync("/bin/sh", ["-c", run?.args ?? "false"], {
        cwd: dir, encoding: "utf8", env: { ...process.env, PATH: `${dir}:${process.env.PATH ?? ""}`, EXAMPLE_PACKAGES: examplePackages },
      });
      return { status: result.status, stderr: result.stderr, npm: readLog(dir, "npm") };
    };

    const ok = exec(args.EXAMPLE_PACKAGES ?? "");
    expect(ok.status, ok.stderr).toBe(0);
    expect(ok.npm[0]).toMatch(/^ci --omit=dev/);
    const install = ok.npm.find((line) => line.startsWith("install ")) ?? "";
    expect(install).toMatch(/--omit=dev/);
    expect(install).toMatch(/--save-prod/);
    for (const name of packages) expect(install.split(" ")).toContain(`${name}@${lock.packages[`node_modules/${name}`]?.version}`);

    // A package missing from the lock file fails the build instead of installing nothing.
    const bad = exec("no-such-package-in-the-lock");
    expect(bad.status).not.toBe(0);
    expect(bad.stderr).toMatch(/not in package-lock\.json/);
    expect(bad.npm.some((line) => line.startsWith("install "))).toBe(false);
  });

  it("ships a compile cache made as the runtime user on the runtime's paths and Node, read-only to the service", () => {
    const cache = getStageEnv(runtime).NODE_COMPILE_CACHE ?? "";
    const workdir = getInstructions(runtime, "WORKDIR").at(-1)?.args ?? "";
    expect(cache.startsWith(`${workdir}/`), cache).toBe(true);
    const stage = dockerfile.stages.find((s) => s.name === copiedFrom(runtime, cache.slice(workdir.length + 1))) as Stage;
    expect(stage, "the cache is copied in from a stage of its own").toBeDefined();
    // Node keys the cache by file path and content, its own version and the uid: all as at run time.
    expect(stage.image).toBe(runtime.image);
    expect(getInstructions(stage, "WORKDIR").at(-1)?.args).toBe(workdir);
    expect(getStageEnv(stage).NODE_COMPILE_CACHE).toBe(cache);
    expect(copiedFrom(stage, "dist")).toBe(copiedFrom(runtime, "dist"));
    expect(copiedFrom(stage, "node_modules")).toBe(copiedFrom(runtime, "node_modules"));
    const user = getInstructions(stage, "USER").at(-1);
    expect(user?.args).toBe(getInstructions(runtime, "USER").at(-1)?.args);
    expect(getInstructions(stage, "RUN").some((r) => r.line > (user?.line ?? Infinity) && r.args.includes("warm-compile-cache.mjs"))).toBe(true);
    // Copied in without --chown: owned by root, so the service cannot write code V8 would then load.
    const copy = getInstructions(runtime, "COPY").find((c) => c.args.includes(`--from=${stage.name}`));
    expect(copy?.args).not.toMatch(/--chown/);
  });

  it("runs as a numeric non-root user", () => {
    const user = getInstructions(runtime, "USER").at(-1);
    expect(user).toBeDefined();
    const [uid, gid] = (user?.args ?? "").split(":");
    expect(uid).toMatch(/^\d+$/);
    expect(Number(uid)).toBeGreaterThan(0);
    // uid:gid both set: a USER with only a uid would run with gid 0 (root's group).
    expect(gid).toMatch(/^\d+$/);
    expect(Number(gid)).toBeGreaterThan(0);
    const entrypoint = getInstructions(runtime, "ENTRYPOINT").at(-1);
    expect((user?.line ?? Infinity) < (entrypoint?.line ?? 0)).toBe(true);
  });

  it("gives the runtime user a writable volume at the example's SQLite folder", () => {
    const workdir = getInstructions(runtime, "WORKDIR").at(-1)?.args ?? "/";
    const data = join(workdir, dirname(DEFAULT_DB_FILE));
    const owner = getInstructions(runtime, "USER").at(-1)?.args ?? "";
    const user = getInstructions(runtime, "USER").at(-1)?.line ?? 0;
    const runs = getInstructions(runtime, "RUN").filter((r) => r.line < user).map((r) => r.args);
    expect(runs.some((r) => r.includes(`mkdir -p ${data}`) && r.includes(`chown ${owner} ${data}`)), runs.join("\n")).toBe(true);
    expect(getInstructions(runtime, "VOLUME").map((v) => v.exec ?? [v.args]).flat()).toContain(data);
  });

  it("starts the supervisor CLI in exec form, with no shell or init in between and no fixed WORKERS/PORT", () => {
    for (const keyword of ["ENTRYPOINT", "CMD"]) {
      for (const instruction of getInstructions(runtime, keyword)) expect(instruction.exec, `${keyword} exec form`).toBeDefined();
    }
    const command = getImageCommand(runtime);
    expect(command[0]).toBe("node");
    expect(command).not.toContain("-g");
    expect(command.join(" ")).not.toMatch(/\b(sh|bash|tini|dumb-init|npm)\b/);
    // keelson's CLI and the example bundled by `keelson bundle` in `make build` (the build stage runs it).
    expect(command.slice(1, 4)).toEqual(["dist/bundle/keelson.mjs", "start", "dist/bundle/main.mjs"]);
    // The example imports tsc's build of keelson (dist/src), so it is bundled by the CLI of that same
    // build (the package's bin is the bundled dist/lib): the preload and the App then share one
    // worker link, which the bundle make build wrote shows.
    const bundle = getBundleCommand(readMakeBuildRecipe(readFileSync(join(ROOT, "Makefile"), "utf8")));
    expect(bundle?.argv).toEqual(["node", "dist/cli/cli.js", "bundle", "dist/examples/bookstore/main.js", "--out", "dist/bundle"]);
    expect(workerLinkCopies(join(ROOT, "dist", "bundle"))).toBe(1);
    expect(command.some((a) => /^--(workers|port)\b/.test(a))).toBe(false);
    // Stated, not inherited: a base image can change the default stop signal.
    expect(getInstructions(runtime, "STOPSIGNAL").at(-1)?.args).toBe("SIGTERM");
  });

  it("has an exec-form HEALTHCHECK on /health at $PORT, and EXPOSEs the default PORT and the metrics port", () => {
    const check = getHealthcheck(runtime);
    expect(check?.exec, "exec form").toBeDefined();
    expect(check?.exec?.[0]).toBe("node");
    const script = check?.exec?.join(" ") ?? "";
    expect(script).toContain("/health");
    expect(script).toContain("process.env.PORT");
    const interval = readDuration(check?.options.interval ?? "30s");
    const timeout = readDuration(check?.options.timeout ?? "30s");
    expect(timeout).toBeLessThan(interval);
    expect(check?.options["start-period"]).toBeDefined();
    const env = getStageEnv(runtime);
    expect(env.NODE_ENV).toBe("production");
    expect(env.PORT).toMatch(/^\d+$/);
    const exposed = getInstructions(runtime, "EXPOSE").flatMap((e) => e.args.split(/\s+/));
    expect(exposed).toContain(env.PORT);
    expect(exposed).toContain(String(DEFAULT_METRICS_PORT));
  });
});

describe(".dockerignore", () => {
  const patterns = readFileSync(join(ROOT, ".dockerignore"), "utf8").split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#"));
  /** Docker's rule: the last pattern that matches the path or one of its parent directories wins. */
  const excluded = (path: string) => {
    const prefixes = path.split("/").map((_, i, parts) => parts.slice(0, i + 1).join("/"));
    let result = false;
    for (const raw of patterns) {
      const negate = raw.startsWith("!");
      const re = toRegExp(negate ? raw.slice(1) : raw);
      if (prefixes.some((p) => re.test(p))) result = !negate;
    }
    return result;
  };

  it("keeps host node_modules, dist, git history, env files and the local database out of the build context", () => {
    for (const path of [".git/config", "node_modules/h3/package.json", "examples/x/node_modules/a/b.js", "dist/src/index.js", ".env", ".env.local", "data/bookstore.db", "data/bookstore.db-wal"]) {
      expect(excluded(path), path).toBe(true);
    }
  });

  it("keeps in everything `make build` reads", () => {
    const build = JSON.parse(readFileSync(join(ROOT, "tsconfig.build.json"), "utf8")) as { include: string[] };
    const recipe = readMakeBuildRecipe(readFileSync(join(ROOT, "Makefile"), "utf8")).join("\n");
    // Not dist/: the recipe writes it (its later lines run what its first one built).
    const referenced = (recipe.match(/[\w./-]+\.(?:m?js|ts|json|sh)\b/g) ?? []).filter((path) => !path.startsWith("dist/"));
    const inputs = ["package.json", "package-lock.json", "Makefile", ".node-version", "tsconfig.json", "tsconfig.build.json", ...build.include.map((d) => `${d}/x.ts`), ...referenced];
    for (const path of inputs) expect(excluded(path), path).toBe(false);
  });
});

describe("make docker", () => {
  // Absolute, so the PATH without docker below still finds make.
  const makePath = spawnSync("/bin/sh", ["-c", "command -v make"], { encoding: "utf8" }).stdout.trim();
  // Without MAKEFLAGS: under `make test NODE_VERSION=…` (CI's other Node lines) it would carry that override in.
  const { MAKEFLAGS: _flags, MFLAGS: _mflags, MAKELEVEL: _level, ...env } = process.env;
  const make = (path: string, infoExit: number) =>
    spawnSync(makePath, ["--no-print-directory", "docker"], { cwd: ROOT, encoding: "utf8", env: { ...env, PATH: path, FAKE_INFO_EXIT: String(infoExit) } });

  it("builds docker/Dockerfile from the repository root, tagged with the package version", () => {
    const dir = tempDir();
    fakeCommand(dir, "docker");
    const result = make(`${dir}:${process.env.PATH ?? ""}`, 0);
    expect(result.status, result.stderr).toBe(0);
    const build = readLog(dir, "docker").find((line) => line.startsWith("build ")) ?? "";
    const nodeVersion = readFileSync(join(ROOT, ".node-version"), "utf8").trim();
    expect(build.split(" ")).toEqual([
      "build", "-f", "docker/Dockerfile", "--build-arg", `NODE_VERSION=${nodeVersion}`, "-t", "keelson-example", "-t", `keelson-example:${pkg.version}`, ".",
    ]);
  });

  it("fails with a clear message and builds nothing when no Docker engine answers", () => {
    const dir = tempDir();
    fakeCommand(dir, "docker");
    const result = make(`${dir}:${process.env.PATH ?? ""}`, 1);
    expect(result.status).not.toBe(0);
    expect(result.stderr).toMatch(/no Docker engine is reachable.*NOT built/);
    expect(readLog(dir, "docker")).toEqual(["info"]);
  });

  it("fails with a clear message when the docker CLI is not installed", () => {
    const result = make(tempDir(), 0);
    expect(result.status).not.toBe(0);
    expect(result.stderr).toMatch(/docker CLI is not installed.*NOT built/);
  });
});
