#!/usr/bin/env bash
# The main job: installs what it needs, builds, and runs the two-process DAT demo over the
# embedded default (iWARP over the udp netdev on 127.0.0.1).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh" "$root/build"
exec "$root/build/tools/softrnic_demo" "${1:-softrnic_iwarp}"
