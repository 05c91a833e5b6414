#!/usr/bin/env bash
# Runs a dapl2-utils server/client pair and judges it by the tools' success lines on both sides
# (their exit codes are unreliable).
#
#   run_pair.sh DAT_CONF|- READY_REGEX SUCCESS_REGEX [--listen-port N] -- SERVER... -- CLIENT...
#
# Starts SERVER, waits for READY_REGEX in its output (and, with --listen-port, for that TCP port
# to be listening: dtest prints its ready line before listen()), runs CLIENT, then waits for the
# server. Both sides are bounded with `timeout -k`. Passes when SUCCESS_REGEX appears in both logs.
set -uo pipefail

conf=$1 ready=$2 success=$3
shift 3
listen_port=""
if [[ ${1:-} == --listen-port ]]; then listen_port=$2; shift 2; fi
[[ ${1:-} == -- ]] || { echo "usage: $0 DAT_CONF READY SUCCESS [--listen-port N] -- SERVER... -- CLIENT..."; exit 2; }
shift
server=()
while [[ $# -gt 0 && $1 != -- ]]; do server+=("$1"); shift; done
shift
client=("$@")

for tool in "${server[0]}" "${client[0]}"; do
  command -v "$tool" >/dev/null || { echo "SKIPPED: $tool not installed (apt-get install dapl2-utils)"; exit 77; }
done

# DAT_CONF "-": libdat2's own /etc/dat.conf (no DAT_OVERRIDE), as an installed provider is found
if [[ $conf == - ]]; then unset DAT_OVERRIDE; else export DAT_OVERRIDE=$conf; fi
dir=$(mktemp -d)
srv_log=$dir/server.log cli_log=$dir/client.log
srv_pid=""
cleanup() {
  [[ -n $srv_pid ]] && kill -- "$srv_pid" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

timeout -k 5 "${PAIR_TIMEOUT:-120}" "${server[@]}" >"$srv_log" 2>&1 &
srv_pid=$!
for ((i = 0; i < 300; i++)); do
  grep -Eq "$ready" "$srv_log" && break
  kill -0 "$srv_pid" 2>/dev/null || break
  sleep 0.1
done
if ! grep -Eq "$ready" "$srv_log"; then
  echo "FAIL: server never printed its ready line /$ready/"; echo "--- server"; cat "$srv_log"; exit 1
fi
if [[ -n $listen_port ]]; then
  for ((i = 0; i < 100; i++)); do
    ss -Hltn "sport = :$listen_port" 2>/dev/null | grep -q . && break
    sleep 0.05
  done
fi

timeout -k 5 "${PAIR_TIMEOUT:-120}" "${client[@]}" >"$cli_log" 2>&1
cli_rc=$?
wait "$srv_pid"
srv_rc=$?
srv_pid=""

ok=1
grep -Eq "$success" "$srv_log" || ok=0
grep -Eq "$success" "$cli_log" || ok=0
echo "--- server (exit $srv_rc): ${server[*]}"; tail -n 15 "$srv_log"
echo "--- client (exit $cli_rc): ${client[*]}"; tail -n 15 "$cli_log"
if [[ $ok == 1 ]]; then
  echo "PASS: /$success/ on both sides"
  exit 0
fi
# The whole logs: a tool's error goes to stderr at once and its buffered stdout after it, so the
# cause is often above the last lines shown.
echo "--- server, whole log"; cat "$srv_log"
echo "--- client, whole log"; cat "$cli_log"
echo "FAIL: /$success/ missing on at least one side"
exit 1
