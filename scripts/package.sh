#!/usr/bin/env bash
# Builds the Debian package: scripts/package.sh [BUILD_DIR] -> BUILD_DIR/softrnic_<version>_<arch>.deb
# (installs what it needs, builds the tree like scripts/build.sh, then CPack; docs/install.md).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/build}
"$root/scripts/setup.sh"
"$root/scripts/build.sh" "$dir"
(cd "$dir" && cpack -G DEB >/dev/null)
ls "$dir"/softrnic_*.deb
