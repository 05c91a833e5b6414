#!/usr/bin/env bash
# Interoperability over a veth pair between two network namespaces (scripts/netns.sh):
#   namespace A: the dpdk netdev on net_af_packet (IPv4 10.77.0.11: not the kernel's 10.77.0.1 on
#                that veth end, so ARP for it can only be answered by the dpdk backend)
#   namespace B: the udp netdev (kernel sockets) at 10.77.0.2
# 1. netdev_ping, dpdk side sending first (its ARP resolver asks for 10.77.0.2);
# 2. dtest through the DAT provider: the dpdk process is the server, the kernel-socket process the
#    client (the kernel ARPs for 10.77.0.11: the dpdk ARP responder answers); dtest's TCP side
#    channel runs between the kernel addresses 10.77.0.1 and 10.77.0.2.
# Both runs are captured with dumpcap on the namespace-B veth end (checksum offload off on both
# ends, so every frame holds its real checksums) and validated with the shared wirecheck
# validate.py (no malformed frame, IPv4 and UDP checksums verified: the dpdk side computes its
# UDP checksums here, dpdk_tx_udp_csum=sw, where af_packet has no offload) and tools/wirecheck_softrnic.py
# (our framing decoded, CRC32c good); a copy with one IPv4 header byte flipped must fail.
#
#   afpacket_dtest.sh BUILD_DIR HAVE_DPDK NETDEV_PING      exit 77 = skipped (root, DPDK, tools)
# SOFTRNIC_KEEP_CAPTURE=1 keeps the capture and logs.
set -uo pipefail
build=${1:?usage: $0 BUILD_DIR HAVE_DPDK NETDEV_PING} have_dpdk=${2:?} ping=${3:?}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
wc_dir=${SOFTRNIC_WIRECHECK_DIR:-$repo/../shared/tools/wirecheck}
P=softrnic_iwarp
PY=/usr/bin/python3

skip() { echo "SKIPPED: $*"; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "needs root (network namespaces, af_packet)"
[[ $have_dpdk == 1 || $have_dpdk == TRUE ]] || skip "softrnic was built without DPDK"
for t in ip ethtool dtest dumpcap tshark; do command -v $t >/dev/null || skip "$t not installed"; done
[[ -x $PY ]] || skip "$PY not installed"
[[ -f $wc_dir/validate.py ]] || skip "shared wirecheck tools not found at $wc_dir (set SOFTRNIC_WIRECHECK_DIR)"
[[ -f $build/dat.conf ]] || { echo "FAIL: $build/dat.conf not found"; exit 1; }

tag=sa$$
tmp=$(mktemp -d /tmp/softrnic_afpacket.XXXXXX)
cap_pid=""
cleanup() {
  local rc=$?
  if [[ -n $cap_pid ]]; then kill -INT "$cap_pid" 2>/dev/null; wait "$cap_pid" 2>/dev/null; fi
  "$repo/scripts/netns.sh" down "$tag"
  rm -rf /var/run/dpdk/"${tag}"_*
  if [[ ${SOFTRNIC_KEEP_CAPTURE:-0} == 1 ]]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() {
  echo "FAIL: $*"
  for f in "$tmp"/*.log; do [[ -s $f ]] && { echo "---- $(basename "$f") (tail)"; tail -n 20 "$f"; }; done
  exit 1
}

eval "$("$repo/scripts/netns.sh" up "$tag" 10.77.0)" || fail "could not make the namespaces"
for pair in "$NS_A $IF_A" "$NS_B $IF_B"; do
  set -- $pair
  ip netns exec "$1" ethtool -K "$2" tx off >/dev/null 2>&1 || fail "ethtool -K $2 tx off"
done
export DAT_OVERRIDE=$build/dat.conf SOFTRNIC_STATS=1
# MTU 8000 (veth 9000): af_packet needs TPACKET frames that hold it; the kernel side's datagrams match
dpdk_nd="netdev=dpdk ip=10.77.0.11 dpdk_vdev=net_af_packet0;iface=$IF_A;framesz=8192;blocksz=8192 mtu=8000 dpdk_lcore=1 dpdk_tx_udp_csum=sw dpdk_prefix=${tag}_d"
kern_nd="netdev=udp ip=10.77.0.2 port=5041 max_datagram=7972"

cap=$tmp/afpacket.pcap
ip netns exec "$NS_B" dumpcap -i "$IF_B" -f "arp or udp portrange 5041-5104 or udp port 6041" -c 4000 -B 64 -P \
  -w "$cap" 2>"$tmp/capture.log" &
cap_pid=$!
for i in $(seq 1 100); do grep -qF "File: $cap" "$tmp/capture.log" 2>/dev/null && break; sleep 0.1; done
grep -qF "File: $cap" "$tmp/capture.log" || fail "dumpcap did not start"

# 1. netdev ping, dpdk first (resolver); port 6041 keeps these frames apart from the framing checks
ip netns exec "$NS_B" timeout -k 5 60 "$ping" server "netdev=udp ip=10.77.0.2 port=6041 max_datagram=7972" \
  >"$tmp/ping_server.log" 2>&1 &
ping_srv=$!
for i in $(seq 1 50); do grep -q "netdev_ping: ready" "$tmp/ping_server.log" && break; sleep 0.1; done
ip netns exec "$NS_A" timeout -k 5 60 "$ping" client "${dpdk_nd/dpdk_prefix=${tag}_d/dpdk_prefix=${tag}_p} port=6041" \
  10.77.0.2:6041 100 0 >"$tmp/ping_client.log" 2>&1
wait "$ping_srv"
grep -q "netdev_ping: PASSED" "$tmp/ping_client.log" || fail "netdev_ping over af_packet"
grep -h "netdev_ping: .*rtt\|softrnic dpdk" "$tmp/ping_client.log"
grep -qE "arp: [1-9][0-9]* requests sent" "$tmp/ping_client.log" || fail "the dpdk side sent no ARP request"

# 2. dtest: dpdk server in A, kernel-socket client in B; the kernel forgets what it learnt above
ip -n "$NS_B" neigh flush dev "$IF_B"
ip netns exec "$NS_A" env PAIR_TIMEOUT=240 "$repo/tests/dat/run_pair.sh" "$DAT_OVERRIDE" \
  "Server is waiting for client connection" "DAPL Test Complete\\. PASSED" --listen-port 15828 \
  -- env SOFTRNIC_NETDEV="$dpdk_nd" dtest -s -P $P \
  -- ip netns exec "$NS_B" env SOFTRNIC_NETDEV="$kern_nd" dtest -h 10.77.0.1 -P $P >"$tmp/dtest.log" 2>&1
rc=$?
grep -E "PingPong|RDMA write|softrnic dpdk|PASS|FAIL" "$tmp/dtest.log"
[[ $rc -eq 0 ]] || fail "dtest over af_packet <-> kernel UDP"

# 3. the capture
kill -INT "$cap_pid" 2>/dev/null; wait "$cap_pid" 2>/dev/null; cap_pid=""
[[ -s $cap ]] || fail "empty capture"
n_all=$(tshark -r "$cap" 2>/dev/null | wc -l)
arp_rep=$(tshark -r "$cap" -Y "arp.opcode == 2 && arp.src.proto_ipv4 == 10.77.0.11" 2>/dev/null | wc -l)
arp_req=$(tshark -r "$cap" -Y "arp.opcode == 1 && arp.src.proto_ipv4 == 10.77.0.11" 2>/dev/null | wc -l)
from_dpdk=$(tshark -r "$cap" -Y "ip.src == 10.77.0.11 && udp" 2>/dev/null | wc -l)
from_kern=$(tshark -r "$cap" -Y "ip.src == 10.77.0.2 && udp" 2>/dev/null | wc -l)
echo "capture: $n_all frames; from dpdk $from_dpdk UDP, from the kernel $from_kern UDP; dpdk ARP requests $arp_req, replies $arp_rep"
# the responder (dtest: the kernel asks for 10.77.0.11) and the resolver (netdev ping) on the wire
((arp_rep >= 1 && arp_req >= 1 && from_dpdk >= 100 && from_kern >= 100)) || fail "capture lacks ARP or traffic in both directions"
"$PY" "$wc_dir/validate.py" "$cap" >"$tmp/validate.log" 2>&1 || { cat "$tmp/validate.log"; fail "validate.py rejected the capture"; }
tail -n 3 "$tmp/validate.log"
"$PY" "$repo/tools/wirecheck_softrnic.py" "$cap" --ports 5041-5104 --min-ddp 100 --min-cm 3 >"$tmp/wirecheck.log" 2>&1 ||
  { cat "$tmp/wirecheck.log"; fail "wirecheck_softrnic.py rejected the capture"; }
tail -n 4 "$tmp/wirecheck.log"

# 4. the checks can fail: flip the TTL of the first IPv4 frame the dpdk side sent (its header
#    checksum no longer matches): validate.py must reject that copy
"$PY" - "$cap" "$tmp/bad.pcap" <<'PYEOF' || fail "could not make the corrupted copy"
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
off = 24
while off + 16 <= len(data):
    incl = struct.unpack("<I", data[off + 8:off + 12])[0]
    p = off + 16
    if data[p + 12:p + 14] == b"\x08\x00" and data[p + 26:p + 30] == bytes([10, 77, 0, 11]):
        data[p + 14 + 8] ^= 0x01
        open(sys.argv[2], "wb").write(data)
        sys.exit(0)
    off = p + incl
sys.exit("no frame from 10.77.0.11")
PYEOF
if "$PY" "$wc_dir/validate.py" "$tmp/bad.pcap" >"$tmp/validate_bad.log" 2>&1; then
  fail "validate.py accepted a frame with a wrong IPv4 header checksum"
fi
grep -m1 -iE "checksum|expert" "$tmp/validate_bad.log" || true
echo "PASSED"
