#!/usr/bin/env bash
# Configures and builds a tree: scripts/build.sh [BUILD_DIR [extra cmake args...]]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/build}
shift || true
cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
ninja -C "$dir" -j "$(nproc)"
