#!/usr/bin/env bash
# Configures and builds a tree: scripts/build.sh [BUILD_DIR [extra cmake args...] [-- targets...]]
# Without targets everything is built, the tests included unless -DSOFTRNIC_BUILD_TESTS=OFF.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/build}
shift || true
args=() targets=()
while (($#)); do
  if [[ $1 == -- ]]; then
    shift
    targets=("$@")
    break
  fi
  args+=("$1")
  shift
done
# Installed under /usr (multiarch libdir) like a distribution package: the .deb (scripts/package.sh)
# is made from this tree; "cmake --install DIR --prefix P" installs elsewhere. The tests are on
# unless asked otherwise (a tree the main job configured without them gets them back here).
cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr \
  -DSOFTRNIC_BUILD_TESTS=ON "${args[@]}" >/dev/null
ninja -C "$dir" -j "$(nproc)" "${targets[@]}"
