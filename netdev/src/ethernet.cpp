#include "ethernet.hpp"

#include <cstring>

namespace softrnic::netdev::eth {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void put16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 8);
  p[1] = static_cast<std::uint8_t>(v);
}
void put32(std::uint8_t* p, std::uint32_t v) {
  put16(p, static_cast<std::uint16_t>(v >> 16));
  put16(p + 2, static_cast<std::uint16_t>(v));
}
std::uint16_t get16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] << 8 | p[1]);
}
std::uint32_t get32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(get16(p)) << 16 | get16(p + 2);
}

void put_mac(std::uint8_t* p, const Mac& m) {
  std::memcpy(p, m.b.data(), 6);
}
Mac get_mac(const std::uint8_t* p) {
  Mac m;
  std::memcpy(m.b.data(), p, 6);
  return m;
}

}  // namespace

bool parse_mac(std::string_view s, Mac& out) {
  if (s.size() != 17) return false;
  Mac m;
  const char sep = s[2];
  if (sep != ':' && sep != '-') return false;
  for (std::size_t i = 0; i < 6; ++i) {
    const int hi = hex_digit(s[3 * i]), lo = hex_digit(s[3 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    if (i < 5 && s[3 * i + 2] != sep) return false;
    m.b[i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  out = m;
  return true;
}

std::string to_string(const Mac& m) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (std::size_t i = 0; i < 6; ++i) {
    if (i) s += ':';
    s += kHex[m.b[i] >> 4];
    s += kHex[m.b[i] & 15];
  }
  return s;
}

Mac mac_from_ip(std::uint32_t ip) {
  return Mac{{0x02, 0x00, static_cast<std::uint8_t>(ip >> 24), static_cast<std::uint8_t>(ip >> 16),
              static_cast<std::uint8_t>(ip >> 8), static_cast<std::uint8_t>(ip)}};
}

bool parse_neighbour(std::string_view s, std::uint32_t& ip, Mac& mac, std::string& error) {
  const auto at = s.find('@');
  if (at == std::string_view::npos) {
    error = "neighbour '" + std::string(s) + "' is not IPv4@MAC";
    return false;
  }
  std::uint32_t i = 0;
  Mac m;
  if (!parse_ipv4(std::string(s.substr(0, at)), i)) {
    error = "neighbour '" + std::string(s) + "': bad IPv4 address";
    return false;
  }
  if (!parse_mac(s.substr(at + 1), m) || m.is_multicast() || m.is_zero()) {
    error = "neighbour '" + std::string(s) + "': bad unicast MAC (want 02:00:00:00:00:02)";
    return false;
  }
  ip = i;
  mac = m;
  return true;
}

void Checksum::add(std::span<const std::uint8_t> d) {
  const std::uint8_t* p = d.data();
  std::size_t n = d.size();
  if (n == 0) return;
  if (odd_) {
    sum_ += *p++;
    --n;
    odd_ = false;
  }
  // Big-endian 16-bit words, eight bytes at a time (no carry lost: 64-bit accumulator, and each
  // step adds at most 4 * 0xFFFF).
  while (n >= 8) {
    sum_ += get16(p) + get16(p + 2) + get16(p + 4) + get16(p + 6);
    p += 8;
    n -= 8;
  }
  while (n >= 2) {
    sum_ += get16(p);
    p += 2;
    n -= 2;
  }
  if (n) {
    sum_ += static_cast<std::uint64_t>(*p) << 8;
    odd_ = true;
  }
}

std::uint16_t Checksum::folded() const {
  std::uint64_t s = sum_;
  while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
  return static_cast<std::uint16_t>(s);
}

std::uint16_t Checksum::finish() const {
  return static_cast<std::uint16_t>(~folded() & 0xFFFF);
}

std::uint16_t ipv4_header_checksum(std::span<const std::uint8_t> hdr) {
  Checksum c;
  c.add(hdr);
  return c.finish();
}

std::uint16_t udp_checksum(std::uint32_t src_ip, std::uint32_t dst_ip, std::span<const std::uint8_t> udp_hdr,
                           std::initializer_list<std::span<const std::uint8_t>> payload) {
  Checksum c;
  c.add32(src_ip);
  c.add32(dst_ip);
  c.add16(17);
  c.add16(get16(udp_hdr.data() + 4));  // UDP length
  c.add(udp_hdr);
  for (auto part : payload) c.add(part);
  const std::uint16_t v = c.finish();
  return v == 0 ? 0xFFFF : v;
}

void write_udp_headers(std::uint8_t* out, const UdpFrameAddrs& a, std::uint16_t ip_id,
                       std::initializer_list<std::span<const std::uint8_t>> payload, UdpCsum csum) {
  std::size_t len = 0;
  for (auto part : payload) len += part.size();
  std::uint8_t* e = out;
  put_mac(e, a.dst_mac);
  put_mac(e + 6, a.src_mac);
  put16(e + 12, kEtherIpv4);
  std::uint8_t* ip = out + kEthHdr;
  ip[0] = 0x45;  // version 4, IHL 5
  ip[1] = 0;     // DSCP/ECN
  put16(ip + 2, static_cast<std::uint16_t>(kIpv4Hdr + kUdpHdr + len));
  put16(ip + 4, ip_id);
  put16(ip + 6, 0x4000);  // DF, offset 0
  ip[8] = 64;             // TTL
  ip[9] = 17;             // UDP
  put16(ip + 10, 0);
  put32(ip + 12, a.src.ip);
  put32(ip + 16, a.dst.ip);
  put16(ip + 10, ipv4_header_checksum({ip, kIpv4Hdr}));
  std::uint8_t* u = ip + kIpv4Hdr;
  put16(u, a.src.port);
  put16(u + 2, a.dst.port);
  put16(u + 4, static_cast<std::uint16_t>(kUdpHdr + len));
  put16(u + 6, 0);
  switch (csum) {
    case UdpCsum::full: put16(u + 6, udp_checksum(a.src.ip, a.dst.ip, {u, kUdpHdr}, payload)); break;
    case UdpCsum::zero: break;
    case UdpCsum::partial: {
      Checksum c;
      c.add32(a.src.ip);
      c.add32(a.dst.ip);
      c.add16(17);
      c.add16(static_cast<std::uint16_t>(kUdpHdr + len));
      put16(u + 6, c.folded());
      break;
    }
  }
}

std::size_t write_arp_frame(std::uint8_t* out, const Mac& eth_dst, const Arp& arp) {
  std::memset(out, 0, kMinFrame);
  put_mac(out, eth_dst);
  put_mac(out + 6, arp.sha);
  put16(out + 12, kEtherArp);
  std::uint8_t* a = out + kEthHdr;
  put16(a, 1);  // hardware type Ethernet
  put16(a + 2, kEtherIpv4);
  a[4] = 6;
  a[5] = 4;
  put16(a + 6, static_cast<std::uint16_t>(arp.op));
  put_mac(a + 8, arp.sha);
  put32(a + 14, arp.spa);
  put_mac(a + 18, arp.tha);
  put32(a + 24, arp.tpa);
  return kMinFrame;
}

const char* to_string(FrameKind k) {
  switch (k) {
    case FrameKind::udp: return "udp";
    case FrameKind::arp: return "arp";
    case FrameKind::short_frame: return "short frame";
    case FrameKind::not_ipv4: return "not IPv4";
    case FrameKind::bad_ipv4: return "bad IPv4 header";
    case FrameKind::bad_ip_checksum: return "bad IPv4 header checksum";
    case FrameKind::fragment: return "IPv4 fragment";
    case FrameKind::not_udp: return "not UDP";
    case FrameKind::bad_udp: return "bad UDP length";
    case FrameKind::bad_udp_checksum: return "bad UDP checksum";
    case FrameKind::bad_arp: return "bad ARP";
  }
  return "?";
}

ParsedFrame parse_frame(std::span<const std::uint8_t> f, bool check_udp) {
  ParsedFrame r;
  if (f.size() < kEthHdr) return r;
  const std::uint8_t* p = f.data();
  r.dst_mac = get_mac(p);
  r.src_mac = get_mac(p + 6);
  const std::uint16_t type = get16(p + 12);
  if (type == kEtherArp) {
    if (f.size() < kEthHdr + kArpBody) return r;
    const std::uint8_t* a = p + kEthHdr;
    r.kind = FrameKind::bad_arp;
    if (get16(a) != 1 || get16(a + 2) != kEtherIpv4 || a[4] != 6 || a[5] != 4) return r;
    const std::uint16_t op = get16(a + 6);
    if (op != 1 && op != 2) return r;
    r.arp.op = static_cast<ArpOp>(op);
    r.arp.sha = get_mac(a + 8);
    r.arp.spa = get32(a + 14);
    r.arp.tha = get_mac(a + 18);
    r.arp.tpa = get32(a + 24);
    r.kind = FrameKind::arp;
    return r;
  }
  if (type != kEtherIpv4) {
    r.kind = FrameKind::not_ipv4;
    return r;
  }
  if (f.size() < kEthHdr + kIpv4Hdr) return r;
  const std::uint8_t* ip = p + kEthHdr;
  const std::size_t ihl = static_cast<std::size_t>(ip[0] & 0x0F) * 4;
  const std::size_t total = get16(ip + 2);
  if ((ip[0] >> 4) != 4 || ihl < kIpv4Hdr || total < ihl || kEthHdr + total > f.size()) {
    r.kind = FrameKind::bad_ipv4;
    return r;
  }
  if (ipv4_header_checksum({ip, ihl}) != 0) {
    r.kind = FrameKind::bad_ip_checksum;
    return r;
  }
  if ((get16(ip + 6) & 0x3FFF) != 0) {
    r.kind = FrameKind::fragment;
    return r;
  }
  if (ip[9] != 17) {
    r.kind = FrameKind::not_udp;
    return r;
  }
  r.src.ip = get32(ip + 12);
  r.dst.ip = get32(ip + 16);
  const std::uint8_t* u = ip + ihl;
  const std::size_t ulen = total - ihl >= kUdpHdr ? get16(u + 4) : 0;
  if (total - ihl < kUdpHdr || ulen < kUdpHdr || ulen > total - ihl) {
    r.kind = FrameKind::bad_udp;
    return r;
  }
  r.src.port = get16(u);
  r.dst.port = get16(u + 2);
  if (check_udp && get16(u + 6) != 0) {
    Checksum c;
    c.add32(r.src.ip);
    c.add32(r.dst.ip);
    c.add16(17);
    c.add16(static_cast<std::uint16_t>(ulen));
    c.add({u, ulen});
    if (c.finish() != 0) {
      r.kind = FrameKind::bad_udp_checksum;
      return r;
    }
  }
  r.payload_off = kEthHdr + ihl + kUdpHdr;
  r.payload_len = ulen - kUdpHdr;
  r.kind = FrameKind::udp;
  return r;
}

}  // namespace softrnic::netdev::eth
