#!/usr/bin/env bash
# softrnic's libibverbs.so.1 and librdmacm.so.1 against the system's (Debian 12, rdma-core 44):
#   exports_test.sh BUILD_DIR
# For each library:
# - it exports exactly the system library's default symbols, each in its version node;
# - every symbol (name and version) the named Debian programs and libraries import from it
#   resolves in it: they are linked BIND_NOW, so one missing import stops them at load.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

build=$(cd "$1" && pwd)
dir=$build/lib/softrnic/verbs

# "VERSION NAME" of each defined dynamic symbol, default versions only (objdump shows hidden
# compatibility versions in parentheses).
exports() {
  objdump -T "$1" | awk '$0 !~ /\*UND\*/ && NF >= 7 && $(NF-1) !~ /^\(/ && $(NF-1) != $NF {print $(NF-1), $NF}' | sort -u
}
# "VERSION NAME" of what a binary imports from the library whose version nodes begin with $2.
imports() {
  objdump -T "$1" | awk -v p="^\\\\($2" '/\*UND\*/ && $(NF-1) ~ p {v = $(NF-1); gsub(/[()]/, "", v); print v, $NF}' |
    sort -u
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

programs=(ibv_devices ibv_devinfo ibv_rc_pingpong ibv_srq_pingpong ibv_uc_pingpong ibv_ud_pingpong ibv_xsrq_pingpong
  ibv_asyncwatch rping ucmatose rdma_server rdma_client mckey rdma_xserver rdma_xclient ib_send_lat ib_send_bw
  ib_write_lat ib_write_bw ib_read_lat ib_read_bw ib_atomic_lat ib_atomic_bw qperf
  /usr/lib/x86_64-linux-gnu/libmlx5.so.1 /usr/lib/x86_64-linux-gnu/libefa.so.1
  /usr/lib/x86_64-linux-gnu/librdmacm.so.1 /usr/lib/x86_64-linux-gnu/ucx/libuct_rdmacm.so.0
  /usr/lib/x86_64-linux-gnu/ucx/libuct_ib.so.0 /usr/lib/x86_64-linux-gnu/libfabric.so.1
  /usr/lib/x86_64-linux-gnu/libdaplofa.so.2)

# check LIBRARY VERSION_PREFIX: the export set, then the imports of every installed program.
check() {
  local lib=$1 prefix=$2
  local ours=$dir/$lib system
  system=$(ldconfig -p | awk -v l="$lib " 'index($0, l) == 2 && /x86-64/ {print $NF; exit}')
  [ -e "$ours" ] || { echo "FAIL: $ours is not built"; exit 1; }
  [ -n "$system" ] || { echo "skipped: the system has no $lib"; return; }
  exports "$system" >"$work/system"
  exports "$ours" >"$work/ours"
  [ -s "$work/system" ] || { echo "FAIL: no symbols read from $system"; exit 1; }
  if ! diff -u "$work/system" "$work/ours" >"$work/diff"; then
    echo "FAIL: $lib's export set differs from $system (- system, + ours):"
    cat "$work/diff"
    exit 1
  fi
  echo "ok: $lib: $(wc -l <"$work/ours") symbols, each in the system library's version node"
  local prog path n=0
  for prog in "${programs[@]}"; do
    path=$(command -v "$prog" 2>/dev/null || true)
    [ -z "$path" ] && [ -e "$prog" ] && path=$prog
    [ -n "$path" ] || continue
    [ "$(readlink -f "$path")" = "$(readlink -f "$system")" ] && continue
    imports "$path" "$prefix" >"$work/imports"
    [ -s "$work/imports" ] || continue
    comm -23 "$work/imports" "$work/ours" >"$work/missing"
    if [ -s "$work/missing" ]; then
      echo "FAIL: $prog imports what softrnic's $lib does not export:"
      cat "$work/missing"
      exit 1
    fi
    n=$((n + 1))
    echo "ok: $prog ($(wc -l <"$work/imports") imports from $lib)"
  done
  [ "$n" -gt 0 ] || echo "(none of the programs that import $lib is installed)"
  checked=$((checked + n))
}

checked=0
check libibverbs.so.1 IBVERBS_
if [ -e "$dir/librdmacm.so.1" ]; then
  check librdmacm.so.1 RDMACM_
else
  echo "not built: librdmacm.so.1 (its headers, Debian package librdmacm-dev, were missing at configure)"
fi
[ "$checked" -gt 0 ] || skip "none of the programs is installed"
