#!/usr/bin/python3
"""Validate a capture of softrnic's iWARP-over-UDP framing (docs/wire.md) with tshark.

usage: wirecheck_softrnic.py CAPTURE [--ports 5041-5104] [--min-ddp N] [--min-cm N] [--expect-bad]
                              [--no-udp-checksum]

tshark (4.0) is the independent decoder: tools/wireshark/softrnic_udp.lua decodes the framing
and hands DDP bodies to tshark's built-in iwarp_ddp_rdmap dissector. The tshark options (which
heuristics to turn off, which checksums to verify) come from the shared wirecheck tools
(validate.py's OPTS), found at ../shared/tools/wirecheck beside the repository or at
$SOFTRNIC_WIRECHECK_DIR.

Asserts
  1. no frame is malformed and no expert info is of severity Warning or above (a `-Y` pass and
     an expert-tap pass, as validate.py does); the Lua dissector turns a bad CRC32c, a short
     datagram, a bad version/type, a CM private data length beyond the body, ... into expert
     infos;
  2. every UDP frame on the softrnic ports decoded as `softrnic` with CRC32c status "good";
  3. every DDP frame (type 1) decoded by iwarp_ddp_rdmap with DDP version 1, RDMAP version 1,
     reserved bits 0, the tagged flag matching the RDMAP opcode (0, 2 tagged; 1, 3-7 untagged)
     and the untagged queue number matching it (1 for Read Request, 2 for Terminate, else 0);
  4. optionally, at least N DDP (--min-ddp) and N CM (--min-cm) frames.
UDP checksums are verified (validate.py's OPTS) unless --no-udp-checksum: captures taken on lo
(or on a sender with checksum offload) hold only the pseudo-header sum in the UDP checksum field,
which tshark reports as a bad checksum on every frame. The CRC32c trailer is checked regardless.
Exit status: 0 = all hold (with --expect-bad: 0 = at least one does NOT hold), 1 = otherwise,
2 = the check itself could not run (tshark or the shared tools missing, unreadable capture).
"""
import argparse
import collections
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.realpath(__file__))
REPO = os.path.dirname(HERE)
LUA = os.path.join(HERE, "wireshark", "softrnic_udp.lua")

TYPE_NAMES = {1: "DDP", 2: "ACK", 3: "CM", 4: "STREAM_CTRL"}
CM_OPS = {1: "CONNECT_REQUEST", 2: "CONNECT_REPLY", 3: "REJECT", 4: "READY_TO_USE", 5: "RESET", 6: "RESET_ACK", 7: "PENDING", 8: "COOKIE"}
RDMAP_OPS = {0: "RDMA Write", 1: "Read Request", 2: "Read Response", 3: "Send",
             4: "Send with Invalidate", 5: "Send with SE", 6: "Send with SE and Invalidate",
             7: "Terminate"}

FIELDS = [
    "frame.number", "frame.protocols", "ip.src", "ipv6.src", "udp.srcport", "udp.dstport",
    "softrnic.version", "softrnic.type", "softrnic.flags", "softrnic.dst_qpn", "softrnic.src_qpn",
    "softrnic.seq", "softrnic.ack", "softrnic.crc_status",
    "softrnic.cm.op", "softrnic.cm.conn_id", "softrnic.ctrl.op",
    "iwarp_ddp.tagged_flag", "iwarp_ddp.last_flag", "iwarp_ddp.rsvd", "iwarp_ddp.dv",
    "iwarp_rdma.version", "iwarp_rdma.rsv", "iwarp_rdma.opcode", "iwarp_ddp.qn",
    "_ws.col.Info",
]


class ToolError(Exception):
    pass


def wirecheck_dir():
    d = os.environ.get("SOFTRNIC_WIRECHECK_DIR") or os.path.join(REPO, "..", "shared", "tools", "wirecheck")
    d = os.path.normpath(d)
    if not os.path.isfile(os.path.join(d, "validate.py")):
        raise ToolError("shared wirecheck tools not found at %s (set SOFTRNIC_WIRECHECK_DIR)" % d)
    return d


def load_opts(d):
    # validate.py runs main() only under __main__: importing it just defines OPTS and helpers.
    sys.path.insert(0, d)
    try:
        from validate import OPTS
    finally:
        sys.path.remove(d)
    return list(OPTS)


def parse_ports(spec):
    ports = set()
    for part in spec.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise argparse.ArgumentTypeError("bad port range %r (want e.g. 5041-5104 or 5041,6000-6010)" % spec)
        lo = int(m.group(1))
        hi = int(m.group(2) or lo)
        if not 0 < lo <= hi <= 65535:
            raise argparse.ArgumentTypeError("bad port range %r" % spec)
        ports.update(range(lo, hi + 1))
    return ports


def tshark(args):
    try:
        p = subprocess.run(["tshark"] + args, capture_output=True, text=True, errors="replace")
    except FileNotFoundError:
        raise ToolError("tshark not found")
    if p.returncode != 0:
        raise ToolError("tshark failed (exit %d): %s" % (p.returncode, p.stderr.strip()))
    return p.stdout


def as_int(v):
    if v in ("True", "False"):
        return int(v == "True")
    return int(v, 0)


def check(a, opts):
    fails = []
    notes = []

    # 1. malformed / expert >= warning, as a display filter ...
    out = tshark(opts + ["-Y", '_ws.malformed || _ws.expert.severity >= "Warning"',
                         "-T", "fields", "-e", "frame.number", "-e", "_ws.expert.message",
                         "-E", "aggregator=|"])
    for line in filter(None, out.split("\n")):
        num, msg = (line.split("\t") + [""])[:2]
        fails.append("frame %s: malformed/expert: %s" % (num, msg))
    # ... and through the expert tap, which also sees expert infos added without a tree item
    out = tshark(opts + ["-q", "-z", "expert,warn"])
    for line in out.split("\n"):
        parts = line.split(None, 3)
        if len(parts) == 4 and parts[0].isdigit():
            fails.append("-z expert: %s x %s (%s): %s" % (parts[0], parts[2], parts[1], parts[3]))

    # 2./3. per-frame decode
    out = tshark(opts + ["-T", "fields", "-E", "header=y", "-E", "occurrence=a", "-E", "aggregator=|",
                         "-E", "separator=/t"] + sum((["-e", f] for f in FIELDS), []))
    lines = out.rstrip("\n").split("\n")
    hdr = lines[0].split("\t")
    rows = [dict(zip(hdr, l.split("\t"))) for l in lines[1:] if l]
    counts = collections.Counter()
    cm_ops = collections.Counter()
    rdmap_ops = collections.Counter()
    seen_seq = set()
    dups = []
    other_udp = 0
    icmp_quotes = 0
    no_ackvalid = collections.Counter()
    for r in rows:
        n = r["frame.number"]
        protos = r["frame.protocols"].split(":")
        try:
            sport, dport = int(r["udp.srcport"] or 0), int(r["udp.dstport"] or 0)
        except ValueError:   # ICMP errors quote a UDP header: several occurrences
            sport = dport = 0
        if "udp" not in protos or (sport not in a.ports and dport not in a.ports):
            if "udp" in protos:
                other_udp += 1
            continue
        if "icmp" in protos or "icmpv6" in protos:
            icmp_quotes += 1   # an ICMP error quoting (the start of) one of our datagrams
            continue
        if "softrnic" not in protos:
            fails.append("frame %s: UDP %d -> %d not decoded as softrnic (%s)" % (n, sport, dport, r["frame.protocols"]))
            continue
        if not r["softrnic.type"]:
            fails.append("frame %s: UDP %d -> %d: softrnic header not decoded (%s)" % (n, sport, dport, r["_ws.col.Info"]))
            continue
        if r["softrnic.crc_status"] != "good":
            fails.append("frame %s: CRC32c %s (%s)" % (n, r["softrnic.crc_status"] or "not checked", r["_ws.col.Info"]))
        if r["softrnic.version"] != "1":
            fails.append("frame %s: framing version %s" % (n, r["softrnic.version"]))
        ftype = int(r["softrnic.type"])
        if ftype not in TYPE_NAMES:
            fails.append("frame %s: unknown frame type %d" % (n, ftype))
            continue
        counts[ftype] += 1
        if not as_int(r["softrnic.flags"] or "0") & 1:
            no_ackvalid[TYPE_NAMES[ftype]] += 1
        if ftype in (1, 4):
            key = (r["ip.src"] or r["ipv6.src"], sport, dport, r["softrnic.src_qpn"], r["softrnic.seq"])
            if key in seen_seq:
                dups.append(n)
            seen_seq.add(key)
        if ftype == 3 and r["softrnic.cm.op"]:
            op = int(r["softrnic.cm.op"])
            cm_ops[CM_OPS.get(op, "op %d" % op)] += 1
        if ftype != 1:
            continue
        # DDP segment: decoded by tshark's iwarp_ddp_rdmap, versions, reserved bits, opcode rules
        L = lambda k: r[k].split("|") if r[k] else []
        if "iwarp_ddp_rdmap" not in protos or not r["iwarp_ddp.dv"]:
            fails.append("frame %s: DDP frame not decoded by iwarp_ddp_rdmap (%s)" % (n, r["frame.protocols"]))
            continue
        if len(L("iwarp_ddp.dv")) != 1:
            fails.append("frame %s: %d DDP headers in one frame" % (n, len(L("iwarp_ddp.dv"))))
        dv, rv = r["iwarp_ddp.dv"], r["iwarp_rdma.version"]
        if dv != "1" or rv != "1":
            fails.append("frame %s: DDP DV=%s RDMAP RV=%s (both must be 1)" % (n, dv, rv))
        if as_int(r["iwarp_ddp.rsvd"] or "0") or as_int(r["iwarp_rdma.rsv"] or "0"):
            fails.append("frame %s: DDP/RDMAP reserved bits set (ddp rsvd=%s, rdmap rsv=%s)"
                         % (n, r["iwarp_ddp.rsvd"], r["iwarp_rdma.rsv"]))
        if not r["iwarp_rdma.opcode"]:
            fails.append("frame %s: no RDMAP opcode decoded" % n)
            continue
        op = as_int(r["iwarp_rdma.opcode"])
        rdmap_ops[RDMAP_OPS.get(op, "opcode %d" % op)] += 1
        tagged = r["iwarp_ddp.tagged_flag"] in ("1", "True")
        if op not in RDMAP_OPS:
            fails.append("frame %s: RDMAP opcode %d is not one of RFC 5040's (0-7)" % (n, op))
        elif op in (0, 2) and not tagged or op not in (0, 2) and tagged:
            fails.append("frame %s: RDMAP opcode %d (%s) with T=%d" % (n, op, RDMAP_OPS[op], tagged))
        if not tagged:
            qn = r["iwarp_ddp.qn"]
            want = {1: "1", 7: "2"}.get(op, "0")
            if qn != want:
                fails.append("frame %s: RDMAP opcode %d on QN %s (expected %s)" % (n, op, qn or "?", want))

    if a.min_ddp is not None and counts[1] < a.min_ddp:
        fails.append("%d DDP frames, at least %d expected" % (counts[1], a.min_ddp))
    if a.min_cm is not None and counts[3] < a.min_cm:
        fails.append("%d CM frames, at least %d expected" % (counts[3], a.min_cm))

    if cm_ops:
        notes.append("CM ops: " + ", ".join("%s x%d" % kv for kv in sorted(cm_ops.items())))
    if rdmap_ops:
        notes.append("RDMAP opcodes: " + ", ".join("%s x%d" % kv for kv in sorted(rdmap_ops.items())))
    if dups:
        notes.append("%d sequenced frames repeat an earlier (direction, QP, seq) -- retransmissions: frames %s%s"
                     % (len(dups), ", ".join(dups[:10]), " ..." if len(dups) > 10 else ""))
    if no_ackvalid:
        notes.append("frames without the ack-valid flag: " +
                     ", ".join("%s x%d" % kv for kv in sorted(no_ackvalid.items())))
    if icmp_quotes:
        notes.append("%d ICMP errors quote softrnic datagrams (a peer's port was closed or unreachable)"
                     % icmp_quotes)
    if other_udp:
        notes.append("%d UDP frames outside ports %s (not checked)" % (other_udp, a.ports_spec))
    return rows, counts, fails, notes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("capture")
    ap.add_argument("--ports", default="5041-5104", help="UDP ports carrying softrnic frames (default 5041-5104)")
    ap.add_argument("--min-ddp", type=int, help="fail unless at least N DDP frames were seen")
    ap.add_argument("--min-cm", type=int, help="fail unless at least N CM frames were seen")
    ap.add_argument("--expect-bad", action="store_true",
                    help="negative test: exit 0 only if validation FAILS")
    ap.add_argument("--no-udp-checksum", action="store_true",
                    help="do not verify UDP checksums (capture on lo: the field holds only the "
                         "pseudo-header sum of checksum offload)")
    a = ap.parse_args()
    try:
        a.ports_spec = a.ports.replace(" ", "")
        a.ports = parse_ports(a.ports_spec)
    except argparse.ArgumentTypeError as e:
        ap.error(str(e))

    try:
        if not os.path.isfile(a.capture):
            raise ToolError("no such capture: %s" % a.capture)
        if not os.path.isfile(LUA):
            raise ToolError("dissector not found: %s" % LUA)
        opts = ["-r", a.capture] + load_opts(wirecheck_dir()) + [
            "-X", "lua_script:" + LUA, "-o", "softrnic.ports:" + a.ports_spec]
        if a.no_udp_checksum:
            opts += ["-o", "udp.check_checksum:FALSE"]   # the last -o wins over OPTS' TRUE
        rows, counts, fails, notes = check(a, opts)
    except ToolError as e:
        print("wirecheck: ERROR: %s" % e)
        sys.exit(2)

    for f in fails:
        print("  FAIL", f)
    for nt in notes:
        print("  note:", nt)
    verdict = "PASS" if not fails else "FAIL (%d failures)" % len(fails)
    if a.expect_bad:
        verdict += " -- expected to fail (--expect-bad): %s" % ("ok" if fails else "NOT OK, it passed")
    print("wirecheck: %d frames, %d DDP, %d CM, %d ACK, %d CTRL: %s"
          % (len(rows), counts[1], counts[3], counts[2], counts[4], verdict))
    sys.exit(0 if bool(fails) == a.expect_bad else 1)


if __name__ == "__main__":
    main()
