#!/usr/bin/env bash
# Configures and builds a tree: scripts/build.sh [BUILD_DIR [extra cmake args...]]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/build}
shift || true
# Installed under /usr (multiarch libdir) like a distribution package: the .deb (scripts/package.sh)
# is made from this tree; "cmake --install DIR --prefix P" installs elsewhere.
cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr "$@" >/dev/null
ninja -C "$dir" -j "$(nproc)"
