#!/bin/sh
# Usage: scripts/ensure-node.sh <node-version> <dir>
#
# Installs Node.js <node-version> and npm into <dir> (<dir>/bin/node, npm, npx) from the npm registry
# only: the node-<os>-<cpu> packages ship the official binary at package/bin/node (but no npm), and
# npm comes from the registry's own `npm` package. Each tarball is checked against the sha512 integrity
# the registry publishes before it is unpacked. POSIX sh, curl, tar and coreutils only: it runs on a
# machine with no Node at all. The Makefile calls it when the system Node's major is not the pinned one.
set -eu

[ $# -eq 2 ] || { echo "usage: $0 <node-version> <dir>" >&2; exit 2; }
version=$1
dir=$2
# npm 11 supports every Node line keelson runs on (22, 24, 26); bump it on purpose, like .node-version.
npm_version=${KEELSON_NPM_VERSION:-11.21.2}
registry=${npm_config_registry:-${NPM_CONFIG_REGISTRY:-https://registry.npmjs.org}}
registry=${registry%/}

fail() {
  printf 'ensure-node: %s\n' "$*" >&2
  exit 1
}

case $version in
  [0-9]*.[0-9]*.[0-9]*) ;;
  *) fail "\"$version\" is not an exact Node version (x.y.z): see .node-version" ;;
esac
major=${version%%.*}

case $(uname -s) in
  Linux) os=linux ;;
  Darwin) os=darwin ;;
  *) fail "the npm registry has no Node binary for $(uname -s): install Node $major yourself and rerun" ;;
esac
case $(uname -m) in
  x86_64 | amd64) cpu=x64 ;;
  aarch64 | arm64) cpu=arm64 ;;
  *) fail "the npm registry has no Node binary for $(uname -m): install Node $major yourself and rerun" ;;
esac
command -v curl >/dev/null 2>&1 || fail "curl is needed to download Node $version from $registry"

# The hex sha512 of a file, with whichever tool the system has.
sha512_hex() {
  if command -v sha512sum >/dev/null 2>&1; then
    sha512sum "$1" | cut -d' ' -f1
  else
    shasum -a 512 "$1" | cut -d' ' -f1
  fi
}

# A string field of a one-line registry manifest (the last match: `dist` comes last).
field() {
  sed -n "s/.*\"$1\" *: *\"\([^\"]*\)\".*/\1/p"
}

# Downloads <package>@<version>, checks it against the registry's sha512 integrity, unpacks it into <dest>.
fetch() {
  manifest=$(curl -fsSL "$registry/$1/$2") || fail "$1@$2 is not on $registry (is the version right?)"
  url=$(printf '%s' "$manifest" | field tarball)
  integrity=$(printf '%s' "$manifest" | field integrity)
  case $integrity in
    sha512-*) ;;
    *) fail "$1@$2: the registry gives no sha512 integrity, refusing to install it" ;;
  esac
  echo "ensure-node: downloading $url" >&2
  curl -fsSL -o "$tmp/$1.tgz" "$url" || fail "could not download $url"
  expected=$(printf '%s' "${integrity#sha512-}" | { base64 -d 2>/dev/null || base64 -D; } | od -An -v -tx1 | tr -d ' \n')
  actual=$(sha512_hex "$tmp/$1.tgz")
  [ "$expected" = "$actual" ] || fail "$1@$2: the tarball does not match the registry's sha512 integrity, refusing to install it"
  mkdir -p "$3"
  tar -xzf "$tmp/$1.tgz" -C "$3" --strip-components=1
  rm -f "$tmp/$1.tgz"
}

if [ -x "$dir/bin/node" ] && [ "$("$dir/bin/node" --version 2>/dev/null)" = "v$version" ]; then
  exit 0
fi

# Built next to <dir> and moved into place at the end: an interrupted or concurrent run never leaves a
# half-installed Node where the Makefile looks for one.
parent=$(dirname "$dir")
mkdir -p "$parent"
tmp=$(mktemp -d "$parent/.ensure-node.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

fetch "node-$os-$cpu" "$version" "$tmp/root"
fetch npm "$npm_version" "$tmp/root/lib/node_modules/npm"
# The official distribution's layout, so npm finds its prefix and `npx` works too.
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$tmp/root/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$tmp/root/bin/npx"

got=$("$tmp/root/bin/node" --version) || fail "the downloaded node does not run on this machine"
[ "$got" = "v$version" ] || fail "node-$os-$cpu@$version runs as $got"

rm -rf "$dir"
mv "$tmp/root" "$dir"
echo "ensure-node: Node $version and npm $npm_version installed in $dir" >&2
