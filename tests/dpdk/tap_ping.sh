#!/usr/bin/env bash
# The dpdk netdev on net_tap (rx interrupts: wait_rx sleeps in the kernel; UDP checksums by the
# port's offload) against the udp netdev on the tap's kernel side, both inside a network
# namespace of our own: netdev_ping with ARP.
#
#   tap_ping.sh HAVE_DPDK NETDEV_PING        exit 77 = skipped (root, DPDK)
set -uo pipefail
have_dpdk=${1:?usage: $0 HAVE_DPDK NETDEV_PING} ping=${2:?}
skip() { echo "SKIPPED: $*"; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "needs root (network namespace, tap)"
[[ $have_dpdk == 1 || $have_dpdk == TRUE ]] || skip "softrnic was built without DPDK"
[[ -c /dev/net/tun ]] || skip "no /dev/net/tun"
command -v ip >/dev/null || skip "ip (iproute2) not installed"
ns=srt_tap$$ tap=stap$$
tmp=$(mktemp -d /tmp/softrnic_tap.XXXXXX)
cleanup() {
  local rc=$?
  ip netns del "$ns" 2>/dev/null
  rm -rf /var/run/dpdk/"${ns}" "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ip netns add "$ns" && ip -n "$ns" link set lo up || { echo "FAIL: ip netns add"; exit 1; }
ip netns exec "$ns" env SOFTRNIC_STATS=1 timeout -k 5 60 "$ping" client \
  "netdev=dpdk ip=10.79.0.11 dpdk_vdev=net_tap0;iface=$tap dpdk_lcore=0 dpdk_prefix=$ns" 10.79.0.1:5041 200 2000 \
  >"$tmp/client.log" 2>&1 &
cli=$!
for i in $(seq 1 50); do ip -n "$ns" link show "$tap" >/dev/null 2>&1 && break; sleep 0.1; done
ip -n "$ns" addr add 10.79.0.1/24 dev "$tap" && ip -n "$ns" link set "$tap" up || { echo "FAIL: tap $tap not made"; cat "$tmp/client.log"; exit 1; }
ip netns exec "$ns" timeout -k 5 60 "$ping" server "netdev=udp ip=10.79.0.1 port=5041" >"$tmp/server.log" 2>&1
wait "$cli"
grep -hE "netdev_ping|softrnic:|FAIL" "$tmp/client.log" "$tmp/server.log"
grep -q "netdev_ping: PASSED" "$tmp/client.log" && grep -q "netdev_ping: PASSED" "$tmp/server.log" || { echo "FAIL"; exit 1; }
grep -q "rx interrupts on" "$tmp/client.log" || { echo "FAIL: the tap port did not use rx interrupts"; exit 1; }
# net_tap offers UDP checksum offload, and the kernel on the other side checks every checksum it
# gets: the datagrams above went out with the pseudo-header sum for the port to finish.
grep -q "udp checksum sent by the port's offload" "$tmp/client.log" ||
  { echo "FAIL: the tap port's UDP checksum offload was not used"; exit 1; }
echo "PASSED"
