// Ethernet II / IPv4 / UDP / ARP codecs for the backends that put raw frames on a wire (dpdk)
// or write them to a file (the pcap tap). Pure functions: no I/O, no allocation, no DPDK.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

#include "softrnic/netdev/netdev.hpp"

namespace softrnic::netdev::eth {

struct Mac {
  std::array<std::uint8_t, 6> b{};
  friend bool operator==(const Mac&, const Mac&) = default;
  bool is_zero() const { return b == std::array<std::uint8_t, 6>{}; }
  bool is_broadcast() const { return b == std::array<std::uint8_t, 6>{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}; }
  bool is_multicast() const { return (b[0] & 1) != 0; }
};
inline constexpr Mac kBroadcast{{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}};

// "02:00:00:00:00:01" (also '-' separated); false on bad syntax.
bool parse_mac(std::string_view s, Mac& out);
std::string to_string(const Mac& m);
// A locally administered unicast MAC derived from an IPv4 address: 02:00:a:b:c:d.
Mac mac_from_ip(std::uint32_t ip);

// "10.0.0.2@02:00:00:00:00:02"; false with `error` on bad syntax.
bool parse_neighbour(std::string_view s, std::uint32_t& ip, Mac& mac, std::string& error);

inline constexpr std::size_t kEthHdr = 14, kIpv4Hdr = 20, kUdpHdr = 8, kArpBody = 28;
inline constexpr std::size_t kUdpHeaders = kEthHdr + kIpv4Hdr + kUdpHdr;  // 42
inline constexpr std::size_t kMinFrame = 60;                              // without FCS
inline constexpr std::uint16_t kEtherIpv4 = 0x0800, kEtherArp = 0x0806;

// Internet checksum (RFC 1071) accumulated over several pieces; odd-length pieces are handled.
class Checksum {
 public:
  void add(std::span<const std::uint8_t> d);
  void add16(std::uint16_t v) { sum_ += v; }
  void add32(std::uint32_t v) { sum_ += (v >> 16) + (v & 0xFFFF); }
  // The one's-complement of the folded sum, as it goes on the wire (host order value).
  std::uint16_t finish() const;
  // The folded sum itself, not complemented: what a checksum offload starts from (DPDK's
  // RTE_MBUF_F_TX_UDP_CKSUM wants the pseudo-header's sum in the checksum field).
  std::uint16_t folded() const;

 private:
  std::uint64_t sum_ = 0;
  bool odd_ = false;  // the previous piece ended on an odd byte: the next byte is a low byte
};

std::uint16_t ipv4_header_checksum(std::span<const std::uint8_t> hdr);
// UDP checksum over the pseudo-header, the UDP header (with its checksum field zero) and the
// payload pieces. A computed 0 is sent as 0xFFFF (RFC 768).
std::uint16_t udp_checksum(std::uint32_t src_ip, std::uint32_t dst_ip, std::span<const std::uint8_t> udp_hdr,
                           std::initializer_list<std::span<const std::uint8_t>> payload);

struct UdpFrameAddrs {
  Mac src_mac, dst_mac;
  NetAddr src, dst;
};

// What goes in the UDP checksum field.
enum class UdpCsum : std::uint8_t {
  full,     // computed over the pseudo-header, the header and the payload
  zero,     // 0, "no checksum" (RFC 768; IPv4 only): rxe sends RoCEv2 so
  partial,  // the pseudo-header's folded sum, for the port's checksum offload to complete
};

// Writes Ethernet + IPv4 (DF, TTL 64, id) + UDP headers (42 bytes) for a datagram of the given
// payload pieces, with the IPv4 header checksum and the UDP checksum as `csum` says. `out` must
// hold kUdpHeaders bytes.
void write_udp_headers(std::uint8_t* out, const UdpFrameAddrs& a, std::uint16_t ip_id,
                       std::initializer_list<std::span<const std::uint8_t>> payload, UdpCsum csum = UdpCsum::full);

enum class ArpOp : std::uint16_t { request = 1, reply = 2 };
struct Arp {
  ArpOp op = ArpOp::request;
  Mac sha, tha;  // sender / target hardware address
  std::uint32_t spa = 0, tpa = 0;
};
// Writes a whole ARP frame (Ethernet header + 28-byte body, zero-padded to kMinFrame bytes).
// `out` must hold kMinFrame bytes; returns kMinFrame.
std::size_t write_arp_frame(std::uint8_t* out, const Mac& eth_dst, const Arp& arp);

enum class FrameKind {
  udp,  // IPv4/UDP, checked: see `udp_*` fields
  arp,  // Ethernet/IPv4 ARP
  short_frame,
  not_ipv4,  // another EtherType
  bad_ipv4,  // version/IHL/length wrong
  bad_ip_checksum,
  fragment,  // MF or a fragment offset: not supported
  not_udp,   // another IP protocol
  bad_udp,   // UDP length beyond the IP payload, or below 8
  bad_udp_checksum,
  bad_arp,  // not Ethernet/IPv4 ARP, or an unknown opcode
};
const char* to_string(FrameKind k);

struct ParsedFrame {
  FrameKind kind = FrameKind::short_frame;
  Mac dst_mac, src_mac;
  NetAddr src, dst;             // udp
  std::size_t payload_off = 0;  // udp: offset of the datagram in the frame
  std::size_t payload_len = 0;
  Arp arp;  // arp
};
// Parses a frame (without FCS; trailing Ethernet padding is ignored). The IPv4 header checksum
// is always checked; the UDP checksum only when `check_udp` (a checksum of 0 means "none").
ParsedFrame parse_frame(std::span<const std::uint8_t> frame, bool check_udp);

}  // namespace softrnic::netdev::eth
