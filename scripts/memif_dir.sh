#!/usr/bin/env bash
# A private directory for memif control sockets (memif's default socket is the abstract
# @/run/memif.sock, shared by every process on the host: always give a file path in a directory
# of your own, with socket-abstract=no).
#
#   dir=$(scripts/memif_dir.sh make)      prints a new directory (mktemp -d, mode 0700)
#   scripts/memif_dir.sh remove DIR       removes it and the sockets in it; idempotent; refuses
#                                         directories it did not make
set -euo pipefail
case ${1:-} in
  make)
    mktemp -d "${TMPDIR:-/tmp}/softrnic_memif.XXXXXX"
    ;;
  remove)
    dir=${2:?usage: $0 remove DIR}
    [[ -e $dir ]] || exit 0
    [[ $(basename "$dir") == softrnic_memif.* ]] || { echo "memif_dir.sh: '$dir' was not made by memif_dir.sh" >&2; exit 1; }
    rm -rf -- "$dir"
    ;;
  *)
    echo "usage: $0 make | remove DIR" >&2
    exit 2
    ;;
esac
