#!/bin/bash
# softrnic_connect against itself over MPA/TCP on 127.0.0.1: a reject carries the listener's
# private data to the initiator (MPA revision 2 with the enhanced header, and revision 1), and a
# port nobody listens on is reported as such.
set -euo pipefail
bin=${1:?usage: connect_self.sh <softrnic_connect>}
port=$((20000 + RANDOM % 20000))
for variant in "" "--mpa-rev 1 --no-crc --no-p2p"; do
  port=$((port + 1))
  log=$(mktemp)
  # shellcheck disable=SC2086
  timeout 30 "$bin" --listen -a 127.0.0.1 -p "$port" --reject 736f6674726e6963206e6f $variant >"$log" 2>&1 &
  srv=$!
  for _ in $(seq 1 100); do grep -q "listening" "$log" && break; sleep 0.05; done
  # shellcheck disable=SC2086
  out=$(timeout 30 "$bin" -a 127.0.0.1 -p "$port" --pdata 0102 --expect rejected \
          --expect-pdata 736f6674726e6963206e6f $variant 2>&1) || { echo "FAIL: client ($variant): $out"; cat "$log"; exit 1; }
  wait "$srv" || { echo "FAIL: listener ($variant)"; cat "$log"; exit 1; }
  grep -q "its private data 2 bytes: 0102" "$log" || { echo "FAIL: listener ($variant)"; cat "$log"; exit 1; }
  echo "reject ${variant:-(rev 2)}: $out"
  rm -f "$log"
done
out=$(timeout 30 "$bin" -a 127.0.0.1 -p "$((port + 1))" --expect no_listener 2>&1) || { echo "FAIL: $out"; exit 1; }
echo "no listener: $out"
echo PASSED
