#!/usr/bin/env bash
# keelson depends on h3 ^2: a user's fresh install gets the newest h3 2.x, not the version in our
# lock. This runs the typecheck and the tests against that newest 2.x, in a scratch copy of the
# repository (the checkout and its lock are untouched), so a breaking h3 release fails CI first.
# Arguments are passed to vitest (default: the projects `make test` runs). H3_VERSION=2.x.y tests that version instead.
set -euo pipefail
cd "$(dirname "$0")/.."
locked=$(node -p 'require("./node_modules/h3/package.json").version' 2>/dev/null || echo "?")
newest=$(npm view 'h3@2' version --json | node -e 'const v = JSON.parse(require("fs").readFileSync(0, "utf8")); console.log([v].flat().at(-1))')
target=${H3_VERSION:-$newest}
echo "check-h3-latest: h3 ${locked} in the lock, newest 2.x is ${newest}, testing ${target}"
if [ "$target" = "$locked" ]; then
  echo "check-h3-latest: the lock already has the newest h3 2.x; the main test run covered it"
  exit 0
fi
scratch=$(mktemp -d "${TMPDIR:-/tmp}/keelson-h3-latest.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
tar --exclude=./node_modules --exclude=./dist --exclude=./.git --exclude=./.cache -cf - . | tar -xf - -C "$scratch"
cd "$scratch"
npm ci --prefer-offline --no-audit --no-fund
npm install --prefer-offline --no-audit --no-fund "h3@${target}"
echo "check-h3-latest: testing with h3 $(node -p 'require("./node_modules/h3/package.json").version')"
npx tsc --noEmit -p tsconfig.json
npm run build
# The h3 compatibility suite first, whatever the arguments: it states what of h3 keelson keeps and
# changes (docs/h3.md), so a new h3 release that moves any of it is named before anything else runs;
# h3's event streams at SIGTERM and in a rolling reload are real processes.
npx vitest run --project socket --project process test/h3-compat test/h3-streams-process
if [ "$#" -eq 0 ]; then set -- --project unit --project socket --project process --project browser; fi
npx vitest run "$@"
