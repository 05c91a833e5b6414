#!/bin/bash
# Wire test for RoCEv2: capture on a veth link (real kernel IP/UDP headers, each datagram as it
# crosses a link) what softrnic_roce puts on the wire while dapl2-utils' dtestx (CM, RDMA Write
# with Immediate, CmpSwap, FetchAdd, Sends) and a short dtest (Sends, RDMA Writes and Reads at
# path MTU 4096, segmented) run, then validate every frame with ../shared/tools/wirecheck/validate.py
# (tshark's infiniband dissector, every UDP/4791 frame a BTH with a verified ICRC), require the
# opcodes each run must produce, and check that the validator rejects a copy with one byte of a
# RoCE frame flipped.
#
# Why veth links and not lo: softrnic sends a window of packets as one UDP GSO send, which crosses
# lo whole (a capture there shows one datagram holding many packets); on a link the kernel cuts
# it into datagrams numbered 0, 1, 2, ... in their IP IDs, which each ICRC covers, and fills in
# their UDP checksums. Three network namespaces: client, router, server (below).
#
#   usage: roce_capture_test.sh <build_dir>   (exit 77 = skipped: needs root, tshark, dumpcap, dapl2-utils, ethtool)
# SOFTRNIC_KEEP_CAPTURE=1 keeps the temporary directory.
set -euo pipefail

BUILD_DIR=${1:?usage: roce_capture_test.sh <build_dir>}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WIRECHECK=$REPO/../shared/tools/wirecheck
PY=/usr/bin/python3
CAPTURE_PACKETS=4000

# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
[ "$(id -u)" -eq 0 ] || skip "needs root to capture on lo"
command -v tshark >/dev/null || skip "tshark not installed"
command -v dumpcap >/dev/null || skip "dumpcap not installed"
command -v dtestx >/dev/null || skip "dtestx (dapl2-utils) not installed"
[ -f "$WIRECHECK/validate.py" ] || skip "no $WIRECHECK/validate.py"
command -v ethtool >/dev/null || skip "ethtool not installed"

DAT_CONF=$BUILD_DIR/dat.conf
[ -f "$DAT_CONF" ] || { echo "FAIL: $DAT_CONF not found"; exit 1; }
LIB=$(awk '$1 == "softrnic_roce" { print $5 }' "$DAT_CONF")
[ -n "$LIB" ] || { echo "FAIL: no softrnic_roce line in $DAT_CONF"; exit 1; }

tmp=$(mktemp -d /tmp/softrnic_roce_capture.XXXXXX)
fail() { fail_with "$tmp" "$*" capture.err server.log client.log validate.log; }
cap_pid="" server_pid=""
C=softrnic_rcapc$$ R=softrnic_rcapr$$ S=softrnic_rcaps$$
cleanup() {
  local rc=$?
  stop_pid "$server_pid" TERM
  stop_pid "$cap_pid" INT
  for ns in "$C" "$R" "$S"; do ip netns del "$ns" 2>/dev/null || true; done
  if [ "${SOFTRNIC_KEEP_CAPTURE:-0}" = 1 ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Client (10.78.1.2) - router - server (10.78.2.2), MTU 9000 (path MTU 4096). The client's GSO
# sends cross its link whole; the router forwards them onto the server's link, whose end has
# segmentation and checksum offload off: there the kernel cuts them into datagrams (IP IDs 0, 1,
# 2, ...) and fills in their UDP checksums, and that is where the capture is. The server's own
# end has checksum offload off, so its sends carry real checksums too (Linux refuses GSO there:
# the server sends datagram by datagram, IP ID 0, as on a NIC without checksum offload).
for ns in "$C" "$R" "$S"; do
  ip netns add "$ns" || skip "cannot create a network namespace"
  ip -n "$ns" link set lo up
done
ip -n "$C" link add cr0 type veth peer name rc0 netns "$R" || skip "cannot create a veth pair"
ip -n "$R" link add rs0 type veth peer name sr0 netns "$S" || skip "cannot create a veth pair"
ip -n "$C" addr add 10.78.1.2/24 dev cr0
ip -n "$R" addr add 10.78.1.1/24 dev rc0
ip -n "$R" addr add 10.78.2.1/24 dev rs0
ip -n "$S" addr add 10.78.2.2/24 dev sr0
for l in "$C":cr0 "$R":rc0 "$R":rs0 "$S":sr0; do ip -n "${l%%:*}" link set "${l#*:}" mtu 9000 up; done
ip -n "$C" route add default via 10.78.1.1
ip -n "$S" route add default via 10.78.2.1
ip netns exec "$R" sysctl -q -w net.ipv4.ip_forward=1
ip netns exec "$R" ethtool -K rs0 tx off tx-udp-segmentation off gso off >/dev/null 2>&1 || skip "ethtool cannot turn a veth's offloads off"
ip netns exec "$S" ethtool -K sr0 tx off >/dev/null 2>&1 || skip "ethtool cannot turn a veth's offloads off"
# One provider name on both sides (dtest's client takes the server's), each side its own address.
for side in s:10.78.2.2 c:10.78.1.2; do
  echo "softrnic_roce_cap u2.0 nonthreadsafe default $LIB dapl.2.0 \"wire=roce ip=${side#*:}\" \"\"" >"$tmp/dat_${side%%:*}.conf"
done
SERVER=(ip netns exec "$S" env DAT_OVERRIDE="$tmp/dat_s.conf")
CLIENT=(ip netns exec "$C" env DAT_OVERRIDE="$tmp/dat_c.conf")

cap=$tmp/cap.pcap
ip netns exec "$R" dumpcap -i rs0 -f "udp port 4791" -c "$CAPTURE_PACKETS" -B 128 -P -w "$cap" 2>"$tmp/capture.err" &
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
  wait_for "$tmp/server.log" "$ready" 20 "$server_pid" || fail "${srv[*]} did not get ready"
  sleep 0.3  # its side channel listens just after the line
  timeout -k 5 120 stdbuf -oL -eL "${cli[@]}" >"$tmp/client.log" 2>&1 || fail "${cli[*]} failed"
  for _ in $(seq 1 300); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
  stop_pid "$server_pid" TERM
  server_pid=""
  grep -qF "$ok" "$tmp/server.log" || fail "${srv[*]} did not pass"
  grep -qF "$ok" "$tmp/client.log" || fail "${cli[*]} did not pass"
  echo "${cli[*]}: server and client passed"
}
# (dtestx's server creates its PSP only after handing over its address: the client's datagrams
# are delayed 100 ms so that its REQ does not win that race; tests/CMakeLists.txt, roce_dtestx)
pair "IB extension test - immed/atomic test PASSED" "waiting to snd addr" \
  "${SERVER[@]}" dtestx -s -P softrnic_roce_cap -- "${CLIENT[@]}" SOFTRNIC_IMPAIR=delay=100000 dtestx -h 10.78.2.2 -P softrnic_roce_cap
pair "DAPL Test Complete. PASSED" "Server is waiting for client connection" \
  "${SERVER[@]}" dtest -s -P softrnic_roce_cap -b 65536 -B 4 -- "${CLIENT[@]}" dtest -h 10.78.2.2 -P softrnic_roce_cap -b 65536 -B 4

sleep 0.5
stop_pid "$cap_pid" INT
cap_pid=""
[ -s "$cap" ] || fail "empty capture"

# Every frame decodes and every ICRC verifies (the kernel's real IP ID, TTL, TOS and checksums).
"$PY" "$WIRECHECK/validate.py" "$cap" >"$tmp/validate.log" 2>&1 || fail "wire validation failed"
tail -n 3 "$tmp/validate.log"
# The datagrams of GSO sends are among them, each verified for its own IP ID (not only ID 0).
numbered=$(tshark -r "$cap" -Y 'ip.src == 10.78.1.2 && ip.id != 0' 2>/dev/null | grep -c . || true)
[ "$numbered" -ge 100 ] || fail "only $numbered of the client's datagrams carry an IP ID other than 0: no GSO send was cut up on the link"
echo "client datagrams with IP IDs 1, 2, ... (segments of GSO sends): $numbered"
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
