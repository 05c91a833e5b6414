#!/usr/bin/env bash
# Installs what softrnic needs from Debian 12's archive (as root), when something is missing.
#   scripts/setup.sh          everything: build, tests, DPDK, packaging (the test command)
#   scripts/setup.sh --demo   only what building the libraries and the demo needs (the main job)
set -euo pipefail
# What configuring and building the libraries and tools needs (the DPDK backend is optional).
pkgs=(cmake ninja-build g++ pkg-config libboost-dev libdapl-dev libisal-dev libpcap-dev libcli11-dev libsodium-dev
      zlib1g-dev nlohmann-json3-dev)
if [[ ${1:-} != --demo ]]; then
  pkgs+=(git python3 libgtest-dev dapl2-utils tshark iproute2 libdpdk-dev dpdk ethtool dpkg-dev file go-md2man
         groff-base
         # the verbs door: rdma-core's headers (its ABI reference), and the programs that judge it
         libibverbs-dev librdmacm-dev ibverbs-utils perftest rdmacm-utils qperf ucx-utils libfabric-bin
         openmpi-bin libopenmpi-dev)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
