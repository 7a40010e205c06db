// The servers under test run from the project's one build (`dist/`, made by `make bench`'s build
// step), as plain JavaScript: tsx's loader hooks would inflate cold start and RSS, and penalise
// keelson (many source files) more than peers loaded precompiled from node_modules.
import * as fs from "node:fs";
import * as path from "node:path";
import { buildSync } from "esbuild";

export interface Build {
  /** Where the servers run from (the repository root: dist/ and node_modules/ are there). */
  dir: string;
  entry(target: string): string;
  /**
   * The target's server bundled into one ESM file with everything it imports statically (esbuild),
   * for the bundled cold start: a deployment can ship that instead of a tree of modules. Written
   * under `root/dist`, as a deployment keeps its bundle beside `node_modules`, where the packages
   * keelson loads at first use (prom-client, fast-json-stringify) come from. Built on first use.
   */
  bundledEntry(target: string): string;
  remove(): void;
}

// CommonJS dependencies (prom-client, the OpenTelemetry API) call require() for Node built-ins.
const REQUIRE_SHIM = 'import { createRequire as __keelsonCreateRequire } from "node:module"; const require = __keelsonCreateRequire(import.meta.url);';

/** The built servers under `root/dist`; throws with the command to run when they are missing. */
export function builtServers(root: string): Build {
  const serversDir = path.join(root, "dist", "load-tests", "servers");
  const entry = (target: string): string => path.join(serversDir, `${target}.js`);
  if (!fs.existsSync(entry("keelson"))) {
    throw new Error(`${path.relative(root, entry("keelson"))} is missing: run make bench (or make build-bench) first`);
  }
  let bundleDir: string | undefined;
  return {
    dir: root,
    entry,
    bundledEntry(target) {
      bundleDir ??= fs.mkdtempSync(path.join(root, "dist", "bench-bundle-"));
      const outfile = path.join(bundleDir, `${target}.mjs`);
      if (!fs.existsSync(outfile)) {
        buildSync({
          entryPoints: [entry(target)], outfile, bundle: true, platform: "node", format: "esm", target: "node22",
          banner: { js: REQUIRE_SHIM }, logLevel: "error",
        });
      }
      return outfile;
    },
    remove: () => {
      if (bundleDir !== undefined) fs.rmSync(bundleDir, { recursive: true, force: true });
    },
  };
}
