// Fuzz target: the RoCEv2 codec (soft_rnic/wire/roce.hpp): BTH and extended headers, ICRC.
// An input is 24 control bytes, then one RoCEv2 UDP payload (BTH .. pad, ICRC):
//   0 src IP, 4 dst IP, 8 UDP source port, 10 destination port, 12 IP ID, 14 flags and fragment
//   offset (big-endian, as in the IPv4/UDP headers: what the ICRC covers besides the packet),
//   16 and 18 two cut points, 20 a bit number (big-endian 32 bits).
// Checked:
// - parse: the verdict of a plain reading of IBTA vol. 1 chapter 9 (our own opcode table: header
//   lengths, which opcodes carry payload; transport version, PadCnt), the same for every opcode
//   as op_info says; an accepted packet's fields are the wire's, header + payload + pad + ICRC is
//   the whole packet, the payload lies right after the headers;
// - build_headers(parse(x)) writes x's header bytes but for what the builder normalizes: BTH
//   byte 4's reserved bits (6), byte 8's (7), DETH's reserved byte, a CNP's 16 reserved bytes
//   (all sent as zero) and PadCnt (computed from the payload length); nothing past the header;
//   headers built from input-chosen fields (QPNs, PSNs, MSN wider than 24 bits) parse back to
//   the same fields, masked to their widths;
// - icrc: equal to CRC-32 (zlib) over our own masked pseudo-header (IBTA annex A17.3.3: LRH all
//   ones, IPv4 TOS, TTL, checksum and UDP checksum masked, BTH byte 4 all ones) and the packet;
//   the same over the body cut in pieces at input-chosen points (and byte by byte through BTH
//   byte 4); with the computed ICRC written, icrc_ok holds, flipping the input-chosen bit
//   anywhere outside BTH byte 4 (or in the addresses, ports, IP ID, flags) breaks it, flipping
//   bits of byte 4 does not; icrc_ok_any_id finds the IP ID used, whatever ID it is given, and
//   on the input as it came agrees with icrc_ok;
// - psn_diff / psn_add on PSNs from the input, and the small helpers (path_mtu_for, mtu_code,
//   mtu_bytes, rnr_timer_us, source_port_of, flow_label_of, cm_flow_label) on the control bytes.
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "fuzz_check.hpp"
#include "softrnic/wire/roce.hpp"

namespace r = softrnic::wire::roce;

namespace {

constexpr std::size_t kCtlLen = 24;

std::uint16_t be16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] << 8 | p[1]);
}
std::uint32_t be24(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) << 16 | static_cast<std::uint32_t>(p[1]) << 8 | p[2];
}
std::uint32_t be32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(be16(p)) << 16 | be16(p + 2);
}
std::uint64_t be64(const std::uint8_t* p) {
  return static_cast<std::uint64_t>(be32(p)) << 32 | be32(p + 4);
}

// ---- The reference: IBTA vol. 1 tables 38 (opcodes) and 39 (headers per opcode), annex A17 ----

enum Ext : unsigned {
  kDeth = 1,
  kReth = 2,
  kAtomicEth = 4,
  kAeth = 8,
  kAtomicAck = 16,
  kImm = 32,
  kIeth = 64,
  kCnp = 128
};

struct RefOp {
  bool valid = false;
  unsigned ext = 0;      // extended headers, in this order on the wire
  bool payload = false;  // may carry payload (and so PadCnt)
};

constexpr std::array<RefOp, 256> kRef = [] {
  std::array<RefOp, 256> t{};
  auto set = [&](unsigned op, unsigned ext, bool payload) { t[op] = RefOp{true, ext, payload}; };
  set(0x00, 0, true);                    // RC SEND First
  set(0x01, 0, true);                    // SEND Middle
  set(0x02, 0, true);                    // SEND Last
  set(0x03, kImm, true);                 // SEND Last with Immediate
  set(0x04, 0, true);                    // SEND Only
  set(0x05, kImm, true);                 // SEND Only with Immediate
  set(0x06, kReth, true);                // RDMA WRITE First
  set(0x07, 0, true);                    // RDMA WRITE Middle
  set(0x08, 0, true);                    // RDMA WRITE Last
  set(0x09, kImm, true);                 // RDMA WRITE Last with Immediate
  set(0x0A, kReth, true);                // RDMA WRITE Only
  set(0x0B, kReth | kImm, true);         // RDMA WRITE Only with Immediate
  set(0x0C, kReth, false);               // RDMA READ Request
  set(0x0D, kAeth, true);                // RDMA READ Response First
  set(0x0E, 0, true);                    // RDMA READ Response Middle
  set(0x0F, kAeth, true);                // RDMA READ Response Last
  set(0x10, kAeth, true);                // RDMA READ Response Only
  set(0x11, kAeth, false);               // Acknowledge
  set(0x12, kAeth | kAtomicAck, false);  // ATOMIC Acknowledge
  set(0x13, kAtomicEth, false);          // CmpSwap
  set(0x14, kAtomicEth, false);          // FetchAdd
  set(0x16, kIeth, true);                // SEND Last with Invalidate
  set(0x17, kIeth, true);                // SEND Only with Invalidate
  set(0x64, kDeth, true);                // UD SEND Only
  set(0x65, kDeth | kImm, true);         // UD SEND Only with Immediate
  set(0x81, kCnp, false);                // CNP (annex A17.9.3): 16 reserved bytes
  return t;
}();

constexpr std::size_t ref_header_len(const RefOp& o) {
  std::size_t n = 12;
  if (o.ext & kDeth) n += 8;
  if (o.ext & kReth) n += 16;
  if (o.ext & kAtomicEth) n += 28;
  if (o.ext & kAeth) n += 4;
  if (o.ext & kAtomicAck) n += 8;
  if (o.ext & kImm) n += 4;
  if (o.ext & kIeth) n += 4;
  if (o.ext & kCnp) n += 16;
  return n;
}

r::ParseError parse_reference(std::span<const std::uint8_t> b) {
  using E = r::ParseError;
  if (b.size() < 12 + 4) return E::too_short;
  const RefOp& o = kRef[b[0]];
  if (!o.valid) return E::unknown_opcode;
  if ((b[1] & 0x0F) != 0) return E::bad_version;
  const std::size_t hl = ref_header_len(o);
  if (b.size() < hl + 4) return E::too_short;
  const unsigned pad = (b[1] >> 4) & 3;
  if (pad > b.size() - hl - 4 || (pad != 0 && !o.payload)) return E::bad_pad;
  return E::ok;
}

// Where each extended header starts (0: absent).
struct Offsets {
  std::size_t deth = 0, reth = 0, atomic = 0, aeth = 0, atomic_ack = 0, imm = 0, ieth = 0, cnp = 0, end = 12;
};
Offsets offsets_of(const RefOp& o) {
  Offsets f;
  std::size_t at = 12;
  auto take = [&](unsigned bit, std::size_t len, std::size_t& where) {
    if (o.ext & bit) {
      where = at;
      at += len;
    }
  };
  take(kDeth, 8, f.deth);
  take(kReth, 16, f.reth);
  take(kAtomicEth, 28, f.atomic);
  take(kAeth, 4, f.aeth);
  take(kAtomicAck, 8, f.atomic_ack);
  take(kImm, 4, f.imm);
  take(kIeth, 4, f.ieth);
  take(kCnp, 16, f.cnp);
  f.end = at;
  return f;
}

// The fields of an accepted packet are the wire's; the headers its opcode does not carry are absent.
void check_fields(std::span<const std::uint8_t> b, const r::Packet& p) {
  const RefOp& o = kRef[b[0]];
  const Offsets f = offsets_of(o);
  FUZZ_CHECK(static_cast<unsigned>(p.opcode) == b[0]);
  FUZZ_CHECK(p.solicited == ((b[1] & 0x80) != 0) && p.mig_req == ((b[1] & 0x40) != 0));
  FUZZ_CHECK(p.pad == ((b[1] >> 4) & 3));
  FUZZ_CHECK(p.pkey == be16(b.data() + 2));
  FUZZ_CHECK(p.fecn == ((b[4] & 0x80) != 0) && p.becn == ((b[4] & 0x40) != 0));
  FUZZ_CHECK(p.dest_qpn == be24(b.data() + 5));
  FUZZ_CHECK(p.ack_req == ((b[8] & 0x80) != 0));
  FUZZ_CHECK(p.psn == be24(b.data() + 9));
  const std::uint8_t* d = b.data();
  FUZZ_CHECK(p.deth.has_value() == (f.deth != 0));
  if (p.deth) FUZZ_CHECK(p.deth->qkey == be32(d + f.deth) && p.deth->src_qpn == be24(d + f.deth + 5));
  FUZZ_CHECK(p.reth.has_value() == (f.reth != 0));
  if (p.reth) {
    FUZZ_CHECK(p.reth->va == be64(d + f.reth) && p.reth->rkey == be32(d + f.reth + 8) &&
               p.reth->dma_len == be32(d + f.reth + 12));
  }
  FUZZ_CHECK(p.atomic_eth.has_value() == (f.atomic != 0));
  if (p.atomic_eth) {
    FUZZ_CHECK(p.atomic_eth->va == be64(d + f.atomic) && p.atomic_eth->rkey == be32(d + f.atomic + 8) &&
               p.atomic_eth->swap_add == be64(d + f.atomic + 12) && p.atomic_eth->compare == be64(d + f.atomic + 20));
  }
  FUZZ_CHECK(p.aeth.has_value() == (f.aeth != 0));
  if (p.aeth) FUZZ_CHECK(p.aeth->syndrome == d[f.aeth] && p.aeth->msn == be24(d + f.aeth + 1));
  FUZZ_CHECK(p.atomic_ack.has_value() == (f.atomic_ack != 0));
  if (p.atomic_ack) FUZZ_CHECK(*p.atomic_ack == be64(d + f.atomic_ack));
  FUZZ_CHECK(p.imm.has_value() == (f.imm != 0));
  if (p.imm) {
    std::uint32_t imm = 0;
    std::memcpy(&imm, d + f.imm, 4);
    FUZZ_CHECK(*p.imm == imm);
  }
  FUZZ_CHECK(p.inv_rkey.has_value() == (f.ieth != 0));
  if (p.inv_rkey) FUZZ_CHECK(*p.inv_rkey == be32(d + f.ieth));
  // Header, payload, pad, ICRC: the whole packet, in that order.
  FUZZ_CHECK(p.payload.data() == d + f.end);
  FUZZ_CHECK(f.end + p.payload.size() + p.pad + r::kIcrcLen == b.size());
}

bool same_fields(const r::Packet& a, const r::Packet& b) {
  return a.opcode == b.opcode && a.solicited == b.solicited && a.mig_req == b.mig_req && a.pad == b.pad &&
         a.pkey == b.pkey && a.fecn == b.fecn && a.becn == b.becn && a.dest_qpn == b.dest_qpn &&
         a.ack_req == b.ack_req && a.psn == b.psn && a.deth == b.deth && a.reth == b.reth &&
         a.atomic_eth == b.atomic_eth && a.aeth == b.aeth && a.atomic_ack == b.atomic_ack && a.imm == b.imm &&
         a.inv_rkey == b.inv_rkey;
}

constexpr std::uint8_t kCanary = 0xA5;

// build_headers(parse(x)) against x's header bytes.
void check_rebuilt(std::span<const std::uint8_t> b, const r::Packet& p) {
  const RefOp& o = kRef[b[0]];
  const Offsets f = offsets_of(o);
  std::array<std::uint8_t, r::kMaxHeaderLen + 8> buf;
  buf.fill(kCanary);
  const std::size_t n =
      r::build_headers(p, p.payload.size(), std::span<std::uint8_t, r::kMaxHeaderLen>(buf.data(), r::kMaxHeaderLen));
  FUZZ_CHECK(n == f.end && n == r::op_info(p.opcode).header_len);
  // Nothing written past the header.
  FUZZ_CHECK(std::all_of(buf.begin() + static_cast<std::ptrdiff_t>(n), buf.end(),
                         [](std::uint8_t c) { return c == kCanary; }));
  std::array<std::uint8_t, r::kMaxHeaderLen> want{};
  std::memcpy(want.data(), b.data(), n);
  // PadCnt: computed from the payload length (the input's when it pads the payload to 4 bytes).
  const auto pad = static_cast<std::uint8_t>(r::pad_of(p.payload.size()));
  want[1] = static_cast<std::uint8_t>((want[1] & ~0x30) | pad << 4);
  if ((p.payload.size() + p.pad) % 4 == 0) FUZZ_CHECK(pad == p.pad);
  want[4] &= 0xC0;  // FECN, BECN, Resv6a
  want[8] &= 0x80;  // AckReq, Resv7
  if (f.deth) want[f.deth + 4] = 0;
  if (f.cnp) std::memset(want.data() + f.cnp, 0, 16);
  for (std::size_t i = 0; i < n; ++i)
    FUZZ_CHECK_MSG(buf[i] == want[i], "opcode 0x%02x: header byte %zu built 0x%02x, want 0x%02x", b[0], i, buf[i],
                   want[i]);
  // The rebuilt packet (headers, payload, pad, any ICRC) parses to the same fields, PadCnt
  // aside. (An opcode without payload given payload bytes that need padding: the builder writes
  // a PadCnt the parser refuses on such opcodes; a sender never passes such a length.)
  if (!o.payload && pad != 0) return;
  std::vector<std::uint8_t> pkt(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
  pkt.insert(pkt.end(), p.payload.begin(), p.payload.end());
  pkt.insert(pkt.end(), pad + r::kIcrcLen, 0);
  r::Packet q;
  FUZZ_CHECK(r::parse(pkt, q) == r::ParseError::ok);
  r::Packet want_p = p;
  want_p.pad = pad;
  FUZZ_CHECK(same_fields(q, want_p));
  FUZZ_CHECK(q.payload.size() == p.payload.size());
  FUZZ_CHECK(std::equal(q.payload.begin(), q.payload.end(), p.payload.begin()));
}

// Bytes from the input, cyclically (zeros when there are none).
struct Source {
  std::span<const std::uint8_t> b;
  std::size_t at = 0;
  std::uint8_t u8() { return b.empty() ? 0 : b[at++ % b.size()]; }
  std::uint32_t u32() {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = v << 8 | u8();
    return v;
  }
  std::uint64_t u64() { return static_cast<std::uint64_t>(u32()) << 32 | u32(); }
};

// Headers built from input-chosen fields (some wider than their wire fields) parse back to the
// fields masked to their widths; the builder refuses an opcode not in the table, writing nothing.
void check_built_from_fields(Source src) {
  static constexpr std::uint8_t kOpcodes[] = {0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
                                              0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F, 0x10, 0x11,
                                              0x12, 0x13, 0x14, 0x16, 0x17, 0x64, 0x65, 0x81};
  const std::uint8_t pick = src.u8();
  const std::uint8_t op = pick < 2 * sizeof kOpcodes ? kOpcodes[pick % sizeof kOpcodes] : pick;
  r::Packet p;
  p.opcode = static_cast<r::Opcode>(op);
  const std::uint8_t flags = src.u8();
  p.solicited = flags & 1;
  p.mig_req = flags & 2;
  p.fecn = flags & 4;
  p.becn = flags & 8;
  p.ack_req = flags & 16;
  p.pad = static_cast<std::uint8_t>(flags >> 5);  // ignored by the builder
  p.pkey = static_cast<std::uint16_t>(src.u32());
  p.dest_qpn = src.u32();
  p.psn = src.u32();
  const std::uint64_t va = src.u64();
  const std::uint32_t rkey = src.u32();
  p.reth = r::Reth{va, rkey, src.u32()};
  p.atomic_eth = r::AtomicEth{va, rkey, src.u64(), src.u64()};
  p.aeth = r::Aeth{src.u8(), src.u32()};
  p.atomic_ack = src.u64();
  p.imm = src.u32();
  p.inv_rkey = src.u32();
  p.deth = r::Deth{src.u32(), src.u32()};
  const RefOp& o = kRef[op];
  const std::size_t payload_len = o.payload ? src.u8() % 64 : 0;
  std::array<std::uint8_t, r::kMaxHeaderLen> hdr;
  hdr.fill(kCanary);
  const std::size_t n = r::build_headers(p, payload_len, hdr);
  if (!o.valid) {
    FUZZ_CHECK(n == 0);
    FUZZ_CHECK(std::all_of(hdr.begin(), hdr.end(), [](std::uint8_t c) { return c == kCanary; }));
    return;
  }
  FUZZ_CHECK(n == ref_header_len(o));
  std::vector<std::uint8_t> pkt(hdr.begin(), hdr.begin() + static_cast<std::ptrdiff_t>(n));
  pkt.resize(n + payload_len + r::pad_of(payload_len) + r::kIcrcLen, 0x5A);
  r::Packet q;
  FUZZ_CHECK(r::parse(pkt, q) == r::ParseError::ok);
  check_fields(pkt, q);
  FUZZ_CHECK(q.payload.size() == payload_len && q.pad == r::pad_of(payload_len));
  // What the wire carries of p.
  const Offsets f = offsets_of(o);
  r::Packet w;
  w.opcode = p.opcode;
  w.solicited = p.solicited;
  w.mig_req = p.mig_req;
  w.pad = static_cast<std::uint8_t>(r::pad_of(payload_len));
  w.pkey = p.pkey;
  w.fecn = p.fecn;
  w.becn = p.becn;
  w.dest_qpn = p.dest_qpn & 0xFFFFFF;
  w.ack_req = p.ack_req;
  w.psn = p.psn & 0xFFFFFF;
  if (f.deth) w.deth = r::Deth{p.deth->qkey, p.deth->src_qpn & 0xFFFFFF};
  if (f.reth) w.reth = p.reth;
  if (f.atomic) w.atomic_eth = p.atomic_eth;
  if (f.aeth) w.aeth = r::Aeth{p.aeth->syndrome, p.aeth->msn & 0xFFFFFF};
  if (f.atomic_ack) w.atomic_ack = p.atomic_ack;
  if (f.imm) w.imm = p.imm;
  if (f.ieth) w.inv_rkey = p.inv_rkey;
  FUZZ_CHECK(same_fields(q, w));
  // Reserved bytes: sent as zero.
  FUZZ_CHECK((pkt[4] & 0x3F) == 0 && (pkt[8] & 0x7F) == 0 && (pkt[1] & 0x0F) == 0);
  if (f.deth) FUZZ_CHECK(pkt[f.deth + 4] == 0);
  if (f.cnp)
    FUZZ_CHECK(std::all_of(pkt.begin() + static_cast<std::ptrdiff_t>(f.cnp),
                           pkt.begin() + static_cast<std::ptrdiff_t>(f.cnp + 16),
                           [](std::uint8_t c) { return c == 0; }));
}

// ---- ICRC ----

void put16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 8);
  p[1] = static_cast<std::uint8_t>(v);
}
void put32(std::uint8_t* p, std::uint32_t v) {
  put16(p, static_cast<std::uint16_t>(v >> 16));
  put16(p + 2, static_cast<std::uint16_t>(v));
}

// IBTA annex A17.3.3 (RoCEv2 over IPv4): CRC-32 over 64 bits of ones (for the LRH), the IPv4
// header with TOS, TTL and checksum all ones, the UDP header with its checksum all ones, the BTH
// with byte 4 (FECN, BECN, Resv6a) all ones, the rest of the packet up to the ICRC.
std::uint32_t icrc_reference(const r::IcrcAddr& a, std::span<const std::uint8_t> body) {
  std::vector<std::uint8_t> m(8 + 20 + 8, 0xFF);
  std::uint8_t* ip = m.data() + 8;
  const std::size_t udp_len = 8 + body.size() + r::kIcrcLen;
  ip[0] = 0x45;
  put16(ip + 2, static_cast<std::uint16_t>(20 + udp_len));
  put16(ip + 4, a.ip_id);
  put16(ip + 6, a.frag_off);
  ip[9] = 17;
  put32(ip + 12, a.src_ip);
  put32(ip + 16, a.dst_ip);
  put16(ip + 20, a.sport);
  put16(ip + 22, a.dport);
  put16(ip + 24, static_cast<std::uint16_t>(udp_len));
  m.insert(m.end(), body.begin(), body.end());
  if (body.size() > 4) m[36 + 4] = 0xFF;
  return static_cast<std::uint32_t>(::crc32(0, m.data(), static_cast<uInt>(m.size())));
}

void store_icrc(std::vector<std::uint8_t>& pkt, std::uint32_t v) {
  for (std::size_t i = 0; i < 4; ++i) pkt[pkt.size() - 4 + i] = static_cast<std::uint8_t>(v >> (8 * i));
}

void flip_addr_bit(r::IcrcAddr& a, std::size_t k) {  // k < 128
  if (k < 32)
    a.src_ip ^= 1u << k;
  else if (k < 64)
    a.dst_ip ^= 1u << (k - 32);
  else if (k < 80)
    a.sport = static_cast<std::uint16_t>(a.sport ^ 1u << (k - 64));
  else if (k < 96)
    a.dport = static_cast<std::uint16_t>(a.dport ^ 1u << (k - 80));
  else if (k < 112)
    a.ip_id = static_cast<std::uint16_t>(a.ip_id ^ 1u << (k - 96));
  else
    a.frag_off = static_cast<std::uint16_t>(a.frag_off ^ 1u << (k - 112));
}

void check_icrc(const r::IcrcAddr& a, std::span<const std::uint8_t> b, std::uint16_t cut_a, std::uint16_t cut_b,
                std::uint32_t bit) {
  std::uint16_t id = 0x1234;
  if (b.size() < r::kBthLen + r::kIcrcLen) {
    FUZZ_CHECK(!r::icrc_ok(a, b));
    FUZZ_CHECK(!r::icrc_ok_any_id(a, b, id));
    return;
  }
  const std::span<const std::uint8_t> body = b.first(b.size() - r::kIcrcLen);
  const std::span<const std::uint8_t> whole[] = {body};
  const std::uint32_t v = r::icrc(a, whole);
  FUZZ_CHECK_MSG(v == icrc_reference(a, body), "icrc %08x, reference %08x", v, icrc_reference(a, body));
  // In pieces: cut at two input-chosen points (pieces may be empty), and byte by byte through
  // BTH byte 4 (the masked one) then the rest.
  std::size_t c1 = cut_a % (body.size() + 1), c2 = cut_b % (body.size() + 1);
  if (c1 > c2) std::swap(c1, c2);
  const std::span<const std::uint8_t> three[] = {body.first(c1), body.subspan(c1, c2 - c1), body.subspan(c2)};
  FUZZ_CHECK(r::icrc(a, three) == v);
  std::vector<std::span<const std::uint8_t>> bytes;
  for (std::size_t i = 0; i < 6; ++i) bytes.push_back(body.subspan(i, 1));
  bytes.push_back({});
  bytes.push_back(body.subspan(6));
  FUZZ_CHECK(r::icrc(a, bytes) == v);
  // The input as it came: icrc_ok says whether its trailer is the ICRC; icrc_ok_any_id agrees
  // and, when it finds an ID, that ID makes the trailer right.
  const std::uint32_t stored =
      static_cast<std::uint32_t>(b[b.size() - 4]) | static_cast<std::uint32_t>(b[b.size() - 3]) << 8 |
      static_cast<std::uint32_t>(b[b.size() - 2]) << 16 | static_cast<std::uint32_t>(b[b.size() - 1]) << 24;
  const bool ok = r::icrc_ok(a, b);
  FUZZ_CHECK(ok == (stored == v));
  if (r::icrc_ok_any_id(a, b, id)) {
    r::IcrcAddr with = a;
    with.ip_id = id;
    FUZZ_CHECK(r::icrc_ok(with, b));
  } else {
    FUZZ_CHECK(!ok);
  }
  if (ok) FUZZ_CHECK(r::icrc_ok_any_id(a, b, id) && id == a.ip_id);
  // Sealed with the computed ICRC.
  std::vector<std::uint8_t> sealed(b.begin(), b.end());
  store_icrc(sealed, v);
  FUZZ_CHECK(r::icrc_ok(a, sealed));
  // icrc_ok_any_id finds the ID used whatever ID it is given (the ID's effect on the CRC is
  // one-to-one: no other ID fits).
  r::IcrcAddr other = a;
  other.ip_id = static_cast<std::uint16_t>(~a.ip_id ^ cut_a);
  id = static_cast<std::uint16_t>(a.ip_id + 1);
  FUZZ_CHECK(r::icrc_ok_any_id(other, sealed, id));
  FUZZ_CHECK_MSG(id == a.ip_id, "icrc_ok_any_id found IP ID %u, the packet's is %u", id, a.ip_id);
  // Solved again (from the per-length cache this time): the same.
  id = 0;
  FUZZ_CHECK(r::icrc_ok_any_id(a, sealed, id) && id == a.ip_id);
  // BTH byte 4 is masked: any change there keeps the ICRC.
  sealed[4] = static_cast<std::uint8_t>(sealed[4] ^ (1u << (bit % 8)) ^ (cut_b >> 8));
  FUZZ_CHECK(r::icrc_ok(a, sealed));
  // One flipped bit anywhere else (the packet, its ICRC, the addresses, ports, ID, flags):
  // refused.
  const std::size_t nbits = 8 * sealed.size() + 128;
  std::size_t k = bit % nbits;
  if (k < 8 * sealed.size() && k / 8 == 4) k += 8;  // byte 4: take the next byte's bit
  if (k < 8 * sealed.size()) {
    sealed[k / 8] = static_cast<std::uint8_t>(sealed[k / 8] ^ (1u << (k % 8)));
    FUZZ_CHECK_MSG(!r::icrc_ok(a, sealed), "bit %zu of the packet flipped, ICRC still good", k);
  } else {
    r::IcrcAddr flipped = a;
    flip_addr_bit(flipped, k - 8 * sealed.size());
    FUZZ_CHECK_MSG(!r::icrc_ok(flipped, sealed), "address bit %zu flipped, ICRC still good", k - 8 * sealed.size());
  }
}

// The small helpers, on input-chosen values: path MTU for an IP MTU, IB MTU codes, RNR timer
// codes, UDP source ports and flow labels as Linux picks them.
void check_helpers(std::uint32_t v, std::uint32_t w, std::uint16_t s, std::uint16_t t) {
  constexpr std::uint32_t kOverhead = 20 + 8 + 12 + 16 + 4 + 4;  // IPv4, UDP, BTH, RETH, ImmDt, ICRC
  const std::uint32_t mtu = r::path_mtu_for(v);
  if (mtu == 0) {
    FUZZ_CHECK(v < 256 + kOverhead);
  } else {
    FUZZ_CHECK(mtu >= 256 && mtu <= 4096 && (mtu & (mtu - 1)) == 0 && mtu + kOverhead <= v);
    FUZZ_CHECK(mtu == 4096 || 2 * mtu + kOverhead > v);
  }
  FUZZ_CHECK(r::mtu_bytes(r::mtu_code(mtu)) == mtu);
  const auto code = static_cast<std::uint8_t>(w);
  const std::uint32_t bytes = r::mtu_bytes(code);
  FUZZ_CHECK((bytes != 0) == (code >= 1 && code <= 5));
  if (bytes) FUZZ_CHECK(r::mtu_code(bytes) == code);
  FUZZ_CHECK(r::rnr_timer_us(code) == r::rnr_timer_us(code & 31) && r::rnr_timer_us(code) > 0);
  if ((code & 31) != 0 && (code & 31) != 31) FUZZ_CHECK(r::rnr_timer_us(code & 31) < r::rnr_timer_us((code & 31) + 1));
  FUZZ_CHECK(r::rnr_timer_us(0) > r::rnr_timer_us(31));  // code 0 is the longest
  FUZZ_CHECK(r::source_port_of(v) >= 0xC000);
  FUZZ_CHECK(r::flow_label_of(v, w) < (1u << 20) && r::cm_flow_label(s, t) < (1u << 20));
  FUZZ_CHECK(r::source_port_of(w, v, w) >= 0xC000);
  FUZZ_CHECK(r::source_port_of(0, v, w) == r::source_port_of(r::flow_label_of(v, w), v, w));
}

void check_tables_once() {
  static const bool done = [] {
    for (unsigned op = 0; op < 256; ++op) {
      const r::OpInfo& i = r::op_info(static_cast<r::Opcode>(op));
      FUZZ_CHECK_MSG(i.valid() == kRef[op].valid, "opcode 0x%02x", op);
      if (!i.valid()) continue;
      FUZZ_CHECK_MSG(i.header_len == ref_header_len(kRef[op]), "opcode 0x%02x header length %u", op, i.header_len);
      FUZZ_CHECK_MSG(i.has(r::Has::payload) == kRef[op].payload, "opcode 0x%02x payload", op);
      FUZZ_CHECK(!i.name.empty());
    }
    return true;
  }();
  (void)done;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  check_tables_once();
  if (size < kCtlLen) return 0;
  r::IcrcAddr a;
  a.src_ip = be32(data);
  a.dst_ip = be32(data + 4);
  a.sport = be16(data + 8);
  a.dport = be16(data + 10);
  a.ip_id = be16(data + 12);
  a.frag_off = be16(data + 14);
  const std::uint16_t cut_a = be16(data + 16), cut_b = be16(data + 18);
  const std::uint32_t bit = be32(data + 20);
  const std::span<const std::uint8_t> b(data + kCtlLen, size - kCtlLen);

  r::Packet p;
  const r::ParseError e = r::parse(b, p);
  FUZZ_CHECK_MSG(e == parse_reference(b), "parse says %d, the reference %d", static_cast<int>(e),
                 static_cast<int>(parse_reference(b)));
  FUZZ_CHECK(!r::to_string(e).empty() && r::to_string(e) != "?");
  if (e == r::ParseError::ok) {
    check_fields(b, p);
    check_rebuilt(b, p);
  }
  check_built_from_fields(Source{b});
  check_icrc(a, b, cut_a, cut_b, bit);
  check_helpers(a.src_ip, a.dst_ip, a.sport, a.dport);
  // PSN arithmetic modulo 2^24 on input-chosen PSNs.
  if (b.size() >= 12) {
    const std::uint32_t x = be24(b.data() + 9), y = be24(b.data() + 5);
    const std::int32_t d = r::psn_diff(x, y);
    // roce.hpp documents (-2^23, 2^23]; the code gives [-2^23, 2^23): half-way (x - y = 2^23)
    // comes out as -2^23 (docs/fuzzing.md, Findings). Either end is taken here.
    FUZZ_CHECK(d >= -(1 << 23) && d <= (1 << 23));
    FUZZ_CHECK(d != -(1 << 23) || ((x - y) & 0xFFFFFF) == 0x800000);
    FUZZ_CHECK(r::psn_add(y, static_cast<std::uint32_t>(d)) == x);
    FUZZ_CHECK(r::psn_diff(r::psn_add(x, 1), x) == 1);
  }
  return 0;
}
