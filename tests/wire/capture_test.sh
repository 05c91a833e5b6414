#!/bin/bash
# Wire test: capture a dtest run over the softrnic_iwarp provider on lo and validate the frames
# with tshark (tools/wirecheck_softrnic.py + tools/wireshark/softrnic_udp.lua), then check that
# the validator rejects a copy of the capture with one byte of a DDP frame flipped.
#
#   usage: capture_test.sh <build_dir>      (exit 77 = skipped: needs root, tshark, dumpcap, dtest)
#
# The capture stops after CAPTURE_PACKETS packets (the CM exchange, the Send of the RMR info and
# the first RDMA Write segments; dtest moves gigabytes, a full capture would be huge). The
# packets are whole (CRC32c needs the full frame); dtest goes on after the capture has stopped.
# Set SOFTRNIC_KEEP_CAPTURE=1 to keep the temporary directory (capture + logs) for inspection.
set -euo pipefail

BUILD_DIR=${1:?usage: capture_test.sh <build_dir>}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VALIDATOR=$REPO/tools/wirecheck_softrnic.py
PY=/usr/bin/python3
PORTS=5041-5104
CAPTURE_PACKETS=3000
PROVIDER=softrnic_iwarp

# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
[ "$(id -u)" -eq 0 ] || skip "needs root to capture on lo"
command -v tshark >/dev/null || skip "tshark not installed"
command -v dumpcap >/dev/null || skip "dumpcap not installed"
command -v dtest >/dev/null || skip "dtest (dapl2-utils) not installed"
[ -x "$PY" ] || skip "$PY not installed"

DAT_CONF=$BUILD_DIR/dat.conf
[ -f "$DAT_CONF" ] || { echo "FAIL: $DAT_CONF not found (is $BUILD_DIR a softrnic build directory?)"; exit 1; }
export DAT_OVERRIDE=$DAT_CONF
export SOFTRNIC_STATS=1   # the provider prints its counters (retransmits, duplicates, ...) at IA close
# UDP GSO off: on lo a GSO send is captured unsegmented, one packet holding a run of frames (on a
# real link the kernel or the NIC cuts it at the segment size, which the capture does not show),
# and each frame must be a packet of its own for the validator. The netdev's other keys are
# dat.conf's for this provider.
export SOFTRNIC_NETDEV="ip=127.0.0.1 port=5041 udp_gso=0"

tmp=$(mktemp -d /tmp/softrnic_capture_test.XXXXXX)
fail() { fail_with "$tmp" "$*" capture.err server.log client.log; }
cap_pid="" server_pid=""

cleanup() {
  local rc=$?
  stop_pid "$server_pid" TERM
  stop_pid "$cap_pid" INT
  if [ "${SOFTRNIC_KEEP_CAPTURE:-0}" = 1 ]; then
    echo "kept $tmp"
  else
    rm -rf "$tmp"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM



# 0. another softrnic process on these ports would mix its frames into the capture (and a client
#    connecting to port 0 would reach the wrong server): wait a little for it to go away
if command -v ss >/dev/null; then
  busy_ports() { ss -Huan "( sport >= :${PORTS%-*} and sport <= :${PORTS#*-} )" 2>/dev/null | head -n 3; }
  for i in $(seq 1 300); do [ -z "$(busy_ports)" ] && break; sleep 0.1; done
  [ -z "$(busy_ports)" ] || { busy_ports; fail "UDP ports $PORTS are in use by another process"; }
fi

# 1. capture: whole packets, classic pcap, stops by itself after CAPTURE_PACKETS packets.
#    dumpcap (and tshark) print "Capturing on ..." BEFORE they open the interface; "File: ..." comes
#    after the interface is open, the filter set and the file created, so wait for that line
#    (waiting for "Capturing on" lost the CM exchange: dtest connects within milliseconds).
cap=$tmp/cap.pcap
dumpcap -i lo -f "udp portrange $PORTS" -c "$CAPTURE_PACKETS" -B 128 -P -w "$cap" 2>"$tmp/capture.err" &
cap_pid=$!
wait_for "$tmp/capture.err" "File: $cap" 10 "$cap_pid" || fail "dumpcap did not start capturing"

# 2. dtest server, then client (line-buffered so the logs can be polled)
timeout -k 5 180 stdbuf -oL -eL dtest -s -P "$PROVIDER" >"$tmp/server.log" 2>&1 &
server_pid=$!
wait_for "$tmp/server.log" "Server is waiting for client connection" 20 "$server_pid" ||
  fail "dtest server did not get ready"

client_rc=0
timeout -k 5 120 stdbuf -oL -eL dtest -h 127.0.0.1 -P "$PROVIDER" >"$tmp/client.log" 2>&1 || client_rc=$?
[ "$client_rc" -eq 0 ] || fail "dtest client exited with $client_rc"
for i in $(seq 1 300); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$server_pid" 2>/dev/null && fail "dtest server still running 30 s after the client finished"
server_rc=0
wait "$server_pid" || server_rc=$?
server_pid=""
[ "$server_rc" -eq 0 ] || fail "dtest server exited with $server_rc"
grep -qF "DAPL Test Complete. PASSED" "$tmp/server.log" || fail "dtest server did not pass"
grep -qF "DAPL Test Complete. PASSED" "$tmp/client.log" || fail "dtest client did not pass"
echo "dtest: server and client PASSED"
grep -h "^softrnic[ :]" "$tmp/server.log" "$tmp/client.log" || true

# 3. stop the capture (normally it has already stopped after CAPTURE_PACKETS packets)
stop_pid "$cap_pid" INT
cap_pid=""
grep -iE "packets (captured|received)" "$tmp/capture.err" | sed 's/^/dumpcap: /' || true
[ -s "$cap" ] || fail "empty capture"

# 4. validate. On lo the UDP checksum field holds only the pseudo-header sum (checksum offload),
#    so UDP checksums are not verified; the framing's CRC32c is.
"$PY" "$VALIDATOR" "$cap" --ports "$PORTS" --no-udp-checksum --min-ddp 100 --min-cm 3 ||
  fail "wire validation failed"

# 5. negative test: flip the last body byte of the first DDP frame; the validator must fail on
#    the CRC32c
"$PY" - "$cap" "$tmp/corrupt.pcap" "$PORTS" <<'EOF'
import struct, sys
src, dst, ports = sys.argv[1], sys.argv[2], sys.argv[3]
lo, hi = (int(x) for x in ports.split("-"))
data = bytearray(open(src, "rb").read())
magic = struct.unpack("<I", data[:4])[0]
if magic in (0xA1B2C3D4, 0xA1B23C4D):
    e = "<"
elif magic in (0xD4C3B2A1, 0x4D3CB2A1):
    e = ">"
else:
    sys.exit("not a classic pcap file")
linktype = struct.unpack(e + "I", data[20:24])[0] & 0x0FFFFFFF
l2 = {1: 14, 113: 16, 276: 20}.get(linktype)
if l2 is None:
    sys.exit("unsupported link type %d" % linktype)
off, frame_no = 24, 0
while off + 16 <= len(data):
    incl, orig = struct.unpack(e + "II", data[off + 8:off + 16])
    p, frame_no = off + 16, frame_no + 1
    off = p + incl
    if incl != orig:
        continue
    ethertype = struct.unpack("!H", data[p + l2 - 2:p + l2])[0] if linktype == 1 else \
        struct.unpack("!H", data[p + (14 if linktype == 113 else 0):p + (16 if linktype == 113 else 2)])[0]
    ip = p + l2
    if ethertype != 0x0800 or data[ip] >> 4 != 4 or data[ip + 9] != 17:
        continue
    if struct.unpack("!H", data[ip + 6:ip + 8])[0] & 0x3FFF:   # fragment
        continue
    u = ip + (data[ip] & 0x0F) * 4
    sport, dport, ulen, ucsum = struct.unpack("!HHHH", data[u:u + 8])
    if not (lo <= sport <= hi or lo <= dport <= hi):
        continue
    pay = u + 8
    plen = ulen - 8
    if plen < 24 + 14 or data[pay] != 0x11:                     # version 1, type 1 (DDP)
        continue
    pos = pay + plen - 5                                           # last body byte
    old = data[pos]
    data[pos] ^= 0xFF
    open(dst, "wb").write(data)
    print("corrupted frame %d (UDP %d -> %d): body byte at UDP payload offset %d 0x%02x -> 0x%02x"
          % (frame_no, sport, dport, pos - pay, old, data[pos]))
    sys.exit(0)
sys.exit("no DDP frame found to corrupt")
EOF
bad_out=$("$PY" "$VALIDATOR" "$tmp/corrupt.pcap" --ports "$PORTS" --no-udp-checksum --expect-bad) ||
  { echo "$bad_out"; fail "the validator accepted the corrupted capture"; }
echo "$bad_out" | grep -E "CRC32c|wirecheck:" | head -n 4
echo "$bad_out" | grep -q "Bad CRC32c" || { echo "$bad_out"; fail "the corrupted capture did not fail on its CRC32c"; }
[ "${SOFTRNIC_KEEP_CAPTURE:-0}" = 1 ] || rm -f "$cap" "$tmp/corrupt.pcap"
echo "PASSED"
