// InfiniBand Communication Management (IBTA vol. 1 chapter 12) as rdma_cm speaks it over RoCEv2:
// the MAD common header, the connection messages REQ, MRA, REJ, REP, RTU, DREQ and DREP with every
// field where IBTA tables 106-113 put it (Linux: include/rdma/ibta_vol1_c12.h), and rdma_cm's CMA
// header at the start of a REQ's private data (drivers/infiniband/core/cma.c, struct cma_hdr) with
// its service IDs. Pure codecs: no I/O, no allocation.
//
// A CM MAD is the 256-byte payload of a UD SEND to QP1 (Q_Key 0x80010000): the 24-byte MAD header,
// then the 232-byte message. Parsers check the header and fill host-order structs; builders write
// the whole MAD (method Send, reserved fields zero) into a caller buffer. Private data is carried
// whole: the wire has no length for it (rdma_cm pads it with zeros).
//
// Linux's conventions seen on the wire: a connection's messages all carry the REQ's transaction
// ID (each side echoes the TID of the message it answers); rdma_cm puts no header in REP, RTU,
// REJ, DREQ or DREP private data, only in REQ's (36 of its 92 bytes).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <variant>

#include "softrnic/wire/be.hpp"

namespace softrnic::wire::ibcm {

// ---- MAD common header (IBTA 13.4.2) ----

inline constexpr std::size_t kMadLen = 256;
inline constexpr std::size_t kMadHdrLen = 24;
inline constexpr std::size_t kCmMsgLen = kMadLen - kMadHdrLen;  // 232

inline constexpr std::uint8_t kBaseVersion = 1;
inline constexpr std::uint8_t kMgmtClassCm = 0x07;
inline constexpr std::uint8_t kCmClassVersion = 2;
inline constexpr std::uint8_t kMethodSend = 0x03;

enum class AttrId : std::uint16_t {
  class_port_info = 0x0001,
  req = 0x0010,
  mra = 0x0011,
  rej = 0x0012,
  rep = 0x0013,
  rtu = 0x0014,
  dreq = 0x0015,
  drep = 0x0016,
  sidr_req = 0x0017,
  sidr_rep = 0x0018,
  lap = 0x0019,
  apr = 0x001A,
};
std::string_view to_string(AttrId a);  // "REQ", ...; "?" for an unknown ID

struct MadHdrWire {
  std::uint8_t base_version;
  std::uint8_t mgmt_class;
  std::uint8_t class_version;
  std::uint8_t method;
  Be16 status;
  Be16 class_specific;
  Be64 tid;
  Be16 attr_id;
  Be16 reserved;
  Be32 attr_mod;
};
static_assert(sizeof(MadHdrWire) == kMadHdrLen);

struct MadHdr {
  std::uint8_t base_version = kBaseVersion;
  std::uint8_t mgmt_class = kMgmtClassCm;
  std::uint8_t class_version = kCmClassVersion;
  std::uint8_t method = kMethodSend;
  std::uint16_t status = 0;
  std::uint16_t class_specific = 0;
  std::uint64_t tid = 0;  // Linux: hi_tid << 32 | the requester's comm ID (its bytes read little-endian)
  AttrId attr_id = AttrId::req;
  std::uint16_t reserved = 0;
  std::uint32_t attr_mod = 0;
  bool operator==(const MadHdr&) const = default;
};

// ---- CM messages (IBTA 12.6) ----

// Private data and ARI sizes (Linux enum ib_cm_data_size).
inline constexpr std::size_t kReqPrivateLen = 92;
inline constexpr std::size_t kMraPrivateLen = 222;
inline constexpr std::size_t kRejPrivateLen = 148;
inline constexpr std::size_t kRepPrivateLen = 196;
inline constexpr std::size_t kRtuPrivateLen = 224;
inline constexpr std::size_t kDreqPrivateLen = 220;
inline constexpr std::size_t kDrepPrivateLen = 224;
inline constexpr std::size_t kRejAriLen = 72;

using Gid = std::array<std::uint8_t, 16>;

// REQ transport service type; 3 means "see the extended transport type" (1 there: XRC).
inline constexpr std::uint8_t kTransportRc = 0;
inline constexpr std::uint8_t kTransportUc = 1;
inline constexpr std::uint8_t kTransportRd = 2;
inline constexpr std::uint8_t kTransportExtended = 3;

// The message a REJ rejects or an MRA acknowledges (Linux enum cm_msg_response).
enum class MsgKind : std::uint8_t { req = 0, rep = 1, other = 2 };

// REJ reasons (IBTA table 109; Linux enum ib_cm_rej_reason).
enum class RejReason : std::uint16_t {
  no_qp = 1,
  no_eec = 2,
  no_resources = 3,
  timeout = 4,  // ARI: the sender's CA GUID (Linux, destroying an ID whose REQ is unanswered)
  unsupported = 5,
  invalid_comm_id = 6,
  invalid_comm_instance = 7,
  invalid_service_id = 8,  // nobody listens on the service ID
  invalid_transport_type = 9,
  stale_conn = 10,
  rdc_not_exist = 11,
  invalid_gid = 12,
  invalid_lid = 13,
  invalid_sl = 14,
  invalid_traffic_class = 15,
  invalid_hop_limit = 16,
  invalid_packet_rate = 17,
  invalid_alt_gid = 18,
  invalid_alt_lid = 19,
  invalid_alt_sl = 20,
  invalid_alt_traffic_class = 21,
  invalid_alt_hop_limit = 22,
  invalid_alt_packet_rate = 23,
  port_cm_redirect = 24,
  port_redirect = 25,
  invalid_mtu = 26,
  insufficient_resp_resources = 27,
  consumer_defined = 28,  // rdma_reject(); private data is the consumer's
  invalid_rnr_retry = 29,
  duplicate_local_comm_id = 30,
  invalid_class_version = 31,
  invalid_flow_label = 32,
  invalid_alt_flow_label = 33,
  vendor_option_not_supported = 35,
};
std::string_view to_string(RejReason r);  // "?" for a value not in the table

// A REQ path (primary: bytes 52-95 of the message, alternate: 96-139).
struct Path {
  std::uint16_t local_lid = 0;  // RoCE: 0xFFFF (permissive)
  std::uint16_t remote_lid = 0;
  Gid local_gid{};  // RoCEv2 over IPv4: ::ffff:a.b.c.d (gid_ipv4)
  Gid remote_gid{};
  std::uint32_t flow_label = 0;  // 20 bits
  std::uint8_t packet_rate = 0;  // 6 bits (enum ib_rate; 0: port current)
  std::uint8_t traffic_class = 0;
  std::uint8_t hop_limit = 0;
  std::uint8_t sl = 0;  // 4 bits
  bool subnet_local = false;
  std::uint8_t local_ack_timeout = 0;  // 5 bits: 4.096 us * 2^t
  bool operator==(const Path&) const = default;
};

struct Req {
  std::uint32_t local_comm_id = 0;
  std::uint64_t service_id = 0;
  std::uint64_t local_ca_guid = 0;
  std::uint32_t local_qkey = 0;
  std::uint32_t local_qpn = 0;  // 24 bits
  std::uint8_t responder_resources = 0;
  std::uint32_t local_eecn = 0;  // 24 bits
  std::uint8_t initiator_depth = 0;
  std::uint32_t remote_eecn = 0;                // 24 bits
  std::uint8_t remote_cm_response_timeout = 0;  // 5 bits
  std::uint8_t transport_service_type = 0;      // 2 bits (kTransport*)
  bool end_to_end_flow_control = false;
  std::uint32_t starting_psn = 0;              // 24 bits
  std::uint8_t local_cm_response_timeout = 0;  // 5 bits
  std::uint8_t retry_count = 0;                // 3 bits
  std::uint16_t pkey = 0;
  std::uint8_t path_mtu = 0;  // 4 bits: IB MTU code (1: 256 ... 5: 4096)
  bool rdc_exists = false;
  std::uint8_t rnr_retry_count = 0;  // 3 bits
  std::uint8_t max_cm_retries = 0;   // 4 bits
  bool srq = false;
  std::uint8_t extended_transport_type = 0;  // 3 bits
  Path primary;
  Path alternate;  // all zero: none
  bool sap_supported = false;
  std::array<std::uint8_t, kReqPrivateLen> private_data{};  // rdma_cm: CMA header, then 56 consumer bytes
  bool operator==(const Req&) const = default;
};

struct Mra {
  std::uint32_t local_comm_id = 0;
  std::uint32_t remote_comm_id = 0;
  MsgKind msg_mraed = MsgKind::req;  // 2 bits
  std::uint8_t service_timeout = 0;  // 5 bits: 4.096 us * 2^t
  std::array<std::uint8_t, kMraPrivateLen> private_data{};
  bool operator==(const Mra&) const = default;
};

struct Rej {
  std::uint32_t local_comm_id = 0;
  std::uint32_t remote_comm_id = 0;     // 0 when rejecting a REQ the sender never answered
  MsgKind msg_rejected = MsgKind::req;  // 2 bits
  std::uint8_t reject_info_length = 0;  // 7 bits: ARI bytes that count
  RejReason reason{};
  std::array<std::uint8_t, kRejAriLen> ari{};
  std::array<std::uint8_t, kRejPrivateLen> private_data{};
  bool operator==(const Rej&) const = default;
};

struct Rep {
  std::uint32_t local_comm_id = 0;
  std::uint32_t remote_comm_id = 0;
  std::uint32_t local_qkey = 0;
  std::uint32_t local_qpn = 0;     // 24 bits
  std::uint32_t local_eecn = 0;    // 24 bits
  std::uint32_t starting_psn = 0;  // 24 bits
  std::uint8_t responder_resources = 0;
  std::uint8_t initiator_depth = 0;
  std::uint8_t target_ack_delay = 0;   // 5 bits
  std::uint8_t failover_accepted = 0;  // 2 bits
  bool end_to_end_flow_control = false;
  std::uint8_t rnr_retry_count = 0;  // 3 bits
  bool srq = false;
  std::uint64_t local_ca_guid = 0;
  std::array<std::uint8_t, kRepPrivateLen> private_data{};
  bool operator==(const Rep&) const = default;
};

struct Rtu {
  std::uint32_t local_comm_id = 0;
  std::uint32_t remote_comm_id = 0;
  std::array<std::uint8_t, kRtuPrivateLen> private_data{};
  bool operator==(const Rtu&) const = default;
};

struct Dreq {
  std::uint32_t local_comm_id = 0;
  std::uint32_t remote_comm_id = 0;
  std::uint32_t remote_qpn = 0;  // 24 bits: the receiver's QPN (or EECN)
  std::array<std::uint8_t, kDreqPrivateLen> private_data{};
  bool operator==(const Dreq&) const = default;
};

struct Drep {
  std::uint32_t local_comm_id = 0;
  std::uint32_t remote_comm_id = 0;
  std::array<std::uint8_t, kDrepPrivateLen> private_data{};
  bool operator==(const Drep&) const = default;
};

using Message = std::variant<Req, Mra, Rej, Rep, Rtu, Dreq, Drep>;

enum class CmError : std::uint8_t {
  ok,
  too_short,          // fewer than 256 bytes
  bad_base_version,   // not 1
  bad_mgmt_class,     // not the CM class 0x07
  bad_class_version,  // not 2
  unsupported_attr,   // ClassPortInfo, SIDR_REQ, SIDR_REP, LAP, APR: CM attributes not spoken here
  unknown_attr,       // no CM attribute at all
  bad_method,         // a connection message not sent with method Send
  wrong_attr,         // a good CM MAD, but not the message asked for
};
std::string_view to_string(CmError e);

// Decodes and checks the header of the MAD at the start of `mad` (bytes after 256 are not looked
// at): ok for one of the seven connection messages. `out` is filled unless too_short.
CmError parse_header(std::span<const std::uint8_t> mad, MadHdr& out);

// Decode one message: parse_header's errors, or wrong_attr when the MAD is another message.
// Reserved bits are ignored.
CmError parse(std::span<const std::uint8_t> mad, MadHdr& hdr, Req& out);
CmError parse(std::span<const std::uint8_t> mad, MadHdr& hdr, Mra& out);
CmError parse(std::span<const std::uint8_t> mad, MadHdr& hdr, Rej& out);
CmError parse(std::span<const std::uint8_t> mad, MadHdr& hdr, Rep& out);
CmError parse(std::span<const std::uint8_t> mad, MadHdr& hdr, Rtu& out);
CmError parse(std::span<const std::uint8_t> mad, MadHdr& hdr, Dreq& out);
CmError parse(std::span<const std::uint8_t> mad, MadHdr& hdr, Drep& out);
// Whichever of the seven it is.
CmError parse(std::span<const std::uint8_t> mad, MadHdr& hdr, Message& out);

// Write the MAD carrying `m` (base version 1, class 0x07 version 2, method Send, status 0, the
// message's attribute ID, attribute modifier 0, transaction ID `tid`) into out[0..256); return
// kMadLen, or 0 when `out` is too small or a field does not fit its width.
std::size_t build(const Req& m, std::uint64_t tid, std::span<std::uint8_t> out);
std::size_t build(const Mra& m, std::uint64_t tid, std::span<std::uint8_t> out);
std::size_t build(const Rej& m, std::uint64_t tid, std::span<std::uint8_t> out);
std::size_t build(const Rep& m, std::uint64_t tid, std::span<std::uint8_t> out);
std::size_t build(const Rtu& m, std::uint64_t tid, std::span<std::uint8_t> out);
std::size_t build(const Dreq& m, std::uint64_t tid, std::span<std::uint8_t> out);
std::size_t build(const Drep& m, std::uint64_t tid, std::span<std::uint8_t> out);
std::size_t build(const Message& m, std::uint64_t tid, std::span<std::uint8_t> out);

// A CM timeout code (response timeouts, ACK timeout, target ACK delay, MRA service timeout) in
// nanoseconds: 4.096 us * 2^code.
constexpr std::uint64_t timeout_ns(std::uint8_t code) {
  return std::uint64_t{4096} << (code & 31);
}

// The RoCEv2 GID of an IPv4 address (host order): ::ffff:a.b.c.d.
Gid gid_ipv4(std::uint32_t ip);
// The IPv4 address (host order) of such a GID, or nullopt for any other GID.
std::optional<std::uint32_t> ipv4_of_gid(const Gid& gid);

// ---- rdma_cm (drivers/infiniband/core/cma.c) ----

inline constexpr std::size_t kCmaHdrLen = 36;
inline constexpr std::uint8_t kCmaVersion = 0x00;
inline constexpr std::size_t kCmaReqPrivateLen = kReqPrivateLen - kCmaHdrLen;  // 56: the consumer's share

// Port spaces (enum rdma_ucm_port_space).
inline constexpr std::uint16_t kPsIpoib = 0x0002;
inline constexpr std::uint16_t kPsTcp = 0x0106;
inline constexpr std::uint16_t kPsUdp = 0x0111;
inline constexpr std::uint16_t kPsIb = 0x013F;

struct CmaHdrWire {
  std::uint8_t cma_version;
  std::uint8_t ip_version;  // version in bits 7:4
  Be16 port;
  Gid src_addr;  // union cma_ip_addr: IPv6, or 12 pad bytes and the IPv4 address
  Gid dst_addr;
};
static_assert(sizeof(CmaHdrWire) == kCmaHdrLen);

struct CmaHdr {
  std::uint8_t ip_version = 4;  // 4 or 6
  std::uint16_t src_port = 0;   // the active side's port (its address is src_addr)
  Gid src_addr{};               // IPv6, or IPv4 in the last 4 bytes (the first 12 zero)
  Gid dst_addr{};
  std::uint32_t src_ip4() const;  // host order (IPv4: the last 4 bytes)
  std::uint32_t dst_ip4() const;
  bool operator==(const CmaHdr&) const = default;
};
CmaHdr cma_hdr_ipv4(std::uint32_t src_ip, std::uint16_t src_port, std::uint32_t dst_ip);

enum class CmaError : std::uint8_t {
  ok,
  too_short,       // fewer than 36 bytes
  bad_version,     // cma_version not 0
  bad_ip_version,  // neither 4 nor 6
};
std::string_view to_string(CmaError e);

// Decodes the CMA header at the start of a REQ's private data (the consumer's data follows it).
CmaError parse_cma_hdr(std::span<const std::uint8_t> private_data, CmaHdr& out);
// Writes it into out[0..36); returns kCmaHdrLen, or 0 when `out` is too small or the IP version
// is neither 4 nor 6.
std::size_t build_cma_hdr(const CmaHdr& h, std::span<std::uint8_t> out);

// rdma_cm's service ID for a port in a port space (cma_get_service_id): (ps << 16) + port.
constexpr std::uint64_t cma_service_id(std::uint16_t ps, std::uint16_t port) {
  return (std::uint64_t{ps} << 16) + port;
}
// The port of an rdma_cm service ID in port space `ps`, or nullopt when it is not one.
constexpr std::optional<std::uint16_t> cma_port_of(std::uint64_t service_id, std::uint16_t ps = kPsTcp) {
  if (service_id >> 16 != ps) return std::nullopt;
  return static_cast<std::uint16_t>(service_id);
}

}  // namespace softrnic::wire::ibcm
