#!/usr/bin/env python3
"""softrnic benchmark: latency, bandwidth, message rate and CPU cost of the soft RNIC through the
DAT API between two processes, beside peers measured in the same run (raw kernel UDP, UCX over
TCP, libfabric tcp and udp;ofi_rxd), so every figure has a ratio. softrnic over its second wire,
iWARP over MPA/TCP (IA softrnic_iwarp_tcp), has rows of its own (ping-pong, RDMA Write and Read
streaming) beside raw kernel TCP (softrnic_tcp_peer). The machine is shared and noisy: read the
ratios.

Each case runs --runs times; a table row gives the median over runs of each run's figure, the p99
and p99.9 (ping-pong: over the round trips of all runs), and the min-max of the run medians.
Writes <out>/results.csv (one line per run) and <out>/latency.png, <out>/bandwidth.png (gnuplot).

  python3 tools/bench/bench.py --build build [--runs 3] [--quick] [--out bench-out] [--only BENCHES]
                               [--tcp-only | --no-tcp]
"""
import argparse
import csv
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import memif_env  # noqa: E402  (tools/bench/memif_env.py)

try:
    import peers  # noqa: E402  (tools/bench/peers.py)
except ImportError as e:  # pragma: no cover
    peers = None
    print(f"bench: peers not available ({e}): softrnic alone", file=sys.stderr)

KIB = 1024
MIB = 1024 * 1024
BENCH_QUAL = 0xB3C4  # softrnic_bench's default --qual
TCP_IA = "softrnic_iwarp_tcp"  # softrnic over MPA/TCP (wire=tcp), in the generated dat.conf
ROCE_IA = "softrnic_roce"  # softrnic over RoCEv2 (wire=roce: UDP 4791, IB CM), in the generated dat.conf


def progress(msg):
    """One progress line, rewritten in place on a terminal."""
    if sys.stderr.isatty():
        sys.stderr.write("\r\033[K" + msg)
    else:
        sys.stderr.write(msg + "\n")
    sys.stderr.flush()


class Softrnic:
    """Runs softrnic_bench server and client processes (DAT over the IA of a dat.conf line)."""

    def __init__(self, build, ia="softrnic_iwarp", env_extra=None, label="softrnic-udp"):
        self.exe = os.path.join(build, "tools", "softrnic_bench")
        self.env = dict(os.environ, DAT_OVERRIDE=os.path.join(build, "dat.conf"))
        self.env.pop("SOFTRNIC_IMPAIR", None)
        if env_extra:
            self.env.update(env_extra)
        self.ia = ia
        self.label = label
        self.server_env = None  # per-role environment (memif roles), when set
        self.client_env = None

    def available(self):
        return os.access(self.exe, os.X_OK)

    def ia_configured(self):
        """True when the dat.conf that DAT_OVERRIDE names has a line for our IA."""
        try:
            with open(self.env["DAT_OVERRIDE"]) as f:
                return any(line.split()[:1] == [self.ia] for line in f)
        except OSError:
            return False

    def run(self, test, size, iters, window=16, poll="busy", timeout=120, warmup=None, signaled=False,
            wait_send=False):
        args = ["--ia", self.ia, "--test", test, "--size", str(size), "--iters", str(iters),
                "--window", str(window), "--poll", poll] + (["--signaled"] if signaled else []) + \
            (["--wait-send"] if wait_send else [])
        if warmup is not None:
            args += ["--warmup", str(warmup)]
        srv = subprocess.Popen([self.exe, "server"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=self.server_env or self.env, start_new_session=True)
        try:
            line = srv.stdout.readline()
            if not line.startswith("READY"):
                srv.kill()
                err = srv.stderr.read()
                raise RuntimeError(f"server did not start: {line.strip()} {err.strip()}")
            host, port = line.split()[1].rsplit(":", 1)
            if port == "0":
                # Over MPA/TCP the IA address has no port of its own: dat_ep_connect goes to the TCP port of
                # the connection qualifier (softrnic_bench's default, 0xB3C4, is port 46020) and ignores
                # the address's port, but softrnic_bench's client wants a nonzero --port.
                port = str(BENCH_QUAL)
            cli = subprocess.run([self.exe, "client", "--host", host, "--port", port] + args, capture_output=True,
                                 text=True, env=self.client_env or self.env, timeout=timeout)
            if cli.returncode != 0:
                raise RuntimeError(f"client failed: {cli.stderr.strip()}")
            res = json.loads(cli.stdout.strip().splitlines()[-1])
            out, _ = srv.communicate(timeout=15)
            server = json.loads(out.strip().splitlines()[-1])
            if server.get("msgs"):
                res["server_cpu_us_per_msg"] = server["cpu_us"] / server["msgs"]
            if "cpu_pct" in server:
                res["server_cpu_pct"] = server["cpu_pct"]
            return res
        finally:
            if srv.poll() is None:
                os.killpg(srv.pid, signal.SIGKILL)
                srv.wait()


def udp_netdev_pingpong(build, size, iters, timeout=60):
    """Round trips through the udp netdev alone (no RNIC, no DAT): where the RNIC's cost starts."""
    return memif_env.run_netdev_pingpong(build, "netdev=udp port=7100", "netdev=udp port=7200", size, iters,
                                         timeout=timeout)


def peer_call(name, *args):
    """A peer's measurement, or None when the peer (or its tool) is not there."""
    fn = getattr(peers, name, None) if peers else None
    if fn is None:
        return None
    try:
        return fn(*args)
    except Exception as e:  # a peer that breaks must not stop the benchmark
        print(f"\nbench: peer {name} failed: {e}", file=sys.stderr)
        return None


def cases(quick, build):
    """(bench, size, [(stack, callable)]) with iteration counts sized for a few minutes on 2 cores."""
    pp_sizes = [8, 64, 1 * KIB, 8 * KIB, 64 * KIB] if not quick else [64, 64 * KIB]
    bw_sizes = [4 * KIB, 64 * KIB, 1 * MIB, 4 * MIB] if not quick else [64 * KIB]
    pp_iters = 3000 if not quick else 1000
    out = []
    for size in pp_sizes:
        it = pp_iters if size <= 8 * KIB else pp_iters // 3
        out.append(("pingpong", size, it))
    for bench in ("write_bw", "read_bw"):
        for size in bw_sizes:
            total = (128 if not quick else 32) * MIB
            out.append((bench, size, max(32, total // size)))
    out.append(("msgrate", 64, 100000 if not quick else 20000))
    out.append(("idle", 0, 3000 if not quick else 1000))  # ms connected and idle
    return out


def measure(stacks, bench, size, iters):
    """Stacks that run this bench: name -> callable() returning a result dict or None. stacks["rows"]:
    "all", "tcp" (only the MPA/TCP rows) or "no-tcp" (all but them)."""
    m = {}
    if stacks["rows"] != "tcp":
        measure_udp(m, stacks, bench, size, iters)
    if stacks["rows"] != "no-tcp" and stacks.get("tcp"):
        measure_tcp(m, stacks, bench, size, iters)
    return {k: v for k, v in m.items() if v is not None}


def measure_tcp(m, stacks, bench, size, iters):
    """softrnic over MPA/TCP beside raw kernel TCP: the same sizes, windows and poll modes as the UDP rows."""
    st, build = stacks["tcp"], stacks["build"]
    if bench == "pingpong":
        m["softrnic-tcp"] = lambda: st.run("pingpong", size, iters)
        m["softrnic-tcp (wait)"] = (lambda: st.run("pingpong", size, iters, poll="wait")) if size == 64 else None
        m["kernel-tcp"] = lambda: peer_call("tcp_pingpong", build, size, iters, "busy")
        if size == 64:
            m["kernel-tcp (block)"] = lambda: peer_call("tcp_pingpong", build, size, iters, "block")
    elif bench in ("write_bw", "read_bw"):
        m["softrnic-tcp"] = lambda: st.run(bench, size, iters, window=16 if size <= MIB else 4)
        m["kernel-tcp stream"] = lambda: peer_call("tcp_stream", build, size, size * iters)


def measure_udp(m, stacks, bench, size, iters):
    """softrnic over its UDP wire, the memif rows and every other peer."""
    sr = stacks["softrnic"]
    if bench == "pingpong":
        m["softrnic-udp"] = lambda: sr.run("pingpong", size, iters)
        m["softrnic-udp (wait)"] = (lambda: sr.run("pingpong", size, iters, poll="wait")) if size == 64 else None
        # event-driven: dat_evd_dequeue until empty, then dat_cno_wait (no peer row of its own)
        m["softrnic-udp (cno)"] = (lambda: sr.run("pingpong", size, iters, poll="cno")) if size == 64 else None
        # Sends that ask for their completion, as most DAT consumers post (no peer row of its kind)
        m["softrnic-udp (signaled)"] = (lambda: sr.run("pingpong", size, iters, signaled=True)) if size == 64 else None
        if size <= 65000:  # one datagram each way
            m["kernel-udp"] = lambda: peer_call("udp_pingpong", stacks["build"], size, iters, "busy")
            if size == 64:
                m["kernel-udp (block)"] = lambda: peer_call("udp_pingpong", stacks["build"], size, iters, "block")
            m["udp netdev, no RNIC"] = lambda: udp_netdev_pingpong(stacks["build"], size, iters)
        m["ucx-tcp tag_lat"] = lambda: peer_call("ucx_tag_lat", size, iters)
        # UCX on softrnic (UCP over rc_verbs + ud_verbs through softrnic's libibverbs), against UCX's tcp
        m["ucx-roce tag_lat"] = lambda: peer_call("ucx_tag_lat", size, iters, stacks["build"])
        if size == 64:
            # qperf: RC over softrnic (rdma_cm) against kernel TCP, both qperf's own means
            m["qperf rc_lat"] = lambda: peer_call("qperf_lat", "rc_lat", size, stacks["build"])
            m["qperf tcp_lat"] = lambda: peer_call("qperf_lat", "tcp_lat", size)
        m["fi tcp"] = lambda: peer_call("fi_pingpong", "tcp", size, iters)
        m["fi udp;ofi_rxd"] = lambda: peer_call("fi_pingpong", "udp;ofi_rxd", size, iters)
        if stacks.get("roce"):
            m["softrnic-roce"] = lambda: stacks["roce"].run("pingpong", size, iters)
            # the verbs door on the same wire: perftest, unmodified (docs/verbs.md), beside DAT doing what
            # ib_send_lat does: each Send signaled, its completion (its ACK) awaited before the reply
            m["softrnic-roce (wait-send)"] = lambda: stacks["roce"].run("pingpong", size, iters, wait_send=True)
            m["verbs-roce ib_send_lat"] = lambda: peer_call("perftest_lat", stacks["build"], size, iters)
            m["verbs-roce ib_send_lat -R"] = lambda: peer_call("perftest_lat", stacks["build"], size, iters,
                                                               "ib_send_lat", True)
            # a consumer that spins on its own memory for the peer's Write, not on a CQ
            m["verbs-roce ib_write_lat"] = lambda: peer_call("perftest_lat", stacks["build"], size, iters,
                                                             "ib_write_lat")
            if size == 64:
                # what the kernel alone costs for ib_send_lat's datagrams: each message with a 20-byte
                # datagram (its ACK) behind it in one sendmmsg, each side answering once it has both
                m["kernel-udp (+20 B ACK)"] = lambda: peer_call("udp_pingpong", stacks["build"], size, iters, "busy",
                                                                20)
                # the same pair as one GSO send, read whole with UDP_GRO: how softrnic's RoCEv2 sends
                # and reads it (udp_gso_pairs)
                m["kernel-udp (+20 B ACK, GSO)"] = lambda: peer_call("udp_pingpong", stacks["build"], size, iters,
                                                                     "busy", 20, True)
        if stacks.get("roce_memif") and size <= 8000:
            m["softrnic-roce-memif"] = lambda: stacks["roce_memif"].run("pingpong", size, iters)
            # the verbs door on DPDK: perftest and UCX, unmodified, a RoCEv2 device on each end of a memif pair
            m["verbs-roce-memif ib_send_lat"] = lambda: memif_env.perftest_lat(stacks["build"], size, iters)
            m["ucx-roce-memif tag_lat"] = lambda: memif_env.ucx_lat(stacks["build"], "tag_lat", size, iters)
        if stacks.get("memif") and size <= 8000:
            m["softrnic-dpdk-memif"] = lambda: stacks["memif"].run("pingpong", size, iters)
            m["dpdk-memif netdev, no RNIC"] = lambda: memif_env.netdev_pingpong(stacks["build"], size, iters)
    elif bench in ("write_bw", "read_bw"):
        m["softrnic-udp"] = lambda: sr.run(bench, size, iters, window=16 if size <= MIB else 4)
        m["kernel-udp stream"] = lambda: peer_call("udp_stream", stacks["build"], size, size * iters)
        if bench == "write_bw":
            m["ucx-tcp put_bw"] = lambda: peer_call("ucx_put_bw", size, iters)
            m["ucx-tcp tag_bw"] = lambda: peer_call("ucx_tag_bw", size, iters)
            m["ucx-roce put_bw"] = lambda: peer_call("ucx_put_bw", size, iters, stacks["build"])
            m["ucx-roce tag_bw"] = lambda: peer_call("ucx_tag_bw", size, iters, stacks["build"])
        if stacks.get("roce"):
            m["softrnic-roce"] = lambda: stacks["roce"].run(bench, size, iters, window=16 if size <= MIB else 4)
            m[f"verbs-roce ib_{bench}"] = lambda: peer_call("perftest_bw", stacks["build"], f"ib_{bench}", size, iters)
            m[f"verbs-roce ib_{bench} -R"] = lambda: peer_call("perftest_bw", stacks["build"], f"ib_{bench}", size,
                                                               iters, None, True)
            # the same window as the DAT row (perftest's own default keeps 128 in flight)
            win = 16 if size <= MIB else 4
            m[f"verbs-roce ib_{bench} -t {win}"] = lambda: peer_call("perftest_bw", stacks["build"], f"ib_{bench}",
                                                                     size, iters, win)
        if stacks.get("roce_memif"):
            m["softrnic-roce-memif"] = lambda: stacks["roce_memif"].run(bench, size, iters, window=16)
        if stacks.get("memif"):
            m["softrnic-dpdk-memif"] = lambda: stacks["memif"].run(bench, size, iters, window=16)
    elif bench == "idle":
        m["softrnic-udp"] = lambda: sr.run("idle", 0, iters)
    elif bench == "msgrate":
        m["softrnic-udp"] = lambda: sr.run("msgrate", size, iters, window=32)
        if stacks.get("roce"):
            m["softrnic-roce"] = lambda: stacks["roce"].run("msgrate", size, iters, window=32)
        m["kernel-udp stream"] = lambda: peer_call("udp_stream", stacks["build"], size, size * iters)
        m["ucx-tcp tag_bw"] = lambda: peer_call("ucx_tag_bw", size, iters)
        if stacks.get("memif"):
            m["softrnic-dpdk-memif"] = lambda: stacks["memif"].run("msgrate", size, iters, window=32)


def fmt(v, digits=1):
    return "-" if v is None else f"{v:.{digits}f}"


def summarize(bench, size, runs_by_stack):
    """Table rows for one case: per stack the median over runs, p99/p99.9, min-max, CPU, ratio."""
    key = {"pingpong": "median_us", "msgrate": "msgs_per_s", "idle": "cpu_pct"}.get(bench, "mbps")

    def figure(r):  # a run's figure; idle counts both processes
        return r[key] + r.get("server_cpu_pct", 0) if bench == "idle" else r[key]

    def median_of(runs, field):  # over the runs, when every run has the field (ping-pong percentiles)
        return statistics.median(r[field] for r in runs) if bench == "pingpong" and all(
            r and field in r for r in runs) else None

    rows = []
    for stack, runs in runs_by_stack.items():
        vals = [figure(r) for r in runs if r and key in r]
        if not vals:
            rows.append((stack, None, None, None, None, None))
            continue
        cpu = [r.get("cpu_us_per_msg", 0) + r.get("server_cpu_us_per_msg", 0) for r in runs if r and "cpu_us_per_msg" in r]
        rows.append((stack, statistics.median(vals), median_of(runs, "p99_us"), median_of(runs, "p999_us"),
                     (min(vals), max(vals)), statistics.median(cpu) if cpu else None))
    figures = {row[0]: row[1] for row in rows}
    out = []
    for row in rows:
        if row[0] in PAIRED:  # a stack on softrnic against the same stack on the kernel's sockets
            peer = figures.get(PAIRED[row[0]])
            out.append(row + ((row[1] / peer) if row[1] and peer else None,))
            continue
        ours = figures.get(reference(row[0]))
        out.append(row + ((ours / row[1]) if ours and row[1] and row[0] != reference(row[0]) else None,))
    return key, out


# Rows of a stack over softrnic whose ratio is taken against the same stack over kernel sockets in the
# same run (issue 32's targets: UCX put_bw on softrnic >= 1.5x UCX on tcp at 64 KiB, its latency no
# worse; qperf rc_lat no slower than qperf tcp_lat).
PAIRED = {"ucx-roce tag_lat": "ucx-tcp tag_lat", "ucx-roce put_bw": "ucx-tcp put_bw",
          "ucx-roce tag_bw": "ucx-tcp tag_bw", "qperf rc_lat": "qperf tcp_lat"}


def reference(stack):
    """The softrnic row a peer's ratio is taken against: the memif rows against softrnic over memif,
    the MPA/TCP rows (softrnic-tcp, kernel-tcp) against softrnic over MPA/TCP, the blocking rows against
    softrnic's blocking (dat_evd_wait) row of that wire, the rest against softrnic-udp; the event-driven
    (cno) and signaled rows have no peer of their kind and no ratio."""
    if stack.startswith("kernel-udp (+20 B ACK"):
        return "verbs-roce ib_send_lat"  # the kernel's floor for perftest's datagrams
    if stack.startswith("verbs-roce ib_send_lat"):
        return "softrnic-roce (wait-send)"  # the verbs door against DAT doing the same: what the door costs
    if stack.startswith("verbs-roce"):
        return "softrnic-roce"  # the verbs door against DAT on the same wire: what the door costs
    if stack.startswith("softrnic-roce"):
        return stack  # the RoCEv2 rows: their own; docs/performance.md gives them against kernel UDP and memif
    if "memif" in stack:
        return "softrnic-dpdk-memif"
    if "(cno)" in stack or "(signaled)" in stack:
        return stack
    wire = "softrnic-tcp" if stack.startswith(("softrnic-tcp", "kernel-tcp")) else "softrnic-udp"
    if "(wait)" in stack or "(block)" in stack:
        return f"{wire} (wait)"
    return wire


# Run medians of one stack further apart than this are marked: the host's state changed during the
# case (the bare memif round trip moves between ~2.1 and ~0.65 us, kernel UDP between ~8 and ~6 us),
# or the stack is unsteady there (UCX put_bw at 1 MiB).
STATE_CHANGE = 1.5


def print_table(bench, size, key, rows):
    unit = {"median_us": "RTT us", "mbps": "MB/s", "msgs_per_s": "msg/s", "cpu_pct": "% of a core"}[key]
    title = {"pingpong": "Send/Recv ping-pong round trip", "write_bw": "RDMA Write streaming",
             "read_bw": "RDMA Read streaming", "msgrate": "message rate (Sends, several outstanding)",
             "idle": "a connected pair, idle (both processes; target < 5 %)"}[bench]
    print(f"\n{title}, {size} B   (softrnic / peer, against the softrnic row of the same kind "
          f"(busy, wait, memif, tcp): "
          f"{'<1 means softrnic is faster' if bench == 'pingpong' else '>1 means softrnic is faster'})")
    print(f"  {'stack':24} {unit + ' p50':>12} {'p99':>10} {'p99.9':>10} {'min-max (run medians)':>24} {'cpu us/msg':>11} {'softrnic/peer':>14}")
    spread = []  # rows whose run medians differ by more than STATE_CHANGE
    for stack, med, p99, p999, mm, cpu, ratio in rows:
        mmtxt = "-" if mm is None else f"{mm[0]:.1f}-{mm[1]:.1f}"
        if mm is not None and mm[0] > 0 and mm[1] / mm[0] > STATE_CHANGE:
            mmtxt += " *"
            spread.append(stack)
        digits = 0 if key == "msgs_per_s" else 1
        rtxt = "-" if ratio is None else f"{ratio:.2f}x"
        print(f"  {stack:24} {fmt(med, digits):>12} {fmt(p99):>10} {fmt(p999):>10} {mmtxt:>24} {fmt(cpu, 2):>11} {rtxt:>14}")
    if spread:
        print(f"  * runs differ by more than {STATE_CHANGE}x ({', '.join(spread)}): the host's state changed during "
              f"this case or the stack is unsteady here; a ratio with such a row says little (docs/performance.md)")
    sys.stdout.flush()


def plot(out_dir, summary):
    """latency.png and bandwidth.png with gnuplot (when installed)."""
    if not shutil.which("gnuplot"):
        print("bench: gnuplot not installed (apt-get install gnuplot-nox): no plots", file=sys.stderr)
        return
    for bench, fname, ylabel, logy in (("pingpong", "latency", "round trip, us (median)", True),
                                       ("write_bw", "bandwidth", "RDMA Write / stream MB/s (median)", False)):
        stacks = sorted({s for (b, _sz, s) in summary if b == bench})
        if not stacks:
            continue
        dat = os.path.join(out_dir, f"{fname}.dat")
        with open(dat, "w") as f:
            for s in stacks:
                f.write(f'"{s}"\n')
                for (b, sz, st), v in sorted(summary.items(), key=lambda kv: kv[0][1]):
                    if b == bench and st == s and v is not None:
                        f.write(f"{sz} {v}\n")
                f.write("\n\n")
        plots = ", ".join(f"'{dat}' index {i} using 1:2 with linespoints title columnheader(1)" for i in range(len(stacks)))
        script = f"""set terminal pngcairo size 900,560 noenhanced
set output '{os.path.join(out_dir, fname + '.png')}'
set title 'softrnic and peers: {bench} (same run, same machine)'
set xlabel 'message size, bytes'
set ylabel '{ylabel}'
set logscale x 2
set format x '%.0b%B'
{'set logscale y' if logy else ''}
set key outside right
set grid
plot {plots}
"""
        r = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
        if r.returncode != 0:
            print(f"bench: gnuplot failed: {r.stderr.strip()}", file=sys.stderr)


def memif_stack(build):
    """softrnic over a DPDK memif pair, when the build has the dpdk netdev and we are root."""
    if os.geteuid() != 0:
        return None
    try:
        return memif_env.stack(build, Softrnic)
    except Exception as e:
        print(f"bench: no memif row: {e}", file=sys.stderr)
        return None


def roce_stacks(build):
    """softrnic over RoCEv2 (IA softrnic_roce) on kernel UDP, and over memif when it can run."""
    st = Softrnic(build, ia=ROCE_IA, label="softrnic-roce")
    if not st.ia_configured():
        print(f"bench: no RoCEv2 rows: {st.env['DAT_OVERRIDE']} has no {ROCE_IA} line", file=sys.stderr)
        return None, None
    try:
        mem = memif_env.stack(build, lambda b, label: Softrnic(b, ia=ROCE_IA, label=label))
        mem.label = "softrnic-roce-memif"
    except Exception as e:
        print(f"bench: no RoCEv2 memif row: {e}", file=sys.stderr)
        mem = None
    return st, mem


def tcp_stack(build):
    """softrnic over MPA/TCP (IA softrnic_iwarp_tcp), when the build's dat.conf has it."""
    st = Softrnic(build, ia=TCP_IA, label="softrnic-tcp")
    if not st.ia_configured():
        print(f"bench: no MPA/TCP rows: {st.env['DAT_OVERRIDE']} has no {TCP_IA} line", file=sys.stderr)
        return None
    return st


def host_facts():
    """Which host a figure comes from (the ratios differ by CPU: docs/performance.md keeps a table per
    kind of host): the CPU model, its core count and the kernel."""
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "kernel": os.uname().release}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="fewer sizes and iterations")
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--only", default="", help="comma-separated benches: pingpong,write_bw,read_bw,msgrate,idle")
    rows = ap.add_mutually_exclusive_group()
    rows.add_argument("--tcp-only", action="store_true",
                      help="only the MPA/TCP rows (softrnic-tcp beside kernel TCP: pingpong, write_bw, read_bw)")
    rows.add_argument("--no-tcp", action="store_true", help="all rows but the MPA/TCP ones")
    a = ap.parse_args()
    if a.runs < 1:
        ap.error("--runs must be at least 1")
    sr = Softrnic(a.build)
    if not sr.available():
        sys.exit(f"bench: {sr.exe} not built (bash scripts/build.sh {a.build})")
    os.makedirs(a.out, exist_ok=True)
    row_set = "tcp" if a.tcp_only else "no-tcp" if a.no_tcp else "all"
    stacks = {"softrnic": sr, "build": a.build, "rows": row_set,
              "memif": memif_stack(a.build) if row_set != "tcp" else None,
              "tcp": tcp_stack(a.build) if row_set != "no-tcp" else None}
    if row_set != "tcp":
        stacks["roce"], stacks["roce_memif"] = roce_stacks(a.build)
    if row_set == "tcp" and stacks["tcp"] is None:
        sys.exit("bench: --tcp-only, but no MPA/TCP stack")
    todo = [c for c in cases(a.quick, a.build) if not a.only or c[0] in a.only.split(",")]
    if row_set == "tcp":
        todo = [c for c in todo if c[0] in ("pingpong", "write_bw", "read_bw")]
    host = host_facts()
    print(f"softrnic benchmark: {a.runs} runs per case, {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"host: {host['cpu']}, {host['cores']} cores, Linux {host['kernel']}")
    summary = {}
    t0 = time.time()
    with open(os.path.join(a.out, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["bench", "size", "stack", "run", "median_us", "p99_us", "p999_us", "mbps", "msgs_per_s",
                    "cpu_us_per_msg", "server_cpu_us_per_msg", "cpu_pct", "server_cpu_pct", "cpu", "cores", "kernel"])
        for ci, (bench, size, iters) in enumerate(todo):
            runs = {}
            m = measure(stacks, bench, size, iters)
            for run in range(a.runs):
                # Interleave the stacks run by run, so a burst of noise hits all of them alike.
                for stack, fn in m.items():
                    progress(f"[{ci + 1}/{len(todo)} {time.time() - t0:.0f}s] {bench} {size} B: {stack} run {run + 1}/{a.runs}")
                    try:
                        r = fn()
                    except Exception as e:
                        print(f"\nbench: {stack} {bench} {size}: {e}", file=sys.stderr)
                        r = None
                    runs.setdefault(stack, []).append(r)
                    if r:
                        w.writerow([bench, size, stack, run + 1] + [r.get(k, "") for k in (
                            "median_us", "p99_us", "p999_us", "mbps", "msgs_per_s", "cpu_us_per_msg",
                            "server_cpu_us_per_msg", "cpu_pct", "server_cpu_pct")] +
                                  [host["cpu"], host["cores"], host["kernel"]])
            progress("")
            runs = {k: v for k, v in runs.items() if any(v)}
            key, rows = summarize(bench, size, runs)
            print_table(bench, size, key, rows)
            for stack, med, *_ in rows:
                summary[(bench, size, stack)] = med
    plot(a.out, summary)
    print(f"\nCSV: {os.path.join(a.out, 'results.csv')}; plots: {a.out}/latency.png, {a.out}/bandwidth.png "
          f"({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
