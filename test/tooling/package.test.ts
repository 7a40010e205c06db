// The package as a user gets it: `npm pack` of a fresh copy of the repository (its prepack builds),
// the tarball installed into a new project, a service compiled there with strict tsc, run under
// the `keelson` command. Slow (a build and an npm install): every step has a generous timeout.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { freePort, killAllChildren, spawnChild } from "../../harness/child.js";
import { ROOT, npm, packKeelson, readRecommendedTsconfig, run } from "./pack.js";
const SLOW = 600_000;

const RECOMMENDED_TSCONFIG = readRecommendedTsconfig();

const SERVICE = `import { App, get, notFound } from "keelson";
import { createPrometheus } from "keelson/metrics";
import type { SupervisorOptions } from "keelson/supervisor";

const workers: SupervisorOptions["workers"] = 2;
const app = new App({ serviceName: "packed", docs: { title: "Packed" } });
app.use(createPrometheus());
app.group("/api").route(get("/hello/:name", (ctx) => {
  if (ctx.params.name === "nobody") throw notFound("no such person");
  return { hello: ctx.params.name, workers };
}));
await app.listen();
`;

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: "utf8" });
}

let work: string;
let tarball: string;
let service: string;
let unpacked: string;
/** Set by the compile test: tsc writes dist/ even when it reports errors. */
let compiled = false;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "keelson-package-"));
  tarball = await packKeelson(work);
  unpacked = join(work, "unpacked");
  await run("sh", ["-c", `mkdir -p "${unpacked}" && tar -xzf "${tarball}" -C "${unpacked}"`], work);

  service = join(work, "service");
  await run("mkdir", ["-p", join(service, "src")], work);
  writeFileSync(join(service, "package.json"), JSON.stringify({ name: "packed-service", private: true, type: "module" }));
  writeFileSync(join(service, "src", "main.ts"), SERVICE);
  const dev = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { devDependencies: Record<string, string> }).devDependencies;
  await npm(["install", tarball, `typescript@${dev.typescript}`, `@types/node@${dev["@types/node"]}`], service);
}, SLOW);

afterEach(() => killAllChildren());

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe("the npm package", () => {
  it("holds the build with the Scalar bundle and both licences, the sources its maps point at, and no examples", () => {
    const files = filesUnder(join(unpacked, "package"));
    for (const file of [
      "LICENSE", "dist/lib/index.js", "dist/src/index.d.ts", "dist/lib/cli.js", "dist/lib/metrics.js", "dist/lib/worker-preload.js",
      "dist/lib/vendor/scalar-standalone.js", "dist/lib/vendor/scalar-standalone.LICENSE.txt", "src/app.ts", "cli/cli.ts",
    ]) expect(files, file).toContain(file);
    expect(files.filter((f) => f.startsWith("dist/examples") || f.startsWith("test") || f.startsWith("load-tests"))).toEqual([]);
    // Every entry point and the bin point into the bundled build, and it is the only code shipped
    // built: no second copy of a module (the App's and the preload's worker link) can be loaded.
    const manifest = JSON.parse(readFileSync(join(unpacked, "package", "package.json"), "utf8")) as {
      exports: Record<string, string | { default: string }>; bin: Record<string, string>;
    };
    const targets = [...Object.values(manifest.exports).map((target) => (typeof target === "string" ? target : target.default)), ...Object.values(manifest.bin)];
    expect(targets.filter((target) => target !== "./package.json" && !target.startsWith("./dist/lib/"))).toEqual([]);
    expect(files.filter((f) => f.startsWith("dist/") && !f.startsWith("dist/lib/") && f.endsWith(".js"))).toEqual([]);
    expect(readFileSync(join(unpacked, "package", "LICENSE"), "utf8")).toContain("Copyright (c) 2026 keelson contributors");
    const maps = files.filter((f) => f.endsWith(".map"));
    expect(maps.length).toBeGreaterThan(50);
    const missing = maps.flatMap((map) => {
      const { sources } = JSON.parse(readFileSync(join(unpacked, "package", map), "utf8")) as { sources: string[] };
      return sources.map((source) => resolve(dirname(join(unpacked, "package", map)), source)).filter((source) => !existsSync(source));
    });
    expect(missing).toEqual([]);
  });

  it("compiles a service with strict tsc and the recommended tsconfig, and with skipLibCheck: false plus crossws", async () => {
    const tsc = join(service, "node_modules", "typescript", "bin", "tsc");
    writeFileSync(join(service, "tsconfig.json"), JSON.stringify(RECOMMENDED_TSCONFIG, null, 2));
    await run(process.execPath, [tsc, "-p", "tsconfig.json"], service);
    expect(existsSync(join(service, "dist", "main.js"))).toBe(true);
    compiled = true;
    // h3's types import crossws (an optional peer of h3): checking them needs it installed.
    const h3 = JSON.parse(readFileSync(join(service, "node_modules", "h3", "package.json"), "utf8")) as { peerDependencies: Record<string, string> };
    await npm(["install", "--save-dev", `crossws@${h3.peerDependencies.crossws}`], service);
    const strict = { ...RECOMMENDED_TSCONFIG, compilerOptions: { ...RECOMMENDED_TSCONFIG.compilerOptions, skipLibCheck: false, noEmit: true } };
    writeFileSync(join(service, "tsconfig.strict.json"), JSON.stringify(strict, null, 2));
    await run(process.execPath, [tsc, "-p", "tsconfig.strict.json"], service);
  }, SLOW);

  it("runs under the keelson command with 2 workers: /health, the API, /metrics, /docs and its Scalar script", async () => {
    expect(compiled, "the compile test passes first").toBe(true);
    const port = await freePort();
    const keelson = spawnChild([join(service, "node_modules", ".bin", "keelson"), "start", "dist/main.js", "--workers", "2", "--port", String(port)], {
      cwd: service, env: { NODE_ENV: "development" }, group: true,
    });
    try {
      await keelson.waitFor(/2 worker\(s\) ready in \d+ms/, { timeoutMs: 60_000 });
      const base = `http://127.0.0.1:${port}`;
      const health = await fetch(`${base}/health`);
      expect([health.status, ((await health.json()) as { service: string }).service]).toEqual([200, "packed"]);
      expect(await (await fetch(`${base}/api/hello/ada`)).json()).toEqual({ hello: "ada", workers: 2 });
      expect((await fetch(`${base}/api/hello/nobody`)).status).toBe(404);
      const metrics = await fetch(`${base}/metrics`);
      expect([metrics.status, (await metrics.text()).includes("http_request_duration_seconds")]).toEqual([200, true]);
      const page = await fetch(`${base}/docs`);
      const html = await page.text();
      expect([page.status, html.includes("<title>Packed")]).toEqual([200, true]);
      const script = /"(\/[^"]*scalar\.js\?v=[\w-]+)"/.exec(html)?.[1];
      expect(script, html).toBeDefined();
      const bundle = await fetch(`${base}/docs${script}`);
      expect([bundle.status, bundle.headers.get("content-type")]).toEqual([200, "text/javascript;charset=UTF-8"]);
      const body = await bundle.text();
      expect(body.length).toBeGreaterThan(1_000_000);
      expect(body).toContain("createApiReference");
      const document = (await (await fetch(`${base}/docs/openapi.json`)).json()) as { paths: Record<string, unknown> };
      expect(Object.keys(document.paths)).toEqual(["/health", "/api/hello/{name}"]);
    } finally {
      await keelson.stop();
    }
    // SIGTERM drains both workers: a clean exit.
    expect((await keelson.exited).code, keelson.output()).toBe(0);
  }, SLOW);
});

/** The lines of the first ```sh block after `heading` in a Markdown file of the repository. */
function shellBlock(file: string, heading: string): string[] {
  const page = readFileSync(join(ROOT, file), "utf8");
  const block = /```sh\n([\s\S]*?)\n```/.exec(page.slice(page.indexOf(heading)))?.[1];
  if (block === undefined) throw new Error(`${file}: no sh block under "${heading}"`);
  return block.split("\n").filter((line) => line.trim() !== "" && !line.startsWith("#"));
}

describe("getting started, followed verbatim in a fresh folder", () => {
  const installs = shellBlock("docs/getting-started.md", "## Add keelson to your own project");
  const clientTools = shellBlock("docs/client.md", "# A typed client").filter((line) => line.startsWith("npm install"));
  let project: string;

  it("the README and getting-started install the same; TypeScript is pinned to the line the tools accept", () => {
    // @types/node of the runtime's major (.node-version): a bare one installs the newest, ahead of the runtime.
    const major = readFileSync(join(ROOT, ".node-version"), "utf8").trim().split(".")[0];
    expect(installs).toEqual(["npm install keelson zod", `npm install --save-dev typescript@~5.9 @types/node@^${major} tsx`]);
    expect(shellBlock("README.md", "## Add keelson to a project").filter((line) => line.startsWith("npm install"))).toEqual(installs);
    const dev = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { devDependencies: Record<string, string> }).devDependencies;
    expect(dev.typescript).toMatch(/^~5\.9\./);
  });

  it("installs (the docs' commands, then openapi-typescript from the client page) with no ERESOLVE and no EBADENGINE", async () => {
    project = join(work, "first-contact");
    await run("mkdir", ["-p", join(project, "src")], work);
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "first-contact", private: true, type: "module" }));
    // Verbatim, but keelson comes from the packed tarball instead of the registry.
    for (const line of [...installs, ...clientTools]) {
      const command = line.replace(/^npm install keelson\b/, `npm install ${tarball}`).replace(/\s+#.*$/, "");
      const output = await run("sh", ["-c", command], project, { npm_config_prefer_offline: "true", npm_config_audit: "false", npm_config_fund: "false" });
      expect(output, command).not.toMatch(/ERESOLVE|EBADENGINE/);
    }
    const installed = JSON.parse(readFileSync(join(project, "node_modules", "typescript", "package.json"), "utf8")) as { version: string };
    expect(installed.version).toMatch(/^5\.9\./);
  }, SLOW);

  it("compiles the README's service with the recommended tsconfig, and it starts on the port asked for", async () => {
    expect(project, "the install test passes first").toBeDefined();
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    const server = /```ts\n(\/\/ src\/server\.ts\n[\s\S]*?)\n```/.exec(readme)?.[1];
    expect(server, "README.md: the ts block of src/server.ts").toBeDefined();
    writeFileSync(join(project, "src", "server.ts"), server!);
    writeFileSync(join(project, "tsconfig.json"), JSON.stringify(RECOMMENDED_TSCONFIG, null, 2));
    await run("npx", ["tsc"], project);
    const port = await freePort();
    const keelson = spawnChild(["npx", "keelson", "start", "dist/server.js", "--port", String(port), "--workers", "1", "--metrics-port", "off"], {
      cwd: project, env: { NODE_ENV: "development", PORT: "" }, group: true,
    });
    try {
      expect(await keelson.waitFor(/1 worker\(s\) ready in \d+ms/, { timeoutMs: 60_000 })).toMatch(new RegExp(`http://(\\[::\\]|0\\.0\\.0\\.0):${port}/`));
      const books = await fetch(`http://127.0.0.1:${port}/api/books?limit=1`);
      expect([books.status, ((await books.json()) as { data: Array<{ title: string }> }).data[0]?.title]).toEqual([200, "Dune"]);
    } finally {
      await keelson.stop();
    }
  }, SLOW);
});
