#!/usr/bin/env bash
# The Debian package on this machine: build it from BUILD_DIR (CPack), install it with dpkg, check
# that /etc/dat.conf gained exactly softrnic's lines (every other line as it was), run unmodified
# dtest with no DAT_OVERRIDE (libdat2 finds softrnic_iwarp in /etc/dat.conf), purge the package,
# and check /etc/dat.conf is back byte for byte (or absent again, if it was).
#   usage: deb_test.sh BUILD_DIR   (exit 77 = skipped: not root, no dpkg/cpack/dtest, or a
#   softrnic package is already installed here)
set -uo pipefail
build=${1:?usage: deb_test.sh BUILD_DIR}
src=$(cd "$(dirname "$0")/../.." && pwd)
skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
[[ $(id -u) == 0 ]] || skip "needs root (dpkg -i)"
for t in dpkg cpack dpkg-shlibdeps dtest; do command -v $t >/dev/null || skip "$t not installed"; done
dpkg-query -W -f='${Status}' softrnic 2>/dev/null | grep -q "ok installed" &&
  skip "a softrnic package is installed on this machine already: not touching it"

work=$(mktemp -d /tmp/softrnic-deb.XXXXXX)
conf=/etc/dat.conf
had_conf=0
[[ -e $conf ]] && { had_conf=1; cp -p "$conf" "$work/dat.conf.before"; }
orig_had=$had_conf
cp -p "$work/dat.conf.before" "$work/dat.conf.orig" 2>/dev/null || true
# Whatever happens (a failed check, a step that fails midway): the package goes and the
# machine's dat.conf is put back as it was, or removed if there was none. Every step below is
# bounded well inside ctest's timeout, so this trap runs.
cleanup() {
  if dpkg-query -W -f='${Status}' softrnic 2>/dev/null | grep -q "ok installed\|half\|unpacked"; then
    timeout 60 dpkg --purge softrnic >/dev/null 2>&1 || true
  fi
  if [[ $orig_had == 1 ]]; then
    cmp -s "$work/dat.conf.orig" "$conf" || cat "$work/dat.conf.orig" >"$conf"
  else
    rm -f "$conf"
  fi
  rm -rf "$work"
}
trap cleanup EXIT
export PAIR_TIMEOUT=60

(cd "$build" && timeout 120 cpack -G DEB -B "$work/pkg" >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; fail "cpack"; }
deb=$(ls "$work"/pkg/softrnic_*.deb 2>/dev/null | head -1)
[[ -n $deb ]] || fail "cpack made no .deb"
echo "package: ${deb##*/}, $(stat -c %s "$deb") bytes; $(dpkg-deb -f "$deb" Depends)"
dpkg-deb -f "$deb" Depends | grep -q libdapl2 || fail "the package does not depend on libdat2's package (libdapl2)"

timeout 60 dpkg -i "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i"; }
lib=$(dpkg -L softrnic | grep '/libdaplsoftrnic\.so\.2$')
[[ -n $lib && -f $lib ]] || fail "the package installed no libdaplsoftrnic.so.2"
# /etc/dat.conf: what was there, unchanged and in order, then our four lines
frag=$(grep -v '^#' /usr/share/softrnic/dat.conf)
[[ $(wc -l <<<"$frag") == 4 ]] || fail "the fragment has $(wc -l <<<"$frag") lines, want 4"
if [[ $had_conf == 1 ]]; then
  want=$(cat "$work/dat.conf.before"; [[ -n $(tail -c1 "$work/dat.conf.before") ]] && echo; echo "$frag")
else
  want=$frag
fi
[[ $(cat "$conf") == "$want" ]] || { diff <(echo "$want") "$conf"; fail "/etc/dat.conf after install is not the old file plus our lines"; }
echo "installed: /etc/dat.conf gained $(grep -c '^softrnic_' "$conf") softrnic lines ($lib)"
# a second configure (dpkg-reconfigure, an upgrade) must not add them twice
timeout 60 dpkg-reconfigure softrnic >/dev/null 2>&1 || /var/lib/dpkg/info/softrnic.postinst configure >/dev/null
[[ $(cat "$conf") == "$want" ]] || fail "/etc/dat.conf changed on a second configure"

# unmodified dtest, no DAT_OVERRIDE: the registry finds softrnic_iwarp in /etc/dat.conf
out=$(env -u DAT_OVERRIDE "$src/tests/dat/run_pair.sh" - "Server is waiting for client connection" \
        "DAPL Test Complete\. PASSED" --listen-port 15828 -- dtest -s -P softrnic_iwarp -- dtest -h 127.0.0.1 -P softrnic_iwarp 2>&1) ||
  { echo "$out" | tail -20; fail "dtest through /etc/dat.conf"; }
echo "dtest (no DAT_OVERRIDE): $(echo "$out" | tail -1)"

timeout 60 dpkg --purge softrnic >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg --purge"; }
if [[ $had_conf == 1 ]]; then
  cmp "$work/dat.conf.before" "$conf" || { diff "$work/dat.conf.before" "$conf"; fail "/etc/dat.conf is not as it was"; }
  echo "removed: /etc/dat.conf is byte for byte as before ($(wc -l <"$conf") lines)"
else
  [[ ! -e $conf ]] || fail "/etc/dat.conf was created by the package and left behind"
  echo "removed: /etc/dat.conf absent again, as before"
fi
[[ ! -e $lib ]] || fail "$lib left behind"

# Two more starting points (the machine's file is put back by the trap whatever happens):
# no /etc/dat.conf at all; and one where the administrator already wrote one of our lines (it is
# theirs: not added twice, not removed) between other providers' lines, the last without newline.
rm -f "$conf"
timeout 60 dpkg -i "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i (no dat.conf)"; }
[[ $(cat "$conf") == "$frag" ]] || fail "without a dat.conf: the new one is not our four lines"
timeout 60 dpkg --purge softrnic >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg --purge (no dat.conf)"; }
[[ ! -e $conf ]] || fail "without a dat.conf before: one is left behind"
echo "no dat.conf before: created with our lines, gone after the purge"
ours=$(head -1 <<<"$frag")
printf 'other-a u2.0 nonthreadsafe default liba.so.2 dapl.2.0 "a 1" ""\n%s\nother-b u2.0 nonthreadsafe default libb.so.2 dapl.2.0 "b 1" ""' \
  "$ours" >"$conf"
cp "$conf" "$work/dat.conf.admin"
timeout 60 dpkg -i "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i (an admin's line)"; }
[[ $(grep -cxF -- "$ours" "$conf") == 1 ]] || fail "the administrator's softrnic line is there $(grep -cxF -- "$ours" "$conf") times"
[[ $(wc -l <"$conf") == 6 ]] || { cat "$conf"; fail "want the 3 lines and our 3 others"; }
timeout 60 dpkg --purge softrnic >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg --purge (an admin's line)"; }
cmp "$work/dat.conf.admin" "$conf" || { diff "$work/dat.conf.admin" "$conf"; fail "the administrator's dat.conf is not as it was"; }
echo "an administrator's softrnic line: kept, not doubled, file byte for byte as before after the purge"
# the machine's own dat.conf back (the trap does the same on any exit)
if [[ $orig_had == 1 ]]; then cat "$work/dat.conf.orig" >"$conf"; else rm -f "$conf"; fi
echo "PASS: the .deb installs, registers its IAs, runs dtest without DAT_OVERRIDE, and leaves /etc/dat.conf as it was"
