#!/usr/bin/env bash
# Runs one dapltest client test against a dapltest server on loopback and judges it by its
# output (dapltest's exit code is unreliable; FFT prints "Result: PASS" even after a failed check).
#
#   run_dapltest.sh DAT_CONF IA KIND -- CLIENT_ARGS...
#
# KIND: tp (transaction/performance: "End of Work", no error line, no "Test Failed" on the
# server, and for -T P the "raw:" results line), fft (every case
# "Result: PASS", no "failed in file" line), limit (local, no server: "created"/"opened" lines and
# no unexpected "fails:"). The server is started for tp and fft, stopped with `dapltest -T Q`.
set -uo pipefail
conf=$1 ia=$2 kind=$3
shift 3
[[ ${1:-} == -- ]] && shift
command -v dapltest >/dev/null || { echo "SKIPPED: dapltest not installed (apt-get install dapl2-utils)"; exit 77; }
export DAT_OVERRIDE=$conf
dir=$(mktemp -d)
srv_pid=""
cleanup() {
  if [[ -n $srv_pid ]]; then
    timeout -k 2 10 dapltest -T Q -s 127.0.0.1 -D "$ia" >/dev/null 2>&1
    for ((i = 0; i < 50; i++)); do kill -0 "$srv_pid" 2>/dev/null || break; sleep 0.1; done
    kill "$srv_pid" 2>/dev/null
  fi
  wait 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

if [[ $kind != limit ]]; then
  timeout -k 5 300 dapltest -T S -D "$ia" >"$dir/server.log" 2>&1 &
  srv_pid=$!
  for ((i = 0; i < 300; i++)); do
    grep -q "Service Point Ready" "$dir/server.log" && break
    kill -0 "$srv_pid" 2>/dev/null || break
    sleep 0.1
  done
  grep -q "Service Point Ready" "$dir/server.log" || { echo "FAIL: server not ready"; cat "$dir/server.log"; exit 1; }
fi

timeout -k 5 "${DAPLTEST_TIMEOUT:-240}" dapltest "$@" >"$dir/client.log" 2>&1
rc=$?
echo "--- dapltest $* (exit $rc)"
tail -n 25 "$dir/client.log"
ok=1
case $kind in
  tp)
    grep -q "End of Work -- Client Exiting" "$dir/client.log" || ok=0
    grep -Eiq "error|failed|mismatch" "$dir/client.log" && ok=0
    # The server's side of the test counts too ("Server: Test Failed" with a silent client was
    # how `-T P -m b RR 65536 4` failed), and a performance test must print its results.
    grep -q "Test Failed" "$dir/server.log" && { ok=0; echo "--- server:"; tail -n 10 "$dir/server.log"; }
    if [[ " $* " == *" -T P "* ]]; then grep -q "^raw: " "$dir/client.log" || ok=0; fi
    ;;
  fft)
    pass=$(grep -c "Result: PASS" "$dir/client.log")
    cases=$(grep -c "Description:" "$dir/client.log")
    [[ $pass -ge 1 && $pass == "$cases" ]] || ok=0
    grep -q "failed in file" "$dir/client.log" && ok=0
    ;;
  limit)
    grep -Eq "created: [0-9]+|opened: [0-9]+|posted per EP: [0-9]+" "$dir/client.log" || ok=0
    grep -q "error occurs" "$dir/client.log" && ok=0
    ;;
esac
[[ $rc == 124 ]] && ok=0
if [[ $ok == 1 ]]; then echo "PASS"; exit 0; fi
echo "FAIL"
exit 1
