#!/bin/bash
# softrnic_perftest server and client over MPA/TCP on 127.0.0.1, the three tools (perftest's -R
# exchange: control connection, then the data connection on the same port). Both sides must exit
# 0, print perftest's result line, and verify the data: with --expect-pattern each side checks
# the bytes it received (send_lat), the bytes written into its buffer (write_bw server) or read
# from the peer (read_bw client) against softrnic's pattern. Then the checks used against perftest
# (no pattern known: the fill replaced, identical payloads per source offset) with 64-byte
# messages, whose offsets cycle through the 4096-byte buffer, and the read_bw client's priming
# Write. Last, a client that reports other figures than the server expects must fail the server.
set -euo pipefail
bin=${1:?usage: perftest_self.sh <softrnic_perftest>}
port=$((20000 + RANDOM % 20000))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run TOOL "SERVER ARGS" "CLIENT ARGS" -> $work/srv.log, $work/cli.log; the exit codes in src, crc
run() {
  local tool=$1 sargs=$2 cargs=$3
  port=$((port + 1))
  # shellcheck disable=SC2086
  timeout 60 "$bin" "$tool" -s -a 127.0.0.1 -p "$port" --accept-timeout 20 $sargs >"$work/srv.log" 2>&1 &
  local srv=$!
  for _ in $(seq 1 200); do grep -q "listening" "$work/srv.log" && break; sleep 0.05; done
  crc=0
  # shellcheck disable=SC2086
  timeout 60 "$bin" "$tool" -c 127.0.0.1 --local 127.0.0.1 -p "$port" --peer-close 0 $cargs >"$work/cli.log" 2>&1 || crc=$?
  src=0
  wait "$srv" || src=$?
}
failed() { echo "FAIL: $*"; echo "--- server"; cat "$work/srv.log"; echo "--- client"; cat "$work/cli.log"; exit 1; }
# expect LOG REGEX WHAT (perftest's result lines mix tabs and spaces: tabs are read as spaces)
expect() { tr '\t' ' ' <"$1" | grep -Eq "$2" || failed "$3: no line /$2/"; }

for tool in send_lat write_bw read_bw; do
  case $tool in
    send_lat) size=64 n=20 res='^ 64 +20( +[0-9.]+){7}'
      ok_s='20 x 64 B, data verified \(20 messages of exactly 64 B, softrnic.s pattern\)$' ok_c=$ok_s ;;
    write_bw) size=4096 n=20 res='^ 4096 +20( +[0-9.]+){3}$'
      ok_s='20 x 4096 B, data verified \(4096 bytes written in 1 range\(s\), softrnic.s pattern, the rest and the guards intact\)$'
      ok_c='20 x 4096 B, completions verified \(20 Writes of 4096 B completed' ;;
    read_bw) size=4096 n=20 res='^ 4096 +20( +[0-9.]+){3}$'
      ok_s='20 x 4096 B, data served \(65536 B of softrnic.s pattern, unchanged; [0-9]+ frames'
      ok_c='20 x 4096 B, data verified \(20 Reads of 4096 B, each returned softrnic.s pattern\)$' ;;
  esac
  run $tool "-n $n -S $size -o 4 --expect-pattern" "-n $n -S $size -o 4 --expect-pattern"
  [[ $src == 0 && $crc == 0 ]] || failed "$tool: exit codes server $src client $crc"
  expect "$work/srv.log" "^softrnic_perftest: $tool server: $ok_s" "$tool server"
  expect "$work/cli.log" "^softrnic_perftest: $tool client: $ok_c" "$tool client"
  expect "$work/srv.log" "$res" "$tool server result"
  expect "$work/cli.log" "$res" "$tool client result"
  echo "$tool: $(tail -1 "$work/srv.log")"
  echo "$tool: $(tail -1 "$work/cli.log")"
done

# Without the pattern, as against perftest (its payloads are random); 64-byte offsets cycle.
run write_bw "-n 100 -S 64" "-n 100 -S 64"
[[ $src == 0 && $crc == 0 ]] || failed "write_bw -S 64: exit codes server $src client $crc"
expect "$work/srv.log" '100 x 64 B, data verified \(4096 bytes written in 64 range\(s\), the fill replaced, the rest and the guards intact\)$' "write_bw -S 64 server"
echo "write_bw -S 64: $(tail -1 "$work/srv.log")"
run read_bw "-n 100 -S 64 -o 8" "-n 100 -S 64 -o 8"
[[ $src == 0 && $crc == 0 ]] || failed "read_bw -S 64: exit codes server $src client $crc"
expect "$work/cli.log" '100 x 64 B, data verified \(100 Reads of 64 B, the fill replaced, identical data per source offset\)$' "read_bw -S 64 client"
echo "read_bw -S 64: $(tail -1 "$work/cli.log")"
run read_bw "-n 10 -S 4096" "-n 10 -S 4096 --prime-remote --mpa-rev 1 --no-crc --no-p2p"
[[ $src == 0 && $crc == 0 ]] || failed "read_bw --prime-remote: exit codes server $src client $crc"
expect "$work/cli.log" '10 x 4096 B, data verified \(10 Reads of 4096 B, each returned the pattern written first\)$' "read_bw --prime-remote client"
echo "read_bw --prime-remote (MPA rev 1, no CRC): $(tail -1 "$work/cli.log")"
run send_lat "-n 10 -S 2" "-n 10 -S 2"
[[ $src == 0 && $crc == 0 ]] || failed "send_lat -S 2: exit codes server $src client $crc"
expect "$work/srv.log" '10 x 2 B, data verified \(10 messages of exactly 2 B, identical payloads\)$' "send_lat -S 2 server"
expect "$work/cli.log" '10 x 2 B, data verified \(10 messages of exactly 2 B, identical payloads\)$' "send_lat -S 2 client"

# The server expects 20 iterations, the client runs 10: the server must see it in the report.
run write_bw "-n 20 -S 4096" "-n 10 -S 4096"
[[ $src != 0 ]] || failed "write_bw: a server expecting 20 Writes accepted a client that made 10"
expect "$work/srv.log" 'the client reports 10 x 4096 B, we expected 20 x 4096' "mismatch server"
echo "mismatch: server exit $src: $(grep -m1 'the client reports' "$work/srv.log")"
echo PASSED
