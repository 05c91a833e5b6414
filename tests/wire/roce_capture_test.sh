#!/bin/bash
# Wire test for RoCEv2: capture on lo (real kernel IP/UDP headers) what softrnic_roce puts on the
# wire while dapl2-utils' dtestx (CM, RDMA Write with Immediate, CmpSwap, FetchAdd, Sends) and a
# short dtest (Sends, RDMA Writes and Reads at path MTU 4096, segmented) run, then validate every
# frame with ../shared/tools/wirecheck/validate.py (tshark's infiniband dissector, every
# UDP/4791 frame a BTH with a verified ICRC), require the opcodes each run must produce, and
# check that the validator rejects a copy with one byte of a RoCE frame flipped.
#
#   usage: roce_capture_test.sh <build_dir>   (exit 77 = skipped: needs root, tshark, dumpcap, dapl2-utils)
# SOFTRNIC_KEEP_CAPTURE=1 keeps the temporary directory.
set -euo pipefail

BUILD_DIR=${1:?usage: roce_capture_test.sh <build_dir>}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WIRECHECK=$REPO/../shared/tools/wirecheck
PY=/usr/bin/python3
CAPTURE_PACKETS=4000
PROVIDER=softrnic_roce

# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
[ "$(id -u)" -eq 0 ] || skip "needs root to capture on lo"
command -v tshark >/dev/null || skip "tshark not installed"
command -v dumpcap >/dev/null || skip "dumpcap not installed"
command -v dtestx >/dev/null || skip "dtestx (dapl2-utils) not installed"
[ -f "$WIRECHECK/validate.py" ] || skip "no $WIRECHECK/validate.py"

DAT_CONF=$BUILD_DIR/dat.conf
[ -f "$DAT_CONF" ] || { echo "FAIL: $DAT_CONF not found"; exit 1; }
export DAT_OVERRIDE=$DAT_CONF

tmp=$(mktemp -d /tmp/softrnic_roce_capture.XXXXXX)
fail() { fail_with "$tmp" "$*" capture.err server.log client.log validate.log; }
cap_pid="" server_pid=""
cleanup() {
  local rc=$?
  stop_pid "$server_pid" TERM
  stop_pid "$cap_pid" INT
  if [ "${SOFTRNIC_KEEP_CAPTURE:-0}" = 1 ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cap=$tmp/cap.pcap
dumpcap -i lo -f "udp port 4791" -c "$CAPTURE_PACKETS" -B 128 -P -w "$cap" 2>"$tmp/capture.err" &
cap_pid=$!
wait_for "$tmp/capture.err" "File: $cap" 10 "$cap_pid" || fail "dumpcap did not start capturing"

# pair SUCCESS READY SERVER_ARGS... -- CLIENT_ARGS...
pair() {
  local ok=$1 ready=$2
  shift 2
  local srv=() cli=()
  while [ "$1" != -- ]; do srv+=("$1"); shift; done
  shift
  cli=("$@")
  timeout -k 5 120 stdbuf -oL -eL "${srv[@]}" >"$tmp/server.log" 2>&1 &
  server_pid=$!
  wait_for "$tmp/server.log" "$ready" 20 "$server_pid" || fail "${srv[0]} server did not get ready"
  sleep 0.3  # its side channel listens just after the line
  timeout -k 5 120 stdbuf -oL -eL "${cli[@]}" >"$tmp/client.log" 2>&1 || fail "${cli[0]} client failed"
  for _ in $(seq 1 300); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
  stop_pid "$server_pid" TERM
  server_pid=""
  grep -qF "$ok" "$tmp/server.log" || fail "${srv[0]} server did not pass"
  grep -qF "$ok" "$tmp/client.log" || fail "${cli[0]} client did not pass"
  echo "${cli[0]}: server and client passed"
}
# (dtestx's server creates its PSP only after handing over its address: the client's datagrams
# are delayed 100 ms so that its REQ does not win that race; tests/CMakeLists.txt, roce_dtestx)
pair "IB extension test - immed/atomic test PASSED" "waiting to snd addr" \
  dtestx -s -P "$PROVIDER" -- env SOFTRNIC_IMPAIR=delay=100000 dtestx -h 127.0.0.1 -P "$PROVIDER"
pair "DAPL Test Complete. PASSED" "Server is waiting for client connection" \
  dtest -s -P "$PROVIDER" -b 65536 -B 4 -- dtest -h 127.0.0.1 -P "$PROVIDER" -b 65536 -B 4

sleep 0.5
stop_pid "$cap_pid" INT
cap_pid=""
[ -s "$cap" ] || fail "empty capture"

# Every frame decodes and every ICRC verifies (the kernel's real IP ID, TTL, TOS and checksums).
"$PY" "$WIRECHECK/validate.py" "$cap" >"$tmp/validate.log" 2>&1 || fail "wire validation failed"
tail -n 3 "$tmp/validate.log"
# What the runs must have put on the wire (BTH opcodes, tshark's decode).
ops=$(tshark -r "$cap" -d udp.port==4791,infiniband -T fields -e infiniband.bth.opcode 2>/dev/null | sort -un | tr '\n' ' ')
echo "opcodes seen: $ops"
for want in 100 4 17 6 7 8 11 12 13 14 15 18 19 20; do  # CM, Send, ACK, Write F/M/L and Only-Imm, Read and its F/M/L responses, atomics
  [[ " $ops " == *" $want "* ]] || fail "no opcode $want in the capture (saw: $ops)"
done
cms=$(tshark -r "$cap" -d udp.port==4791,infiniband -Y 'infiniband.bth.opcode == 100' 2>/dev/null | grep -c "CM:" || true)
[ "$cms" -ge 6 ] || fail "only $cms CM MADs (want REQ, REP, RTU, DREQ, DREP of two connections)"

# Negative: one byte of the first RoCE payload flipped; the validator must refuse the copy.
"$PY" - "$cap" "$tmp/corrupt.pcap" <<'EOF'
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
e = "<" if struct.unpack("<I", data[:4])[0] in (0xA1B2C3D4, 0xA1B23C4D) else ">"
off = 24
while off + 16 <= len(data):
    incl = struct.unpack(e + "I", data[off + 8:off + 12])[0]
    p = off + 16
    off = p + incl
    ip = p + 14
    if data[ip + 9] != 17:
        continue
    u = ip + (data[ip] & 0x0F) * 4
    if struct.unpack("!H", data[u + 2:u + 4])[0] == 4791 and incl > (u - p) + 8 + 20:
        data[u + 8 + 16] ^= 0x01  # a byte after the BTH
        open(sys.argv[2], "wb").write(data)
        sys.exit(0)
sys.exit("no RoCE frame to corrupt")
EOF
if "$PY" "$WIRECHECK/validate.py" "$tmp/corrupt.pcap" >"$tmp/corrupt.log" 2>&1; then
  fail "the validator accepted a frame with a flipped byte"
fi
echo "corrupted copy rejected: $(grep -m1 -i 'icrc' "$tmp/corrupt.log" || tail -n 1 "$tmp/corrupt.log")"
echo "PASS: RoCEv2 capture valid ($(grep -c . <(tshark -r "$cap" 2>/dev/null)) frames)"
