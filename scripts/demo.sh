#!/usr/bin/env bash
# The main job: installs what it needs, builds, and runs the two-process DAT demo over the
# embedded default (iWARP over the udp netdev on 127.0.0.1). It installs and builds only what the
# demo runs (the provider and softrnic_demo, no tests): scripts/test.sh builds the rest into the
# same tree.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh" --demo
"$root/scripts/build.sh" "$root/build" -DSOFTRNIC_BUILD_TESTS=OFF -- softrnic_demo
exec "$root/build/tools/softrnic_demo" "${1:-softrnic_iwarp}"
