#!/usr/bin/env bash
# softrnic's libibverbs.so.1 against the system's (Debian 12, rdma-core 44):
#   exports_test.sh BUILD_DIR
# - it exports exactly the system library's default symbols, each in its version node;
# - every symbol (name and version) the named Debian programs import from libibverbs resolves
#   in it: they are linked BIND_NOW, so one missing import stops them at load.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

build=$(cd "$1" && pwd)
ours=$build/lib/softrnic/verbs/libibverbs.so.1
system=$(ldconfig -p | awk '/libibverbs\.so\.1 .*x86-64/ {print $NF; exit}')
[ -e "$ours" ] || { echo "FAIL: $ours is not built"; exit 1; }
[ -n "$system" ] || skip "the system has no libibverbs.so.1 (Debian package libibverbs1)"

# "VERSION NAME" of each defined dynamic symbol, default versions only (objdump shows hidden
# compatibility versions in parentheses).
exports() {
  objdump -T "$1" | awk '$0 !~ /\*UND\*/ && NF >= 7 && $(NF-1) !~ /^\(/ && $(NF-1) != $NF {print $(NF-1), $NF}' | sort -u
}
# "VERSION NAME" of what a binary imports from libibverbs.
imports() {
  objdump -T "$1" | awk '/\*UND\*/ && $(NF-1) ~ /^\(IBVERBS_/ {v = $(NF-1); gsub(/[()]/, "", v); print v, $NF}' | sort -u
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
exports "$system" >"$work/system"
exports "$ours" >"$work/ours"
[ -s "$work/system" ] || { echo "FAIL: no symbols read from $system"; exit 1; }
if ! diff -u "$work/system" "$work/ours" >"$work/diff"; then
  echo "FAIL: the export set differs from $system (- system, + ours):"
  cat "$work/diff"
  exit 1
fi
echo "ok: $(wc -l <"$work/ours") symbols, each in the system library's version node"

checked=0
missing=0
for prog in ibv_devices ibv_devinfo ibv_rc_pingpong ibv_srq_pingpong ibv_uc_pingpong ibv_ud_pingpong \
  ibv_xsrq_pingpong ibv_asyncwatch rping ucmatose rdma_server rdma_client ib_send_lat ib_send_bw ib_write_lat \
  ib_write_bw ib_read_lat ib_read_bw ib_atomic_lat ib_atomic_bw qperf /usr/lib/x86_64-linux-gnu/libmlx5.so.1 \
  /usr/lib/x86_64-linux-gnu/libefa.so.1 /usr/lib/x86_64-linux-gnu/librdmacm.so.1; do
  path=$(command -v "$prog" 2>/dev/null || true)
  [ -z "$path" ] && [ -e "$prog" ] && path=$prog
  [ -n "$path" ] || { echo "not installed: $prog"; continue; }
  imports "$path" >"$work/imports"
  if [ -s "$work/imports" ]; then
    comm -23 "$work/imports" "$work/ours" >"$work/missing"
    if [ -s "$work/missing" ]; then
      echo "FAIL: $prog imports what softrnic's libibverbs does not export:"
      cat "$work/missing"
      missing=1
    fi
  fi
  checked=$((checked + 1))
  echo "ok: $prog ($(wc -l <"$work/imports") imports)"
done
[ "$missing" = 0 ] || exit 1
[ "$checked" -gt 0 ] || skip "none of the programs is installed"
