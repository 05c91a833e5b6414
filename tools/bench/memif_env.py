"""The DPDK rows of the benchmark: softrnic over a memif pair (two processes, SOFTRNIC_NETDEV
gives each its end), and the floor under it, a datagram ping-pong through the same dpdk netdev
with no RNIC (softrnic_netdev_pingpong). Needs root and a build with DPDK; every run gets its own
memif socket directory and EAL file prefixes, removed afterwards."""
import json
import os
import shutil
import signal
import subprocess
import tempfile

import peers  # (tools/bench/peers.py, beside this file)

SERVER_IP, CLIENT_IP = "10.78.0.1", "10.78.0.2"


def have_dpdk(build):
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            return any(line.strip() == "DPDK_FOUND:INTERNAL=1" for line in f)
    except OSError:
        return False


def _specs(sock_dir, tag):
    srv_core, cli_core = ("1", "0") if (os.cpu_count() or 1) >= 2 else ("0", "0")
    common = "mtu=9000"
    srv = (f"netdev=dpdk ip={SERVER_IP} dpdk_vdev=net_memif0;role=server;socket={sock_dir}/memif.sock "
           f"dpdk_lcore={srv_core} dpdk_prefix={tag}_s {common}")
    cli = (f"netdev=dpdk ip={CLIENT_IP} dpdk_vdev=net_memif0;role=client;socket={sock_dir}/memif.sock "
           f"dpdk_lcore={cli_core} dpdk_prefix={tag}_c {common}")
    return srv, cli


class _Run:
    """A memif socket directory and EAL prefixes for one measurement, cleaned up on exit."""

    count = 0

    def __enter__(self):
        _Run.count += 1
        self.dir = tempfile.mkdtemp(prefix="softrnic-memif-")
        self.tag = f"srb{os.getpid()}_{_Run.count}"
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.dir, ignore_errors=True)
        for side in ("s", "c"):
            shutil.rmtree(f"/var/run/dpdk/{self.tag}_{side}", ignore_errors=True)


class MemifSoftrnic:
    label = "softrnic-dpdk-memif"

    def __init__(self, build, softrnic_cls):
        self.inner = softrnic_cls(build, label=self.label)

    def run(self, test, size, iters, window=16, poll="busy", timeout=120, wait_send=False):
        with _Run() as r:
            srv, cli = _specs(r.dir, r.tag)
            self.inner.server_env = dict(self.inner.env, SOFTRNIC_NETDEV=srv)
            self.inner.client_env = dict(self.inner.env, SOFTRNIC_NETDEV=cli)
            # Over memif the first few hundred round trips are slow (tens of us): a longer warm-up.
            return self.inner.run(test, size, iters, window=window, poll=poll, timeout=timeout, warmup=2000,
                                  wait_send=wait_send)


def run_netdev_pingpong(build, server_spec, client_spec, size, iters, peer=None, timeout=60):
    """Round trips of `size`-byte datagrams between two softrnic_netdev_pingpong processes, each
    on the netdev its spec names (no RNIC). `peer`: the server's IP:PORT (default: its READY line)."""
    exe = os.path.join(build, "tools", "softrnic_netdev_pingpong")
    s = subprocess.Popen([exe, "server", server_spec], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        line = s.stdout.readline()
        if not line.startswith("READY"):
            raise RuntimeError(f"netdev ping-pong server: {line.strip()} {s.stderr.read().strip()}")
        c = subprocess.run([exe, "client", client_spec, peer or line.split()[1], str(size), str(iters)],
                           capture_output=True, text=True, timeout=timeout)
        if c.returncode != 0:
            raise RuntimeError(f"netdev ping-pong client: {c.stderr.strip()}")
        return json.loads(c.stdout.strip().splitlines()[-1])
    finally:
        try:
            s.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(s.pid, signal.SIGKILL)
            s.wait()


def netdev_pingpong(build, size, iters, timeout=60):
    """Round trips through the dpdk netdev over memif, no RNIC."""
    with _Run() as r:
        srv, cli = _specs(r.dir, r.tag)
        return run_netdev_pingpong(build, srv, cli, size, iters, peer=f"{SERVER_IP}:5041", timeout=timeout)


def _verbs_pair(what, run):
    """run(verbs): a program pair over softrnic's libibverbs, `verbs` the server's and the client's
    SOFTRNIC_VERBS: a RoCEv2 device on each end of a memif pair (the programs' own exchange goes
    over kernel TCP on 127.0.0.1). Its result; RuntimeError when it failed (peers.py said why)."""
    with _Run() as r:
        srv, cli = _specs(r.dir, r.tag)
        got = run(("wire=roce " + srv, "wire=roce " + cli))
    if got is None:
        raise RuntimeError(f"{what} over memif failed (peers.py said why)")
    return got


def perftest_lat(build, size, iters, prog="ib_send_lat"):
    """perftest's latency test `prog`, unmodified, as peers.perftest_lat."""
    return _verbs_pair(prog, lambda v: peers.perftest_lat(build, size, iters, prog, verbs=v))


def perftest_bw(build, prog, size, iters):
    """perftest's bandwidth test `prog`, unmodified, as peers.perftest_bw: mbps."""
    return _verbs_pair(prog, lambda v: peers.perftest_bw(build, prog, size, iters, verbs=v))


def ucx_lat(build, test, size, iters):
    """ucx_perftest's `test` ("am_lat": UCT over rc_verbs; "tag_lat": UCP over rc_verbs and ud_verbs)."""
    fn = peers.ucx_am_lat if test == "am_lat" else peers.ucx_tag_lat
    return _verbs_pair(f"ucx {test}", lambda v: fn(size, iters, build, verbs=v))


def stack(build, softrnic_cls):
    if os.geteuid() != 0:
        raise RuntimeError("memif rows need root")
    if not have_dpdk(build):
        raise RuntimeError("this build has no dpdk netdev (libdpdk-dev missing when it was configured)")
    return MemifSoftrnic(build, softrnic_cls)
