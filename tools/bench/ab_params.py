#!/usr/bin/env python3
"""A/B by IA parameters in one build: the same softrnic benchmarks over IAs that differ only in
their ia_params (e.g. batch_posts=0 udp_gso=0 against the defaults), interleaved run by run in one
process (so every variant sees the same machine state), with raw kernel UDP (softrnic_udp_peer)
beside them in the same runs.

  python3 tools/bench/ab_params.py BUILD RUNS NAME=PARAMS [NAME=PARAMS ...] [case:TEST:SIZE[:POLL] ...]

BUILD: a build directory with tools/softrnic_bench, tools/softrnic_udp_peer and the provider
(scripts/bench.sh's build-bench). NAME=PARAMS: an IA name and the ia_params added to
"netdev=udp ip=127.0.0.1 port=5041" (written to a dat.conf of its own, /tmp/ab_params.conf).
case: TEST is pingpong, write_bw or msgrate; POLL busy (default), wait or cno. Default cases:
write_bw:4096 write_bw:65536 pingpong:64. Prints per case and variant the median, min, max and
every run's figure (MB/s, round-trip µs, or messages/s); the udp-peer row is the raw kernel UDP
stream (write_bw) or ping-pong (pingpong) of the same size.
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import Softrnic  # noqa: E402
import peers  # noqa: E402


def main():
    if len(sys.argv) < 4 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help") else 2)
    build, runs = os.path.abspath(sys.argv[1]), int(sys.argv[2])
    variants = [a.split("=", 1) for a in sys.argv[3:] if "=" in a and not a.startswith("case:")]
    cases = [a[5:] for a in sys.argv[3:] if a.startswith("case:")] or ["write_bw:4096", "write_bw:65536",
                                                                      "pingpong:64"]
    lib = os.path.join(build, "dat", "libdaplsoftrnic.so.2.0.0")
    conf = "/tmp/ab_params.conf"
    with open(conf, "w") as f:
        for name, params in variants:
            f.write(f'{name} u2.0 nonthreadsafe default {lib} dapl.2.0 "netdev=udp ip=127.0.0.1 port=5041 {params}" ""\n')
    stacks = {}
    for name, _ in variants:
        s = Softrnic(build, ia=name)
        s.env["DAT_OVERRIDE"] = conf
        stacks[name] = s
    for case in cases:
        parts = case.split(":")
        test, size = parts[0], int(parts[1])
        poll = parts[2] if len(parts) > 2 else "busy"
        iters = 20000 if test == "pingpong" else 100000 if test == "msgrate" else max(64, (128 << 20) // size)
        key = {"pingpong": "median_us", "msgrate": "msgs_per_s"}.get(test, "mbps")
        got = {n: [] for n in list(stacks) + ["udp-peer"]}
        for r in range(runs):
            order = list(stacks) if r % 2 == 0 else list(reversed(list(stacks)))
            for n in order:
                res = stacks[n].run(test, size, iters, window=32 if test == "msgrate" else 16, poll=poll)
                got[n].append(res[key])
            if test == "write_bw":
                got["udp-peer"].append(peers.udp_stream(build, size, size * iters)["mbps"])
            elif test == "pingpong":
                mode = "busy" if poll == "busy" else "block"
                got["udp-peer"].append(peers.udp_pingpong(build, size, iters, mode)["median_us"])
        print(f"\n{case} ({key})")
        for n, v in got.items():
            if v:
                runs_txt = " ".join(f"{x:.1f}" for x in v)
                print(f"  {n:24} median {statistics.median(v):12.2f}  min {min(v):12.2f}  max {max(v):12.2f}  "
                      f"runs {runs_txt}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
