#!/usr/bin/env bash
# Test topology: two network namespaces joined by a veth pair (MTU 9000).
#
#   scripts/netns.sh up   PREFIX [SUBNET [MTU]]  makes PREFIX_a and PREFIX_b, veth ends PREFIX_va
#                                           (in PREFIX_a, SUBNET.1/24) and PREFIX_vb (in PREFIX_b,
#                                           SUBNET.2/24), both up with MTU (default 9000; af_xdp
#                                           on a veth wants at most ~3500), lo up. SUBNET
#                                           defaults to 10.77.0
#   scripts/netns.sh down PREFIX            removes both namespaces (and with them the veth pair);
#                                           idempotent
#
# PREFIX: letters, digits, '_' (at most 10 characters: interface names are limited to 15).
# Needs root. Prints the names it made as shell assignments (NS_A=..., NS_B=..., IF_A=..., IF_B=...).
set -euo pipefail
cmd=${1:-} prefix=${2:-}
subnet=${3:-10.77.0} mtu=${4:-9000}
usage() { echo "usage: $0 up|down PREFIX [SUBNET e.g. 10.77.0 [MTU]]" >&2; exit 2; }
[[ -n $cmd && -n $prefix ]] || usage
[[ $prefix =~ ^[A-Za-z0-9_]{1,10}$ ]] || { echo "netns.sh: bad PREFIX '$prefix' (letters, digits, _; at most 10)" >&2; exit 2; }
[[ $subnet =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || { echo "netns.sh: bad SUBNET '$subnet'" >&2; exit 2; }
[[ $mtu =~ ^[0-9]{3,5}$ ]] || { echo "netns.sh: bad MTU '$mtu'" >&2; exit 2; }
ns_a=${prefix}_a ns_b=${prefix}_b if_a=${prefix}_va if_b=${prefix}_vb

down() {
  local ns
  for ns in "$ns_a" "$ns_b"; do
    if ip netns list 2>/dev/null | grep -qw "^$ns"; then ip netns del "$ns" 2>/dev/null || true; fi
  done
  # a half-made pair can be left in the root namespace
  ip link del "$if_a" 2>/dev/null || true
  ip link del "$if_b" 2>/dev/null || true
  return 0
}

case $cmd in
  up)
    [[ $(id -u) -eq 0 ]] || { echo "netns.sh: needs root" >&2; exit 1; }
    down
    trap 'down' ERR
    ip netns add "$ns_a"
    ip netns add "$ns_b"
    ip link add "$if_a" type veth peer name "$if_b"
    ip link set "$if_a" netns "$ns_a"
    ip link set "$if_b" netns "$ns_b"
    ip -n "$ns_a" link set lo up
    ip -n "$ns_b" link set lo up
    ip -n "$ns_a" link set "$if_a" mtu "$mtu" up
    ip -n "$ns_b" link set "$if_b" mtu "$mtu" up
    ip -n "$ns_a" addr add "$subnet.1/24" dev "$if_a"
    ip -n "$ns_b" addr add "$subnet.2/24" dev "$if_b"
    trap - ERR
    echo "NS_A=$ns_a NS_B=$ns_b IF_A=$if_a IF_B=$if_b IP_A=$subnet.1 IP_B=$subnet.2"
    ;;
  down)
    down
    ;;
  *) usage ;;
esac
