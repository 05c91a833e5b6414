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
logs=$(mktemp -d /tmp/softrnic-test.XXXXXX)
trap 'rm -rf "$logs"' EXIT
verdicts=()
# verdict PHASE EXIT [LOG]: records the phase's result (with ctest's failed tests from LOG, or
# fuzz.sh's failed targets) for the closing lines; a failure fails the suite.
verdict() {
  local line="$1: passed"
  if [ "$2" != 0 ]; then
    status=1
    line="$1: FAILED (exit $2)"
    if [ -n "${3:-}" ]; then
      local detail
      detail=$({
        sed -n '/The following tests FAILED:/,$p' "$3" | grep -E '^\s+[0-9]+ - '
        grep -E '^FAIL|FAILED$|^  (ERROR|SUMMARY|input|reproduce)' "$3" | head -8
      } | sed 's/^\s*/    /')
      [ -n "$detail" ] && line+=$'\n'"$detail"
    fi
  fi
  verdicts+=("$line")
}
# phase NAME: how long the previous phase took (the suite must stay under 45 minutes on a busy 2-core machine)
phase() { echo "=== $1 (previous phase $((SECONDS - t_phase)) s, $((SECONDS - t_start)) s so far)"; t_phase=$SECONDS; }
phase "setup done"
echo "=== sanitizer build (ASan + UBSan): unit, component, dat, the verbs API (Verbs.*; the verbs_* scripts run Debian's uninstrumented programs: main build only)"
# (only what these runs take: the sanitizer_tests target, tests/CMakeLists.txt)
if "$root/scripts/build.sh" "$root/build-asan" -DSOFTRNIC_SANITIZE=ON -- sanitizer_tests; then
  (cd "$root/build-asan" && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     ctest -L 'unit|component|dat|verbs' -LE conformance -E '^(demo|verbs_.*)$' -j2 --timeout 300 --output-on-failure) \
    2>&1 | tee "$logs/asan"
  verdict "ASan+UBSan" "${PIPESTATUS[0]}" "$logs/asan"
else
  verdict "ASan+UBSan" build-failed
fi

phase "ASan done"
echo "=== ThreadSanitizer build: unit, component, dat (the provider is called from several threads)"
if "$root/scripts/build.sh" "$root/build-tsan" -DSOFTRNIC_TSAN=ON -- sanitizer_tests; then
  (cd "$root/build-tsan" && TSAN_OPTIONS=halt_on_error=1 \
     ctest -L 'unit|component|dat|verbs' -E '^(demo|verbs_.*)$' -j2 --timeout 300 --output-on-failure) \
    2>&1 | tee "$logs/tsan"
  verdict TSan "${PIPESTATUS[0]}" "$logs/tsan"
else
  verdict TSan build-failed
fi

phase "TSan done"
echo "=== fuzz: every parser's libFuzzer target, 10 s each (clang, ASan + UBSan; docs/fuzzing.md)"
"$root/scripts/fuzz.sh" 10 2>&1 | tee "$logs/fuzz"
verdict fuzz "${PIPESTATUS[0]}" "$logs/fuzz"

phase "fuzz done"
echo "=== main build: every test (all labels, dpdk included)"
"$root/scripts/build.sh" "$root/build" || exit 1
phase "main build done"
(cd "$root/build" && ctest -j2 --timeout 600 --output-on-failure) 2>&1 | tee "$logs/main"
verdict main "${PIPESTATUS[0]}" "$logs/main"
# The closing lines: each phase's verdict (a CI log's tail shows which phase failed, and its
# failed tests), then the main build's ctest summary again: the tests that ran.
echo "=== verdicts"
printf '%s\n' "${verdicts[@]}"
echo "=== main build's ctest summary"
sed -n '/tests passed, .* tests failed out of/,$p' "$logs/main"
exit $status
