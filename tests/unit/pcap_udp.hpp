// Test helper: the IPv4/UDP datagrams of a classic pcap file (Ethernet link type, either byte
// order, VLAN tags skipped), with the IP header fields the RoCEv2 ICRC covers. Header-only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace softrnic::testing {

struct UdpFrame {
  std::size_t index = 0;  // frame number in the file, from 0
  std::uint32_t src_ip = 0, dst_ip = 0;
  std::uint8_t tos = 0, ttl = 0;
  std::uint16_t ip_id = 0;
  std::uint16_t frag_off = 0;  // flags and fragment offset as on the wire (DF = 0x4000)
  std::uint16_t sport = 0, dport = 0;
  std::vector<std::uint8_t> payload;  // the UDP payload, as long as the UDP length says
};

inline std::uint16_t pcap_be16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] << 8 | p[1]);
}
inline std::uint32_t pcap_be32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) << 24 | static_cast<std::uint32_t>(p[1]) << 16 |
         static_cast<std::uint32_t>(p[2]) << 8 | p[3];
}
inline std::uint32_t pcap_le32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[3]) << 24 | static_cast<std::uint32_t>(p[2]) << 16 |
         static_cast<std::uint32_t>(p[1]) << 8 | p[0];
}

// False when the file is missing or not a classic Ethernet pcap. Non-UDP frames are skipped.
inline bool read_udp_frames(const std::string& path, std::vector<UdpFrame>& out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  const std::vector<std::uint8_t> file((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (file.size() < 24) return false;
  const std::uint32_t magic = pcap_le32(file.data());
  const bool swapped = magic == 0xd4c3b2a1u || magic == 0x4d3cb2a1u;
  if (!swapped && magic != 0xa1b2c3d4u && magic != 0xa1b23c4du) return false;
  auto u32 = [&](std::size_t off) { return swapped ? pcap_be32(file.data() + off) : pcap_le32(file.data() + off); };
  if (u32(20) != 1) return false;  // LINKTYPE_ETHERNET
  std::size_t index = 0;
  for (std::size_t off = 24; off + 16 <= file.size(); ++index) {
    const std::size_t caplen = u32(off + 8);
    const std::uint8_t* p = file.data() + off + 16;
    off += 16 + caplen;
    if (off > file.size()) return false;
    std::size_t n = caplen;
    if (n < 14) continue;
    std::uint16_t type = pcap_be16(p + 12);
    p += 14;
    n -= 14;
    while ((type == 0x8100 || type == 0x88a8) && n >= 4) {
      type = pcap_be16(p + 2);
      p += 4;
      n -= 4;
    }
    if (type != 0x0800 || n < 28 || p[9] != 17) continue;
    const std::size_t ihl = (p[0] & 0x0F) * 4u;
    const std::size_t total = pcap_be16(p + 2);
    if (ihl < 20 || total > n || total < ihl + 8) continue;
    UdpFrame u;
    u.index = index;
    u.tos = p[1];
    u.ip_id = pcap_be16(p + 4);
    u.frag_off = pcap_be16(p + 6);
    u.ttl = p[8];
    u.src_ip = pcap_be32(p + 12);
    u.dst_ip = pcap_be32(p + 16);
    const std::uint8_t* udp = p + ihl;
    u.sport = pcap_be16(udp);
    u.dport = pcap_be16(udp + 2);
    const std::size_t ulen = pcap_be16(udp + 4);
    if (ulen < 8 || ihl + ulen > total) continue;
    u.payload.assign(udp + 8, udp + ulen);
    out.push_back(std::move(u));
  }
  return true;
}

}  // namespace softrnic::testing
