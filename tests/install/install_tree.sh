#!/usr/bin/env bash
# The installed tree works on its own: "cmake --install BUILD --prefix P" into a fresh directory
# gives the provider by its soname (no run path into the build tree), the tools, the man pages
# (when the build found go-md2man) and the dat.conf fragment naming the installed library;
# unmodified dtest then passes through that fragment.
#   usage: install_tree.sh BUILD_DIR   (exit 77 = skipped: dapl2-utils missing)
set -uo pipefail
build=${1:?usage: install_tree.sh BUILD_DIR}
src=$(cd "$(dirname "$0")/../.." && pwd)
command -v dtest >/dev/null || { echo "SKIPPED: dtest not installed (apt-get install dapl2-utils)"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
prefix=$(mktemp -d /tmp/softrnic-install.XXXXXX)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >"$prefix.log" 2>&1 || { cat "$prefix.log"; rm -f "$prefix.log"; fail "cmake --install"; }
rm -f "$prefix.log"
libdir=$(grep -m1 '^CMAKE_INSTALL_LIBDIR:' "$build/CMakeCache.txt" | cut -d= -f2)
lib=$prefix/$libdir/libdaplsoftrnic.so.2
[[ -f $lib ]] || fail "no $lib"
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[[ $soname == libdaplsoftrnic.so.2 ]] || fail "soname '$soname', want libdaplsoftrnic.so.2"
[[ ! -e $prefix/$libdir/libdaplsoftrnic.so ]] || fail "a development symlink was installed (a provider is loaded by its soname)"
for t in softrnic_info softrnic_scenario softrnic_bench softrnic_connect softrnic_perftest softrnic_rc_pingpong; do
  [[ -x $prefix/bin/$t ]] || fail "no $prefix/bin/$t"
  readelf -d "$prefix/bin/$t" | grep -qE 'RPATH|RUNPATH' && fail "$t keeps a run path: $(readelf -d "$prefix/bin/$t" | grep -E 'RPATH|RUNPATH')"
  "$prefix/bin/$t" --help >/dev/null 2>&1 || fail "$t --help failed"
done
readelf -d "$lib" | grep -qE 'RPATH|RUNPATH' && fail "the provider keeps a run path"
# the verbs door (docs/verbs.md), when the build had rdma-core's headers: its libibverbs.so.1 in a
# directory of its own, no run path, and the installed launcher finds it
if grep -q '^IBVERBS_INCLUDE_DIR:PATH=/' "$build/CMakeCache.txt"; then
  vlibs=(libibverbs.so.1)
  grep -q '^RDMACM_INCLUDE_DIR:PATH=/' "$build/CMakeCache.txt" && vlibs+=(librdmacm.so.1)
  for v in "${vlibs[@]}"; do
    vlib=$prefix/$libdir/softrnic/verbs/$v
    [[ -f $vlib ]] || fail "no $vlib"
    [[ $(readelf -d "$vlib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p') == "$v" ]] || fail "$vlib: soname not $v"
    readelf -d "$vlib" | grep -qE 'RPATH|RUNPATH' && fail "$vlib keeps a run path"
    [[ -e $prefix/$libdir/$v ]] && fail "$v installed in the loader's path"
  done
  "$prefix/bin/softrnic_run" --help >/dev/null 2>&1 || fail "softrnic_run --help failed"
  if command -v ibv_devices >/dev/null; then
    "$prefix/bin/softrnic_run" -- ibv_devices | grep -q softrnic_roce0 || fail "the installed softrnic_run: ibv_devices lists no softrnic_roce0"
  fi
fi
# the man pages (docs/man), when the build found go-md2man to generate them
if grep -q '^GO_MD2MAN:FILEPATH=/' "$build/CMakeCache.txt"; then
  for m in man7/softrnic.7 man1/softrnic_info.1 man1/softrnic_scenario.1 man1/softrnic_bench.1; do
    [[ -s $prefix/share/man/$m ]] || fail "no $prefix/share/man/$m"
  done
fi
conf=$prefix/share/softrnic/dat.conf
[[ -f $conf ]] || fail "no $conf"
n=$(grep -c " $lib dapl.2.0 " "$conf")
[[ $n == 4 ]] || { cat "$conf"; fail "$conf names $lib on $n lines, want 4"; }
echo "installed: $(cd "$prefix" && find . -type f -o -type l | sort | tr '\n' ' ')"
# dtest through the installed fragment (and so the installed library, by its absolute path)
out=$("$src/tests/dat/run_pair.sh" "$conf" "Server is waiting for client connection" "DAPL Test Complete\. PASSED" \
        --listen-port 15828 -- dtest -s -P softrnic_iwarp -- dtest -h 127.0.0.1 -P softrnic_iwarp 2>&1) ||
  { echo "$out" | tail -20; fail "dtest through the installed tree"; }
echo "$out" | tail -2
echo "PASS: the installed tree runs dtest (softrnic_iwarp from $lib)"
