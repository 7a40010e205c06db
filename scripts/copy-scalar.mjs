#!/usr/bin/env node
// Ships Scalar's standalone browser bundle inside keelson's build output, where the docs route
// looks first (src/docs/assets.ts: SHIPPED_BUNDLE). @scalar/api-reference stays a devDependency:
// services built on keelson never install its 287 MB of dependencies.
// Usage: node scripts/copy-scalar.mjs [outDir=dist]
import { copyFileSync, mkdirSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

const outDir = process.argv[2] ?? "dist";
// The package exports no subpath for the bundle: find it from the main entry (dist/index.js).
const main = createRequire(import.meta.url).resolve("@scalar/api-reference");
const source = join(dirname(main), "browser", "standalone.js");
const target = join(outDir, "src", "docs", "vendor", "scalar-standalone.js");
mkdirSync(dirname(target), { recursive: true });
copyFileSync(source, target);
console.log(`scalar: ${source} -> ${target} (${(statSync(target).size / 1e6).toFixed(1)} MB)`);
