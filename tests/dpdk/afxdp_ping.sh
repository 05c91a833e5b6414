#!/usr/bin/env bash
# The dpdk netdev on net_af_xdp (veth end in namespace A, IPv4 10.77.1.11) against the udp netdev
# (kernel sockets, namespace B, 10.77.1.2): netdev_ping with ARP resolution. The veth MTU is 3000
# (the veth driver refuses XDP above ~3.5 KB).
#
#   afxdp_ping.sh HAVE_DPDK NETDEV_PING        exit 77 = skipped (root, DPDK)
set -uo pipefail
have_dpdk=${1:?usage: $0 HAVE_DPDK NETDEV_PING} ping=${2:?}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
skip() { echo "SKIPPED: $*"; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "needs root (network namespaces, af_xdp)"
[[ $have_dpdk == 1 || $have_dpdk == TRUE ]] || skip "softrnic was built without DPDK"
command -v ip >/dev/null || skip "ip (iproute2) not installed"
tag=sx$$
tmp=$(mktemp -d /tmp/softrnic_afxdp.XXXXXX)
cleanup() {
  local rc=$?
  "$repo/scripts/netns.sh" down "$tag"
  rm -rf /var/run/dpdk/"${tag}"_* "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
eval "$("$repo/scripts/netns.sh" up "$tag" 10.77.1 3000)" || { echo "FAIL: could not make the namespaces"; exit 1; }
ip netns exec "$NS_B" timeout -k 5 60 "$ping" server "netdev=udp ip=10.77.1.2 port=5041" >"$tmp/server.log" 2>&1 &
srv=$!
for i in $(seq 1 50); do grep -q "netdev_ping: ready" "$tmp/server.log" && break; sleep 0.1; done
ip netns exec "$NS_A" env SOFTRNIC_STATS=1 timeout -k 5 60 "$ping" client \
  "netdev=dpdk ip=10.77.1.11 dpdk_vdev=net_af_xdp0;iface=$IF_A;start_queue=0;queue_count=1 dpdk_lcore=0 dpdk_prefix=${tag}_x" \
  10.77.1.2:5041 200 5000 >"$tmp/client.log" 2>&1
wait "$srv"
cat "$tmp/client.log" "$tmp/server.log" | grep -E "netdev_ping|softrnic:|FAIL|rror"
grep -q "netdev_ping: PASSED" "$tmp/client.log" && grep -q "netdev_ping: PASSED" "$tmp/server.log" || { echo "FAIL"; exit 1; }
echo "PASSED"
