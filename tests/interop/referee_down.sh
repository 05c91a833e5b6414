#!/usr/bin/env bash
# Ends the shared referee guest (tests/interop/referee_shared.sh) after the interop cases: ctest
# runs it as the interop fixture's cleanup. Prints how many cases the guest served since its last
# boot. Exit 0 also when no guest runs.
#   referee_down.sh [--rdmavm DIR]
set -euo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
rdmavm=${RDMAVM_DIR:-$src/../shared/tools/rdmavm}
[[ ${1:-} == --rdmavm ]] && rdmavm=$2
skip() { echo "SKIPPED: $*"; exit 77; }
# shellcheck source=referee.sh
. "$src/tests/interop/referee.sh"
# (after a case another run may be running on the guest: referee_run's lock)
mkdir -p /run/lock
exec 8>/run/lock/softrnic-referee.lock
flock -w 900 8 || { echo "referee: another run holds the shared guest; left running"; exit 0; }
if [[ ! -f $REFEREE_DIR/session ]]; then
  echo "referee: no shared guest runs"
  exit 0
fi
echo "referee: the shared guest served $(cat "$REFEREE_DIR/cases-served" 2>/dev/null || echo 0) cases since its last boot; ending it"
referee_session_down
