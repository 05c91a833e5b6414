// RoCEv2 transport headers and ICRC (roce.hpp).
#include "softrnic/wire/roce.hpp"

#include <isa-l/crc.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>

#include "crc_paths_internal.hpp"
#include "softrnic/wire/be.hpp"

namespace softrnic::wire::roce {

namespace {

constexpr std::uint32_t kRnrTimerUs[32] = {
    655360, 10,   20,   30,   40,    60,    80,    120,   160,   240,   320,   480,    640,    960,    1280,   1920,
    2560,   3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};

// The masked LRH, IPv4 header and UDP header the ICRC starts with (IBTA annex A17.3.3): the
// masked fields (LRH, TOS, TTL, the checksums) all ones.
struct IcrcPrefix {
  std::array<std::uint8_t, 8> lrh;
  std::uint8_t ver_ihl, tos;
  Be16 total_len, id, frag_off;
  std::uint8_t ttl, protocol;
  Be16 ip_checksum;
  Be32 src, dst;
  Be16 sport, dport, udp_len, udp_checksum;
};
static_assert(sizeof(IcrcPrefix) == 8 + 20 + 8);
constexpr std::size_t kPrefixLen = sizeof(IcrcPrefix);
constexpr std::size_t kIpIdOffset = offsetof(IcrcPrefix, id);

IcrcPrefix icrc_prefix(const IcrcAddr& a, std::size_t udp_payload_len) {
  IcrcPrefix h{};
  h.lrh.fill(0xFF);
  h.ver_ihl = 0x45;
  h.tos = 0xFF;
  h.total_len.set(static_cast<std::uint16_t>(20 + 8 + udp_payload_len));
  h.id.set(a.ip_id);
  h.frag_off.set(a.frag_off);
  h.ttl = 0xFF;
  h.protocol = 17;
  h.ip_checksum.set(0xFFFF);
  h.src.set(a.src_ip);
  h.dst.set(a.dst_ip);
  h.sport.set(a.sport);
  h.dport.set(a.dport);
  h.udp_len.set(static_cast<std::uint16_t>(8 + udp_payload_len));
  h.udp_checksum.set(0xFFFF);
  return h;
}

// CRC-32 (zlib's) continued over n bytes at p: ISA-L's narrow code (SSE + PCLMULQDQ) up to the
// size from which its wide code (its dispatcher's: AVX-512 where the CPU has it) is taken
// (crc_paths.hpp: chosen by a measurement on this CPU; by default never, since where that code
// slows the core it costs more than it saves on packets sent now and then).
std::uint32_t crc_update(std::uint32_t crc, const std::uint8_t* p, std::size_t n) {
#if defined(__x86_64__)
  if (detail::have_pclmul && n < detail::icrc_wide_from.load(std::memory_order_relaxed))
    return crc32_gzip_refl_by8(crc, p, n);
#endif
  return detail::wide_crc32_gzip(crc, p, n);
}

// CRC-32 (zlib's) continued over `p`; the BTH's byte 4 (FECN, BECN, reserved) counts as 0xFF.
std::uint32_t crc_body(std::uint32_t crc, std::span<const std::span<const std::uint8_t>> pieces, std::size_t& total) {
  total = 0;
  for (auto piece : pieces) {
    if (total <= 4 && total + piece.size() > 4) {  // the piece holds BTH byte 4
      const std::size_t at = 4 - total;
      crc = crc_update(crc, piece.data(), at);
      std::uint8_t ff = 0xFF;
      crc = crc_update(crc, &ff, 1);
      crc = crc_update(crc, piece.data() + at + 1, piece.size() - at - 1);
    } else {
      crc = crc_update(crc, piece.data(), piece.size());
    }
    total += piece.size();
  }
  return crc;
}

}  // namespace

std::uint32_t rnr_timer_us(std::uint8_t code) {
  return kRnrTimerUs[code & 31];
}

std::string_view to_string(ParseError e) {
  switch (e) {
    case ParseError::ok: return "ok";
    case ParseError::too_short: return "shorter than its headers, pad and ICRC";
    case ParseError::unknown_opcode: return "unknown opcode";
    case ParseError::bad_version: return "BTH transport version is not 0";
    case ParseError::bad_pad: return "pad count larger than the payload";
  }
  return "?";
}

namespace {

// Reads the header at `at` and moves past it.
template <class H>
H take(const std::uint8_t*& at) {
  H h;
  std::memcpy(&h, at, sizeof h);
  at += sizeof h;
  return h;
}
template <class H>
void put(std::uint8_t*& at, const H& h) {
  std::memcpy(at, &h, sizeof h);
  at += sizeof h;
}

void parse_bth(const BthHdr& h, Packet& p) {
  p.opcode = static_cast<Opcode>(h.opcode);
  p.solicited = (h.se_m_pad_tver & 0x80) != 0;
  p.mig_req = (h.se_m_pad_tver & 0x40) != 0;
  p.pad = static_cast<std::uint8_t>((h.se_m_pad_tver >> 4) & 3);
  p.pkey = h.pkey.get();
  p.fecn = (h.fecn_becn & 0x80) != 0;
  p.becn = (h.fecn_becn & 0x40) != 0;
  p.dest_qpn = h.dest_qpn.get();
  p.ack_req = (h.ack_req & 0x80) != 0;
  p.psn = h.psn.get();
}

// The extended headers in the table's order (the order build_extended writes them).
void parse_extended(const OpInfo& info, const std::uint8_t* at, Packet& p) {
  if (info.has(Has::deth)) {
    const auto h = take<DethHdr>(at);
    p.deth = Deth{h.qkey.get(), h.src_qpn.get()};
  }
  if (info.has(Has::reth)) {
    const auto h = take<RethHdr>(at);
    p.reth = Reth{h.va.get(), h.rkey.get(), h.dma_len.get()};
  }
  if (info.has(Has::atomic_eth)) {
    const auto h = take<AtomicEthHdr>(at);
    p.atomic_eth = AtomicEth{h.va.get(), h.rkey.get(), h.swap_add.get(), h.compare.get()};
  }
  if (info.has(Has::aeth)) {
    const auto h = take<AethHdr>(at);
    p.aeth = Aeth{h.syndrome, h.msn.get()};
  }
  if (info.has(Has::atomic_ack)) p.atomic_ack = take<AtomicAckHdr>(at).orig.get();
  if (info.has(Has::imm)) {
    std::uint32_t v;
    std::memcpy(&v, take<ImmHdr>(at).imm.data(), sizeof v);
    p.imm = v;
  }
  if (info.has(Has::ieth)) p.inv_rkey = take<IethHdr>(at).rkey.get();
}

BthHdr make_bth(const Packet& p, std::size_t payload_len) {
  BthHdr h{};
  h.opcode = static_cast<std::uint8_t>(p.opcode);
  h.se_m_pad_tver = static_cast<std::uint8_t>((p.solicited ? 0x80 : 0) | (p.mig_req ? 0x40 : 0) |
                                              pad_of(payload_len) << 4 | kTransportVersion);
  h.pkey.set(p.pkey);
  h.fecn_becn = static_cast<std::uint8_t>((p.fecn ? 0x80 : 0) | (p.becn ? 0x40 : 0));
  h.dest_qpn.set(p.dest_qpn);
  h.ack_req = p.ack_req ? 0x80 : 0;
  h.psn.set(p.psn);
  return h;
}

// Whether the packet holds every extended header its opcode carries.
bool complete(const OpInfo& info, const Packet& p) {
  return (!info.has(Has::deth) || p.deth) && (!info.has(Has::reth) || p.reth) &&
         (!info.has(Has::atomic_eth) || p.atomic_eth) && (!info.has(Has::aeth) || p.aeth) &&
         (!info.has(Has::atomic_ack) || p.atomic_ack) && (!info.has(Has::imm) || p.imm) &&
         (!info.has(Has::ieth) || p.inv_rkey);
}

void build_extended(const OpInfo& info, const Packet& p, std::uint8_t* at) {
  if (info.has(Has::deth)) put(at, DethHdr{Be32(p.deth->qkey), 0, Be24(p.deth->src_qpn)});
  if (info.has(Has::reth)) put(at, RethHdr{Be64(p.reth->va), Be32(p.reth->rkey), Be32(p.reth->dma_len)});
  if (info.has(Has::atomic_eth)) {
    const AtomicEth& a = *p.atomic_eth;
    put(at, AtomicEthHdr{Be64(a.va), Be32(a.rkey), Be64(a.swap_add), Be64(a.compare)});
  }
  if (info.has(Has::aeth)) put(at, AethHdr{p.aeth->syndrome, Be24(p.aeth->msn)});
  if (info.has(Has::atomic_ack)) put(at, AtomicAckHdr{Be64(*p.atomic_ack)});
  if (info.has(Has::imm)) {
    ImmHdr h;
    std::memcpy(h.imm.data(), &*p.imm, sizeof h.imm);
    put(at, h);
  }
  if (info.has(Has::ieth)) put(at, IethHdr{Be32(*p.inv_rkey)});
  if (info.has(Has::cnp)) put(at, CnpHdr{});
}

}  // namespace

ParseError parse(std::span<const std::uint8_t> b, Packet& out) {
  if (b.size() < kBthLen + kIcrcLen) return ParseError::too_short;
  const OpInfo& info = kOps[b[0]];
  if (!info.valid()) return ParseError::unknown_opcode;
  if ((b[1] & 0x0F) != kTransportVersion) return ParseError::bad_version;
  if (b.size() < info.header_len + kIcrcLen) return ParseError::too_short;
  // Into `out` as it is: parse_bth sets every BTH field, the extended headers are cleared one by
  // one (a whole Packet{} is 160 bytes of rep stos, a third of the parse).
  Packet& p = out;
  p.deth.reset();
  p.reth.reset();
  p.atomic_eth.reset();
  p.aeth.reset();
  p.atomic_ack.reset();
  p.imm.reset();
  p.inv_rkey.reset();
  const std::uint8_t* at = b.data();
  parse_bth(take<BthHdr>(at), p);
  parse_extended(info, at, p);
  const std::size_t body = b.size() - info.header_len - kIcrcLen;
  if (p.pad > body || (p.pad && !info.has(Has::payload))) return ParseError::bad_pad;
  p.payload = b.subspan(info.header_len, body - p.pad);
  return ParseError::ok;
}

std::size_t build_headers(const Packet& p, std::size_t payload_len, std::span<std::uint8_t, kMaxHeaderLen> out) {
  const OpInfo& info = op_info(p.opcode);
  if (!info.valid() || !complete(info, p)) return 0;
  std::uint8_t* at = out.data();
  put(at, make_bth(p, payload_len));
  build_extended(info, p, at);
  return info.header_len;
}

std::uint32_t icrc(const IcrcAddr& a, std::span<const std::span<const std::uint8_t>> pieces) {
  std::size_t len = 0;
  for (auto piece : pieces) len += piece.size();
  const IcrcPrefix prefix = icrc_prefix(a, len + kIcrcLen);
  // The prefix and the first piece's head (the BTH and what follows it), its byte 4 masked, in
  // one call: each call of the CRC code costs ~10 ns however short its buffer, and a packet's
  // headers came as four (the prefix, the BTH around byte 4, the rest) beside its payload.
  constexpr std::size_t kHead = 64;
  if (pieces.empty() || pieces[0].size() <= 4) {
    std::uint32_t crc = crc_update(0, reinterpret_cast<const std::uint8_t*>(&prefix), kPrefixLen);
    std::size_t total = 0;
    return crc_body(crc, pieces, total);
  }
  std::array<std::uint8_t, kPrefixLen + kHead> head;
  const std::size_t k = std::min(kHead, pieces[0].size());
  std::memcpy(head.data(), &prefix, kPrefixLen);
  // (A copy of a constant 64 bytes is four vector moves; of k bytes, a rep movs that starts slowly.)
  if (k == kHead)
    std::memcpy(head.data() + kPrefixLen, pieces[0].data(), kHead);
  else
    std::memcpy(head.data() + kPrefixLen, pieces[0].data(), k);
  head[kPrefixLen + 4] = 0xFF;
  std::uint32_t crc = crc_update(0, head.data(), kPrefixLen + k);
  if (k < pieces[0].size()) crc = crc_update(crc, pieces[0].data() + k, pieces[0].size() - k);
  for (auto piece : pieces.subspan(1))
    if (!piece.empty()) crc = crc_update(crc, piece.data(), piece.size());
  return crc;
}

namespace {
std::uint32_t stored_icrc(std::span<const std::uint8_t> b) {
  const std::uint8_t* t = b.data() + b.size() - kIcrcLen;
  return static_cast<std::uint32_t>(t[0]) | static_cast<std::uint32_t>(t[1]) << 8 |
         static_cast<std::uint32_t>(t[2]) << 16 | static_cast<std::uint32_t>(t[3]) << 24;
}
}  // namespace

bool icrc_ok(const IcrcAddr& a, std::span<const std::uint8_t> b) {
  if (b.size() < kBthLen + kIcrcLen) return false;
  const std::span<const std::uint8_t> body[] = {b.first(b.size() - kIcrcLen)};
  return icrc(a, body) == stored_icrc(b);
}

namespace {

// The IP ID's effect on the ICRC of a packet of one length, as a linear map from the ID's 16
// bits to the CRC's 32, in echelon form (rows sorted by their highest bit, descending).
struct IdSolver {
  std::size_t len = 0;
  int n = 0;
  std::uint32_t row[16]{};
  std::uint16_t combo[16]{};   // which ID bits make up the row
  std::uint32_t effect[16]{};  // what each ID bit alone changes in the CRC

  void build(std::size_t udp_payload_len) {
    len = udp_payload_len;
    n = 0;
    // CRC(M) = combine(CRC(prefix), CRC(rest), |rest|) and combine is linear in its first
    // argument: changing the ID changes the ICRC by shift(CRC(id bytes) ^ CRC(00 00)), a
    // linear function of the ID.
    const auto rest_len = static_cast<z_off_t>(kPrefixLen - kIpIdOffset - 2 + len - kIcrcLen);
    for (int i = 0; i < 16; ++i) {
      const std::uint8_t bytes[2] = {static_cast<std::uint8_t>((1u << i) >> 8), static_cast<std::uint8_t>(1u << i)};
      const std::uint8_t zero[2] = {0, 0};
      const auto d = static_cast<uLong>(::crc32(0, bytes, 2) ^ ::crc32(0, zero, 2));
      auto v = static_cast<std::uint32_t>(::crc32_combine(d, 0, rest_len) ^ ::crc32_combine(0, 0, rest_len));
      effect[i] = v;
      auto c = static_cast<std::uint16_t>(1u << i);
      for (int r = 0; r < n; ++r)
        if (v & top_bit(row[r])) {
          v ^= row[r];
          c = static_cast<std::uint16_t>(c ^ combo[r]);
        }
      if (v == 0) continue;
      int at = n++;
      for (; at > 0 && top_bit(row[at - 1]) < top_bit(v); --at) {
        row[at] = row[at - 1];
        combo[at] = combo[at - 1];
      }
      row[at] = v;
      combo[at] = c;
    }
  }
  // The ID whose effect is `t`; false when no ID has it.
  bool solve(std::uint32_t t, std::uint16_t& id) const {
    std::uint16_t x = 0;
    for (int r = 0; r < n; ++r)
      if (t & top_bit(row[r])) {
        t ^= row[r];
        x = static_cast<std::uint16_t>(x ^ combo[r]);
      }
    id = x;
    return t == 0;
  }
  static std::uint32_t top_bit(std::uint32_t v) { return v ? 1u << (31 - __builtin_clz(v)) : 0; }
};

}  // namespace

namespace {
// A few packet lengths carry nearly all traffic (MTU-sized, ACKs): their maps are kept.
const IdSolver& solver_for(std::size_t udp_payload_len) {
  thread_local std::array<IdSolver, 8> cache;
  thread_local std::size_t next = 0;
  for (const auto& c : cache)
    if (c.len == udp_payload_len) return c;
  IdSolver& fresh = cache[next++ % cache.size()];
  fresh.build(udp_payload_len);
  return fresh;
}
}  // namespace

bool icrc_ok_any_id(IcrcAddr a, std::span<const std::uint8_t> b, std::uint16_t& ip_id) {
  if (b.size() < kBthLen + kIcrcLen) return false;
  a.ip_id = 0;
  const std::span<const std::uint8_t> body[] = {b.first(b.size() - kIcrcLen)};
  const std::uint32_t target = icrc(a, body) ^ stored_icrc(b);
  if (target == 0) {
    ip_id = 0;
    return true;
  }
  return solver_for(b.size()).solve(target, ip_id);
}

std::uint32_t icrc_ip_id_effect(std::size_t udp_payload_len, std::uint16_t id) {
  const IdSolver& s = solver_for(udp_payload_len);
  std::uint32_t v = 0;
  for (int i = 0; i < 16; ++i)
    if (id & (1u << i)) v ^= s.effect[i];
  return v;
}

std::uint16_t source_port_of(std::uint32_t qpn) {
  // rxe_qp.c: RXE_ROCE_V2_SPORT + (hash_32(qpn, 14) & 0x3fff), hash_32 = multiply by the golden ratio.
  const std::uint32_t h = (qpn * 0x61C88647u) >> (32 - 14);
  return static_cast<std::uint16_t>(0xC000 + (h & 0x3FFF));
}

std::uint32_t flow_label_of(std::uint32_t lqpn, std::uint32_t rqpn) {
  std::uint64_t v = static_cast<std::uint64_t>(lqpn) * rqpn;  // rdma_calc_flow_label
  v ^= v >> 20;
  v ^= v >> 40;
  return static_cast<std::uint32_t>(v & 0xFFFFF);
}

std::uint16_t source_port_of(std::uint32_t flow_label, std::uint32_t lqpn, std::uint32_t rqpn) {
  std::uint32_t fl = flow_label & 0xFFFFF;
  if (fl == 0) fl = flow_label_of(lqpn, rqpn);
  const std::uint32_t low = (fl & 0x3FFF) ^ ((fl & 0xFC000) >> 14);  // rdma_flow_label_to_udp_sport
  return static_cast<std::uint16_t>(low | 0xC000);
}

std::uint32_t cm_flow_label(std::uint16_t sport, std::uint16_t dport) {
  return (static_cast<std::uint32_t>(sport) * 31 + dport) & 0xFFFFF;  // cma_get_roce_udp_flow_label
}

std::uint32_t path_mtu_for(std::uint32_t ip_mtu) {
  // IP + UDP + BTH + the longest extended header set (RETH + ImmDt) + ICRC must fit.
  constexpr std::uint32_t kOverhead = 20 + 8 + kBthLen + kRethLen + kImmLen + kIcrcLen;
  for (std::uint32_t mtu = 4096; mtu >= 256; mtu /= 2)
    if (mtu + kOverhead <= ip_mtu) return mtu;
  return 0;
}

std::uint8_t mtu_code(std::uint32_t mtu) {
  switch (mtu) {
    case 256: return 1;
    case 512: return 2;
    case 1024: return 3;
    case 2048: return 4;
    case 4096: return 5;
    default: return 0;
  }
}

std::uint32_t mtu_bytes(std::uint8_t code) {
  return code >= 1 && code <= 5 ? 128u << code : 0;
}

}  // namespace softrnic::wire::roce
