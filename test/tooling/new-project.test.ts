// `npx keelson new` as a user runs it, from the packed package: the project it writes installs,
// passes its own tests (`make test`, with an older Node first on PATH) and runs with 2 workers
// (`make run`). Slow (a build and npm installs): generous timeouts. Its templates are kept in step
// with keelson's own files here.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { stripVTControlCharacters } from "node:util";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { freePort, killAllChildren, spawnChild } from "../../harness/child.js";
import { writeProject } from "../../cli/new-command.js";
import { node20 } from "../node20.js";
import { ROOT, packKeelson, readRecommendedTsconfig, run, workerLinkCopies } from "./pack.js";

const SLOW = 600_000;
const TEMPLATES = join(ROOT, "templates", "new");

/**
 * The Dockerfile's `ARG NODE_VERSION` line and its runtime stage without the ENTRYPOINT: what the two
 * images share. Not shared: the example's data volume (its SQLite file), from its comment to VOLUME.
 */
function sharedDockerfilePart(path: string): string {
  const text = readFileSync(path, "utf8").replace(/^# The one folder the service writes[\s\S]*?^VOLUME .*\n/m, "");
  const version = /^ARG NODE_VERSION=.*$/m.exec(text)?.[0];
  const start = text.indexOf("# ---- runtime");
  const end = text.indexOf("ENTRYPOINT");
  if (version === undefined || start < 0 || end < start) throw new Error(`${path}: no NODE_VERSION or runtime stage`);
  return `${version}\n${text.slice(start, end)}`;
}

/** A Makefile's pinned-Node part: from `NODE_VERSION :=` to its `endif`, and the rule that installs it. */
function pinnedNodePart(path: string): string[] {
  const text = readFileSync(path, "utf8");
  const choice = /^NODE_VERSION :=[\s\S]*?^endif$/m.exec(text)?.[0];
  const rule = /^ifneq \(\$\(PINNED_NODE\),\)\n\$\(PINNED_NODE\):\n\t.*\nendif$/m.exec(text)?.[0];
  if (choice === undefined || rule === undefined) throw new Error(`${path}: no pinned-Node part`);
  return [choice, rule];
}

let work: string;
let tarball: string;
let project: string;
let tested = false;
let served = false;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "keelson-new-"));
  tarball = await packKeelson(work);
  // As documented for keelson before it is on the registry: `keelson new --keelson` with the tarball.
  await run("npm", ["exec", "--yes", `--package=${tarball}`, "--", "keelson", "new", "my-api", "--keelson", tarball], work);
  project = join(work, "my-api");
}, SLOW);

afterEach(() => killAllChildren());

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

/** `keelson new <dir>` from source, as a process. */
const keelsonNew = (dir: string) => spawnChild([process.execPath, "--import", "tsx", join(ROOT, "cli", "cli.ts"), "new", dir], { cwd: ROOT });

describe("keelson new", () => {
  it("writes the project files, named after the folder", () => {
    for (const file of [
      "package.json", "tsconfig.json", "src/app.ts", "src/notes.ts", "src/main.ts", "src/database.ts", "test/app.test.ts", "Dockerfile", "Makefile",
      ".gitignore", ".dockerignore", "README.md", ".node-version", "scripts/ensure-node.sh",
    ]) expect(existsSync(join(project, file)), file).toBe(true);
    const manifest = JSON.parse(readFileSync(join(project, "package.json"), "utf8")) as {
      name: string; dependencies: Record<string, string>; devDependencies: Record<string, string>; engines: { node: string };
    };
    const keelson = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
      version: string; engines: { node: string }; devDependencies: Record<string, string>;
    };
    expect([manifest.name, manifest.dependencies.keelson]).toEqual(["my-api", `file:${tarball}`]);
    // Without --keelson: this version from the registry.
    const plain = join(work, "plain");
    writeProject(plain, { name: "plain" });
    expect((JSON.parse(readFileSync(join(plain, "package.json"), "utf8")) as typeof manifest).dependencies.keelson).toBe(`^${keelson.version}`);
    // The Node keelson needs, and the TypeScript line keelson is built with (the docs name the same).
    expect(manifest.engines.node).toBe(keelson.engines.node);
    expect(manifest.devDependencies.typescript).toBe(keelson.devDependencies.typescript);
    expect(readFileSync(join(project, "src", "app.ts"), "utf8")).toContain('serviceName: "my-api"');
  });

  it("keeps the templates in step: the tsconfig docs/getting-started.md recommends, keelson's own runtime image and pinned Node", () => {
    expect(JSON.parse(readFileSync(join(TEMPLATES, "tsconfig.json"), "utf8"))).toEqual(readRecommendedTsconfig());
    expect(sharedDockerfilePart(join(TEMPLATES, "Dockerfile"))).toBe(sharedDockerfilePart(join(ROOT, "docker", "Dockerfile")));
    expect(pinnedNodePart(join(project, "Makefile"))).toEqual(pinnedNodePart(join(ROOT, "Makefile")));
    for (const file of [".node-version", "scripts/ensure-node.sh"]) expect(readFileSync(join(project, file), "utf8"), file).toBe(readFileSync(join(ROOT, file), "utf8"));
    expect(statSync(join(project, "scripts", "ensure-node.sh")).mode & 0o111).toBe(0o111);
  });

  it("refuses a folder that is not empty, and a name npm would refuse", async () => {
    const again = keelsonNew(project);
    const bad = keelsonNew(join(work, "Bad Name"));
    expect([(await again.exited).code, again.output()]).toEqual([2, expect.stringContaining("exists and is not empty")]);
    expect([(await bad.exited).code, bad.output()]).toEqual([2, expect.stringContaining("is not a valid npm package name")]);
    const refusals: [string, string][] = [[join(work, "missing.tgz"), "does not exist"], [join(ROOT, "src"), "is not a keelson checkout"], [join(ROOT, "Makefile"), "is neither a folder nor a .tgz"]];
    for (const [path, reason] of refusals) {
      const refused = spawnChild([process.execPath, "--import", "tsx", join(ROOT, "cli", "cli.ts"), "new", join(work, "other"), "--keelson", path], { cwd: ROOT });
      expect([(await refused.exited).code, refused.output()]).toEqual([2, expect.stringContaining(`--keelson: ${path} ${reason}`)]);
    }
    expect(existsSync(join(work, "other"))).toBe(false);
  });

  it("installs keelson from the tarball and passes its own tests (make test) on the pinned Node, with Node 20 first on PATH", async () => {
    const pinned = readFileSync(join(project, ".node-version"), "utf8").trim();
    // The Node this checkout's make installed stands in for the download when there is one.
    const installed = join(ROOT, ".cache", "node", pinned);
    if (existsSync(join(installed, "bin", "node"))) {
      mkdirSync(join(project, ".cache", "node"), { recursive: true });
      symlinkSync(installed, join(project, ".cache", "node", pinned), "dir");
    }
    // Not the flags of a `make test NODE_VERSION=…` this suite may run under.
    const output = stripVTControlCharacters(await run("make", ["test"], project, {
      PATH: `${dirname(node20())}:${process.env.PATH ?? ""}`, MAKEFLAGS: undefined, MFLAGS: undefined, MAKELEVEL: undefined,
    }));
    expect(output).toContain(`make test: Node v${pinned} at ${join(project, ".cache", "node", pinned, "bin", "node")}`);
    expect(output).toMatch(/Tests\s+4 passed/);
    // Quiet: the App's request lines stay out of the test output.
    expect(output).not.toMatch(/\b(GET|POST) \/(api|health)\S* \d{3} /);
    tested = true;
  }, SLOW);

  it("runs with 2 workers (make run): /health 200, the validated route, /metrics", async () => {
    expect(tested, "make test passes first").toBe(true);
    const port = await freePort();
    // Metrics port 0: a free one, so that no other service on this machine is in the way of 9464.
    const service = spawnChild(["make", "run", "WORKERS=2", `PORT=${port}`], { cwd: project, group: true, env: { KEELSON_METRICS_PORT: "0" } });
    try {
      await service.waitFor(/2 worker\(s\) ready in \d+ms/, { timeoutMs: 120_000 });
      const base = `http://127.0.0.1:${port}`;
      const health = await fetch(`${base}/health`);
      expect([health.status, await health.json()]).toEqual([200, expect.objectContaining({ status: "UP", service: "my-api" })]);
      const post = (body: unknown) => fetch(`${base}/api/notes`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      expect((await post({ text: 1 })).status).toBe(422);
      // One SQLite file shared by the workers: a note written through one reads back through every other.
      const written = await post({ text: "hi" });
      expect(written.status).toBe(201);
      const { id } = (await written.json()) as { id: string };
      const reads = await Promise.all(Array.from({ length: 8 }, () => fetch(`${base}/api/notes/${id}`, { headers: { connection: "close" } })));
      expect(reads.map((read) => read.status)).toEqual(Array.from({ length: 8 }, () => 200));
      expect(existsSync(join(project, "data", "notes.db"))).toBe(true);
      const metrics = await fetch(`${base}/metrics`);
      expect([metrics.status, (await metrics.text()).includes('http_request_duration_seconds_count{method="POST",route="/api/notes"')]).toEqual([200, true]);
      served = true;
    } finally {
      service.kill("SIGTERM", { all: true });
      await service.exited;
    }
  }, SLOW);

  it("bundles and warms a compile cache the way its image's build and compile-cache stages do, with the installed package", async () => {
    expect(served, "make run served first (it builds dist/)").toBe(true);
    const dockerfile = readFileSync(join(project, "Dockerfile"), "utf8");
    // The build stage's last step first: the image runs (and warms) the bundle it writes.
    expect(dockerfile).toMatch(/^RUN npm run build && npm run bundle$/m);
    const bundled = await run("npm", ["run", "bundle"], project);
    expect(bundled).toMatch(/keelson bundle: \d+ module\(s\)/);
    // The worker preload and the App bundled one copy of the worker link (both from the package's dist/lib).
    expect(workerLinkCopies(join(project, "dist", "bundle"))).toBe(1);
    const command = /^RUN (node node_modules\/keelson\/scripts\/warm-compile-cache\.mjs [^\\&\n]+)/m.exec(dockerfile)?.[1];
    expect(command).toContain("dist/bundle/keelson.mjs start dist/bundle/main.mjs");
    expect(command, "the compile-cache stage runs the packaged warm-up script").toBeDefined();
    const cache = join(work, "compile-cache");
    const port = await freePort();
    const [, ...args] = (command ?? "").trim().split(/\s+/);
    const warm = spawnChild([process.execPath, ...args], { cwd: project, env: { NODE_COMPILE_CACHE: cache, PORT: String(port), KEELSON_METRICS_PORT: "0" } });
    expect((await warm.exited).code, warm.output()).toBe(0);
    expect(warm.output()).toMatch(/warm-compile-cache: [1-9]\d+ entries/);
  }, SLOW);
});
