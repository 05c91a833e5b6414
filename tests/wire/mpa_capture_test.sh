#!/bin/bash
# Wire test for iWARP over MPA/TCP: capture a dtest run over the softrnic_iwarp_tcp IA (over a
# veth pair between two network namespaces the test makes and removes) and
# validate it with tshark's own iWARP dissectors (../shared/tools/wirecheck/validate.py --iwarp:
# every TCP segment of the stream decodes as MPA, no malformed frame, no bad MPA CRC32c), then
# count what it shows: the MPA request and reply (revision 2, CRC on: we ask for it) and FPDUs
# whose CRC tshark checked and found good.
#
#   usage: mpa_capture_test.sh <build_dir>   (exit 77 = skipped: needs root, tshark, dumpcap, dtest, the shared tools)
# Set SOFTRNIC_KEEP_CAPTURE=1 to keep the temporary directory.
set -euo pipefail

BUILD_DIR=${1:?usage: mpa_capture_test.sh <build_dir>}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WIRECHECK=$REPO/../shared/tools/wirecheck
PY=/usr/bin/python3
PROVIDER=softrnic_iwarp_tcp
PORT=45248            # dtest's conn_qual 0xb0c0: the TCP port over MPA
CAPTURE_PACKETS=100000  # per direction: the whole run (about 6000 each), so neither record ends first

# shellcheck source=../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
[ "$(id -u)" -eq 0 ] || skip "needs root to capture on lo"
command -v tshark >/dev/null || skip "tshark not installed"
command -v dumpcap >/dev/null || skip "dumpcap not installed"
command -v mergecap >/dev/null || skip "mergecap not installed"
command -v dtest >/dev/null || skip "dtest (dapl2-utils) not installed"
[ -x "$PY" ] || skip "$PY not installed"
[ -f "$WIRECHECK/validate.py" ] || skip "no $WIRECHECK/validate.py (../shared beside the repository)"

command -v ip >/dev/null || skip "ip (iproute2) not installed"
command -v ethtool >/dev/null || skip "ethtool not installed"

# Two network namespaces joined by a veth pair with checksum and segmentation offloads off (on lo the
# kernel leaves TCP checksums unfinished in what a capture sees, and tshark flags them): the
# dtest server in one (10.79.0.1), the client in the other (10.79.0.2).
ns_s=srt_mpa_s_$$ ns_c=srt_mpa_c_$$
ip netns add "$ns_s" 2>/dev/null || skip "cannot create network namespaces"
ip netns add "$ns_c"
teardown_ns() { ip netns del "$ns_s" 2>/dev/null || true; ip netns del "$ns_c" 2>/dev/null || true; }
ip link add srt_mpa_a$$ type veth peer name srt_mpa_b$$ || { teardown_ns; skip "cannot create a veth pair"; }
ip link set srt_mpa_a$$ netns "$ns_s"
ip link set srt_mpa_b$$ netns "$ns_c"
ip -n "$ns_s" addr add 10.79.0.1/24 dev srt_mpa_a$$
ip -n "$ns_c" addr add 10.79.0.2/24 dev srt_mpa_b$$
for n in "$ns_s" "$ns_c"; do ip -n "$n" link set lo up; done
ip -n "$ns_s" link set srt_mpa_a$$ up
ip -n "$ns_c" link set srt_mpa_b$$ up
ip netns exec "$ns_s" ethtool -K srt_mpa_a$$ tx off tso off gso off gro off >/dev/null 2>&1 || true
ip netns exec "$ns_c" ethtool -K srt_mpa_b$$ tx off tso off gso off gro off >/dev/null 2>&1 || true
IN_S=(ip netns exec "$ns_s" env SOFTRNIC_NETDEV=ip=10.79.0.1)
IN_C=(ip netns exec "$ns_c" env SOFTRNIC_NETDEV=ip=10.79.0.2)

export DAT_OVERRIDE=$BUILD_DIR/dat.conf
[ -f "$DAT_OVERRIDE" ] || { echo "FAIL: $DAT_OVERRIDE not found"; exit 1; }
tmp=$(mktemp -d /tmp/softrnic_mpa_capture.XXXXXX)
fail() { fail_with "$tmp" "$*" capture.err capture_c.err server.log client.log validate.log; }
cap_pid="" cap_c_pid="" server_pid=""
cleanup() {
  local rc=$?
  stop_pid "$server_pid" TERM
  stop_pid "$cap_pid" INT
  stop_pid "$cap_c_pid" INT
  teardown_ns
  if [ "${SOFTRNIC_KEEP_CAPTURE:-0}" = 1 ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
  exit "$rc"
}
trap cleanup EXIT
# Start over (at most 3 attempts) after something that is not softrnic's fault.
again() {
  local why=$1
  shift
  if [ "${ATTEMPT:-1}" -lt 3 ]; then
    echo "$why (attempt ${ATTEMPT:-1}); again"
    trap - EXIT
    stop_pid "$server_pid" TERM
    stop_pid "$cap_pid" INT
    stop_pid "$cap_c_pid" INT
    teardown_ns
    rm -rf "$tmp"
    ATTEMPT=$((${ATTEMPT:-1} + 1)) exec "$0" "$@"
  fi
}

# Each direction is captured where it leaves: on a veth the receiving end records a segment when
# the receiving CPU's backlog delivers it, and a sender that moves between CPUs lands its segments
# on both backlogs, so the receive side's record can show a burst out of order (TCP reorders
# them; tshark cannot). The sending end records them in the order TCP sent them. One dumpcap per
# namespace, each keeping its own side's packets, merged by time afterwards.
cap=$tmp/cap.pcap
ip netns exec "$ns_s" dumpcap -i srt_mpa_a$$ -f "src host 10.79.0.1 and tcp port $PORT" -c "$CAPTURE_PACKETS" -B 256 -P \
  -w "$tmp/cap_s.pcap" 2>"$tmp/capture.err" &
cap_pid=$!
ip netns exec "$ns_c" dumpcap -i srt_mpa_b$$ -f "src host 10.79.0.2 and tcp port $PORT" -c "$CAPTURE_PACKETS" -B 256 -P \
  -w "$tmp/cap_c.pcap" 2>"$tmp/capture_c.err" &
cap_c_pid=$!
wait_for "$tmp/capture.err" "File: $tmp/cap_s.pcap" 10 "$cap_pid" || fail "dumpcap did not start capturing"
wait_for "$tmp/capture_c.err" "File: $tmp/cap_c.pcap" 10 "$cap_c_pid" || fail "dumpcap did not start capturing"

timeout -k 5 180 "${IN_S[@]}" stdbuf -oL -eL dtest -s -P "$PROVIDER" -b 65536 -B 10 >"$tmp/server.log" 2>&1 &
server_pid=$!
wait_for "$tmp/server.log" "Server is waiting for client connection" 20 "$server_pid" || fail "dtest server did not get ready"
if ! timeout -k 5 120 "${IN_C[@]}" stdbuf -oL -eL dtest -h 10.79.0.1 -P "$PROVIDER" -b 65536 -B 10 >"$tmp/client.log" 2>&1; then
  # dtest sends its parameters before it creates its PSP: a client that connects in between is
  # refused by TCP (the same happens with OFA dapl on siw), a race of dtest's, not softrnic's.
  grep -q "NON_PEER_REJECTED" "$tmp/client.log" "$tmp/server.log" && again "dtest's listen race" "$@"
  fail "dtest client failed"
fi
for i in $(seq 1 300); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
if ! wait "$server_pid"; then
  grep -q "NON_PEER_REJECTED" "$tmp/client.log" "$tmp/server.log" && { server_pid=""; again "dtest's listen race" "$@"; }
  fail "dtest server failed"
fi
server_pid=""
grep -qF "DAPL Test Complete. PASSED" "$tmp/server.log" || fail "dtest server did not pass"
grep -qF "DAPL Test Complete. PASSED" "$tmp/client.log" || fail "dtest client did not pass"
echo "dtest over $PROVIDER: server and client PASSED"
sleep 1  # dumpcap reads the kernel's buffer in batches: what is still there when it stops is lost
stop_pid "$cap_pid" INT
stop_pid "$cap_c_pid" INT
cap_pid="" cap_c_pid=""
mergecap -F pcap -w "$cap" "$tmp/cap_s.pcap" "$tmp/cap_c.pcap" || fail "mergecap failed"
[ -s "$cap" ] || fail "empty capture"

if ! "$PY" "$WIRECHECK/validate.py" "$cap" --iwarp --allow-mpa-v2 >"$tmp/validate.log" 2>&1; then
  # The kernel's TCP may resend a segment (and the peer answer with a D-SACK): tshark does not
  # dissect a retransmitted segment's payload as MPA again (its bytes were decoded the first
  # time) and flags the D-SACK. And a segment whose (offloaded) TCP checksum the kernel left as
  # 0xffff draws tshark's RFC 1624 note. All are TCP's, below MPA (softrnic writes only the
  # stream's bytes); anything else still fails.
  fails=$(grep "FAIL" "$tmp/validate.log" | grep -v "^wirecheck:" || true)
  kernel_tcp="not decoded as MPA/DDP \(\[TCP (Spurious |Fast )?Retransmission\]|TCP Checksum 0xffff instead of 0x0000"
  tcp_resends=$(grep -E "$kernel_tcp" <<<"$fails" || true)
  rest=$(grep -vE "$kernel_tcp|D-SACK Sequence" <<<"$fails" || true)
  if [ -n "$tcp_resends" ] && [ -z "$rest" ]; then
    echo "tolerated: $(wc -l <<<"$tcp_resends") note(s) on the kernel's TCP (resends not re-dissected by tshark, checksums):"
    echo "$tcp_resends"
  else
    validate_failed=1
  fi
fi
if [ "${validate_failed:-0}" = 1 ]; then
  # The capture point on a veth sometimes records a burst of segments out of order (not what
  # the sender sent: TCP delivered them in order, dtest passed); tshark then cannot reassemble
  # those FPDUs. Only that is not softrnic's: any other failure (malformed MPA, a bad CRC) is.
  others=$(grep "FAIL" "$tmp/validate.log" | grep -vE "out-of-order segment|Previous segment\(s\) not captured|Out-Of-Order|ACKed segment that wasn't captured" || true)
  [ -z "$others" ] && again "the capture was reordered at the capture point" "$@"
  [ -z "$others" ] && skip "the capture was reordered at the capture point in 3 attempts (tshark cannot reassemble it; not a softrnic fault)"
  fail "tshark validation failed"
fi
tail -n 3 "$tmp/validate.log"

# What tshark saw: MPA request and reply, and FPDUs with a checked, good CRC.
# shellcheck disable=SC1091
. "$WIRECHECK/tshark_opts.sh"
count() { tshark -r "$cap" "${TSHARK_RDMA_OPTS[@]}" -Y "$1" 2>/dev/null | wc -l; }
req=$(count "iwarp_mpa.req")
rep=$(count "iwarp_mpa.rep")
fpdus=$(count "iwarp_mpa.ulpdulength")
crc_good=$(count "iwarp_mpa.crc_check != 0")
echo "tshark: $req MPA request(s), $rep reply(ies), $fpdus segments with FPDUs, $crc_good with a CRC (validate.py checked every CRC)"
[ "$req" -ge 1 ] && [ "$rep" -ge 1 ] || fail "no MPA request/reply decoded"
[ "$fpdus" -ge 50 ] || fail "too few FPDUs decoded ($fpdus)"
[ "$crc_good" -ge 50 ] || fail "too few FPDUs with a CRC ($crc_good): CRC was negotiated"
echo "PASSED"
