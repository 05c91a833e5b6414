#!/usr/bin/env bash
# The benchmark beside its peers (tools/bench/bench.py): installs what it needs (the project's
# packages, and ucx-utils, libfabric-bin, gnuplot-nox for the peers and plots), builds, runs.
#   bash scripts/bench.sh [bench.py options: --runs N --quick --only pingpong,... --tcp-only|--no-tcp --out DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
extra=()
for p in ucx-utils libfabric-bin gnuplot-nox; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || extra+=("$p")
done
if ((${#extra[@]})); then
  echo "bench: installing ${extra[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${extra[@]}"
fi
# What is measured is an optimised build of its own (-O3, link-time optimisation), as a user
# would deploy it; the test build (build/) keeps -O2 -g. Only the benchmark's targets are built.
dir="$root/build-bench"
cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INTERPROCEDURAL_OPTIMIZATION=ON >/dev/null
ninja -C "$dir" -j "$(nproc)" softrnic_bench softrnic_udp_peer softrnic_tcp_peer softrnic_netdev_pingpong daplsoftrnic \
  softrnic_scalebench softrnic_lossbench softrnic_ibverbs
cd "$root"
exec python3 tools/bench/bench.py --build "$dir" --out "${BENCH_OUT:-bench-out}" "$@"
