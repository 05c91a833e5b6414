// Fuzz target: the IB CM MAD codec and rdma_cm's CMA header (soft_rnic/wire/ib_cm.hpp).
// An input is a MAD (the 256 bytes of a UD SEND to QP1); up to 10 bytes after it choose a field
// and a value for the width checks below (the codec does not look past 256 bytes).
// Checked:
// - parse_header: the verdict of a plain reading of IBTA 13.4.2 and 12.6 (base version, class,
//   class version, which attributes are connection messages, method Send), the header fields as
//   on the wire; parse(Message) and the seven typed parses agree with it (wrong_attr for the
//   others);
// - an accepted message's fields are where Linux's include/rdma/ibta_vol1_c12.h (IBTA tables
//   106-113) puts them: every field of every message compared with the bits of the input, our
//   own table of byte, bit and width;
// - build(parse(x), tid): the MAD header as documented (version 1, class 7 version 2, method
//   Send, status, class-specific, reserved and attribute modifier zero, x's TID and attribute),
//   and x's message bytes on every bit a field of the table defines, zero elsewhere (reserved
//   bits, and the vendor IDs of REQ and REP, which the codec does not keep); nothing written
//   past 256 bytes, nothing at all into a 255-byte buffer; parse(build(parse(x))) == parse(x);
//   build(Message) writes what the typed build of the message it holds writes;
// - one input-chosen field set to an input-chosen value: build refuses exactly the values wider
//   than the field (a REJ's reject info length also above 72, the ARI's size), and what it
//   builds parses back to that value;
// - the CMA header at the start of a REQ's private data, and at the start of the input: the
//   verdict (version 0, IP version 4 or 6), its fields, build_cma_hdr(parse_cma_hdr(x)) == x but
//   for the IP version byte's reserved low nibble, and parsed again the same; a bad IP version
//   or a short buffer built to nothing; gid_ipv4 / ipv4_of_gid and cma_service_id / cma_port_of
//   round trips on the REQ's GIDs and service ID.
#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "fuzz_check.hpp"
#include "softrnic/wire/ib_cm.hpp"

namespace cm = softrnic::wire::ibcm;

namespace {

std::uint16_t be16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] << 8 | p[1]);
}
std::uint32_t be32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(be16(p)) << 16 | be16(p + 2);
}
std::uint64_t be64(const std::uint8_t* p) {
  return static_cast<std::uint64_t>(be32(p)) << 32 | be32(p + 4);
}

// `width` bits from bit `bit` (0: the most significant) of message byte `byte`, big-endian, as
// Linux's IBA_FIELD_BLOC / IBA_FIELDnn_LOC read them.
std::uint64_t bits_at(const std::uint8_t* msg, unsigned byte, unsigned bit, unsigned width) {
  std::uint64_t v = 0;
  for (unsigned i = 0; i < width; ++i) {
    const unsigned pos = byte * 8 + bit + i;
    v = v << 1 | ((msg[pos / 8] >> (7 - pos % 8)) & 1u);
  }
  return v;
}
void mark_bits(std::uint8_t* mask, unsigned byte, unsigned bit, unsigned width) {
  for (unsigned i = 0; i < width; ++i) {
    const unsigned pos = byte * 8 + bit + i;
    mask[pos / 8] = static_cast<std::uint8_t>(mask[pos / 8] | 0x80u >> (pos % 8));
  }
}

template <typename M>
struct Bits {
  const char* name;
  unsigned byte, bit, width;
  unsigned type_bits;  // of the struct member (1 for a bool)
  std::uint64_t (*get)(const M&);
  void (*set)(M&, std::uint64_t);
};
template <typename M>
struct Bytes {
  const char* name;
  unsigned byte, len;
  std::span<const std::uint8_t> (*get)(const M&);
};
template <typename M>
struct Layout {
  std::vector<Bits<M>> bits;
  std::vector<Bytes<M>> bytes;
};

template <typename T>
constexpr unsigned type_bits() {
  return std::is_same_v<T, bool> ? 1u : static_cast<unsigned>(sizeof(T) * 8);
}

// clang-format off
#define MEMBER_T(M, f) std::remove_cvref_t<decltype(std::declval<M&>().f)>
#define BITS(M, f, byte, bit, width)                                  \
  Bits<M>{#f, byte, bit, width, type_bits<MEMBER_T(M, f)>(),          \
          [](const M& m) { return static_cast<std::uint64_t>(m.f); }, \
          [](M& m, std::uint64_t v) { m.f = static_cast<MEMBER_T(M, f)>(v); }}
#define BYTES(M, f, byte, len) \
  Bytes<M>{#f, byte, len, [](const M& m) { return std::span<const std::uint8_t>(m.f.data(), m.f.size()); }}
// clang-format on

// IBTA tables 106-113 as include/rdma/ibta_vol1_c12.h spells them (offsets from the message
// start, after the 24-byte MAD header).
#define PATH(p, o)                                                                                \
  BITS(cm::Req, p.local_lid, (o), 0, 16), BITS(cm::Req, p.remote_lid, (o) + 2, 0, 16),            \
      BITS(cm::Req, p.flow_label, (o) + 36, 0, 20), BITS(cm::Req, p.packet_rate, (o) + 39, 2, 6), \
      BITS(cm::Req, p.traffic_class, (o) + 40, 0, 8), BITS(cm::Req, p.hop_limit, (o) + 41, 0, 8), \
      BITS(cm::Req, p.sl, (o) + 42, 0, 4), BITS(cm::Req, p.subnet_local, (o) + 42, 4, 1),         \
      BITS(cm::Req, p.local_ack_timeout, (o) + 43, 0, 5)

const Layout<cm::Req> kReq{
    {BITS(cm::Req, local_comm_id, 0, 0, 32),
     // 5..7: VendorID (not kept by the codec)
     BITS(cm::Req, service_id, 8, 0, 64), BITS(cm::Req, local_ca_guid, 16, 0, 64), BITS(cm::Req, local_qkey, 28, 0, 32),
     BITS(cm::Req, local_qpn, 32, 0, 24), BITS(cm::Req, responder_resources, 35, 0, 8),
     BITS(cm::Req, local_eecn, 36, 0, 24), BITS(cm::Req, initiator_depth, 39, 0, 8),
     BITS(cm::Req, remote_eecn, 40, 0, 24), BITS(cm::Req, remote_cm_response_timeout, 43, 0, 5),
     BITS(cm::Req, transport_service_type, 43, 5, 2), BITS(cm::Req, end_to_end_flow_control, 43, 7, 1),
     BITS(cm::Req, starting_psn, 44, 0, 24), BITS(cm::Req, local_cm_response_timeout, 47, 0, 5),
     BITS(cm::Req, retry_count, 47, 5, 3), BITS(cm::Req, pkey, 48, 0, 16), BITS(cm::Req, path_mtu, 50, 0, 4),
     BITS(cm::Req, rdc_exists, 50, 4, 1), BITS(cm::Req, rnr_retry_count, 50, 5, 3),
     BITS(cm::Req, max_cm_retries, 51, 0, 4), BITS(cm::Req, srq, 51, 4, 1),
     BITS(cm::Req, extended_transport_type, 51, 5, 3), PATH(primary, 52), PATH(alternate, 96),
     BITS(cm::Req, sap_supported, 139, 5, 1)},
    {BYTES(cm::Req, primary.local_gid, 56, 16), BYTES(cm::Req, primary.remote_gid, 72, 16),
     BYTES(cm::Req, alternate.local_gid, 100, 16), BYTES(cm::Req, alternate.remote_gid, 116, 16),
     BYTES(cm::Req, private_data, 140, 92)}};

const Layout<cm::Mra> kMra{{BITS(cm::Mra, local_comm_id, 0, 0, 32), BITS(cm::Mra, remote_comm_id, 4, 0, 32),
                            BITS(cm::Mra, msg_mraed, 8, 0, 2), BITS(cm::Mra, service_timeout, 9, 0, 5)},
                           {BYTES(cm::Mra, private_data, 10, 222)}};

const Layout<cm::Rej> kRej{{BITS(cm::Rej, local_comm_id, 0, 0, 32), BITS(cm::Rej, remote_comm_id, 4, 0, 32),
                            BITS(cm::Rej, msg_rejected, 8, 0, 2), BITS(cm::Rej, reject_info_length, 9, 0, 7),
                            BITS(cm::Rej, reason, 10, 0, 16)},
                           {BYTES(cm::Rej, ari, 12, 72), BYTES(cm::Rej, private_data, 84, 148)}};

const Layout<cm::Rep> kRep{
    {BITS(cm::Rep, local_comm_id, 0, 0, 32), BITS(cm::Rep, remote_comm_id, 4, 0, 32),
     BITS(cm::Rep, local_qkey, 8, 0, 32), BITS(cm::Rep, local_qpn, 12, 0, 24),  // 15: VendorID[23:16] (not kept)
     BITS(cm::Rep, local_eecn, 16, 0, 24),                                      // 19: VendorID[15:8]
     BITS(cm::Rep, starting_psn, 20, 0, 24),                                    // 23: VendorID[7:0]
     BITS(cm::Rep, responder_resources, 24, 0, 8), BITS(cm::Rep, initiator_depth, 25, 0, 8),
     BITS(cm::Rep, target_ack_delay, 26, 0, 5), BITS(cm::Rep, failover_accepted, 26, 5, 2),
     BITS(cm::Rep, end_to_end_flow_control, 26, 7, 1), BITS(cm::Rep, rnr_retry_count, 27, 0, 3),
     BITS(cm::Rep, srq, 27, 3, 1), BITS(cm::Rep, local_ca_guid, 28, 0, 64)},
    {BYTES(cm::Rep, private_data, 36, 196)}};

const Layout<cm::Rtu> kRtu{{BITS(cm::Rtu, local_comm_id, 0, 0, 32), BITS(cm::Rtu, remote_comm_id, 4, 0, 32)},
                           {BYTES(cm::Rtu, private_data, 8, 224)}};

const Layout<cm::Dreq> kDreq{{BITS(cm::Dreq, local_comm_id, 0, 0, 32), BITS(cm::Dreq, remote_comm_id, 4, 0, 32),
                              BITS(cm::Dreq, remote_qpn, 8, 0, 24)},
                             {BYTES(cm::Dreq, private_data, 12, 220)}};

const Layout<cm::Drep> kDrep{{BITS(cm::Drep, local_comm_id, 0, 0, 32), BITS(cm::Drep, remote_comm_id, 4, 0, 32)},
                             {BYTES(cm::Drep, private_data, 8, 224)}};

const Layout<cm::Req>& layout(const cm::Req&) {
  return kReq;
}
const Layout<cm::Mra>& layout(const cm::Mra&) {
  return kMra;
}
const Layout<cm::Rej>& layout(const cm::Rej&) {
  return kRej;
}
const Layout<cm::Rep>& layout(const cm::Rep&) {
  return kRep;
}
const Layout<cm::Rtu>& layout(const cm::Rtu&) {
  return kRtu;
}
const Layout<cm::Dreq>& layout(const cm::Dreq&) {
  return kDreq;
}
const Layout<cm::Drep>& layout(const cm::Drep&) {
  return kDrep;
}

// Every bit a message's fields cover.
template <typename M>
std::array<std::uint8_t, cm::kCmMsgLen> defined_bits(const Layout<M>& l) {
  std::array<std::uint8_t, cm::kCmMsgLen> mask{};
  for (const auto& f : l.bits) mark_bits(mask.data(), f.byte, f.bit, f.width);
  for (const auto& f : l.bytes) std::memset(mask.data() + f.byte, 0xFF, f.len);
  return mask;
}

// ---- the MAD header ----

cm::CmError header_reference(std::span<const std::uint8_t> mad) {
  using E = cm::CmError;
  if (mad.size() < 256) return E::too_short;
  if (mad[0] != 1) return E::bad_base_version;
  if (mad[1] != 0x07) return E::bad_mgmt_class;
  if (mad[2] != 2) return E::bad_class_version;
  const std::uint16_t attr = be16(mad.data() + 16);
  if (attr == 0x0001 || (attr >= 0x0017 && attr <= 0x001A)) return E::unsupported_attr;
  if (attr < 0x0010 || attr > 0x0016) return E::unknown_attr;
  return mad[3] == 0x03 ? E::ok : E::bad_method;
}

void check_header_fields(std::span<const std::uint8_t> mad, const cm::MadHdr& h) {
  FUZZ_CHECK(h.base_version == mad[0] && h.mgmt_class == mad[1] && h.class_version == mad[2] && h.method == mad[3]);
  FUZZ_CHECK(h.status == be16(mad.data() + 4) && h.class_specific == be16(mad.data() + 6));
  FUZZ_CHECK(h.tid == be64(mad.data() + 8));
  FUZZ_CHECK(static_cast<std::uint16_t>(h.attr_id) == be16(mad.data() + 16));
  FUZZ_CHECK(h.reserved == be16(mad.data() + 18) && h.attr_mod == be32(mad.data() + 20));
}

// The seven typed parses: ok for the MAD's own message, wrong_attr for the others, the header's
// error for all when the header is bad.
template <typename M>
void check_typed(std::span<const std::uint8_t> mad, cm::CmError header, cm::AttrId want) {
  cm::MadHdr h;
  M m;
  const cm::CmError e = cm::parse(mad, h, m);
  if (header != cm::CmError::ok) {
    FUZZ_CHECK(e == header);
    return;
  }
  FUZZ_CHECK(e == (h.attr_id == want ? cm::CmError::ok : cm::CmError::wrong_attr));
}

// ---- input-chosen values ----

struct Tail {
  std::span<const std::uint8_t> b;
  std::size_t at = 0;
  std::uint8_t u8() { return at < b.size() ? b[at++] : 0; }
  std::uint64_t u64() {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = v << 8 | u8();
    return v;
  }
};

// An accepted message: fields against the bits, then built again and parsed again.
template <typename M>
void check_message(std::span<const std::uint8_t> mad, const cm::MadHdr& h, const M& m, Tail tail) {
  const Layout<M>& l = layout(m);
  const std::uint8_t* msg = mad.data() + cm::kMadHdrLen;
  for (const auto& f : l.bits)
    FUZZ_CHECK_MSG(f.get(m) == bits_at(msg, f.byte, f.bit, f.width), "%s: parsed %llu, on the wire %llu", f.name,
                   static_cast<unsigned long long>(f.get(m)),
                   static_cast<unsigned long long>(bits_at(msg, f.byte, f.bit, f.width)));
  for (const auto& f : l.bytes) {
    const auto v = f.get(m);
    FUZZ_CHECK(v.size() == f.len && std::memcmp(v.data(), msg + f.byte, f.len) == 0);
  }

  // Built again: the header as documented, the message's defined bits, zero elsewhere.
  static const auto mask = defined_bits(l);
  std::array<std::uint8_t, cm::kMadLen + 16> out;
  out.fill(0xA5);
  const std::size_t n = cm::build(m, h.tid, std::span<std::uint8_t>(out.data(), out.size()));
  if (n == 0) {
    // Only a REJ whose reject info length exceeds the ARI (72 bytes) cannot be sent; the 7-bit
    // field holds up to 127 and parse takes it as it is (tests/unit/test_ib_cm.cpp).
    if constexpr (std::is_same_v<M, cm::Rej>) {
      FUZZ_CHECK(m.reject_info_length > cm::kRejAriLen);
      return;
    }
    FUZZ_CHECK_MSG(false, "build refused a message parse accepted (attribute 0x%04x)",
                   static_cast<unsigned>(h.attr_id));
  }
  FUZZ_CHECK(n == cm::kMadLen);
  FUZZ_CHECK(std::all_of(out.begin() + cm::kMadLen, out.end(), [](std::uint8_t c) { return c == 0xA5; }));
  FUZZ_CHECK(out[0] == 1 && out[1] == 0x07 && out[2] == 2 && out[3] == 0x03);
  FUZZ_CHECK(be16(out.data() + 4) == 0 && be16(out.data() + 6) == 0);  // status, class-specific
  FUZZ_CHECK(be64(out.data() + 8) == h.tid && be16(out.data() + 16) == be16(mad.data() + 16));
  FUZZ_CHECK(be16(out.data() + 18) == 0 && be32(out.data() + 20) == 0);  // reserved, attribute modifier
  for (std::size_t i = 0; i < cm::kCmMsgLen; ++i)
    FUZZ_CHECK_MSG(out[cm::kMadHdrLen + i] == (msg[i] & mask[i]),
                   "attribute 0x%04x, message byte %zu: built 0x%02x, "
                   "input 0x%02x, defined bits 0x%02x",
                   static_cast<unsigned>(h.attr_id), i, out[cm::kMadHdrLen + i], msg[i], mask[i]);
  cm::MadHdr h2;
  cm::Message again;
  FUZZ_CHECK(cm::parse(std::span<const std::uint8_t>(out.data(), cm::kMadLen), h2, again) == cm::CmError::ok);
  FUZZ_CHECK(std::holds_alternative<M>(again) && std::get<M>(again) == m);
  cm::MadHdr want = h;
  want.status = 0;
  want.class_specific = 0;
  want.reserved = 0;
  want.attr_mod = 0;
  FUZZ_CHECK(h2 == want);
  // Too small a buffer: nothing built, nothing written.
  std::array<std::uint8_t, cm::kMadLen - 1> small;
  small.fill(0x5A);
  FUZZ_CHECK(cm::build(m, h.tid, small) == 0);
  FUZZ_CHECK(std::all_of(small.begin(), small.end(), [](std::uint8_t c) { return c == 0x5A; }));

  // One field set to an input-chosen value, maybe wider than the field.
  if (l.bits.empty()) return;
  const auto& f = l.bits[tail.u8() % l.bits.size()];
  std::uint64_t v = tail.u64();
  if (f.type_bits < 64) v &= (std::uint64_t{1} << f.type_bits) - 1;
  M w = m;
  f.set(w, v);
  const bool fits = f.width >= 64 || v >> f.width == 0;
  bool refused = !fits;
  if constexpr (std::is_same_v<M, cm::Rej>) refused = refused || w.reject_info_length > cm::kRejAriLen;
  std::array<std::uint8_t, cm::kMadLen> b2{};
  const std::size_t n2 = cm::build(w, h.tid, b2);
  FUZZ_CHECK_MSG(n2 == (refused ? 0 : cm::kMadLen), "%s = %llu: build gave %zu", f.name,
                 static_cast<unsigned long long>(v), n2);
  if (refused) return;
  cm::MadHdr h3;
  M back;
  FUZZ_CHECK(cm::parse(b2, h3, back) == cm::CmError::ok);
  FUZZ_CHECK(f.get(back) == v && back == w);
  FUZZ_CHECK(bits_at(b2.data() + cm::kMadHdrLen, f.byte, f.bit, f.width) == v);
}

// ---- rdma_cm's CMA header ----

void check_cma(std::span<const std::uint8_t> pd) {
  cm::CmaHdr h;
  const cm::CmaError e = cm::parse_cma_hdr(pd, h);
  cm::CmaError want = cm::CmaError::ok;
  if (pd.size() < 36)
    want = cm::CmaError::too_short;
  else if (pd[0] != 0)
    want = cm::CmaError::bad_version;
  else if ((pd[1] >> 4) != 4 && (pd[1] >> 4) != 6)
    want = cm::CmaError::bad_ip_version;
  FUZZ_CHECK(e == want);
  FUZZ_CHECK(!cm::to_string(e).empty() && cm::to_string(e) != "?");
  if (e != cm::CmaError::ok) return;
  FUZZ_CHECK(h.ip_version == pd[1] >> 4 && h.src_port == be16(pd.data() + 2));
  FUZZ_CHECK(std::memcmp(h.src_addr.data(), pd.data() + 4, 16) == 0 &&
             std::memcmp(h.dst_addr.data(), pd.data() + 20, 16) == 0);
  FUZZ_CHECK(h.src_ip4() == be32(pd.data() + 16) && h.dst_ip4() == be32(pd.data() + 32));
  std::array<std::uint8_t, cm::kCmaHdrLen + 4> out;
  out.fill(0xA5);
  FUZZ_CHECK(cm::build_cma_hdr(h, out) == cm::kCmaHdrLen);
  FUZZ_CHECK(out[cm::kCmaHdrLen] == 0xA5);
  FUZZ_CHECK(out[0] == 0 && out[1] == (pd[1] & 0xF0));  // the low nibble is reserved
  FUZZ_CHECK(std::memcmp(out.data() + 2, pd.data() + 2, cm::kCmaHdrLen - 2) == 0);
  cm::CmaHdr again;
  FUZZ_CHECK(cm::parse_cma_hdr(std::span<const std::uint8_t>(out.data(), cm::kCmaHdrLen), again) == cm::CmaError::ok &&
             again == h);
  // What cannot be built: a short buffer, an IP version neither 4 nor 6.
  FUZZ_CHECK(cm::build_cma_hdr(h, std::span<std::uint8_t>(out.data(), cm::kCmaHdrLen - 1)) == 0);
  cm::CmaHdr bad = h;
  bad.ip_version = static_cast<std::uint8_t>(pd[2] == 4 || pd[2] == 6 ? 5 : pd[2]);
  FUZZ_CHECK(cm::build_cma_hdr(bad, out) == 0);
  // The IPv4 form from the addresses it carries.
  const cm::CmaHdr v4 = cm::cma_hdr_ipv4(h.src_ip4(), h.src_port, h.dst_ip4());
  FUZZ_CHECK(cm::build_cma_hdr(v4, out) == cm::kCmaHdrLen);
  FUZZ_CHECK(cm::parse_cma_hdr(std::span<const std::uint8_t>(out.data(), cm::kCmaHdrLen), again) == cm::CmaError::ok);
  FUZZ_CHECK(again == v4 && again.ip_version == 4 && again.src_ip4() == h.src_ip4() && again.dst_ip4() == h.dst_ip4());
  FUZZ_CHECK(std::all_of(again.src_addr.begin(), again.src_addr.begin() + 12, [](std::uint8_t c) { return c == 0; }));
}

void check_gid(const cm::Gid& g) {
  static constexpr std::uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
  const auto ip = cm::ipv4_of_gid(g);
  FUZZ_CHECK(ip.has_value() == (std::memcmp(g.data(), kPrefix, 12) == 0));
  if (ip) FUZZ_CHECK(*ip == be32(g.data() + 12) && cm::gid_ipv4(*ip) == g);
  const std::uint32_t any = be32(g.data());
  FUZZ_CHECK(cm::ipv4_of_gid(cm::gid_ipv4(any)) == any);
}

void check_req_extras(const cm::Req& m) {
  check_cma(m.private_data);
  check_gid(m.primary.local_gid);
  check_gid(m.primary.remote_gid);
  check_gid(m.alternate.local_gid);
  check_gid(m.alternate.remote_gid);
  const auto ps = static_cast<std::uint16_t>(m.service_id >> 16);
  const auto port = static_cast<std::uint16_t>(m.service_id);
  const auto got = cm::cma_port_of(m.service_id, ps);
  FUZZ_CHECK(got.has_value() == (m.service_id >> 32 == 0));
  if (got) FUZZ_CHECK(*got == port && cm::cma_service_id(ps, port) == m.service_id);
  FUZZ_CHECK(cm::cma_port_of(cm::cma_service_id(cm::kPsTcp, port)) == port);
  FUZZ_CHECK(!cm::cma_port_of(cm::cma_service_id(cm::kPsUdp, port)).has_value());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> mad(data, size);
  const Tail tail{size > cm::kMadLen ? mad.subspan(cm::kMadLen) : std::span<const std::uint8_t>{}};

  cm::MadHdr h;
  const cm::CmError he = cm::parse_header(mad, h);
  FUZZ_CHECK_MSG(he == header_reference(mad), "parse_header says %d, the reference %d", static_cast<int>(he),
                 static_cast<int>(header_reference(mad)));
  FUZZ_CHECK(!cm::to_string(he).empty() && cm::to_string(he) != "?");
  if (he != cm::CmError::too_short) check_header_fields(mad, h);

  cm::MadHdr mh;
  cm::Message m;
  const cm::CmError e = cm::parse(mad, mh, m);
  FUZZ_CHECK(e == he);
  check_typed<cm::Req>(mad, he, cm::AttrId::req);
  check_typed<cm::Mra>(mad, he, cm::AttrId::mra);
  check_typed<cm::Rej>(mad, he, cm::AttrId::rej);
  check_typed<cm::Rep>(mad, he, cm::AttrId::rep);
  check_typed<cm::Rtu>(mad, he, cm::AttrId::rtu);
  check_typed<cm::Dreq>(mad, he, cm::AttrId::dreq);
  check_typed<cm::Drep>(mad, he, cm::AttrId::drep);
  if (e == cm::CmError::ok) {
    FUZZ_CHECK(mh == h);
    FUZZ_CHECK(m.index() == static_cast<std::size_t>(static_cast<std::uint16_t>(h.attr_id) - 0x10));
    FUZZ_CHECK(cm::to_string(h.attr_id) != "?");
    std::visit([&](const auto& msg) { check_message(mad, mh, msg, tail); }, m);
    // build(Message) is the typed build of what it holds.
    std::array<std::uint8_t, cm::kMadLen> whole{}, typed{};
    const std::size_t n = cm::build(m, h.tid, whole);
    FUZZ_CHECK(n == std::visit([&](const auto& msg) { return cm::build(msg, h.tid, typed); }, m));
    FUZZ_CHECK(whole == typed);
    if (const auto* req = std::get_if<cm::Req>(&m)) check_req_extras(*req);
    if (const auto* rej = std::get_if<cm::Rej>(&m)) (void)cm::to_string(rej->reason);
  }
  // The CMA header parser on the input itself (any length).
  check_cma(mad);
  return 0;
}
