#!/usr/bin/env python3
"""Writes the seed corpora of fuzz_roce and fuzz_ib_cm (tests/fuzz/corpus/{roce,ib_cm}/) from
RoCEv2 captures (classic pcap, Ethernet): UDP/4791 payloads, a few per opcode and source, and the
CM MADs of the UD SENDs to QP1.

  tests/fuzz/roce_seeds.py OUTDIR CAPTURE.pcap...

fuzz_roce's inputs are 24 control bytes (source and destination IPv4 addresses, UDP ports, IP ID,
flags/fragment offset as captured, two cut points and a bit number) and the UDP payload; with the
captured addresses and ID the captured ICRC verifies. A few packets of opcodes no capture holds
(atomics, Send with Invalidate, UD Send with Immediate, Write Last with Immediate) are made from
captured ones, with a correct ICRC (made_*). fuzz_ib_cm's inputs are 256-byte MADs, some with 9
more bytes (a field and a value for its width checks), and an MRA made from a captured RTU.
Standard library only; the output depends only on the captures given.
"""
import os
import struct
import sys
import zlib

ROCE_PORT = 4791


def udp_frames(path):
    data = open(path, "rb").read()
    magic = struct.unpack("<I", data[:4])[0]
    e = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    if struct.unpack(e + "I", data[20:24])[0] != 1:
        return
    off = 24
    while off + 16 <= len(data):
        caplen = struct.unpack(e + "I", data[off + 8:off + 12])[0]
        p = data[off + 16:off + 16 + caplen]
        off += 16 + caplen
        if len(p) < 14:
            continue
        etype = struct.unpack(">H", p[12:14])[0]
        p = p[14:]
        while etype in (0x8100, 0x88A8) and len(p) >= 4:
            etype = struct.unpack(">H", p[2:4])[0]
            p = p[4:]
        if etype != 0x0800 or len(p) < 28 or p[9] != 17:
            continue
        ihl = (p[0] & 15) * 4
        u = p[ihl:]
        sport, dport, ulen = struct.unpack(">HHH", u[:6])
        yield {"src": p[12:16], "dst": p[16:20], "id": p[4:6], "frag": p[6:8], "sport": sport, "dport": dport,
               "payload": u[8:ulen]}


def icrc(src, dst, sport, dport, ip_id, frag, body):
    """IBTA annex A17.3.3 over IPv4: masked LRH, IP and UDP headers, BTH byte 4 all ones."""
    udp_len = 8 + len(body) + 4
    ip = bytes([0x45, 0xFF]) + struct.pack(">H", 20 + udp_len) + ip_id + frag + bytes([0xFF, 17, 0xFF, 0xFF]) + src + dst
    udp = struct.pack(">HHHH", sport, dport, udp_len, 0xFFFF)
    b = bytearray(body)
    b[4] = 0xFF
    return struct.pack("<I", zlib.crc32(b"\xff" * 8 + ip + udp + bytes(b)))


def control(f, k):
    # Cut points and bit number vary with the seed's number (any value is as good).
    return (f["src"] + f["dst"] + struct.pack(">HH", f["sport"], f["dport"]) + f["id"] + f["frag"] +
            struct.pack(">HHI", (7 * k + 3) & 0xFFFF, (131 * k + 40) & 0xFFFF, (2654435761 * (k + 1)) & 0xFFFFFFFF))


def made(f, opcode, ext, payload):
    """A packet of `opcode` with the captured packet's BTH, extended header bytes `ext`, payload."""
    pad = (4 - len(payload) % 4) % 4
    bth = bytearray(f["payload"][:12])
    bth[0] = opcode
    bth[1] = (bth[1] & 0xC0) | pad << 4
    body = bytes(bth) + ext + payload + bytes(pad)
    return dict(f, payload=body + icrc(f["src"], f["dst"], f["sport"], f["dport"], f["id"], f["frag"], body))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out = sys.argv[1]
    roce = []  # (name, frame)
    mads = []  # (name, bytes)
    per_opcode = {}
    seen_mads = set()
    for path in sys.argv[2:]:
        src = os.path.basename(path).split(".")[0]
        for f in udp_frames(path):
            pl = f["payload"]
            if f["dport"] != ROCE_PORT or len(pl) < 16:
                continue
            op = pl[0]
            if op in (0x64, 0x65):
                hdr = 12 + 8 + (4 if op == 0x65 else 0)
                mad = pl[hdr:hdr + 256]
                if len(mad) == 256 and mad[1] == 0x07 and mad not in seen_mads:
                    seen_mads.add(mad)
                    attr = struct.unpack(">H", mad[16:18])[0]
                    mads.append((f"{src}_attr{attr:04x}", mad))
            # At most two packets per opcode and source, of different lengths, from up to four sources;
            # one MTU-sized packet per opcode.
            taken = per_opcode.setdefault(op, {})
            lens = taken.setdefault(src, set())
            if len(lens) >= 2 or len(pl) in lens or (not lens and len(taken) > 3):
                continue
            if len(pl) >= 512 and any(n >= 512 for s in taken.values() for n in s):
                continue  # one MTU-sized packet per opcode
            lens.add(len(pl))
            roce.append((f"{src}_op{op:02x}_{len(pl)}", f))
    # Opcodes no capture holds, made from a captured RC SEND Only (addresses, BTH, ICRC right).
    base = next((f for _, f in roce if f["payload"][0] == 0x04), None)
    if base:
        va, rkey = struct.pack(">Q", 0x7F0012345000), struct.pack(">I", 0x1234)
        roce += [
            ("made_write_last_imm", made(base, 0x09, b"\xde\xad\xbe\xef", b"last bytes")),
            ("made_cmp_swap", made(base, 0x13, va + rkey + struct.pack(">QQ", 5, 4), b"")),
            ("made_fetch_add", made(base, 0x14, va + rkey + struct.pack(">QQ", 1, 0), b"")),
            ("made_atomic_ack", made(base, 0x12, b"\x1f\x00\x00\x07" + struct.pack(">Q", 4), b"")),
            ("made_send_last_inv", made(base, 0x16, rkey, b"tail of a send")),
            ("made_send_only_inv", made(base, 0x17, rkey, b"x")),
            ("made_ud_send_imm", made(base, 0x65, struct.pack(">II", 0x11111111, 0x000123), b"\x00\x00\x00\x2a" + b"ud")),
        ]
    os.makedirs(os.path.join(out, "roce"), exist_ok=True)
    os.makedirs(os.path.join(out, "ib_cm"), exist_ok=True)
    for k, (name, f) in enumerate(roce):
        open(os.path.join(out, "roce", name), "wb").write(control(f, k) + f["payload"])
    # An MRA (no capture holds one): a captured RTU's bytes under the MRA attribute.
    rtu = next((m for n, m in mads if n.endswith("attr0014")), None)
    if rtu:
        mads.append(("made_attr0011", rtu[:16] + b"\x00\x11" + rtu[18:32] + b"\x40\x98" + rtu[34:]))
    for k, (name, mad) in enumerate(mads):
        open(os.path.join(out, "ib_cm", name), "wb").write(mad)
        if k % 2 == 0:  # the same MAD with a field and a value for the width checks
            tail = bytes([k * 5 + 1]) + struct.pack(">Q", (0x1F << (k % 40)) | k)
            open(os.path.join(out, "ib_cm", name + "_widen"), "wb").write(mad + tail)
    print(f"roce_seeds: {len(roce)} roce, {len(os.listdir(os.path.join(out, 'ib_cm')))} ib_cm files")


if __name__ == "__main__":
    main()
