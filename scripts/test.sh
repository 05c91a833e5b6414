#!/usr/bin/env bash
# The whole test suite: installs what it needs, builds, runs the unit, component, DAT,
# conformance (dapl2-utils), wire and dpdk tests, after the unit/component/DAT tests under
# AddressSanitizer + UndefinedBehaviorSanitizer and under ThreadSanitizer, and a short pass of
# every fuzz target (scripts/fuzz.sh). The last lines are
# ctest's summary of the main build. The dpdk label (memif, af_packet, af_xdp, tap; the root-only
# ones make their own network namespaces) runs only in the main build; its pure parts (codecs,
# grammar, pcap tap) also carry the unit label and so run under the sanitizers too.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh" || exit 1

status=0
t_start=$SECONDS t_phase=$SECONDS
# phase NAME: how long the previous phase took (the suite must stay well under 30 minutes on 2 cores)
phase() { echo "=== $1 (previous phase $((SECONDS - t_phase)) s, $((SECONDS - t_start)) s so far)"; t_phase=$SECONDS; }
phase "setup done"
echo "=== sanitizer build (ASan + UBSan): unit, component, dat, the verbs API (Verbs.*; the verbs_* scripts run Debian's uninstrumented programs: main build only)"
if "$root/scripts/build.sh" "$root/build-asan" -DSOFTRNIC_SANITIZE=ON; then
  (cd "$root/build-asan" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     ctest -L 'unit|component|dat|verbs' -LE conformance -E '^(demo|verbs_.*)$' -j2 --timeout 300 --output-on-failure) || status=1
else
  status=1
fi

phase "ASan done"
echo "=== ThreadSanitizer build: unit, component, dat (the provider is called from several threads)"
if "$root/scripts/build.sh" "$root/build-tsan" -DSOFTRNIC_TSAN=ON; then
  (cd "$root/build-tsan" && TSAN_OPTIONS=halt_on_error=1 \
     ctest -L 'unit|component|dat|verbs' -E '^(demo|verbs_.*)$' -j2 --timeout 300 --output-on-failure) || status=1
else
  status=1
fi

phase "TSan done"
echo "=== fuzz: every parser's libFuzzer target, 10 s each (clang, ASan + UBSan; docs/fuzzing.md)"
"$root/scripts/fuzz.sh" 10 || status=1

phase "fuzz done"
echo "=== main build: every test (all labels, dpdk included)"
"$root/scripts/build.sh" "$root/build" || exit 1
phase "main build done"
# (ctest's own summary, with its "Total Test time", stays the last lines: the tests that ran)
(cd "$root/build" && ctest -j2 --timeout 600 --output-on-failure) || status=1
exit $status
