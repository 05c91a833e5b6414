#!/usr/bin/env python3
"""The performance targets' rows (docs/performance.md, "A table per kind of host"), each a pair of
stacks run alternately, round by round, so that both of a round see the same state of a noisy host;
a row's figure is the median over the rounds of that round's ratio, with the rounds' spread.

  python3 tools/bench/targets.py --build build [--rounds 9] [--only ROW,ROW]

Rows (softrnic / peer; < 1 is better for round trips, > 1 for throughput):
  udp_pp64     DAT 64 B ping-pong over the udp wire / kernel UDP ping-pong
  udp_w4k      DAT 4 KiB Write stream over the udp wire / kernel UDP stream of 4 KiB datagrams
  roce_pp64    DAT 64 B ping-pong over RoCEv2 / the same over the udp wire
  roce_w64k    DAT 64 KiB Write stream over RoCEv2 / the same over the udp wire
  roce_rate    DAT 64 B Send message rate over RoCEv2 / the same over the udp wire
  tcp_w4k      DAT 4 KiB Write stream over MPA/TCP / kernel TCP stream of 4 KiB messages
  tcp_w64k     DAT 64 KiB Write stream over MPA/TCP / kernel TCP stream of 64 KiB messages
  memif_pp64   DAT 64 B ping-pong over DPDK memif / the dpdk netdev's own ping-pong (root, DPDK)
  send_lat_memif  perftest ib_send_lat 64 B over softrnic's libibverbs on a memif pair (RoCEv2) / kernel
               UDP ping-pong, DAT --wait-send over RoCEv2 on memif, the dpdk netdev's own ping-pong
               (root, DPDK)
  send_lat     perftest ib_send_lat 64 B over softrnic's libibverbs / DAT --wait-send, kernel UDP,
               kernel UDP with a 20 B datagram behind each message (sendmmsg; one GSO send)
  verbs_w4k, verbs_w64k  perftest ib_write_bw 4 KiB / 64 KiB over softrnic's libibverbs (out of band,
               128 outstanding) / DAT Write stream over RoCEv2 (window 16) (issue 31)
  ucx_put64k   ucx_perftest UCP put_bw 64 KiB over softrnic (rc_verbs) / the same over UCX's tcp (issue 32)
  ucx_lat64    ucx_perftest UCP tag_lat 64 B over softrnic / over UCX's tcp (issue 32)
  uct_am64     ucx_perftest UCT am_lat 64 B (bcopy) over rc_verbs on softrnic / over UCX's tcp (issue 32)
  qperf_lat64  qperf rc_lat 64 B (-cm1) over softrnic / qperf tcp_lat (issue 32)
  verbs_w4k_memif, verbs_w64k_memif  verbs_w4k and verbs_w64k on a memif pair (root, DPDK)
  uct_am64_memif, ucx_lat64_memif  uct_am64 and ucx_lat64 with softrnic's device on a memif pair
               (RoCEv2 on the dpdk netdev) / UCX's tcp (root, DPDK)
The host (CPU model, cores, kernel) heads the output, as in bench.py.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import memif_env  # noqa: E402
import peers  # noqa: E402

KIB = 1024


def rows(build):
    """name -> [(stack, callable returning the figure)]; the first stack is softrnic's, the rest peers."""
    udp = bench.Softrnic(build)
    roce = bench.Softrnic(build, ia=bench.ROCE_IA, label="softrnic-roce")
    tcp = bench.Softrnic(build, ia=bench.TCP_IA, label="softrnic-tcp")
    out = {
        "udp_pp64": [("softrnic-udp", lambda: udp.run("pingpong", 64, 20000)["median_us"]),
                     ("kernel-udp", lambda: peers.udp_pingpong(build, 64, 20000)["median_us"])],
        "udp_w4k": [("softrnic-udp", lambda: udp.run("write_bw", 4 * KIB, 65536)["mbps"]),
                    ("kernel-udp stream", lambda: peers.udp_stream(build, 4 * KIB, 256 << 20)["mbps"])],
        "roce_pp64": [("softrnic-roce", lambda: roce.run("pingpong", 64, 20000)["median_us"]),
                      ("softrnic-udp", lambda: udp.run("pingpong", 64, 20000)["median_us"])],
        "roce_w64k": [("softrnic-roce", lambda: roce.run("write_bw", 64 * KIB, 16384)["mbps"]),
                      ("softrnic-udp", lambda: udp.run("write_bw", 64 * KIB, 16384)["mbps"])],
        "roce_rate": [("softrnic-roce", lambda: roce.run("msgrate", 64, 200000, window=32)["msgs_per_s"]),
                      ("softrnic-udp", lambda: udp.run("msgrate", 64, 200000, window=32)["msgs_per_s"])],
        "tcp_w4k": [("softrnic-tcp", lambda: tcp.run("write_bw", 4 * KIB, 131072)["mbps"]),
                    ("kernel-tcp stream", lambda: peers.tcp_stream(build, 4 * KIB, 512 << 20)["mbps"])],
        "tcp_w64k": [("softrnic-tcp", lambda: tcp.run("write_bw", 64 * KIB, 16384)["mbps"]),
                     ("kernel-tcp stream", lambda: peers.tcp_stream(build, 64 * KIB, 1 << 30)["mbps"])],
        "send_lat": [("ib_send_lat", lambda: peers.perftest_lat(build, 64, 20000)["median_us"]),
                     ("DAT wait-send", lambda: roce.run("pingpong", 64, 20000, wait_send=True)["median_us"]),
                     ("kernel-udp", lambda: peers.udp_pingpong(build, 64, 20000)["median_us"]),
                     ("kernel-udp +20 B", lambda: peers.udp_pingpong(build, 64, 20000, "busy", 20)["median_us"]),
                     ("kernel-udp +20 B GSO",
                      lambda: peers.udp_pingpong(build, 64, 20000, "busy", 20, True)["median_us"])],
        "verbs_w4k": [("ib_write_bw", lambda: peers.perftest_bw(build, "ib_write_bw", 4 * KIB, 100000)["mbps"]),
                      ("DAT roce", lambda: roce.run("write_bw", 4 * KIB, 65536)["mbps"])],
        "verbs_w64k": [("ib_write_bw", lambda: peers.perftest_bw(build, "ib_write_bw", 64 * KIB, 16384)["mbps"]),
                       ("DAT roce", lambda: roce.run("write_bw", 64 * KIB, 16384)["mbps"])],
        "ucx_put64k": [("ucx-roce", lambda: peers.ucx_put_bw(64 * KIB, 20000, build)["mbps"]),
                       ("ucx-tcp", lambda: peers.ucx_put_bw(64 * KIB, 20000)["mbps"])],
        "ucx_lat64": [("ucx-roce", lambda: peers.ucx_tag_lat(64, 20000, build)["median_us"]),
                      ("ucx-tcp", lambda: peers.ucx_tag_lat(64, 20000)["median_us"])],
        "uct_am64": [("uct rc_verbs", lambda: peers.ucx_am_lat(64, 20000, build)["median_us"]),
                     ("uct tcp", lambda: peers.ucx_am_lat(64, 20000)["median_us"])],
        "qperf_lat64": [("qperf rc_lat", lambda: peers.qperf_lat("rc_lat", 64, build)["median_us"]),
                        ("qperf tcp_lat", lambda: peers.qperf_lat("tcp_lat", 64)["median_us"])],
    }
    try:
        mem = memif_env.stack(build, bench.Softrnic)
        out["memif_pp64"] = [("softrnic-memif", lambda: mem.run("pingpong", 64, 20000)["median_us"]),
                             ("bare memif", lambda: memif_env.netdev_pingpong(build, 64, 20000)["median_us"])]
        mem_roce = memif_env.stack(build, lambda b, label: bench.Softrnic(b, ia=bench.ROCE_IA, label=label))
        out["send_lat_memif"] = [
            ("ib_send_lat memif", lambda: memif_env.perftest_lat(build, 64, 20000)["median_us"]),
            ("kernel-udp", lambda: peers.udp_pingpong(build, 64, 20000)["median_us"]),
            ("DAT wait-send memif", lambda: mem_roce.run("pingpong", 64, 20000, wait_send=True)["median_us"]),
            ("bare memif", lambda: memif_env.netdev_pingpong(build, 64, 20000)["median_us"])]
        out["verbs_w4k_memif"] = [
            ("ib_write_bw memif", lambda: memif_env.perftest_bw(build, "ib_write_bw", 4 * KIB, 100000)["mbps"]),
            ("DAT roce memif", lambda: mem_roce.run("write_bw", 4 * KIB, 65536)["mbps"])]
        out["verbs_w64k_memif"] = [
            ("ib_write_bw memif", lambda: memif_env.perftest_bw(build, "ib_write_bw", 64 * KIB, 16384)["mbps"]),
            ("DAT roce memif", lambda: mem_roce.run("write_bw", 64 * KIB, 16384)["mbps"])]
        out["uct_am64_memif"] = [
            ("uct rc_verbs memif", lambda: memif_env.ucx_lat(build, "am_lat", 64, 20000)["median_us"]),
            ("uct tcp", lambda: peers.ucx_am_lat(64, 20000)["median_us"])]
        out["ucx_lat64_memif"] = [
            ("ucx-roce memif", lambda: memif_env.ucx_lat(build, "tag_lat", 64, 20000)["median_us"]),
            ("ucx-tcp", lambda: peers.ucx_tag_lat(64, 20000)["median_us"])]
    except Exception as e:
        print(f"targets: no memif row: {e}", file=sys.stderr)
    return out


def measure(stacks, rounds):
    """Per round, every stack's figure (None where it failed)."""
    got = []
    for r in range(rounds):
        fig = {}
        for name, fn in stacks:
            try:
                fig[name] = fn()
            except Exception as e:  # a stack that breaks must not stop the others
                print(f"targets: {name} failed: {e}", file=sys.stderr)
                fig[name] = None
        got.append(fig)
        print(f"  {time.strftime('%H:%M:%S')} round {r + 1}: " +
              ", ".join(f"{k} {v:.4g}" if v else f"{k} -" for k, v in fig.items()), file=sys.stderr, flush=True)
    return got


def report(name, stacks, got):
    ours = stacks[0][0]
    for peer, _ in stacks:
        vals = [f[peer] for f in got if f.get(peer)]
        if not vals:
            print(f"{name:11s} {peer:22s} -")
            continue
        line = f"{name:11s} {peer:22s} median {statistics.median(vals):10.4g}  runs {min(vals):.4g}-{max(vals):.4g}"
        if peer != ours:
            ratios = [f[ours] / f[peer] for f in got if f.get(ours) and f.get(peer)]
            if ratios:
                line += (f"  {ours}/{peer} {statistics.median(ratios):.2f}x"
                         f" ({min(ratios):.2f}-{max(ratios):.2f}, {len(ratios)} rounds)")
        print(line, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    h = bench.host_facts()
    print(f"host: {h['cpu']}, {h['cores']} cores, Linux {h['kernel']}")
    only = [x for x in a.only.split(",") if x]
    for name, stacks in rows(build).items():
        if only and name not in only:
            continue
        report(name, stacks, measure(stacks, a.rounds))


if __name__ == "__main__":
    main()
