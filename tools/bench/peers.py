#!/usr/bin/env python3
"""Peers for the benchmark (project issue 6): one measurement of another stack per call, on 127.0.0.1.

Each function returns a dict, or None after printing (to stderr) why the peer could not be measured; none
raises for an absent or failing tool. Every process runs with a deadline and is killed with its process
group on failure; servers are always reaped. docs/performance-peers.md says how each peer is run and what
its numbers mean. Units: latency figures are ROUND TRIPS in microseconds; MB = 10**6 bytes.

  udp_pingpong(build_dir, size, iters, poll)  softrnic_udp_peer (raw kernel UDP), poll "busy" or "block"
  udp_stream(build_dir, size, total_bytes, poll="busy")
  tcp_pingpong(build_dir, size, iters, poll)  softrnic_tcp_peer (raw kernel TCP, TCP_NODELAY, length-framed)
  tcp_stream(build_dir, size, total_bytes, poll="busy")
  ucx_tag_lat(size, iters), ucx_tag_bw(size, iters), ucx_put_bw(size, iters)   ucx_perftest over UCX tcp
  fi_pingpong(provider, size, iters)          libfabric fi_pingpong: "tcp", "udp;ofi_rxd", "udp"

Self-check: python3 tools/bench/peers.py --quick [--build-dir DIR]
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

TIMEOUT_S = 60.0  # per process: server start-up, client run, server exit
UCX_PERFTEST = "/usr/bin/ucx_perftest"
FI_PINGPONG = "/usr/bin/fi_pingpong"
# UCX over its TCP transport on the loopback interface only (no shared memory, no self transport needed:
# the two sides are separate processes).
UCX_ENV = {"UCX_TLS": "tcp", "UCX_NET_DEVICES": "lo", "UCX_WARN_UNUSED_ENV_VARS": "n"}
# UCX over softrnic: its "rc" (rc_verbs, with ud_verbs for the wire-up), no shared memory, no tcp.
UCX_SOFTRNIC_ENV = {"UCX_TLS": "rc_verbs,ud_verbs", "UCX_WARN_UNUSED_ENV_VARS": "n"}
QPERF = "/usr/bin/qperf"
# fi_pingpong endpoint type per provider: tcp is connection-oriented (msg); ofi_rxd makes udp reliable
# (rdm); plain udp is unreliable datagrams (dgram).
FI_EP_TYPE = {"tcp": "msg", "udp;ofi_rxd": "rdm", "udp": "dgram", "tcp;ofi_rxm": "rdm"}

_said = set()


def _why(what, reason):
    """Prints why a peer gave no figure (each distinct reason once per process)."""
    key = (what, reason)
    if key not in _said:
        _said.add(key)
        print(f"peers: {what}: {reason}", file=sys.stderr, flush=True)
    return None


def _free_port():
    """A TCP and UDP port free on 127.0.0.1 right now (the tools bind it a moment later)."""
    for _ in range(20):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as t:
            t.bind(("127.0.0.1", 0))
            port = t.getsockname()[1]
            try:
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                    u.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise OSError("no free port on 127.0.0.1")


def _listening(port):
    """True once some socket listens on TCP `port` (from /proc/net/tcp and tcp6, without connecting)."""
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                        return True
        except OSError:
            pass
    return False


class _Proc:
    """A child in its own process group, stdout and stderr to temporary files, reaped with its rusage."""

    def __init__(self, argv, env=None):
        self.out = tempfile.TemporaryFile()
        self.err = tempfile.TemporaryFile()
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.out, stderr=self.err,
                                      env=full_env, start_new_session=True)
        self.rc = None
        self.cpu_us = None

    def _reap(self, flags):
        if self.rc is not None:
            return True
        try:
            pid, status, ru = os.wait4(self.popen.pid, flags)
        except ChildProcessError:
            self.rc = self.popen.returncode if self.popen.returncode is not None else -1
            return True
        if pid == 0:
            return False
        self.rc = os.waitstatus_to_exitcode(status)
        self.popen.returncode = self.rc  # reaped here: Popen must not wait again
        self.cpu_us = (ru.ru_utime + ru.ru_stime) * 1e6
        return True

    def wait(self, timeout):
        """The exit code, or None if the process was still running at the deadline."""
        deadline = time.monotonic() + timeout
        while not self._reap(os.WNOHANG):
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.005)
        return self.rc

    def kill(self):
        if self.rc is None:
            try:
                os.killpg(self.popen.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.wait(5.0)

    def text(self, which="out"):
        f = self.out if which == "out" else self.err
        f.seek(0)
        return f.read().decode(errors="replace")

    def tail(self, n=3, first=False):
        """The last (or first) n lines of stderr, else of stdout, on one line."""
        lines = (self.text("err").strip() or self.text("out").strip()).splitlines()
        picked = lines[:n] if first else lines[-n:]
        return " | ".join(line.strip() for line in picked) if lines else "(no output)"

    def close(self):
        self.kill()
        self.out.close()
        self.err.close()


def _wait_until(pred, proc, timeout):
    """Waits for pred() while `proc` runs; False on exit or deadline."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        if proc.wait(0) is not None:
            return pred()
        time.sleep(0.01)
    return False


def _client_server(what, server_argv, client_argv, env, port, settle=None):
    """Runs one server and one client to completion. Returns (client, server) with both exited 0, or None.
    The client starts once the server listens on TCP `port` (its control connection), or, with `settle`
    (seconds), that long after the server started (an rdma_cm listener has no socket to watch)."""
    server = client = None
    try:
        server = _Proc(server_argv, env)
        if settle is not None:
            time.sleep(settle)
            if server.wait(0) is not None:
                return _why(what, f"server exited at start: {server.tail()}")
        elif not _wait_until(lambda: _listening(port), server, TIMEOUT_S):
            return _why(what, f"server not ready within {TIMEOUT_S:.0f} s: {server.tail()}")
        client = _Proc(client_argv, env)
        rc = client.wait(TIMEOUT_S)
        if rc is None:
            return _why(what, f"client did not finish within {TIMEOUT_S:.0f} s (killed)")
        if rc != 0:
            return _why(what, f"client exit {rc}: {client.tail()}")
        rc = server.wait(TIMEOUT_S)
        if rc is None:
            return _why(what, f"server did not exit within {TIMEOUT_S:.0f} s after the client (killed)")
        if rc != 0:
            return _why(what, f"server exit {rc}: {server.tail()}")
        return client, server
    except OSError as e:
        return _why(what, f"cannot run: {e}")
    finally:
        for p in (client, server):
            if p is not None:
                p.kill()


def _finish(pair, parse):
    """Applies parse(client, server) to a finished pair and closes both; a parse failure is a reason."""
    if pair is None:
        return None
    client, server = pair
    try:
        return parse(client, server)
    finally:
        client.close()
        server.close()


# --- raw kernel UDP and TCP: softrnic_udp_peer, softrnic_tcp_peer ------------------------------------------


def _own_peer(build_dir, name):
    path = os.path.join(build_dir, "tools", name)
    return path if os.access(path, os.X_OK) else None


def _own_peer_run(what, name, build_dir, client_args, poll):
    """One server and one client of softrnic_udp_peer or softrnic_tcp_peer (the same command line and
    output): the client's JSON plus the server's CPU."""
    exe = _own_peer(build_dir, name)
    if exe is None:
        return _why(what, f"{os.path.join(build_dir, 'tools', name)} not built")
    port_box = []

    def ready(server):
        for line in server.text().splitlines():
            if line.startswith("READY "):
                port_box.append(int(line.split()[1]))
                return True
        return False

    # The server binds port 0 and reports the kernel's choice in READY, so there is no race for a port.
    server = None
    try:
        server = _Proc([exe, "server", "--port", "0", "--poll", poll])
        if not _wait_until(lambda: ready(server), server, TIMEOUT_S):
            return _why(what, f"server not ready: {server.tail()}")
        client = _Proc([exe, "client", "--port", str(port_box[0]), "--poll", poll] + client_args)
        try:
            rc = client.wait(TIMEOUT_S)
            if rc is None:
                return _why(what, f"client did not finish within {TIMEOUT_S:.0f} s (killed)")
            if rc != 0:
                return _why(what, f"client exit {rc}: {client.tail(1, first=True)}")
            if server.wait(TIMEOUT_S) != 0:
                return _why(what, f"server failed: {server.tail(1, first=True)}")
            res = json.loads(client.text().strip().splitlines()[-1])
            srv = json.loads(server.text().strip().splitlines()[-1])
        finally:
            client.close()
    except (OSError, ValueError, IndexError) as e:
        return _why(what, f"failed: {e}")
    finally:
        if server is not None:
            server.close()
    res["server_cpu_us"] = srv["cpu_us"]
    res["server_msgs"] = srv["msgs"]
    res["server_cpu_us_per_msg"] = srv["cpu_us"] / srv["msgs"] if srv["msgs"] else None
    return res


def udp_pingpong(build_dir, size, iters, poll="busy", companion=0, companion_gso=False):
    """Raw kernel UDP ping-pong: round-trip median/p99/p99.9/min/max (us, after a warm-up), client CPU per
    round trip, plus server_cpu_us (server CPU over warm-up and measured echoes, server_msgs of them).
    companion: each message goes with a datagram of that many bytes behind it, in one sendmmsg, and
    each side answers once it has both (20: a RoCEv2 ping-pong whose Sends ask for their ACKs);
    companion_gso: the two as one UDP GSO send, read whole with UDP_GRO (softrnic's udp_gso_pairs)."""
    return _own_peer_run(f"udp_pingpong(size={size}, poll={poll}, companion={companion}, gso={companion_gso})",
                         "softrnic_udp_peer", build_dir,
                         ["--test", "pingpong", "--size", str(size), "--iters", str(iters), "--companion",
                          str(companion)] + (["--companion-gso", "1"] if companion_gso else []), poll)


def udp_stream(build_dir, size, total_bytes, poll="busy"):
    """Raw kernel UDP stream of min(size, 65000)-byte datagrams (sendmmsg, credit window): mbps (MB/s,
    10**6), msgs_per_s, client cpu_us_per_msg, plus server_cpu_us."""
    return _own_peer_run(f"udp_stream(size={size}, poll={poll})", "softrnic_udp_peer", build_dir,
                         ["--test", "stream", "--size", str(size), "--bytes", str(total_bytes)], poll)


def tcp_pingpong(build_dir, size, iters, poll="busy"):
    """Raw kernel TCP ping-pong over one connection (TCP_NODELAY, each message framed by a 4-byte length):
    round-trip median/p99/p99.9/min/max (us, after a warm-up), client CPU per round trip, plus server_cpu_us
    (over warm-up and measured echoes, server_msgs of them). poll "busy" (MSG_DONTWAIT spin) or "block"."""
    return _own_peer_run(f"tcp_pingpong(size={size}, poll={poll})", "softrnic_tcp_peer", build_dir,
                         ["--test", "pingpong", "--size", str(size), "--iters", str(iters)], poll)


def tcp_stream(build_dir, size, total_bytes, poll="busy"):
    """Raw kernel TCP stream, one direction, of size-byte length-framed messages (small ones gathered into
    one send), paced by TCP's own flow control: mbps (MB/s, 10**6, payload only), msgs_per_s, client
    cpu_us_per_msg, plus server_cpu_us."""
    return _own_peer_run(f"tcp_stream(size={size}, poll={poll})", "softrnic_tcp_peer", build_dir,
                         ["--test", "stream", "--size", str(size), "--bytes", str(total_bytes)], poll)


def _warmup(iters):
    """softrnic_udp_peer's (and softrnic_tcp_peer's) default warm-up: a tenth of the iterations, 10 to 1000."""
    return min(1000, max(10, iters // 10))


def _softrnic_run(build_dir, spec=None):
    """The argv prefix that runs a program over softrnic's libraries: build/bin/softrnic_run, with
    `spec` as its SOFTRNIC_VERBS when given (else the default device)."""
    return [os.path.join(build_dir, "bin", "softrnic_run")] + (["--verbs", spec] if spec else []) + ["--"]


# --- UCX: ucx_perftest over the tcp transport ------------------------------------------------------------


def _ucx(test, size, iters, build_dir=None, extra=(), verbs=None):
    """ucx_perftest over UCX's tcp transport, or (build_dir given) over softrnic: UCX's "rc" (rc_verbs,
    ud_verbs for the wire-up) on softrnic's libibverbs through build/bin/softrnic_run (`verbs`: the
    server's and the client's SOFTRNIC_VERBS, else the default device)."""
    what = f"ucx {test}(size={size})"
    if not os.access(UCX_PERFTEST, os.X_OK):
        return _why("ucx", f"{UCX_PERFTEST} not installed (Debian package ucx-utils)")
    srv_launch = cli_launch = []
    env = UCX_ENV
    if build_dir:
        run = os.path.join(build_dir, "bin", "softrnic_run")
        if not os.access(run, os.X_OK):
            return _why("ucx on softrnic", f"{run} not built")
        srv_spec, cli_spec = verbs or (None, None)
        srv_launch, cli_launch = _softrnic_run(build_dir, srv_spec), _softrnic_run(build_dir, cli_spec)
        env = UCX_SOFTRNIC_ENV
    try:
        port = _free_port()
    except OSError as e:
        return _why(what, str(e))
    # -f: final figures only; -v: CSV (iterations,typical_lat,avg_lat,overall_lat,avg_bw,overall_bw,avg_mr,
    # overall_mr). -w: the same warm-up as softrnic_udp_peer's (ucx_perftest's default is 10000 iterations).
    # The server takes its test parameters from the client.
    warmup = _warmup(iters)
    server = srv_launch + [UCX_PERFTEST, "-p", str(port)]
    client = cli_launch + [UCX_PERFTEST, "127.0.0.1", "-p", str(port), "-t", test, "-s", str(size), "-n", str(iters),
                       "-w", str(warmup), "-f", "-v"] + list(extra)

    def parse(c, s):
        row = None
        for line in c.text().splitlines():
            parts = line.strip().split(",")
            if len(parts) == 8:
                try:
                    row = [float(x) for x in parts]
                except ValueError:
                    continue
        if row is None:
            return _why(what, f"no result line in the output: {c.tail()}")
        n, typical, _avg, overall, _bw_avg, bw_overall, _mr_avg, mr_overall = row
        return {"iters": int(n), "warmup": warmup, "typical_lat_us": typical, "overall_lat_us": overall,
                "bw_mib_s": bw_overall, "msgs_per_s": mr_overall,
                "client_cpu_us": c.cpu_us, "server_cpu_us": s.cpu_us}

    return _finish(_client_server(what, server, client, env, port), parse)


def ucx_tag_lat(size, iters, build_dir=None, verbs=None):
    """UCP tag-matching ping-pong. ucx_perftest's latency of a ping-pong test is ONE-WAY: it divides the
    round trip by 2 (libperf ucx_perf_calc_result, factor 2.0 for UCX_PERF_TEST_TYPE_PINGPONG). Its "typical"
    figure is the percentile (-R, default 50) of the last iterations' times (a 2048-entry queue). Returned
    here as round trips: median_us = 2 * typical, mean_us = 2 * overall average (whole run after warm-up)."""
    r = _ucx("tag_lat", size, iters, build_dir, verbs=verbs)
    if r is None:
        return None
    return {"median_us": 2 * r["typical_lat_us"], "mean_us": 2 * r["overall_lat_us"], "iters": r["iters"],
            "cpu_us_per_msg": r["client_cpu_us"] / (r["iters"] + r["warmup"]), "cpu_includes_startup": True,
            "server_cpu_us": r["server_cpu_us"], "one_way_typical_us": r["typical_lat_us"]}


def ucx_am_lat(size, iters, build_dir=None, verbs=None):
    """UCT active-message ping-pong (ucx_perftest am_lat) on one transport: UCX's tcp on lo, or (build_dir
    given) rc_verbs on softrnic's default device. -D bcopy: rc_verbs' short messages stop at 63 bytes
    here (its inline size). Round trips, as ucx_tag_lat."""
    uct = ["-d", "softrnic_roce0:1", "-x", "rc_verbs"] if build_dir else ["-d", "lo", "-x", "tcp"]
    r = _ucx("am_lat", size, iters, build_dir, uct + ["-D", "bcopy"], verbs)
    if r is None:
        return None
    return {"median_us": 2 * r["typical_lat_us"], "mean_us": 2 * r["overall_lat_us"], "iters": r["iters"],
            "one_way_typical_us": r["typical_lat_us"]}


def _ucx_bw(test, size, iters, build_dir=None):
    r = _ucx(test, size, iters, build_dir)
    if r is None:
        return None
    # ucx_perftest's "MB/s" is MiB/s (bytes / 2**20). Our MB is 10**6 bytes: computed from the message rate
    # (messages per second * message size), which is what the MiB figure was derived from.
    return {"mbps": r["msgs_per_s"] * size / 1e6, "msgs_per_s": r["msgs_per_s"], "iters": r["iters"],
            "ucx_mib_s": r["bw_mib_s"], "cpu_us_per_msg": r["client_cpu_us"] / (r["iters"] + r["warmup"]),
            "cpu_includes_startup": True, "server_cpu_us": r["server_cpu_us"]}


def ucx_tag_bw(size, iters, build_dir=None):
    """UCP tag-matching stream, one direction: mbps (10**6 B/s), msgs_per_s."""
    return _ucx_bw("tag_bw", size, iters, build_dir)


def ucx_put_bw(size, iters, build_dir=None):
    """UCP put (one-sided RMA write, ucx_perftest ucp_put_bw), one direction: mbps (10**6 B/s), msgs_per_s."""
    return _ucx_bw("ucp_put_bw", size, iters, build_dir)


# --- perftest over softrnic's libibverbs.so.1 (the verbs door, docs/verbs.md) -------------------------


def _perftest(build_dir, prog, size, iters, extra=(), cm=False, verbs=None):
    """One perftest 4.5 program, server and client, unmodified, over softrnic's libibverbs (its launcher
    build/bin/softrnic_run; the default device, RoCEv2 on 127.0.0.x, GID index 1; `verbs`: the server's
    and the client's SOFTRNIC_VERBS instead). The numbers of its one result line (after "#bytes
    #iterations"), or None."""
    what = f"{prog}(size={size})"
    run = os.path.join(build_dir, "bin", "softrnic_run")
    if not os.access(run, os.X_OK):
        return _why("perftest", f"{run} not built (softrnic_ibverbs: libibverbs-dev missing at configure?)")
    if not shutil.which(prog):
        return _why("perftest", f"{prog} not installed (Debian package perftest)")
    try:
        port = _free_port()
    except OSError as e:
        return _why(what, str(e))
    # -R (cm): the exchange and the data QP through rdma_cm (softrnic's librdmacm), else -x 1: the
    # IPv4 GID and the QPs connected out of band
    args = [prog] + (["-R"] if cm else ["-x", "1"]) + ["-s", str(size), "-n", str(iters), "-p", str(port), "-F"]
    srv, cli = verbs or (None, None)
    launch = (lambda spec: _softrnic_run(build_dir, spec) + args + list(extra))

    def parse(c, s):
        for line in c.text().splitlines():
            parts = line.split()
            if len(parts) >= 5 and parts[0] == str(size) and parts[1] == str(iters):
                try:
                    return [float(x) for x in parts[2:]], c, s
                except ValueError:
                    continue
        return _why(what, f"no result line in the output: {c.tail()}")

    return _finish(_client_server(what, launch(srv), launch(cli) + ["127.0.0.1"], None, port, 1.0 if cm else None),
                   parse)


def perftest_lat(build_dir, size, iters, prog="ib_send_lat", cm=False, verbs=None):
    """perftest's latency test. Its figures are ONE-WAY (half the round trip): t_min t_max t_typical t_avg
    t_stdev 99% 99.9%; returned as round trips (median_us = 2 * t_typical, p99_us = 2 * 99%)."""
    r = _perftest(build_dir, prog, size, iters, cm=cm, verbs=verbs)
    if r is None:
        return None
    v, c, s = r
    if len(v) < 7:
        return _why(prog, f"a short result line: {v}")
    return {"median_us": 2 * v[2], "mean_us": 2 * v[3], "p99_us": 2 * v[5], "p999_us": 2 * v[6], "iters": iters,
            "cpu_us_per_msg": c.cpu_us / iters, "cpu_includes_startup": True, "server_cpu_us": s.cpu_us}


def perftest_bw(build_dir, prog, size, iters, tx_depth=None, cm=False, verbs=None):
    """perftest's bandwidth test, one direction: BW peak, BW average, MsgRate [Mpps]; mbps (10**6 B/s) from
    the message rate (perftest's MB/sec is MiB/s). tx_depth: its -t (default 128 work requests in flight)."""
    r = _perftest(build_dir, prog, size, iters, ["-t", str(tx_depth)] if tx_depth else (), cm, verbs)
    if r is None:
        return None
    v, c, s = r
    if len(v) < 3:
        return _why(prog, f"a short result line: {v}")
    return {"mbps": v[2] * size, "msgs_per_s": v[2] * 1e6, "iters": iters,
            "cpu_us_per_msg": c.cpu_us / iters, "cpu_includes_startup": True, "server_cpu_us": s.cpu_us}


# --- qperf: rc_lat over softrnic (-cm1: rdma_cm), tcp_lat over kernel TCP -----------------------------------


def qperf_lat(test, size, build_dir=None, seconds=3):
    """qperf's latency test `test` at `size` bytes: through softrnic (build_dir given: both sides under
    build/bin/softrnic_run, -cm1) or plain (tcp_lat). qperf's latency is ONE-WAY (half the round trip), a
    mean over the run (-t seconds): returned as a round trip, median_us = mean_us = 2 * latency."""
    what = f"qperf {test}(size={size})"
    if not os.access(QPERF, os.X_OK):
        return _why("qperf", f"{QPERF} not installed (Debian package qperf)")
    # On softrnic each side has its own device address (rdma_cm connects to the server's; the default
    # "next free loopback address" would make that the client's own when 127.0.0.1 is taken).
    srv_launch = cli_launch = []
    addr, cm = "127.0.0.1", []
    if build_dir:
        run = os.path.join(build_dir, "bin", "softrnic_run")
        if not os.access(run, os.X_OK):
            return _why("qperf on softrnic", f"{run} not built")
        addr, cm = "127.0.61.1", ["-cm1"]
        srv_launch = _softrnic_run(build_dir, f"wire=roce ip={addr}")
        cli_launch = _softrnic_run(build_dir, "wire=roce ip=127.0.61.2")
    try:
        port = _free_port()
    except OSError as e:
        return _why(what, str(e))
    server = srv_launch + [QPERF, "-lp", str(port)]
    client = cli_launch + [QPERF, addr, "-lp", str(port)] + cm + ["-t", str(seconds), "-m", str(size), test, "quit"]

    def parse(c, s):
        lines = c.text().splitlines()
        for i, line in enumerate(lines[:-1]):
            if line.strip() == f"{test}:":
                parts = lines[i + 1].split()
                if len(parts) >= 4 and parts[0] == "latency":
                    us = float(parts[2]) * {"ns": 1e-3, "us": 1.0, "ms": 1e3, "sec": 1e6}.get(parts[3], float("nan"))
                    return {"median_us": 2 * us, "mean_us": 2 * us, "stat": "mean", "seconds": seconds}
        return _why(what, f"no latency line in the output: {c.tail()}")

    return _finish(_client_server(what, server, client, None, port), parse)


# --- libfabric: fi_pingpong --------------------------------------------------------------------------------


def fi_pingpong(provider, size, iters):
    """libfabric fi_pingpong on the lo domain. Its usec/xfer is elapsed / (iters * 2): ONE-WAY, a mean over
    all iterations (fi_pingpong has no warm-up and no percentiles). Returned as a round trip:
    median_us = mean_us = 2 * usec/xfer (the key is median_us so it sits beside the other round trips;
    "stat": "mean" says what it is)."""
    what = f"fi_pingpong({provider}, size={size})"
    if not os.access(FI_PINGPONG, os.X_OK):
        return _why("fi_pingpong", f"{FI_PINGPONG} not installed (Debian package libfabric-bin)")
    ep = FI_EP_TYPE.get(provider, "rdm")
    try:
        port = _free_port()
    except OSError as e:
        return _why(what, str(e))
    common = ["-p", provider, "-e", ep, "-d", "lo", "-I", str(iters), "-S", str(size)]
    server = [FI_PINGPONG] + common + ["-B", str(port)]
    client = [FI_PINGPONG] + common + ["-P", str(port), "127.0.0.1"]

    def parse(c, s):
        # bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec, e.g. "64 1k =1k 125k 0.04s 6.43 9.95 0.10"
        for line in reversed(c.text().splitlines()):
            parts = line.split()
            if len(parts) == 8 and parts[4].endswith("s") and parts[2].startswith("="):
                try:
                    secs, usec_xfer = float(parts[4][:-1]), float(parts[6])
                except ValueError:
                    continue
                return {"median_us": 2 * usec_xfer, "mean_us": 2 * usec_xfer, "stat": "mean", "iters": iters,
                        "one_way_usec_per_xfer": usec_xfer, "total_s": secs,
                        "cpu_us_per_msg": c.cpu_us / iters, "cpu_includes_startup": True,
                        "server_cpu_us": s.cpu_us}
        return _why(what, f"no result line in the output: {c.tail()}")

    return _finish(_client_server(what, server, client, None, port), parse)


# --- self-check -------------------------------------------------------------------------------------------


def _main(argv):
    import argparse

    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="run each peer once (64 B; 65536 B for bandwidth)")
    ap.add_argument("--build-dir", default=os.path.join(here, "..", "..", "build-peers"),
                    help="build tree holding tools/softrnic_udp_peer and softrnic_tcp_peer (default: build-peers)")
    args = ap.parse_args(argv)
    if not args.quick:
        ap.print_help()
        return 2
    bd = os.path.abspath(args.build_dir)
    runs = [
        ("udp_pingpong 64 busy", lambda: udp_pingpong(bd, 64, 10000, "busy")),
        ("udp_pingpong 64 block", lambda: udp_pingpong(bd, 64, 10000, "block")),
        ("udp_stream 65536", lambda: udp_stream(bd, 65536, 256 * 10**6)),
        ("udp_stream 64", lambda: udp_stream(bd, 64, 32 * 10**6)),
        ("tcp_pingpong 64 busy", lambda: tcp_pingpong(bd, 64, 10000, "busy")),
        ("tcp_pingpong 64 block", lambda: tcp_pingpong(bd, 64, 10000, "block")),
        ("tcp_pingpong 65536 busy", lambda: tcp_pingpong(bd, 65536, 1000, "busy")),
        ("tcp_stream 65536", lambda: tcp_stream(bd, 65536, 256 * 10**6)),
        ("tcp_stream 64", lambda: tcp_stream(bd, 64, 32 * 10**6)),
        ("ucx_tag_lat 64", lambda: ucx_tag_lat(64, 10000)),
        ("ucx_tag_bw 65536", lambda: ucx_tag_bw(65536, 5000)),
        ("ucx_put_bw 65536", lambda: ucx_put_bw(65536, 5000)),
        ("fi_pingpong tcp 64", lambda: fi_pingpong("tcp", 64, 10000)),
        ("fi_pingpong udp;ofi_rxd 64", lambda: fi_pingpong("udp;ofi_rxd", 64, 10000)),
        ("fi_pingpong udp 64", lambda: fi_pingpong("udp", 64, 10000)),
    ]
    failed = 0
    for name, run in runs:
        t0 = time.monotonic()
        r = run()
        failed += r is None
        shown = json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()}) if r else None
        print(f"{name:28s} {time.monotonic() - t0:5.1f}s  {shown}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
