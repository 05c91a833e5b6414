#!/usr/bin/env bash
# Installs what softrnic needs from Debian 12's archive (as root), when something is missing.
set -euo pipefail
pkgs=(cmake ninja-build g++ pkg-config git python3 libboost-dev libgtest-dev libdapl-dev dapl2-utils libisal-dev
      tshark iproute2 libdpdk-dev dpdk libpcap-dev ethtool libcli11-dev libsodium-dev zlib1g-dev
      dpkg-dev file go-md2man groff-base nlohmann-json3-dev)
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
