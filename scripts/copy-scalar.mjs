#!/usr/bin/env node
// Ships Scalar's standalone browser bundle inside keelson's build output, where the docs route
// looks first (src/docs/assets.ts: SHIPPED_BUNDLE), with its licence notice beside it (MIT asks
// for the notice in every copy). @scalar/api-reference stays a devDependency: services built on
// keelson never install its 287 MB of dependencies.
// Usage: node scripts/copy-scalar.mjs [outDir=dist]
import { copyFileSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

const outDir = process.argv[2] ?? "dist";
// The package exports no subpath for the bundle: find it from the main entry (dist/index.js).
const require = createRequire(import.meta.url);
const main = require.resolve("@scalar/api-reference");
const packageDir = dirname(dirname(main));
const source = join(dirname(main), "browser", "standalone.js");
const target = join(outDir, "src", "docs", "vendor", "scalar-standalone.js");
mkdirSync(dirname(target), { recursive: true });
copyFileSync(source, target);
console.log(`scalar: ${source} -> ${target} (${(statSync(target).size / 1e6).toFixed(1)} MB)`);

const notice = join(dirname(target), "scalar-standalone.LICENSE.txt");
writeFileSync(notice, licenceNotice());
console.log(`scalar: licence notice -> ${notice}`);

/**
 * @scalar/api-reference declares `"license": "MIT"` but ships no LICENSE file; its README points
 * at the Scalar repository's LICENSE, the file every other @scalar package of that repository
 * ships. Its own file is used when a release has one, else that of @scalar/types (one of its
 * dependencies, from the same repository).
 */
function licenceNotice() {
  const pkg = JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8"));
  if (pkg.license !== "MIT") throw new Error(`@scalar/api-reference ${pkg.version} is licensed ${pkg.license}, not MIT: review its terms before shipping it`);
  let licence = join(packageDir, "LICENSE");
  if (!existsSync(licence)) {
    // Looked up as Node would find the dependency (@scalar/types exports no package.json to resolve).
    const dirs = createRequire(join(packageDir, "package.json")).resolve.paths("@scalar/types") ?? [];
    const found = dirs.map((dir) => join(dir, "@scalar", "types", "LICENSE")).find((file) => existsSync(file));
    if (found === undefined) throw new Error("no LICENSE in @scalar/api-reference nor in @scalar/types: cannot ship Scalar's licence notice");
    licence = found;
  }
  const text = readFileSync(licence, "utf8");
  if (!text.includes("Scalar") || !text.startsWith("MIT License")) throw new Error(`${licence} is not Scalar's MIT licence`);
  return [
    `scalar-standalone.js is the browser bundle of @scalar/api-reference ${pkg.version}`,
    `(${pkg.homepage}), copied unchanged. It is licensed under the MIT licence below; the`,
    "notices of the third-party code it bundles are kept as comments inside the file.",
    "",
    text.trimEnd(),
    "",
  ].join("\n");
}
