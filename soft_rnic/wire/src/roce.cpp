// RoCEv2 transport headers and ICRC (roce.hpp).
#include "softrnic/wire/roce.hpp"

#include <isa-l/crc.h>
#include <zlib.h>

#include <cstring>

#include "softrnic/wire/be.hpp"

// ISA-L's SSE + PCLMULQDQ implementation: exported (versioned, crc32_gzip_refl_by8_slver) but not
// declared in its public header, which offers only the dispatcher.
extern "C" std::uint32_t crc32_gzip_refl_by8(std::uint32_t init_crc, const unsigned char* buf, std::uint64_t len);

namespace softrnic::wire::roce {

namespace {

std::uint16_t get16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] << 8 | p[1]);
}
std::uint32_t get24(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) << 16 | static_cast<std::uint32_t>(p[1]) << 8 | p[2];
}
std::uint32_t get32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(get16(p)) << 16 | get16(p + 2);
}
std::uint64_t get64(const std::uint8_t* p) {
  return static_cast<std::uint64_t>(get32(p)) << 32 | get32(p + 4);
}
void put16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 8);
  p[1] = static_cast<std::uint8_t>(v);
}
void put24(std::uint8_t* p, std::uint32_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 16);
  p[1] = static_cast<std::uint8_t>(v >> 8);
  p[2] = static_cast<std::uint8_t>(v);
}
void put32(std::uint8_t* p, std::uint32_t v) {
  put16(p, static_cast<std::uint16_t>(v >> 16));
  put16(p + 2, static_cast<std::uint16_t>(v));
}
void put64(std::uint8_t* p, std::uint64_t v) {
  put32(p, static_cast<std::uint32_t>(v >> 32));
  put32(p + 4, static_cast<std::uint32_t>(v));
}

constexpr std::uint32_t kRnrTimerUs[32] = {
    655360, 10,   20,   30,   40,    60,    80,    120,   160,   240,   320,   480,    640,    960,    1280,   1920,
    2560,   3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};

// The masked LRH, IPv4 header and UDP header the ICRC starts with (IBTA annex A17.3.3).
constexpr std::size_t kPrefixLen = 8 + 20 + 8;
constexpr std::size_t kIpIdOffset = 8 + 4;
void icrc_prefix(const IcrcAddr& a, std::size_t udp_payload_len, std::uint8_t (&b)[kPrefixLen]) {
  std::memset(b, 0xFF, 8);
  std::uint8_t* ip = b + 8;
  ip[0] = 0x45;
  ip[1] = 0xFF;  // TOS
  put16(ip + 2, static_cast<std::uint16_t>(20 + 8 + udp_payload_len));
  put16(ip + 4, a.ip_id);
  put16(ip + 6, a.frag_off);
  ip[8] = 0xFF;  // TTL
  ip[9] = 17;
  put16(ip + 10, 0xFFFF);  // header checksum
  put32(ip + 12, a.src_ip);
  put32(ip + 16, a.dst_ip);
  std::uint8_t* udp = ip + 20;
  put16(udp, a.sport);
  put16(udp + 2, a.dport);
  put16(udp + 4, static_cast<std::uint16_t>(8 + udp_payload_len));
  put16(udp + 6, 0xFFFF);  // checksum
}

#if defined(__x86_64__)
const bool kHavePclmul = (__builtin_cpu_init(), __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul"));
#endif

// CRC-32 (zlib's) continued over n bytes at p. A packet is at most 4 KiB and some headers: ISA-L's
// SSE + PCLMULQDQ code, not the AVX-512 code its dispatcher picks where the CPU has it, which costs
// more than it saves on packets sent now and then (the 512-bit units' wake-up and the core's
// frequency drop: crc32c.cpp, docs/performance.md).
std::uint32_t crc_update(std::uint32_t crc, const std::uint8_t* p, std::size_t n) {
#if defined(__x86_64__)
  if (kHavePclmul) return crc32_gzip_refl_by8(crc, p, n);
#endif
  return crc32_gzip_refl(crc, p, n);
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

ParseError parse(std::span<const std::uint8_t> b, Packet& out) {
  if (b.size() < kBthLen + kIcrcLen) return ParseError::too_short;
  const OpInfo& info = kOps[b[0]];
  if (!info.valid()) return ParseError::unknown_opcode;
  if ((b[1] & 0x0F) != kTransportVersion) return ParseError::bad_version;
  if (b.size() < info.header_len + kIcrcLen) return ParseError::too_short;
  Packet p;
  p.opcode = static_cast<Opcode>(b[0]);
  p.solicited = (b[1] & 0x80) != 0;
  p.mig_req = (b[1] & 0x40) != 0;
  p.pad = static_cast<std::uint8_t>((b[1] >> 4) & 3);
  p.pkey = get16(&b[2]);
  p.fecn = (b[4] & 0x80) != 0;
  p.becn = (b[4] & 0x40) != 0;
  p.dest_qpn = get24(&b[5]);
  p.ack_req = (b[8] & 0x80) != 0;
  p.psn = get24(&b[9]);
  const std::uint8_t* h = b.data() + kBthLen;
  if (info.has & kDeth) {
    p.qkey = get32(h);
    p.src_qpn = get24(h + 5);
    h += kDethLen;
  }
  if (info.has & kReth) {
    p.va = get64(h);
    p.rkey = get32(h + 8);
    p.dma_len = get32(h + 12);
    h += kRethLen;
  }
  if (info.has & kAtomicEth) {
    p.va = get64(h);
    p.rkey = get32(h + 8);
    p.swap_add = get64(h + 12);
    p.compare = get64(h + 20);
    h += kAtomicEthLen;
  }
  if (info.has & kAeth) {
    p.syndrome = h[0];
    p.msn = get24(h + 1);
    h += kAethLen;
  }
  if (info.has & kAtomicAck) {
    p.orig = get64(h);
    h += kAtomicAckLen;
  }
  if (info.has & kImm) {
    std::memcpy(&p.imm, h, 4);
    h += kImmLen;
  }
  if (info.has & kIeth) {
    p.inv_rkey = get32(h);
    h += kIethLen;
  }
  const std::size_t body = b.size() - info.header_len - kIcrcLen;
  if (p.pad > body || (p.pad && !(info.has & kPayload))) return ParseError::bad_pad;
  p.payload = b.subspan(info.header_len, body - p.pad);
  out = p;
  return ParseError::ok;
}

std::size_t build_headers(const Packet& p, std::size_t payload_len, std::span<std::uint8_t, kMaxHeaderLen> out) {
  const OpInfo& info = op_info(p.opcode);
  if (!info.valid()) return 0;
  std::uint8_t* b = out.data();
  b[0] = static_cast<std::uint8_t>(p.opcode);
  b[1] = static_cast<std::uint8_t>((p.solicited ? 0x80 : 0) | (p.mig_req ? 0x40 : 0) | pad_of(payload_len) << 4 |
                                   kTransportVersion);
  put16(b + 2, p.pkey);
  b[4] = static_cast<std::uint8_t>((p.fecn ? 0x80 : 0) | (p.becn ? 0x40 : 0));
  put24(b + 5, p.dest_qpn & kQpnMask);
  b[8] = p.ack_req ? 0x80 : 0;
  put24(b + 9, p.psn & kPsnMask);
  std::uint8_t* h = b + kBthLen;
  if (info.has & kDeth) {
    put32(h, p.qkey);
    h[4] = 0;
    put24(h + 5, p.src_qpn & kQpnMask);
    h += kDethLen;
  }
  if (info.has & kReth) {
    put64(h, p.va);
    put32(h + 8, p.rkey);
    put32(h + 12, p.dma_len);
    h += kRethLen;
  }
  if (info.has & kAtomicEth) {
    put64(h, p.va);
    put32(h + 8, p.rkey);
    put64(h + 12, p.swap_add);
    put64(h + 20, p.compare);
    h += kAtomicEthLen;
  }
  if (info.has & kAeth) {
    h[0] = p.syndrome;
    put24(h + 1, p.msn & 0xFFFFFF);
    h += kAethLen;
  }
  if (info.has & kAtomicAck) {
    put64(h, p.orig);
    h += kAtomicAckLen;
  }
  if (info.has & kImm) {
    std::memcpy(h, &p.imm, 4);
    h += kImmLen;
  }
  if (info.has & kIeth) {
    put32(h, p.inv_rkey);
    h += kIethLen;
  }
  if (info.has & kCnp) std::memset(h, 0, kCnpLen);
  return info.header_len;
}

std::uint32_t icrc(const IcrcAddr& a, std::span<const std::span<const std::uint8_t>> pieces) {
  std::size_t len = 0;
  for (auto piece : pieces) len += piece.size();
  std::uint8_t prefix[kPrefixLen];
  icrc_prefix(a, len + kIcrcLen, prefix);
  std::uint32_t crc = crc_update(0, prefix, kPrefixLen);
  std::size_t total = 0;
  return crc_body(crc, pieces, total);
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
  std::uint16_t combo[16]{};  // which ID bits make up the row

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

bool icrc_ok_any_id(IcrcAddr a, std::span<const std::uint8_t> b, std::uint16_t& ip_id) {
  if (b.size() < kBthLen + kIcrcLen) return false;
  a.ip_id = 0;
  const std::span<const std::uint8_t> body[] = {b.first(b.size() - kIcrcLen)};
  const std::uint32_t target = icrc(a, body) ^ stored_icrc(b);
  if (target == 0) {
    ip_id = 0;
    return true;
  }
  // A few packet lengths carry nearly all traffic (MTU-sized, ACKs): their maps are kept.
  thread_local std::array<IdSolver, 8> cache;
  thread_local std::size_t next = 0;
  const IdSolver* s = nullptr;
  for (const auto& c : cache)
    if (c.len == b.size()) s = &c;
  if (!s) {
    IdSolver& fresh = cache[next++ % cache.size()];
    fresh.build(b.size());
    s = &fresh;
  }
  return s->solve(target, ip_id);
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
