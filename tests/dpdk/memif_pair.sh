#!/usr/bin/env bash
# Runs a dapl2-utils server/client pair (tests/dat/run_pair.sh) over a DPDK memif pair: both
# processes use the same dat.conf line; SOFTRNIC_NETDEV gives the server the memif server role
# at 10.78.0.1 and the client the client role at 10.78.0.2 (ARP over memif). The tools' TCP side
# channel (dtest) stays on 127.0.0.1; tools without one (dtestsrq) take the server as -h 10.78.0.1.
#
#   memif_pair.sh BUILD_DIR HAVE_DPDK READY SUCCESS [--listen-port N] -- SERVER... -- CLIENT...
#
# Exit 77 (SKIPPED) without DPDK in the build or without the tool. Removes the memif socket
# directory and the EAL runtime directories it made, whatever happens.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$1 have_dpdk=$2 ready=$3 success=$4
shift 4
pass=()
if [[ ${1:-} == --listen-port ]]; then pass=(--listen-port "$2"); shift 2; fi
[[ ${1:-} == -- ]] || { echo "usage: $0 BUILD_DIR HAVE_DPDK READY SUCCESS [--listen-port N] -- SERVER... -- CLIENT..."; exit 2; }
shift
server=()
while [[ $# -gt 0 && $1 != -- ]]; do server+=("$1"); shift; done
shift
client=("$@")

skip() { echo "SKIPPED: $*"; exit 77; }
[[ $have_dpdk == 1 || $have_dpdk == TRUE ]] || skip "softrnic was built without DPDK (install libdpdk-dev and rebuild)"
command -v "${server[0]}" >/dev/null || skip "${server[0]} not installed (apt-get install dapl2-utils)"
[[ -f $build/dat.conf ]] || { echo "FAIL: $build/dat.conf not found"; exit 1; }

if [[ $(id -u) -eq 0 ]]; then rundir=/var/run/dpdk; else rundir=${XDG_RUNTIME_DIR:-/tmp}/dpdk; fi
tag=srt$$
dir=$("$repo/scripts/memif_dir.sh" make)
cleanup() {
  "$repo/scripts/memif_dir.sh" remove "$dir"
  rm -rf "$rundir/${tag}_s" "$rundir/${tag}_c"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# 2 cores: the server's EAL lcore is 1, the client's 0 (the consumer threads keep their affinity).
srv="netdev=dpdk ip=10.78.0.1 dpdk_vdev=net_memif0;role=server;socket=$dir/memif.sock dpdk_lcore=1 dpdk_prefix=${tag}_s mtu=9000"
cli="netdev=dpdk ip=10.78.0.2 dpdk_vdev=net_memif0;role=client;socket=$dir/memif.sock dpdk_lcore=0 dpdk_prefix=${tag}_c mtu=9000"
[[ $(nproc) -ge 2 ]] || srv=${srv/dpdk_lcore=1/dpdk_lcore=0}
# MEMIF_SRV_EXTRA / MEMIF_CLI_EXTRA: more netdev keys for one side (e.g. mac=, neigh=)
srv+=${MEMIF_SRV_EXTRA:+ $MEMIF_SRV_EXTRA}
cli+=${MEMIF_CLI_EXTRA:+ $MEMIF_CLI_EXTRA}
echo "server SOFTRNIC_NETDEV: $srv"
echo "client SOFTRNIC_NETDEV: $cli"
# MEMIF_PAIR_PCAP=1: the server's pcap tap records its real frames (ARP included); the capture
# must then pass the shared validate.py and tools/wirecheck_softrnic.py.
srv_env=(SOFTRNIC_NETDEV="$srv")
[[ ${MEMIF_PAIR_PCAP:-0} == 1 ]] && srv_env+=(SOFTRNIC_PCAP="$dir/server.pcap")
SOFTRNIC_STATS=1 "$repo/tests/dat/run_pair.sh" "$build/dat.conf" "$ready" "$success" "${pass[@]}" \
  -- env "${srv_env[@]}" "${server[@]}" -- env SOFTRNIC_NETDEV="$cli" "${client[@]}" 2>&1 | tee "$dir/pair.log"
rc=${PIPESTATUS[0]}
# MEMIF_PAIR_EXPECT: an extended regex that must appear in the output (e.g. a counter)
if [[ $rc -eq 0 && -n ${MEMIF_PAIR_EXPECT:-} ]] && ! grep -Eq -- "$MEMIF_PAIR_EXPECT" "$dir/pair.log"; then
  echo "FAIL: /$MEMIF_PAIR_EXPECT/ not in the output"
  exit 1
fi
if [[ $rc -eq 0 && ${MEMIF_PAIR_PCAP:-0} == 1 ]]; then
  wc_dir=${SOFTRNIC_WIRECHECK_DIR:-$repo/../shared/tools/wirecheck}
  if ! command -v tshark >/dev/null || [[ ! -f $wc_dir/validate.py ]]; then
    echo "note: tshark or $wc_dir/validate.py missing: the pcap tap's capture was not validated"
  else
    cap=$dir/server.pcap
    arp=$(tshark -r "$cap" -Y "arp" 2>/dev/null | wc -l)
    echo "pcap tap: $(tshark -r "$cap" 2>/dev/null | wc -l) frames, $arp ARP"
    /usr/bin/python3 "$wc_dir/validate.py" "$cap" | tail -n 3 || { echo "FAIL: validate.py rejected the pcap tap's capture"; exit 1; }
    /usr/bin/python3 "$repo/tools/wirecheck_softrnic.py" "$cap" --ports 5041-5104 --min-ddp 10 --min-cm 3 | tail -n 3 ||
      { echo "FAIL: wirecheck_softrnic.py rejected the pcap tap's capture"; exit 1; }
    ((arp >= 2)) || { echo "FAIL: no ARP request and reply in the pcap tap's capture"; exit 1; }
  fi
fi
exit $rc
