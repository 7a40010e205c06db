#!/bin/sh
# Usage: scripts/ensure-apt.sh <path> <debian-package>
#
# Makes sure a system program the test suite runs is installed: nothing to do when <path> (a shell glob
# is fine, e.g. /usr/lib/postgresql/*/bin/initdb) is an executable; otherwise installs <debian-package>
# with apt-get, as root or through sudo without a password prompt. When it cannot, it stops at once with
# the one command to run, so `make test` never fails minutes later for a missing program.
set -eu

[ $# -eq 2 ] || { echo "usage: $0 <path> <debian-package>" >&2; exit 2; }
pattern=$1
package=$2

present() {
  # Unquoted on purpose: the pattern may be a glob.
  for file in $pattern; do
    [ -x "$file" ] && return 0
  done
  return 1
}

present && exit 0

stop() {
  printf 'make test needs %s (%s is missing): %s\n' "$package" "$pattern" "$1" >&2
  exit 1
}

command -v apt-get >/dev/null 2>&1 || stop "this is not a Debian/Ubuntu system (no apt-get): install $package with your package manager and rerun"
if [ "$(id -u)" -eq 0 ]; then
  sudo=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  sudo="sudo -n"
else
  stop "run  sudo apt-get update && sudo apt-get install -y $package  and rerun"
fi

echo "make test: installing Debian's $package (for $pattern)" >&2
$sudo apt-get update -qq
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package"
present || stop "apt-get installed $package but $pattern is still missing"
