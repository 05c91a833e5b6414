// Fuzz target: the Ethernet/IPv4/UDP/ARP layer of the dpdk netdev (netdev/src/ethernet.*), which
// parses every frame the port receives. The input is one frame: parse_frame with and without the
// UDP checksum check, the verdict compared with a plain reading of the headers, and frames built
// again from what was parsed (write_udp_headers, write_arp_frame) parsed back to the same fields.
// The Internet checksum is also summed over the input in pieces split at points the input chooses.
#include <cstring>
#include <vector>

#include "ethernet.hpp"
#include "fuzz_check.hpp"

namespace eth = softrnic::netdev::eth;

namespace {

std::uint16_t get16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] << 8 | p[1]);
}

// The naive RFC 1071 sum: 16-bit big-endian words, an odd last byte padded with zero.
std::uint16_t checksum_reference(std::span<const std::uint8_t> d) {
  std::uint64_t s = 0;
  for (std::size_t i = 0; i + 1 < d.size(); i += 2) s += get16(d.data() + i);
  if (d.size() % 2) s += static_cast<std::uint64_t>(d.back()) << 8;
  while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
  return static_cast<std::uint16_t>(~s);
}

// What parse_frame must say, read off the headers directly.
eth::FrameKind kind_reference(std::span<const std::uint8_t> f, bool check_udp) {
  using K = eth::FrameKind;
  if (f.size() < 14) return K::short_frame;
  const std::uint16_t type = get16(f.data() + 12);
  if (type == 0x0806) {
    if (f.size() < 14 + 28) return K::short_frame;
    const std::uint8_t* a = f.data() + 14;
    if (get16(a) != 1 || get16(a + 2) != 0x0800 || a[4] != 6 || a[5] != 4) return K::bad_arp;
    const std::uint16_t op = get16(a + 6);
    return op == 1 || op == 2 ? K::arp : K::bad_arp;
  }
  if (type != 0x0800) return K::not_ipv4;
  if (f.size() < 14 + 20) return K::short_frame;
  const std::uint8_t* ip = f.data() + 14;
  const std::size_t ihl = (ip[0] & 0x0F) * 4u, total = get16(ip + 2);
  if ((ip[0] >> 4) != 4 || ihl < 20 || total < ihl || 14 + total > f.size()) return K::bad_ipv4;
  if (checksum_reference({ip, ihl}) != 0) return K::bad_ip_checksum;
  if ((get16(ip + 6) & 0x3FFF) != 0) return K::fragment;
  if (ip[9] != 17) return K::not_udp;
  if (total - ihl < 8) return K::bad_udp;
  const std::uint8_t* u = ip + ihl;
  const std::size_t ulen = get16(u + 4);
  if (ulen < 8 || ulen > total - ihl) return K::bad_udp;
  if (check_udp && get16(u + 6) != 0) {
    // Pseudo-header (addresses, protocol, UDP length) and the datagram.
    std::vector<std::uint8_t> ph(ip + 12, ip + 20);
    ph.insert(ph.end(), {0, 17, static_cast<std::uint8_t>(ulen >> 8), static_cast<std::uint8_t>(ulen)});
    ph.insert(ph.end(), u, u + ulen);
    if (checksum_reference(ph) != 0) return K::bad_udp_checksum;
  }
  return K::udp;
}

void check_parsed(std::span<const std::uint8_t> f, const eth::ParsedFrame& p) {
  if (p.kind == eth::FrameKind::udp) {
    FUZZ_CHECK(p.payload_off >= eth::kUdpHeaders && p.payload_off + p.payload_len <= f.size());
    FUZZ_CHECK(std::memcmp(p.dst_mac.b.data(), f.data(), 6) == 0);
    FUZZ_CHECK(std::memcmp(p.src_mac.b.data(), f.data() + 6, 6) == 0);
    // Built again from the fields: parses (checksums verified) to the same addresses and payload.
    const auto payload = f.subspan(p.payload_off, p.payload_len);
    std::vector<std::uint8_t> again(eth::kUdpHeaders + payload.size());
    const eth::UdpFrameAddrs a{p.src_mac, p.dst_mac, p.src, p.dst};
    eth::write_udp_headers(again.data(), a, 0x1234, {payload});
    if (!payload.empty()) std::memcpy(again.data() + eth::kUdpHeaders, payload.data(), payload.size());
    const eth::ParsedFrame q = eth::parse_frame(again, true);
    FUZZ_CHECK_MSG(q.kind == eth::FrameKind::udp, "rebuilt frame parses as %s", eth::to_string(q.kind));
    FUZZ_CHECK(q.src == p.src && q.dst == p.dst && q.src_mac == p.src_mac && q.dst_mac == p.dst_mac);
    FUZZ_CHECK(q.payload_off == eth::kUdpHeaders && q.payload_len == p.payload_len);
    FUZZ_CHECK(kind_reference(again, true) == eth::FrameKind::udp);
  } else if (p.kind == eth::FrameKind::arp) {
    std::uint8_t again[eth::kMinFrame];
    FUZZ_CHECK(eth::write_arp_frame(again, p.dst_mac, p.arp) == eth::kMinFrame);
    const eth::ParsedFrame q = eth::parse_frame(again, true);
    FUZZ_CHECK(q.kind == eth::FrameKind::arp && q.arp.op == p.arp.op && q.arp.sha == p.arp.sha &&
               q.arp.tha == p.arp.tha && q.arp.spa == p.arp.spa && q.arp.tpa == p.arp.tpa && q.dst_mac == p.dst_mac);
  }
  FUZZ_CHECK(eth::to_string(p.kind) != nullptr);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> f(data, size);
  const eth::ParsedFrame with = eth::parse_frame(f, true);
  const eth::ParsedFrame without = eth::parse_frame(f, false);
  FUZZ_CHECK_MSG(with.kind == kind_reference(f, true), "parse_frame says %s", eth::to_string(with.kind));
  FUZZ_CHECK_MSG(without.kind == kind_reference(f, false), "parse_frame says %s", eth::to_string(without.kind));
  // The UDP checksum check only ever turns a udp verdict into bad_udp_checksum.
  FUZZ_CHECK(with.kind == without.kind ||
             (without.kind == eth::FrameKind::udp && with.kind == eth::FrameKind::bad_udp_checksum));
  check_parsed(f, with);
  check_parsed(f, without);

  // The running checksum over pieces (odd sizes included) equals the naive sum of the whole.
  eth::Checksum c;
  std::size_t at = 0;
  for (std::size_t i = 0; at < size; ++i) {
    const std::size_t n = std::min<std::size_t>(size - at, 1 + data[i % size] % 13);
    c.add(f.subspan(at, n));
    at += n;
  }
  FUZZ_CHECK(c.finish() == checksum_reference(f));
  FUZZ_CHECK(eth::ipv4_header_checksum(f) == checksum_reference(f));
  return 0;
}
