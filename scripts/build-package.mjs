#!/usr/bin/env node
// What the package's entry points and its `keelson` bin load: keelson's own modules bundled with
// esbuild into a few ESM files in dist/lib (one per entry point, shared code split into chunks, so
// `keelson` and `keelson/metrics` share one App), every dependency left to node_modules. h3 and srvx
// ship their builds the same way: Node's ESM loader resolves, reads and links each file on its own,
// and a service start paid for keelson's ~90 files where a few do. The types stay tsc's (dist/src,
// dist/supervisor). The worker preload and the CLI are entries too, so a worker's preload and its
// App share one copy of the worker link. Scalar's bundle is copied next to the chunks, where the
// docs route looks first (src/docs/assets.ts).
// Usage: node scripts/build-package.mjs [outDir=dist/lib] (after tsc and copy-scalar)
import { copyFileSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const out = join(root, process.argv[2] ?? "dist/lib");

/** The package's entry points (package.json exports and bin), by output name. */
const ENTRIES = {
  index: "src/index.ts",
  metrics: "src/entries/metrics.ts",
  tracing: "src/entries/tracing.ts",
  auth: "src/entries/auth.ts",
  sql: "src/entries/sql.ts",
  redis: "src/entries/redis.ts",
  supervisor: "supervisor/index.ts",
  cli: "cli/cli.ts",
  "worker-preload": "supervisor/worker-preload.ts",
};

rmSync(out, { recursive: true, force: true });
await build({
  absWorkingDir: root,
  entryPoints: Object.fromEntries(Object.entries(ENTRIES).map(([name, file]) => [name, join(root, file)])),
  outdir: out,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node22",
  packages: "external",
  // The maps point at the TypeScript sources the package ships (src, supervisor, cli).
  sourcemap: "linked",
  sourcesContent: false,
  logLevel: "warning",
});

// The library refuses an unsupported Node at import, with one line, before any of its modules runs: a
// user who runs `node` or `npm test` outside the Makefile would otherwise meet a TypeError deep in a
// test (node:sqlite is missing on Node 20). The floor is package.json's engines.node, the rule the
// CLI's own check (cli/cli.ts) is tested against. Each library entry imports the guard first, so it
// is evaluated before every chunk the entry imports after it. The CLI keeps its own check (one line,
// exit 1) and loads no library entry before it. The import goes on the entry's first line, so its
// source map's lines stay right.
const engines = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).engines.node;
const floor = /^>=(\d+)\.(\d+)$/.exec(engines);
if (floor === null) throw new Error(`package.json engines.node is "${engines}": the Node guard understands ">=MAJOR.MINOR" only`);
const [major, minor] = [Number(floor[1]), Number(floor[2])];
writeFileSync(join(out, "node-guard.js"), [
  `// Written by scripts/build-package.mjs from package.json's engines.node (${engines}).`,
  `const [major = 0, minor = 0] = process.versions.node.split(".").map(Number);`,
  `if (major < ${major} || (major === ${major} && minor < ${minor})) {`,
  `  throw new Error(\`keelson: needs Node.js ${engines}, found \${process.version} (\${process.execPath}); install a current LTS from https://nodejs.org/en/download (or: nvm install --lts)\`);`,
  `}`,
  ``,
].join("\n"));
for (const name of Object.keys(ENTRIES).filter((entry) => entry !== "cli")) {
  const file = join(out, `${name}.js`);
  writeFileSync(file, `import "./node-guard.js";${readFileSync(file, "utf8")}`);
}

const vendor = join(root, "dist", "src", "docs", "vendor");
mkdirSync(join(out, "vendor"), { recursive: true });
for (const file of readdirSync(vendor)) copyFileSync(join(vendor, file), join(out, "vendor", file));
console.log(`package: ${Object.keys(ENTRIES).length} entry points -> ${out} (${readdirSync(out).filter((f) => f.endsWith(".js")).length} files)`);
