// `npx keelson new` as a user runs it, from the packed package: the project it writes installs,
// passes its own tests (`make test`) and runs with 2 workers (`make run`). Slow (a build and npm
// installs): generous timeouts. Its templates are kept in step with keelson's own files here.
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stripVTControlCharacters } from "node:util";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { freePort, killAllChildren, spawnChild } from "../../harness/child.js";
import { ROOT, npm, packKeelson, readRecommendedTsconfig, run, workerLinkCopies } from "./pack.js";

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

let work: string;
let tarball: string;
let project: string;
let tested = false;
let served = false;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "keelson-new-"));
  tarball = await packKeelson(work);
  // As documented: `npx keelson new my-api`, here with the tarball standing in for the registry.
  await run("npm", ["exec", "--yes", `--package=${tarball}`, "--", "keelson", "new", "my-api"], work);
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
      ".gitignore", ".dockerignore", "README.md",
    ]) expect(existsSync(join(project, file)), file).toBe(true);
    const manifest = JSON.parse(readFileSync(join(project, "package.json"), "utf8")) as {
      name: string; dependencies: Record<string, string>; devDependencies: Record<string, string>; engines: { node: string };
    };
    const keelson = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
      version: string; engines: { node: string }; devDependencies: Record<string, string>;
    };
    expect([manifest.name, manifest.dependencies.keelson]).toEqual(["my-api", `^${keelson.version}`]);
    // The Node keelson needs, and the TypeScript line keelson is built with (the docs name the same).
    expect(manifest.engines.node).toBe(keelson.engines.node);
    expect(manifest.devDependencies.typescript).toBe(keelson.devDependencies.typescript);
    expect(readFileSync(join(project, "src", "app.ts"), "utf8")).toContain('serviceName: "my-api"');
  });

  it("keeps the templates in step: the tsconfig docs/getting-started.md recommends, keelson's own runtime image", () => {
    expect(JSON.parse(readFileSync(join(TEMPLATES, "tsconfig.json"), "utf8"))).toEqual(readRecommendedTsconfig());
    expect(sharedDockerfilePart(join(TEMPLATES, "Dockerfile"))).toBe(sharedDockerfilePart(join(ROOT, "docker", "Dockerfile")));
  });

  it("refuses a folder that is not empty, and a name npm would refuse", async () => {
    const again = keelsonNew(project);
    const bad = keelsonNew(join(work, "Bad Name"));
    expect([(await again.exited).code, again.output()]).toEqual([2, expect.stringContaining("exists and is not empty")]);
    expect([(await bad.exited).code, bad.output()]).toEqual([2, expect.stringContaining("is not a valid npm package name")]);
  });

  it("installs keelson from the tarball and passes its own tests (make test)", async () => {
    await npm(["install", tarball], project);
    const output = stripVTControlCharacters(await run("make", ["test"], project));
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
