// IB CM MADs and rdma_cm's CMA header (ib_cm.hpp).
#include "softrnic/wire/ib_cm.hpp"

#include <cstring>

namespace softrnic::wire::ibcm {
namespace {

// The messages as IBTA tables 106-113 lay them out after the MAD header (byte offsets there are
// from the start of the message; Linux cm_msgs.h names the packed words the same way).

struct PathWire {
  Be16 local_lid;
  Be16 remote_lid;
  Gid local_gid;
  Gid remote_gid;
  Be32 flow_rate;  // flow label:20, reserved:6, packet rate:6
  std::uint8_t traffic_class;
  std::uint8_t hop_limit;
  std::uint8_t sl_subnet;    // SL:4, subnet local:1, reserved:3
  std::uint8_t ack_timeout;  // local ACK timeout:5, then reserved:3 (alternate path: SAP supported:1, reserved:2)
};
static_assert(sizeof(PathWire) == 44);

struct ReqWire {
  Be32 local_comm_id;
  Be32 reserved4;
  Be64 service_id;
  Be64 local_ca_guid;
  Be32 reserved24;
  Be32 local_qkey;
  Be32 qpn_resp;    // local QPN:24, responder resources:8
  Be32 eecn_depth;  // local EECN:24, initiator depth:8
  Be32 reecn_misc;  // remote EECN:24, remote CM response timeout:5, transport service type:2, e2e flow control:1
  Be32 psn_misc;    // starting PSN:24, local CM response timeout:5, retry count:3
  Be16 pkey;
  std::uint8_t mtu_misc;      // path packet payload MTU:4, RDC exists:1, RNR retry count:3
  std::uint8_t retries_misc;  // max CM retries:4, SRQ:1, extended transport type:3
  PathWire primary;
  PathWire alternate;
  std::array<std::uint8_t, kReqPrivateLen> private_data;
};

struct MraWire {
  Be32 local_comm_id;
  Be32 remote_comm_id;
  std::uint8_t msg_mraed;        // message MRAed:2, reserved:6
  std::uint8_t service_timeout;  // service timeout:5, reserved:3
  std::array<std::uint8_t, kMraPrivateLen> private_data;
};

struct RejWire {
  Be32 local_comm_id;
  Be32 remote_comm_id;
  std::uint8_t msg_rejected;  // message REJected:2, reserved:6
  std::uint8_t info_length;   // reject info length:7, reserved:1
  Be16 reason;
  std::array<std::uint8_t, kRejAriLen> ari;
  std::array<std::uint8_t, kRejPrivateLen> private_data;
};

struct RepWire {
  Be32 local_comm_id;
  Be32 remote_comm_id;
  Be32 local_qkey;
  Be32 qpn;   // local QPN:24, reserved:8
  Be32 eecn;  // local EE context number:24, reserved:8
  Be32 psn;   // starting PSN:24, reserved:8
  std::uint8_t responder_resources;
  std::uint8_t initiator_depth;
  std::uint8_t ack_misc;  // target ACK delay:5, failover accepted:2, e2e flow control:1
  std::uint8_t rnr_misc;  // RNR retry count:3, SRQ:1, reserved:4
  Be64 local_ca_guid;
  std::array<std::uint8_t, kRepPrivateLen> private_data;
};

struct RtuWire {  // DREP has the same layout
  Be32 local_comm_id;
  Be32 remote_comm_id;
  std::array<std::uint8_t, kRtuPrivateLen> private_data;
};

struct DreqWire {
  Be32 local_comm_id;
  Be32 remote_comm_id;
  Be32 qpn;  // remote QPN/EECN:24, reserved:8
  std::array<std::uint8_t, kDreqPrivateLen> private_data;
};

static_assert(sizeof(ReqWire) == kCmMsgLen && sizeof(MraWire) == kCmMsgLen && sizeof(RejWire) == kCmMsgLen &&
              sizeof(RepWire) == kCmMsgLen && sizeof(RtuWire) == kCmMsgLen && sizeof(DreqWire) == kCmMsgLen);
static_assert(offsetof(ReqWire, service_id) == 8 && offsetof(ReqWire, local_qkey) == 28 &&
              offsetof(ReqWire, qpn_resp) == 32 && offsetof(ReqWire, psn_misc) == 44 && offsetof(ReqWire, pkey) == 48 &&
              offsetof(ReqWire, mtu_misc) == 50 && offsetof(ReqWire, primary) == 52 &&
              offsetof(ReqWire, alternate) == 96 && offsetof(ReqWire, private_data) == 140);
static_assert(offsetof(PathWire, local_gid) == 4 && offsetof(PathWire, remote_gid) == 20 &&
              offsetof(PathWire, flow_rate) == 36 && offsetof(PathWire, traffic_class) == 40 &&
              offsetof(PathWire, ack_timeout) == 43);
static_assert(offsetof(MraWire, private_data) == 10);
static_assert(offsetof(RejWire, reason) == 10 && offsetof(RejWire, ari) == 12 && offsetof(RejWire, private_data) == 84);
static_assert(offsetof(RepWire, qpn) == 12 && offsetof(RepWire, psn) == 20 && offsetof(RepWire, ack_misc) == 26 &&
              offsetof(RepWire, local_ca_guid) == 28 && offsetof(RepWire, private_data) == 36);
static_assert(offsetof(RtuWire, private_data) == 8 && offsetof(DreqWire, private_data) == 12);

constexpr std::uint8_t kSapSupported = 0x04;  // alternate path, byte 139 bit 5

constexpr bool fits(std::uint32_t v, unsigned bits) {
  return v < (1u << bits);
}
constexpr std::uint8_t u8(unsigned v) {
  return static_cast<std::uint8_t>(v);
}
// A word holding a 24-bit field on top of an 8-bit one.
Be32 pack24(std::uint32_t hi24, std::uint8_t lo8) {
  return Be32(hi24 << 8 | lo8);
}

// The CM message of `mad` (parse_header has checked its length).
template <typename W>
W load(std::span<const std::uint8_t> mad) {
  W w;
  std::memcpy(&w, mad.data() + kMadHdrLen, sizeof w);
  return w;
}

std::size_t store(std::span<std::uint8_t> out, AttrId attr, std::uint64_t tid, const void* msg) {
  MadHdrWire h{};
  h.base_version = kBaseVersion;
  h.mgmt_class = kMgmtClassCm;
  h.class_version = kCmClassVersion;
  h.method = kMethodSend;
  h.tid.set(tid);
  h.attr_id.set(static_cast<std::uint16_t>(attr));
  std::memcpy(out.data(), &h, sizeof h);
  std::memcpy(out.data() + kMadHdrLen, msg, kCmMsgLen);
  return kMadLen;
}

CmError check(std::span<const std::uint8_t> mad, MadHdr& hdr, AttrId want) {
  const CmError e = parse_header(mad, hdr);
  if (e != CmError::ok) return e;
  return hdr.attr_id == want ? CmError::ok : CmError::wrong_attr;
}

Path decode_path(const PathWire& w) {
  const std::uint32_t fr = w.flow_rate.get();
  return Path{.local_lid = w.local_lid.get(),
              .remote_lid = w.remote_lid.get(),
              .local_gid = w.local_gid,
              .remote_gid = w.remote_gid,
              .flow_label = fr >> 12,
              .packet_rate = u8(fr & 0x3F),
              .traffic_class = w.traffic_class,
              .hop_limit = w.hop_limit,
              .sl = u8(w.sl_subnet >> 4),
              .subnet_local = (w.sl_subnet & 0x08) != 0,
              .local_ack_timeout = u8(w.ack_timeout >> 3)};
}

bool path_fits(const Path& p) {
  return fits(p.flow_label, 20) && fits(p.packet_rate, 6) && fits(p.sl, 4) && fits(p.local_ack_timeout, 5);
}

PathWire encode_path(const Path& p) {
  PathWire w{};
  w.local_lid.set(p.local_lid);
  w.remote_lid.set(p.remote_lid);
  w.local_gid = p.local_gid;
  w.remote_gid = p.remote_gid;
  w.flow_rate.set(p.flow_label << 12 | p.packet_rate);
  w.traffic_class = p.traffic_class;
  w.hop_limit = p.hop_limit;
  w.sl_subnet = u8(p.sl << 4 | (p.subnet_local ? 0x08 : 0));
  w.ack_timeout = u8(p.local_ack_timeout << 3);
  return w;
}

std::uint32_t ip4_of(const Gid& a) {
  return static_cast<std::uint32_t>(a[12]) << 24 | static_cast<std::uint32_t>(a[13]) << 16 |
         static_cast<std::uint32_t>(a[14]) << 8 | a[15];
}

Gid ip4_tail(std::uint32_t ip) {  // 12 zero bytes, then the address
  Gid g{};
  const Be32 b(ip);
  std::memcpy(g.data() + 12, &b, sizeof b);
  return g;
}

}  // namespace

std::string_view to_string(AttrId a) {
  switch (a) {
    case AttrId::class_port_info: return "ClassPortInfo";
    case AttrId::req: return "REQ";
    case AttrId::mra: return "MRA";
    case AttrId::rej: return "REJ";
    case AttrId::rep: return "REP";
    case AttrId::rtu: return "RTU";
    case AttrId::dreq: return "DREQ";
    case AttrId::drep: return "DREP";
    case AttrId::sidr_req: return "SIDR_REQ";
    case AttrId::sidr_rep: return "SIDR_REP";
    case AttrId::lap: return "LAP";
    case AttrId::apr: return "APR";
  }
  return "?";
}

std::string_view to_string(RejReason r) {
  switch (r) {
    case RejReason::no_qp: return "no QP";
    case RejReason::no_eec: return "no EEC";
    case RejReason::no_resources: return "no resources";
    case RejReason::timeout: return "timeout";
    case RejReason::unsupported: return "unsupported request";
    case RejReason::invalid_comm_id: return "invalid comm ID";
    case RejReason::invalid_comm_instance: return "invalid comm instance";
    case RejReason::invalid_service_id: return "invalid service ID";
    case RejReason::invalid_transport_type: return "invalid transport type";
    case RejReason::stale_conn: return "stale connection";
    case RejReason::rdc_not_exist: return "RDC does not exist";
    case RejReason::invalid_gid: return "invalid GID";
    case RejReason::invalid_lid: return "invalid LID";
    case RejReason::invalid_sl: return "invalid SL";
    case RejReason::invalid_traffic_class: return "invalid traffic class";
    case RejReason::invalid_hop_limit: return "invalid hop limit";
    case RejReason::invalid_packet_rate: return "invalid packet rate";
    case RejReason::invalid_alt_gid: return "invalid alternate GID";
    case RejReason::invalid_alt_lid: return "invalid alternate LID";
    case RejReason::invalid_alt_sl: return "invalid alternate SL";
    case RejReason::invalid_alt_traffic_class: return "invalid alternate traffic class";
    case RejReason::invalid_alt_hop_limit: return "invalid alternate hop limit";
    case RejReason::invalid_alt_packet_rate: return "invalid alternate packet rate";
    case RejReason::port_cm_redirect: return "port and CM redirect";
    case RejReason::port_redirect: return "port redirect";
    case RejReason::invalid_mtu: return "invalid MTU";
    case RejReason::insufficient_resp_resources: return "insufficient responder resources";
    case RejReason::consumer_defined: return "consumer defined";
    case RejReason::invalid_rnr_retry: return "invalid RNR retry count";
    case RejReason::duplicate_local_comm_id: return "duplicate local comm ID";
    case RejReason::invalid_class_version: return "invalid class version";
    case RejReason::invalid_flow_label: return "invalid flow label";
    case RejReason::invalid_alt_flow_label: return "invalid alternate flow label";
    case RejReason::vendor_option_not_supported: return "vendor option not supported";
  }
  return "?";
}

std::string_view to_string(CmError e) {
  switch (e) {
    case CmError::ok: return "ok";
    case CmError::too_short: return "MAD shorter than 256 bytes";
    case CmError::bad_base_version: return "MAD base version not 1";
    case CmError::bad_mgmt_class: return "management class not CM (0x07)";
    case CmError::bad_class_version: return "CM class version not 2";
    case CmError::unsupported_attr: return "CM attribute not supported (ClassPortInfo, SIDR, LAP, APR)";
    case CmError::unknown_attr: return "unknown CM attribute ID";
    case CmError::bad_method: return "CM message not sent with method Send";
    case CmError::wrong_attr: return "CM MAD is another message";
  }
  return "?";
}

std::string_view to_string(CmaError e) {
  switch (e) {
    case CmaError::ok: return "ok";
    case CmaError::too_short: return "private data shorter than the 36-byte CMA header";
    case CmaError::bad_version: return "CMA header version not 0";
    case CmaError::bad_ip_version: return "CMA header IP version neither 4 nor 6";
  }
  return "?";
}

CmError parse_header(std::span<const std::uint8_t> mad, MadHdr& out) {
  if (mad.size() < kMadLen) return CmError::too_short;
  MadHdrWire w;
  std::memcpy(&w, mad.data(), sizeof w);
  out = MadHdr{.base_version = w.base_version,
               .mgmt_class = w.mgmt_class,
               .class_version = w.class_version,
               .method = w.method,
               .status = w.status.get(),
               .class_specific = w.class_specific.get(),
               .tid = w.tid.get(),
               .attr_id = static_cast<AttrId>(w.attr_id.get()),
               .reserved = w.reserved.get(),
               .attr_mod = w.attr_mod.get()};
  if (out.base_version != kBaseVersion) return CmError::bad_base_version;
  if (out.mgmt_class != kMgmtClassCm) return CmError::bad_mgmt_class;
  if (out.class_version != kCmClassVersion) return CmError::bad_class_version;
  switch (out.attr_id) {
    case AttrId::req:
    case AttrId::mra:
    case AttrId::rej:
    case AttrId::rep:
    case AttrId::rtu:
    case AttrId::dreq:
    case AttrId::drep: break;
    case AttrId::class_port_info:
    case AttrId::sidr_req:
    case AttrId::sidr_rep:
    case AttrId::lap:
    case AttrId::apr: return CmError::unsupported_attr;
    default: return CmError::unknown_attr;
  }
  return out.method == kMethodSend ? CmError::ok : CmError::bad_method;
}

CmError parse(std::span<const std::uint8_t> mad, MadHdr& hdr, Req& out) {
  if (const CmError e = check(mad, hdr, AttrId::req); e != CmError::ok) return e;
  const auto w = load<ReqWire>(mad);
  const std::uint32_t reecn = w.reecn_misc.get();
  const std::uint32_t psn = w.psn_misc.get();
  out = Req{.local_comm_id = w.local_comm_id.get(),
            .service_id = w.service_id.get(),
            .local_ca_guid = w.local_ca_guid.get(),
            .local_qkey = w.local_qkey.get(),
            .local_qpn = w.qpn_resp.get() >> 8,
            .responder_resources = u8(w.qpn_resp.get()),
            .local_eecn = w.eecn_depth.get() >> 8,
            .initiator_depth = u8(w.eecn_depth.get()),
            .remote_eecn = reecn >> 8,
            .remote_cm_response_timeout = u8((reecn >> 3) & 0x1F),
            .transport_service_type = u8((reecn >> 1) & 0x3),
            .end_to_end_flow_control = (reecn & 1) != 0,
            .starting_psn = psn >> 8,
            .local_cm_response_timeout = u8((psn >> 3) & 0x1F),
            .retry_count = u8(psn & 0x7),
            .pkey = w.pkey.get(),
            .path_mtu = u8(w.mtu_misc >> 4),
            .rdc_exists = (w.mtu_misc & 0x08) != 0,
            .rnr_retry_count = u8(w.mtu_misc & 0x7),
            .max_cm_retries = u8(w.retries_misc >> 4),
            .srq = (w.retries_misc & 0x08) != 0,
            .extended_transport_type = u8(w.retries_misc & 0x7),
            .primary = decode_path(w.primary),
            .alternate = decode_path(w.alternate),
            .sap_supported = (w.alternate.ack_timeout & kSapSupported) != 0,
            .private_data = w.private_data};
  return CmError::ok;
}

CmError parse(std::span<const std::uint8_t> mad, MadHdr& hdr, Mra& out) {
  if (const CmError e = check(mad, hdr, AttrId::mra); e != CmError::ok) return e;
  const auto w = load<MraWire>(mad);
  out = Mra{.local_comm_id = w.local_comm_id.get(),
            .remote_comm_id = w.remote_comm_id.get(),
            .msg_mraed = static_cast<MsgKind>(w.msg_mraed >> 6),
            .service_timeout = u8(w.service_timeout >> 3),
            .private_data = w.private_data};
  return CmError::ok;
}

CmError parse(std::span<const std::uint8_t> mad, MadHdr& hdr, Rej& out) {
  if (const CmError e = check(mad, hdr, AttrId::rej); e != CmError::ok) return e;
  const auto w = load<RejWire>(mad);
  out = Rej{.local_comm_id = w.local_comm_id.get(),
            .remote_comm_id = w.remote_comm_id.get(),
            .msg_rejected = static_cast<MsgKind>(w.msg_rejected >> 6),
            .reject_info_length = u8(w.info_length >> 1),
            .reason = static_cast<RejReason>(w.reason.get()),
            .ari = w.ari,
            .private_data = w.private_data};
  return CmError::ok;
}

CmError parse(std::span<const std::uint8_t> mad, MadHdr& hdr, Rep& out) {
  if (const CmError e = check(mad, hdr, AttrId::rep); e != CmError::ok) return e;
  const auto w = load<RepWire>(mad);
  out = Rep{.local_comm_id = w.local_comm_id.get(),
            .remote_comm_id = w.remote_comm_id.get(),
            .local_qkey = w.local_qkey.get(),
            .local_qpn = w.qpn.get() >> 8,
            .local_eecn = w.eecn.get() >> 8,
            .starting_psn = w.psn.get() >> 8,
            .responder_resources = w.responder_resources,
            .initiator_depth = w.initiator_depth,
            .target_ack_delay = u8(w.ack_misc >> 3),
            .failover_accepted = u8((w.ack_misc >> 1) & 0x3),
            .end_to_end_flow_control = (w.ack_misc & 1) != 0,
            .rnr_retry_count = u8(w.rnr_misc >> 5),
            .srq = (w.rnr_misc & 0x10) != 0,
            .local_ca_guid = w.local_ca_guid.get(),
            .private_data = w.private_data};
  return CmError::ok;
}

CmError parse(std::span<const std::uint8_t> mad, MadHdr& hdr, Rtu& out) {
  if (const CmError e = check(mad, hdr, AttrId::rtu); e != CmError::ok) return e;
  const auto w = load<RtuWire>(mad);
  out = Rtu{
      .local_comm_id = w.local_comm_id.get(), .remote_comm_id = w.remote_comm_id.get(), .private_data = w.private_data};
  return CmError::ok;
}

CmError parse(std::span<const std::uint8_t> mad, MadHdr& hdr, Dreq& out) {
  if (const CmError e = check(mad, hdr, AttrId::dreq); e != CmError::ok) return e;
  const auto w = load<DreqWire>(mad);
  out = Dreq{.local_comm_id = w.local_comm_id.get(),
             .remote_comm_id = w.remote_comm_id.get(),
             .remote_qpn = w.qpn.get() >> 8,
             .private_data = w.private_data};
  return CmError::ok;
}

CmError parse(std::span<const std::uint8_t> mad, MadHdr& hdr, Drep& out) {
  if (const CmError e = check(mad, hdr, AttrId::drep); e != CmError::ok) return e;
  const auto w = load<RtuWire>(mad);
  out = Drep{
      .local_comm_id = w.local_comm_id.get(), .remote_comm_id = w.remote_comm_id.get(), .private_data = w.private_data};
  return CmError::ok;
}

CmError parse(std::span<const std::uint8_t> mad, MadHdr& hdr, Message& out) {
  if (const CmError e = parse_header(mad, hdr); e != CmError::ok) return e;
  switch (hdr.attr_id) {
    case AttrId::req: return parse(mad, hdr, out.emplace<Req>());
    case AttrId::mra: return parse(mad, hdr, out.emplace<Mra>());
    case AttrId::rej: return parse(mad, hdr, out.emplace<Rej>());
    case AttrId::rep: return parse(mad, hdr, out.emplace<Rep>());
    case AttrId::rtu: return parse(mad, hdr, out.emplace<Rtu>());
    case AttrId::dreq: return parse(mad, hdr, out.emplace<Dreq>());
    case AttrId::drep: return parse(mad, hdr, out.emplace<Drep>());
    default: return CmError::unknown_attr;  // (parse_header lets only the seven through)
  }
}

std::size_t build(const Req& m, std::uint64_t tid, std::span<std::uint8_t> out) {
  if (out.size() < kMadLen) return 0;
  if (!fits(m.local_qpn, 24) || !fits(m.local_eecn, 24) || !fits(m.remote_eecn, 24) || !fits(m.starting_psn, 24) ||
      !fits(m.remote_cm_response_timeout, 5) || !fits(m.local_cm_response_timeout, 5) ||
      !fits(m.transport_service_type, 2) || !fits(m.retry_count, 3) || !fits(m.path_mtu, 4) ||
      !fits(m.rnr_retry_count, 3) || !fits(m.max_cm_retries, 4) || !fits(m.extended_transport_type, 3) ||
      !path_fits(m.primary) || !path_fits(m.alternate))
    return 0;
  ReqWire w{};
  w.local_comm_id.set(m.local_comm_id);
  w.service_id.set(m.service_id);
  w.local_ca_guid.set(m.local_ca_guid);
  w.local_qkey.set(m.local_qkey);
  w.qpn_resp = pack24(m.local_qpn, m.responder_resources);
  w.eecn_depth = pack24(m.local_eecn, m.initiator_depth);
  w.reecn_misc = pack24(m.remote_eecn, u8(m.remote_cm_response_timeout << 3 | m.transport_service_type << 1 |
                                          (m.end_to_end_flow_control ? 1 : 0)));
  w.psn_misc = pack24(m.starting_psn, u8(m.local_cm_response_timeout << 3 | m.retry_count));
  w.pkey.set(m.pkey);
  w.mtu_misc = u8(m.path_mtu << 4 | (m.rdc_exists ? 0x08 : 0) | m.rnr_retry_count);
  w.retries_misc = u8(m.max_cm_retries << 4 | (m.srq ? 0x08 : 0) | m.extended_transport_type);
  w.primary = encode_path(m.primary);
  w.alternate = encode_path(m.alternate);
  if (m.sap_supported) w.alternate.ack_timeout |= kSapSupported;
  w.private_data = m.private_data;
  return store(out, AttrId::req, tid, &w);
}

std::size_t build(const Mra& m, std::uint64_t tid, std::span<std::uint8_t> out) {
  const auto kind = static_cast<std::uint8_t>(m.msg_mraed);
  if (out.size() < kMadLen || !fits(kind, 2) || !fits(m.service_timeout, 5)) return 0;
  MraWire w{};
  w.local_comm_id.set(m.local_comm_id);
  w.remote_comm_id.set(m.remote_comm_id);
  w.msg_mraed = u8(kind << 6);
  w.service_timeout = u8(m.service_timeout << 3);
  w.private_data = m.private_data;
  return store(out, AttrId::mra, tid, &w);
}

std::size_t build(const Rej& m, std::uint64_t tid, std::span<std::uint8_t> out) {
  const auto kind = static_cast<std::uint8_t>(m.msg_rejected);
  if (out.size() < kMadLen || !fits(kind, 2) || m.reject_info_length > kRejAriLen) return 0;
  RejWire w{};
  w.local_comm_id.set(m.local_comm_id);
  w.remote_comm_id.set(m.remote_comm_id);
  w.msg_rejected = u8(kind << 6);
  w.info_length = u8(m.reject_info_length << 1);
  w.reason.set(static_cast<std::uint16_t>(m.reason));
  w.ari = m.ari;
  w.private_data = m.private_data;
  return store(out, AttrId::rej, tid, &w);
}

std::size_t build(const Rep& m, std::uint64_t tid, std::span<std::uint8_t> out) {
  if (out.size() < kMadLen || !fits(m.local_qpn, 24) || !fits(m.local_eecn, 24) || !fits(m.starting_psn, 24) ||
      !fits(m.target_ack_delay, 5) || !fits(m.failover_accepted, 2) || !fits(m.rnr_retry_count, 3))
    return 0;
  RepWire w{};
  w.local_comm_id.set(m.local_comm_id);
  w.remote_comm_id.set(m.remote_comm_id);
  w.local_qkey.set(m.local_qkey);
  w.qpn = pack24(m.local_qpn, 0);
  w.eecn = pack24(m.local_eecn, 0);
  w.psn = pack24(m.starting_psn, 0);
  w.responder_resources = m.responder_resources;
  w.initiator_depth = m.initiator_depth;
  w.ack_misc = u8(m.target_ack_delay << 3 | m.failover_accepted << 1 | (m.end_to_end_flow_control ? 1 : 0));
  w.rnr_misc = u8(m.rnr_retry_count << 5 | (m.srq ? 0x10 : 0));
  w.local_ca_guid.set(m.local_ca_guid);
  w.private_data = m.private_data;
  return store(out, AttrId::rep, tid, &w);
}

std::size_t build(const Rtu& m, std::uint64_t tid, std::span<std::uint8_t> out) {
  if (out.size() < kMadLen) return 0;
  RtuWire w{};
  w.local_comm_id.set(m.local_comm_id);
  w.remote_comm_id.set(m.remote_comm_id);
  w.private_data = m.private_data;
  return store(out, AttrId::rtu, tid, &w);
}

std::size_t build(const Dreq& m, std::uint64_t tid, std::span<std::uint8_t> out) {
  if (out.size() < kMadLen || !fits(m.remote_qpn, 24)) return 0;
  DreqWire w{};
  w.local_comm_id.set(m.local_comm_id);
  w.remote_comm_id.set(m.remote_comm_id);
  w.qpn = pack24(m.remote_qpn, 0);
  w.private_data = m.private_data;
  return store(out, AttrId::dreq, tid, &w);
}

std::size_t build(const Drep& m, std::uint64_t tid, std::span<std::uint8_t> out) {
  if (out.size() < kMadLen) return 0;
  RtuWire w{};
  w.local_comm_id.set(m.local_comm_id);
  w.remote_comm_id.set(m.remote_comm_id);
  w.private_data = m.private_data;
  return store(out, AttrId::drep, tid, &w);
}

std::size_t build(const Message& m, std::uint64_t tid, std::span<std::uint8_t> out) {
  return std::visit([&](const auto& msg) { return build(msg, tid, out); }, m);
}

Gid gid_ipv4(std::uint32_t ip) {
  Gid g = ip4_tail(ip);
  g[10] = g[11] = 0xFF;
  return g;
}

std::optional<std::uint32_t> ipv4_of_gid(const Gid& gid) {
  static constexpr std::array<std::uint8_t, 12> kPrefix = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
  if (std::memcmp(gid.data(), kPrefix.data(), kPrefix.size()) != 0) return std::nullopt;
  return ip4_of(gid);
}

std::uint32_t CmaHdr::src_ip4() const {
  return ip4_of(src_addr);
}
std::uint32_t CmaHdr::dst_ip4() const {
  return ip4_of(dst_addr);
}

CmaHdr cma_hdr_ipv4(std::uint32_t src_ip, std::uint16_t src_port, std::uint32_t dst_ip) {
  return CmaHdr{.ip_version = 4, .src_port = src_port, .src_addr = ip4_tail(src_ip), .dst_addr = ip4_tail(dst_ip)};
}

CmaError parse_cma_hdr(std::span<const std::uint8_t> private_data, CmaHdr& out) {
  if (private_data.size() < kCmaHdrLen) return CmaError::too_short;
  CmaHdrWire w;
  std::memcpy(&w, private_data.data(), sizeof w);
  if (w.cma_version != kCmaVersion) return CmaError::bad_version;
  const auto ip_version = u8(w.ip_version >> 4);
  if (ip_version != 4 && ip_version != 6) return CmaError::bad_ip_version;
  out = CmaHdr{.ip_version = ip_version, .src_port = w.port.get(), .src_addr = w.src_addr, .dst_addr = w.dst_addr};
  return CmaError::ok;
}

std::size_t build_cma_hdr(const CmaHdr& h, std::span<std::uint8_t> out) {
  if (out.size() < kCmaHdrLen || (h.ip_version != 4 && h.ip_version != 6)) return 0;
  CmaHdrWire w{};
  w.cma_version = kCmaVersion;
  w.ip_version = u8(h.ip_version << 4);
  w.port.set(h.src_port);
  w.src_addr = h.src_addr;
  w.dst_addr = h.dst_addr;
  std::memcpy(out.data(), &w, sizeof w);
  return kCmaHdrLen;
}

}  // namespace softrnic::wire::ibcm
