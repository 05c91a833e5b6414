#!/bin/bash
# softrnic_rping server and client over MPA/TCP on 127.0.0.1: 20 validated pings, both variants
# of the MPA exchange (revision 2 with CRC and the peer-to-peer RTR, revision 1 without CRC).
set -euo pipefail
bin=${1:?usage: rping_self.sh <softrnic_rping>}
port=$((20000 + RANDOM % 20000))
for variant in "" "--mpa-rev 1 --no-crc --no-p2p"; do
  port=$((port + 1))
  log=$(mktemp)
  # shellcheck disable=SC2086
  timeout 60 "$bin" -s -a 127.0.0.1 -p "$port" -C 20 -S 100 -V $variant >"$log" 2>&1 &
  srv=$!
  for _ in $(seq 1 100); do grep -q "listening" "$log" && break; sleep 0.05; done
  # shellcheck disable=SC2086
  out=$(timeout 60 "$bin" -c -a 127.0.0.1 -p "$port" -C 20 -S 100 -V --delay-ms 0 $variant 2>&1) || {
    echo "FAIL: client ($variant): $out"; cat "$log"; exit 1; }
  wait "$srv" || { echo "FAIL: server ($variant)"; cat "$log"; exit 1; }
  grep -q "served 20 pings, data validated" "$log" || { echo "FAIL: server ($variant)"; cat "$log"; exit 1; }
  echo "$out" | grep -q "20 pings, data validated" || { echo "FAIL: $out"; exit 1; }
  echo "rping ${variant:-(rev 2, CRC, p2p)}: $out"
  rm -f "$log"
done
echo PASSED
