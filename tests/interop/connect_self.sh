#!/bin/bash
# softrnic_connect against itself on loopback: a reject carries the listener's private data to the
# initiator (over MPA/TCP: revision 2 with the enhanced header, and revision 1; over RoCEv2: a REJ
# whose 148-byte field starts with it, given after a delay the initiator's repeated REQs bridge
# through the listener's MRA), and a port nobody listens on is reported as such.
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

# RoCEv2 with IB CM: the listener on 127.0.0.1, the initiator on 127.0.0.2 (each UDP 4791)
pd=736f6674726e6963206e6f
zeros=$(printf '0%.0s' $(seq 1 $(((148 - ${#pd} / 2) * 2))))
log=$(mktemp)
timeout 30 "$bin" --roce --listen -a 127.0.0.1 -p "$port" --reject "$pd" --delay 2 >"$log" 2>&1 &
srv=$!
for _ in $(seq 1 100); do grep -q "listening" "$log" && break; sleep 0.05; done
# another port of the listener's device: a REJ that names no listener (invalid service ID)
out=$(timeout 30 "$bin" --roce -a 127.0.0.1 --local 127.0.0.2 -p "$((port + 1))" --expect no_listener 2>&1) ||
  { echo "FAIL: $out"; exit 1; }
echo "no listener (RoCEv2): $out"
t0=$(date +%s%N)
out=$(timeout 30 "$bin" --roce -a 127.0.0.1 --local 127.0.0.2 -p "$port" --pdata 0102 --timeout 10 \
        --expect rejected --expect-pdata "$pd$zeros" 2>&1) || { echo "FAIL: RoCEv2 client: $out"; cat "$log"; exit 1; }
ms=$((($(date +%s%N) - t0) / 1000000))
wait "$srv" || { echo "FAIL: RoCEv2 listener"; cat "$log"; exit 1; }
# the REQ's private data after rdma_cm's CMA header: 56 bytes, the consumer's 2 first
grep -q "its private data 56 bytes: 0102" "$log" || { echo "FAIL: RoCEv2 listener"; cat "$log"; exit 1; }
((ms >= 2000)) || { echo "FAIL: RoCEv2 reject after $ms ms, before the listener's 2 s delay"; exit 1; }
echo "reject (RoCEv2, after ${ms} ms): ${out:0:90}..."
rm -f "$log"
echo PASSED
