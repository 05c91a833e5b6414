#!/usr/bin/env python3
"""A/B: the same softrnic benchmarks from two builds, interleaved in one run (so both see the same
machine state), with a table of medians, p99 and spread per build and the ratio B/A.

  python3 tools/bench/ab.py --a BUILD_A --b BUILD_B [--runs 5] [--ia softrnic_iwarp]

BUILD_x: a build directory holding tools/softrnic_bench, the provider and its dat.conf (e.g.
scripts/bench.sh's build-bench at two commits: git worktree add /tmp/ab-a <commit>, then
cmake -S /tmp/ab-a -B /tmp/ab-a/build -DCMAKE_BUILD_TYPE=Release -DCMAKE_INTERPROCEDURAL_OPTIMIZATION=ON
and ninja softrnic_bench daplsoftrnic there). Rows: 64 B ping-pong (busy poll) latency, 64 KiB
RDMA Write stream throughput (64 KiB and 4 KiB), 64 B Send message rate (32 outstanding).
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import Softrnic  # noqa: E402

CASES = [
    ("pingpong 64 B (us, lower is better)", "pingpong", 64, 20000, 16, "median_us", "p99_us"),
    ("write_bw 64 KiB (MB/s, higher is better)", "write_bw", 65536, 20000, 16, "mbps", None),
    ("write_bw 4 KiB (MB/s, higher is better)", "write_bw", 4096, 100000, 16, "mbps", None),
    ("msgrate 64 B (msgs/s, higher is better)", "msgrate", 64, 100000, 32, "msgs_per_s", None),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--ia", default="softrnic_iwarp")
    o = ap.parse_args()
    stacks = {"A": Softrnic(o.a, ia=o.ia), "B": Softrnic(o.b, ia=o.ia)}
    for k, s in stacks.items():
        if not s.available():
            sys.exit(f"ab: no {s.exe} for {k}")
    print(f"A = {o.a}\nB = {o.b}\nia = {o.ia}, {o.runs} interleaved runs per build\n")
    print(f"{'case':42} {'build':5} {'median':>10} {'p99':>10} {'min':>10} {'max':>10}")
    for title, test, size, iters, window, key, p99key in CASES:
        got = {"A": [], "B": []}
        p99 = {"A": [], "B": []}
        for r in range(o.runs):
            for k in ("A", "B") if r % 2 == 0 else ("B", "A"):
                res = stacks[k].run(test, size, iters, window=window)
                got[k].append(res[key])
                if p99key:
                    p99[k].append(res[p99key])
        for k in ("A", "B"):
            v = got[k]
            p = f"{statistics.median(p99[k]):10.2f}" if p99[k] else f"{'-':>10}"
            print(f"{title:42} {k:5} {statistics.median(v):10.2f} {p} {min(v):10.2f} {max(v):10.2f}")
        ratio = statistics.median(got["B"]) / statistics.median(got["A"])
        print(f"{'':42} {'B/A':5} {ratio:10.3f}\n")


if __name__ == "__main__":
    main()
