#!/usr/bin/env bash
# h3's own test suite through keelson (docs/h3.md, "h3's own test suite"): checks the suite out of
# an h3 mirror (the tag of the installed h3 when the mirror has it, else its newest commit), swaps
# its test/_setup.ts for scripts/h3-suite/setup.ts (each test's app becomes a keelson App's:
# app.httpEngine for the routes, app.fetch for the requests), runs it twice (with h3's own app, the
# baseline, and with keelson's), and reports which tests fail only under keelson, each matched
# against scripts/h3-suite/differences.txt (the differences docs/h3.md names). Exits 1 when a test
# fails under keelson for a reason that list does not name.
#   scripts/h3-suite.sh [vitest arguments, e.g. a file filter such as cookies]
# H3_MIRROR: the mirror's git directory (default /work/.mirror/h3js+h3/repo); H3_REF: a ref to use
# instead; H3_SUITE_KEEP=1 keeps the scratch folder (the suite, both runs' logs and JSON reports).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mirror=${H3_MIRROR:-/work/.mirror/h3js+h3/repo}
installed=$(node -p 'require("./node_modules/h3/package.json").version')
ref=${H3_REF:-}
if [ -z "$ref" ]; then
  if git --git-dir="$mirror" rev-parse -q --verify "refs/tags/v${installed}" >/dev/null; then ref="v${installed}"; else ref=HEAD; fi
fi
suite=$(git --git-dir="$mirror" show "${ref}:package.json" | node -p 'JSON.parse(require("fs").readFileSync(0, "utf8")).version')
echo "h3-suite: h3 ${installed} installed; the suite of h3 ${suite} (${ref} of ${mirror})"
scratch=$(mktemp -d "${TMPDIR:-/tmp}/keelson-h3-suite.XXXXXX")
if [ "${H3_SUITE_KEEP:-}" = 1 ]; then echo "h3-suite: keeping ${scratch}"; else trap 'rm -rf "$scratch"' EXIT; fi
git --git-dir="$mirror" archive "$ref" test | tar -x -C "$scratch"
cp scripts/h3-suite/setup.ts "$scratch/test/_setup.ts"
ln -s "$root/node_modules" "$scratch/node_modules"
h3_entry=$(node -p 'require.resolve("h3")')
cat > "$scratch/vitest.config.mjs" <<CONFIG
import { defineConfig } from "vitest/config";
export default defineConfig({
  resolve: {
    alias: [
      // The suite imports h3's source; it runs against the installed h3, the one keelson uses.
      { find: /^(\.\.\/)+src\/.*\.ts\$/, replacement: "${h3_entry}" },
      { find: "keelson-under-test", replacement: "${root}/src/index.ts" },
    ],
  },
  test: {
    include: ["test/*.test.ts"],
    // Their dependencies (express, hono, elysia, react, happy-dom) or h3's own build are not installed here.
    exclude: ["test/integrations.test.ts", "test/happydom.test.ts", "test/dist.test.ts"],
    pool: "forks",
    maxWorkers: 1,
    testTimeout: 20000,
  },
});
CONFIG
for app in h3 keelson; do
  echo "h3-suite: running with ${app}'s app"
  (cd "$scratch" && H3_SUITE_APP=$app "$root/node_modules/.bin/vitest" run --config vitest.config.mjs --reporter=json --outputFile="$scratch/$app.json" "$@" >"$scratch/$app.log" 2>&1) || true
  [ -s "$scratch/$app.json" ] || { echo "h3-suite: the ${app} run wrote no results:"; tail -40 "$scratch/$app.log"; exit 2; }
done
node scripts/h3-suite/compare.mjs "$scratch/h3.json" "$scratch/keelson.json" scripts/h3-suite/differences.txt
