// Servers run as plain JavaScript, not through tsx: tsx's loader hooks and on-the-fly
// transforms would inflate cold start and RSS, and penalise keelson (many source
// files) more than peers loaded precompiled from node_modules. Each .ts file is
// transpiled on its own (types erased, nothing bundled) into a temp dir that mirrors
// the repo, with a node_modules link so package imports resolve as usual.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { buildSync } from "esbuild";
import ts from "typescript";

const SOURCE_DIRS = ["src", "supervisor", "load-tests/servers"];

function* walk(dir: string): Generator<string> {
  if (!fs.existsSync(dir)) return;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) yield* walk(full);
    else if (entry.isFile()) yield full;
  }
}

export interface Build {
  dir: string;
  files: number;
  entry(target: string): string;
  /**
   * The target's server bundled into one ESM file with everything it imports (esbuild), for the
   * bundled cold start: a deployment can ship that instead of a tree of modules. Built on first use.
   */
  bundledEntry(target: string): string;
  remove(): void;
}

// CommonJS dependencies (prom-client, the OpenTelemetry API) call require() for Node built-ins.
const REQUIRE_SHIM = 'import { createRequire as __keelsonCreateRequire } from "node:module"; const require = __keelsonCreateRequire(import.meta.url);';

function bundle(entry: string, outfile: string): void {
  buildSync({
    entryPoints: [entry], outfile, bundle: true, platform: "node", format: "esm", target: "node20",
    banner: { js: REQUIRE_SHIM }, logLevel: "error",
  });
}

export function buildServers(root: string): Build {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "keelson-bench-build-"));
  // package.json carries "type": "module" (and any "imports" map) for the emitted files.
  fs.copyFileSync(path.join(root, "package.json"), path.join(dir, "package.json"));
  fs.symlinkSync(path.join(root, "node_modules"), path.join(dir, "node_modules"), "dir");
  let files = 0;
  for (const sourceDir of SOURCE_DIRS) {
    for (const file of walk(path.join(root, sourceDir))) {
      const rel = path.relative(root, file);
      if (rel.endsWith(".d.ts")) continue;
      const out = path.join(dir, rel.endsWith(".ts") ? `${rel.slice(0, -3)}.js` : rel);
      fs.mkdirSync(path.dirname(out), { recursive: true });
      if (!rel.endsWith(".ts")) {
        fs.copyFileSync(file, out);
        continue;
      }
      const output = ts.transpileModule(fs.readFileSync(file, "utf8"), {
        fileName: rel,
        compilerOptions: {
          module: ts.ModuleKind.ESNext,
          target: ts.ScriptTarget.ES2023,
          verbatimModuleSyntax: true,
          sourceMap: false,
        },
      });
      fs.writeFileSync(out, output.outputText);
      files++;
    }
  }
  return {
    dir,
    files,
    entry: (target) => path.join(dir, "load-tests", "servers", `${target}.js`),
    bundledEntry(target) {
      const outfile = path.join(dir, "bundled", `${target}.mjs`);
      if (!fs.existsSync(outfile)) bundle(this.entry(target), outfile);
      return outfile;
    },
    remove: () => fs.rmSync(dir, { recursive: true, force: true }),
  };
}
