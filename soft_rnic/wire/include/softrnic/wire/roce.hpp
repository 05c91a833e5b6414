// RoCEv2: the InfiniBand transport headers over UDP/IPv4 (IBTA vol. 1 chapter 9, annex A17):
// BTH and the extended transport headers (RETH, AETH, ImmDt, IETH, AtomicETH, AtomicAckETH,
// DETH), one opcode table that drives both the parser and the builder (as rxe's rxe_opcode.c),
// and the ICRC. Pure codecs: no I/O, no allocation.
//
// A RoCEv2 UDP payload: BTH, the opcode's extended headers in the table's order, payload, pad
// to 4 bytes (BTH PadCnt), 4-byte ICRC.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "softrnic/wire/be.hpp"

namespace softrnic::wire::roce {

inline constexpr std::uint16_t kUdpPort = 4791;
inline constexpr std::uint16_t kDefaultPkey = 0xFFFF;
inline constexpr std::uint32_t kPsnMask = 0xFFFFFF;
inline constexpr std::uint32_t kQpnMask = 0xFFFFFF;
inline constexpr std::uint32_t kGsiQpn = 1;             // QP1: connection management MADs
inline constexpr std::uint32_t kGsiQkey = 0x80010000u;  // the GSI's well-known Q_Key
inline constexpr std::size_t kIcrcLen = 4;
inline constexpr std::uint8_t kTransportVersion = 0;

// The headers as they sit on the wire (network order; Be24 for the 24-bit QPNs, PSNs, MSNs).
struct BthHdr {
  std::uint8_t opcode;
  std::uint8_t se_m_pad_tver;  // SE(1) MigReq(1) PadCnt(2) TVer(4)
  Be16 pkey;
  std::uint8_t fecn_becn;  // FECN(1) BECN(1) reserved(6)
  Be24 dest_qpn;
  std::uint8_t ack_req;  // AckReq(1) reserved(7)
  Be24 psn;
};
struct DethHdr {
  Be32 qkey;
  std::uint8_t reserved;
  Be24 src_qpn;
};
struct RethHdr {
  Be64 va;
  Be32 rkey;
  Be32 dma_len;
};
struct AtomicEthHdr {
  Be64 va;
  Be32 rkey;
  Be64 swap_add;
  Be64 compare;
};
struct AethHdr {
  std::uint8_t syndrome;
  Be24 msn;
};
struct AtomicAckHdr {
  Be64 orig;
};
struct ImmHdr {
  std::array<std::uint8_t, 4> imm;  // opaque: kept in network order
};
struct IethHdr {
  Be32 rkey;
};
struct CnpHdr {
  std::array<std::uint8_t, 16> reserved;
};

inline constexpr std::size_t kBthLen = sizeof(BthHdr);
inline constexpr std::size_t kRethLen = sizeof(RethHdr);
inline constexpr std::size_t kAethLen = sizeof(AethHdr);
inline constexpr std::size_t kImmLen = sizeof(ImmHdr);
inline constexpr std::size_t kIethLen = sizeof(IethHdr);
inline constexpr std::size_t kAtomicEthLen = sizeof(AtomicEthHdr);
inline constexpr std::size_t kAtomicAckLen = sizeof(AtomicAckHdr);
inline constexpr std::size_t kDethLen = sizeof(DethHdr);
inline constexpr std::size_t kCnpLen = sizeof(CnpHdr);
// IBTA vol. 1 9.2 and 9.3: each header's length.
static_assert(kBthLen == 12 && kDethLen == 8 && kRethLen == 16 && kAtomicEthLen == 28 && kAethLen == 4 &&
              kAtomicAckLen == 8 && kImmLen == 4 && kIethLen == 4 && kCnpLen == 16);
inline constexpr std::size_t kMaxHeaderLen = kBthLen + kDethLen + kAtomicEthLen;  // the longest opcode's

enum class Opcode : std::uint8_t {
  send_first = 0x00,
  send_middle = 0x01,
  send_last = 0x02,
  send_last_imm = 0x03,
  send_only = 0x04,
  send_only_imm = 0x05,
  write_first = 0x06,
  write_middle = 0x07,
  write_last = 0x08,
  write_last_imm = 0x09,
  write_only = 0x0A,
  write_only_imm = 0x0B,
  read_request = 0x0C,
  read_response_first = 0x0D,
  read_response_middle = 0x0E,
  read_response_last = 0x0F,
  read_response_only = 0x10,
  ack = 0x11,
  atomic_ack = 0x12,
  cmp_swap = 0x13,
  fetch_add = 0x14,
  send_last_inv = 0x16,
  send_only_inv = 0x17,
  ud_send_only = 0x64,
  ud_send_only_imm = 0x65,
  cnp = 0x81,  // congestion notification (RoCEv2 annex)
};

// What an opcode's packet carries and what it is (rxe's RXE_*_MASK).
enum class Has : std::uint32_t {
  none = 0,
  reth = 1u << 0,
  aeth = 1u << 1,
  imm = 1u << 2,
  ieth = 1u << 3,
  atomic_eth = 1u << 4,
  atomic_ack = 1u << 5,
  deth = 1u << 6,
  payload = 1u << 7,
  request = 1u << 8,   // requester to responder
  response = 1u << 9,  // responder to requester (ACK, Read Response, Atomic ACK)
  send = 1u << 10,
  write = 1u << 11,
  read = 1u << 12,
  atomic = 1u << 13,
  first = 1u << 14,  // a message's first packet (FIRST or ONLY)
  last = 1u << 15,   // its last (LAST or ONLY)
  rc = 1u << 16,
  ud = 1u << 17,
  consumes_recv = 1u << 18,  // takes a receive buffer (Send; Write with Immediate)
  cnp = 1u << 19,            // congestion notification: 16 reserved bytes after the BTH
};
constexpr Has operator|(Has a, Has b) {
  return static_cast<Has>(static_cast<std::uint32_t>(a) | static_cast<std::uint32_t>(b));
}

struct OpInfo {
  std::string_view name;        // tshark's spelling
  Has flags = Has::none;        // none: not an opcode we speak
  std::uint8_t header_len = 0;  // BTH and extended headers
  constexpr bool valid() const { return flags != Has::none; }
  // Whether the opcode has any of `f`.
  constexpr bool has(Has f) const { return (static_cast<std::uint32_t>(flags) & static_cast<std::uint32_t>(f)) != 0; }
};

constexpr OpInfo make_op(std::string_view name, Has flags) {
  const OpInfo o{name, flags, 0};
  std::size_t len = kBthLen;
  if (o.has(Has::deth)) len += kDethLen;
  if (o.has(Has::reth)) len += kRethLen;
  if (o.has(Has::atomic_eth)) len += kAtomicEthLen;
  if (o.has(Has::aeth)) len += kAethLen;
  if (o.has(Has::atomic_ack)) len += kAtomicAckLen;
  if (o.has(Has::imm)) len += kImmLen;
  if (o.has(Has::ieth)) len += kIethLen;
  if (o.has(Has::cnp)) len += kCnpLen;
  return OpInfo{name, flags, static_cast<std::uint8_t>(len)};
}

inline constexpr std::array<OpInfo, 256> kOps = [] {
  std::array<OpInfo, 256> t{};
  using H = Has;
  constexpr Has sreq = H::rc | H::request | H::send | H::payload;
  constexpr Has wreq = H::rc | H::request | H::write | H::payload;
  constexpr Has rrsp = H::rc | H::response | H::read | H::payload;
  t[0x00] = make_op("SEND First", sreq | H::first | H::consumes_recv);
  t[0x01] = make_op("SEND Middle", sreq | H::consumes_recv);
  t[0x02] = make_op("SEND Last", sreq | H::last | H::consumes_recv);
  t[0x03] = make_op("SEND Last with Immediate", sreq | H::last | H::imm | H::consumes_recv);
  t[0x04] = make_op("SEND Only", sreq | H::first | H::last | H::consumes_recv);
  t[0x05] = make_op("SEND Only with Immediate", sreq | H::first | H::last | H::imm | H::consumes_recv);
  t[0x06] = make_op("RDMA WRITE First", wreq | H::first | H::reth);
  t[0x07] = make_op("RDMA WRITE Middle", wreq);
  t[0x08] = make_op("RDMA WRITE Last", wreq | H::last);
  t[0x09] = make_op("RDMA WRITE Last with Immediate", wreq | H::last | H::imm | H::consumes_recv);
  t[0x0A] = make_op("RDMA WRITE Only", wreq | H::first | H::last | H::reth);
  t[0x0B] = make_op("RDMA WRITE Only with Immediate", wreq | H::first | H::last | H::reth | H::imm | H::consumes_recv);
  t[0x0C] = make_op("RDMA READ Request", H::rc | H::request | H::read | H::first | H::last | H::reth);
  t[0x0D] = make_op("RDMA READ Response First", rrsp | H::first | H::aeth);
  t[0x0E] = make_op("RDMA READ Response Middle", rrsp);
  t[0x0F] = make_op("RDMA READ Response Last", rrsp | H::last | H::aeth);
  t[0x10] = make_op("RDMA READ Response Only", rrsp | H::first | H::last | H::aeth);
  t[0x11] = make_op("Acknowledge", H::rc | H::response | H::first | H::last | H::aeth);
  t[0x12] =
      make_op("ATOMIC Acknowledge", H::rc | H::response | H::atomic | H::first | H::last | H::aeth | H::atomic_ack);
  t[0x13] = make_op("CmpSwap", H::rc | H::request | H::atomic | H::first | H::last | H::atomic_eth);
  t[0x14] = make_op("FetchAdd", H::rc | H::request | H::atomic | H::first | H::last | H::atomic_eth);
  t[0x16] = make_op("SEND Last with Invalidate", sreq | H::last | H::ieth | H::consumes_recv);
  t[0x17] = make_op("SEND Only with Invalidate", sreq | H::first | H::last | H::ieth | H::consumes_recv);
  t[0x64] = make_op("UD SEND Only",
                    H::ud | H::request | H::send | H::payload | H::first | H::last | H::deth | H::consumes_recv);
  t[0x65] = make_op("UD SEND Only with Immediate", H::ud | H::request | H::send | H::payload | H::first | H::last |
                                                       H::deth | H::imm | H::consumes_recv);
  t[0x81] = make_op("CNP", H::cnp);
  return t;
}();
// IBTA vol. 1 table 38's header lengths, and the flags the transports decide by.
static_assert(kOps[0x04].header_len == 12 && kOps[0x0A].header_len == 28 && kOps[0x0B].header_len == 32);
static_assert(kOps[0x0C].header_len == 28 && kOps[0x11].header_len == 16 && kOps[0x12].header_len == 24);
static_assert(kOps[0x13].header_len == 40 && kOps[0x17].header_len == 16 && kOps[0x65].header_len == 24);
static_assert(kOps[0x81].header_len == 28 && !kOps[0x15].valid() && !kOps[0x18].valid());
static_assert(kOps[0x09].has(Has::consumes_recv) && !kOps[0x08].has(Has::consumes_recv));
static_assert(kOps[0x0D].has(Has::aeth) && !kOps[0x0E].has(Has::aeth) && kOps[0x0F].has(Has::aeth));

inline const OpInfo& op_info(Opcode op) {
  return kOps[static_cast<std::uint8_t>(op)];
}

// AETH syndrome (IBTA 9.7.5.1.4, rxe's enum aeth_syndrome).
inline constexpr std::uint8_t kAethTypeMask = 0xE0;
inline constexpr std::uint8_t kAethAck = 0x00;     // | credit count (0x1F: none, rxe sends this)
inline constexpr std::uint8_t kAethRnrNak = 0x20;  // | RNR timer code
inline constexpr std::uint8_t kAethNak = 0x60;     // | NAK code
inline constexpr std::uint8_t kAethNoCredit = 0x1F;
inline constexpr std::uint8_t kNakPsnSeqError = 0x60;
inline constexpr std::uint8_t kNakInvalidRequest = 0x61;
inline constexpr std::uint8_t kNakRemoteAccess = 0x62;
inline constexpr std::uint8_t kNakRemoteOperation = 0x63;
inline constexpr std::uint8_t kNakInvalidRdRequest = 0x64;

// The IB RNR timer encoding (IBTA table 45): a 5-bit code to microseconds.
std::uint32_t rnr_timer_us(std::uint8_t code);

// The extended headers' fields, host order. parse sets exactly those the opcode carries;
// build_headers writes those and refuses a packet that lacks one.
struct Reth {
  std::uint64_t va = 0;
  std::uint32_t rkey = 0;
  std::uint32_t dma_len = 0;
  friend bool operator==(const Reth&, const Reth&) = default;
};
struct AtomicEth {
  std::uint64_t va = 0;
  std::uint32_t rkey = 0;
  std::uint64_t swap_add = 0, compare = 0;
  friend bool operator==(const AtomicEth&, const AtomicEth&) = default;
};
struct Aeth {
  std::uint8_t syndrome = 0;
  std::uint32_t msn = 0;
  friend bool operator==(const Aeth&, const Aeth&) = default;
};
struct Deth {
  std::uint32_t qkey = 0;
  std::uint32_t src_qpn = 0;
  friend bool operator==(const Deth&, const Deth&) = default;
};

struct Packet {
  Opcode opcode = Opcode::send_only;
  // BTH
  bool solicited = false;
  bool mig_req = false;
  std::uint8_t pad = 0;  // parse: PadCnt; build: computed from the payload length
  std::uint16_t pkey = kDefaultPkey;
  bool fecn = false, becn = false;
  std::uint32_t dest_qpn = 0;
  bool ack_req = false;
  std::uint32_t psn = 0;
  // The extended headers, each present exactly when the opcode carries it.
  std::optional<Deth> deth;
  std::optional<Reth> reth;
  std::optional<AtomicEth> atomic_eth;
  std::optional<Aeth> aeth;
  std::optional<std::uint64_t> atomic_ack;  // AtomicAckETH: the original value
  std::optional<std::uint32_t> imm;         // ImmDt, in network order as the consumer gave it (opaque)
  std::optional<std::uint32_t> inv_rkey;    // IETH
  // Payload, pad and ICRC excluded (parse only).
  std::span<const std::uint8_t> payload;
};

enum class ParseError : std::uint8_t {
  ok,
  too_short,       // shorter than BTH + extended headers + pad + ICRC
  unknown_opcode,  // not in the table
  bad_version,     // BTH transport version not 0
  bad_pad,         // PadCnt on an opcode without payload, or more than the payload
};
std::string_view to_string(ParseError e);

// Parses a RoCEv2 UDP payload (ICRC included, not checked here: icrc_ok). `out` holds the packet on
// ok, and is unspecified after an error.
ParseError parse(std::span<const std::uint8_t> udp_payload, Packet& out);

// Writes the BTH and the opcode's extended headers for a packet of `payload_len` payload bytes
// (PadCnt computed) into `out`; returns the header length (op_info(p.opcode).header_len), 0 for
// an opcode not in the table or a packet without an extended header its opcode carries.
std::size_t build_headers(const Packet& p, std::size_t payload_len, std::span<std::uint8_t, kMaxHeaderLen> out);

inline std::size_t pad_of(std::size_t payload_len) {
  return (4 - (payload_len & 3)) & 3;
}

// What the ICRC covers of the IPv4 and UDP headers besides the RoCEv2 packet itself (the TOS,
// TTL, IP checksum and UDP checksum are masked). A kernel UDP socket that sets DF and is not
// connected sends IP ID 0; so do rxe and our dpdk netdev.
struct IcrcAddr {
  std::uint32_t src_ip = 0, dst_ip = 0;  // host order
  std::uint16_t sport = 0, dport = kUdpPort;
  std::uint16_t ip_id = 0;
  std::uint16_t frag_off = 0x4000;  // DF
};

// The ICRC of a packet whose UDP payload is `pieces` (from the BTH through the pad, in order)
// followed by the ICRC itself, as the value to store little-endian in the last 4 bytes.
std::uint32_t icrc(const IcrcAddr& a, std::span<const std::span<const std::uint8_t>> pieces);
// Whether the last 4 bytes of `udp_payload` are its ICRC.
bool icrc_ok(const IcrcAddr& a, std::span<const std::uint8_t> udp_payload);
// Whether some IP ID makes the ICRC right (a receiver that cannot see the IP header: a kernel
// UDP socket; Linux rxe numbers its packets' IDs); true with `ip_id` set to it. The CRC is
// affine in the ID's 16 bits, so this solves for it (16 steps, the map cached per packet
// length); a corrupted packet passes with probability 2^-16 instead of 2^-32.
bool icrc_ok_any_id(IcrcAddr a, std::span<const std::uint8_t> udp_payload, std::uint16_t& ip_id);
// What IP ID `id` instead of 0 changes in the ICRC of a packet whose UDP payload is
// `udp_payload_len` bytes (XOR it in): for a sender whose kernel numbers the packets of one send
// (netdev::IpIdSeal; the map cached per length, as for icrc_ok_any_id).
std::uint32_t icrc_ip_id_effect(std::size_t udp_payload_len, std::uint16_t id);

// PSN arithmetic modulo 2^24: a - b as a signed distance in [-2^23, 2^23) (exactly half-way
// counts as behind: fuzz corpus regress_psn_diff_halfway).
inline std::int32_t psn_diff(std::uint32_t a, std::uint32_t b) {
  return static_cast<std::int32_t>((a - b) << 8) >> 8;
}
inline std::uint32_t psn_add(std::uint32_t a, std::uint32_t n) {
  return (a + n) & kPsnMask;
}

// UDP source ports as Linux picks them (ECMP entropy; receivers ignore them). A QP's first one
// comes from its number (rxe_qp.c: 0xC000 + hash_32(qpn, 14)); once connected, from the path's
// flow label (rdma_get_udp_sport), which is derived from both QPNs when the path has none.
// rdma_cm on RoCE gives the path a flow label from its own ports (cm_flow_label) and carries it in
// the CM REQ.
std::uint16_t source_port_of(std::uint32_t qpn);
std::uint16_t source_port_of(std::uint32_t flow_label, std::uint32_t lqpn, std::uint32_t rqpn);
std::uint32_t flow_label_of(std::uint32_t lqpn, std::uint32_t rqpn);
std::uint32_t cm_flow_label(std::uint16_t sport, std::uint16_t dport);

// Largest IB MTU (256..4096) whose packet fits an IP MTU of `ip_mtu` bytes (1500 -> 1024).
std::uint32_t path_mtu_for(std::uint32_t ip_mtu);
// IBTA's enum ib_mtu code (1: 256 ... 5: 4096) and back; 0 for anything else.
std::uint8_t mtu_code(std::uint32_t mtu);
std::uint32_t mtu_bytes(std::uint8_t code);

}  // namespace softrnic::wire::roce
