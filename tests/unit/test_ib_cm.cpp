// IB CM MADs and rdma_cm's CMA header (ib_cm.hpp). Known answers: the 14 CM MADs in the captures
// of Linux 6.1 rxe in ../shared/tools/rdmavm/captures (rxe_rping, host_rxe_cm_req_to_host,
// rxe_dtest.first150, rxe_send_bw_cm.first150), with the values tshark 4.0 decodes
// (`tshark -r F -d udp.port==4791,infiniband -V`; frame numbers below are tshark's). Except the
// REQ's primary flow label and packet rate, which tshark 4.0 misreads (it takes 2 bytes of the
// 4-byte word): those were read from the bytes (IBTA table 106, bytes 88-91) and agree with how
// rdma_cm derives the label (cma_get_roce_udp_flow_label: (sport * 31 + dport) & 0xFFFFF).
// Field positions: a bit table transcribed from Linux include/rdma/ibta_vol1_c12.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "pcap_udp.hpp"
#include "softrnic/wire/ib_cm.hpp"

using namespace softrnic::wire::ibcm;

namespace {

using Bytes = std::vector<std::uint8_t>;
using Mad = std::array<std::uint8_t, kMadLen>;

constexpr std::uint32_t ip(std::uint32_t host) {  // 10.99.1.host (the rxe link)
  return 0x0A630100u | host;
}
constexpr std::uint64_t kGuidA = 0x505400fffe990102;  // guest A (10.99.1.2) node GUID
constexpr std::uint64_t kGuidB = 0x505400fffe990103;  // guest B (10.99.1.3)

// ---- the CM MADs of a capture ----

struct CapturedMad {
  std::size_t frame = 0;  // tshark's frame number
  std::uint32_t src_ip = 0, dst_ip = 0;
  Bytes mad;
};

std::string capture_path(const std::string& name) {
  return std::string(SOFTRNIC_SHARED_DIR) + "/tools/rdmavm/captures/" + name;
}

// RoCEv2 UD SEND Only to QP1: BTH (12), DETH (8: GSI Q_Key, source QP 1), MAD (256), ICRC (4).
bool read_cm_mads(const std::string& name, std::vector<CapturedMad>& out) {
  std::vector<softrnic::testing::UdpFrame> frames;
  if (!softrnic::testing::read_udp_frames(capture_path(name), frames)) return false;
  for (const auto& f : frames) {
    const Bytes& p = f.payload;
    if (f.dport != 4791 || p.size() < 12 || p[0] != 0x64) continue;
    EXPECT_EQ(p.size(), 12u + 8 + kMadLen + 4) << name << " frame " << f.index + 1;
    if (p.size() != 12 + 8 + kMadLen + 4) continue;
    EXPECT_EQ(softrnic::testing::pcap_be32(p.data() + 4) & 0xFFFFFF, 1u);   // BTH dest QP
    EXPECT_EQ(softrnic::testing::pcap_be32(p.data() + 12), 0x80010000u);    // DETH Q_Key
    EXPECT_EQ(softrnic::testing::pcap_be32(p.data() + 16) & 0xFFFFFF, 1u);  // DETH source QP
    out.push_back({f.index + 1, f.src_ip, f.dst_ip, Bytes(p.begin() + 20, p.begin() + 20 + kMadLen)});
  }
  return true;
}

#define LOAD_OR_SKIP(name, mads) \
  std::vector<CapturedMad> mads; \
  if (!read_cm_mads(name, mads)) GTEST_SKIP() << "capture missing: " << capture_path(name)

std::vector<std::size_t> frames_of(const std::vector<CapturedMad>& mads) {
  std::vector<std::size_t> v;
  for (const auto& m : mads) v.push_back(m.frame);
  return v;
}

// The header every captured CM MAD has: method Send, status, class-specific, attribute modifier 0.
void expect_header(const MadHdr& h, std::uint64_t tid, AttrId attr) {
  EXPECT_EQ(h.base_version, 1);
  EXPECT_EQ(h.mgmt_class, 0x07);
  EXPECT_EQ(h.class_version, 2);
  EXPECT_EQ(h.method, 0x03);
  EXPECT_EQ(h.status, 0);
  EXPECT_EQ(h.class_specific, 0);
  EXPECT_EQ(h.tid, tid);
  EXPECT_EQ(h.attr_id, attr);
  EXPECT_EQ(h.reserved, 0);
  EXPECT_EQ(h.attr_mod, 0u);
}

template <typename M>
M parse_as(const CapturedMad& c, std::uint64_t tid, AttrId attr) {
  MadHdr h;
  M m;
  EXPECT_EQ(parse(c.mad, h, m), CmError::ok) << "frame " << c.frame;
  expect_header(h, tid, attr);
  Mad again{};
  EXPECT_EQ(build(m, h.tid, again), kMadLen);
  EXPECT_TRUE(std::equal(again.begin(), again.end(), c.mad.begin())) << "frame " << c.frame << " does not rebuild";
  return m;
}

template <std::size_t N>
bool all_zero(const std::array<std::uint8_t, N>& a, std::size_t from = 0) {
  return std::all_of(a.begin() + from, a.end(), [](std::uint8_t b) { return b == 0; });
}

// What differs between the REQs Linux 6.1 rdma_cm sends on rxe.
struct ReqCase {
  std::size_t frame;
  std::uint64_t tid;
  std::uint32_t comm_id;
  std::uint16_t port;  // destination (service ID)
  std::uint64_t guid;
  std::uint32_t qpn;
  std::uint8_t rd_atomic;  // responder resources = initiator depth
  bool flow_control;
  std::uint32_t psn;
  std::uint32_t src_ip, dst_ip;
  std::uint16_t sport;  // CMA header
  std::uint32_t flow_label;
};

Req expect_req(const CapturedMad& c, const ReqCase& k) {
  EXPECT_EQ(c.frame, k.frame);
  EXPECT_EQ(c.src_ip, k.src_ip);
  EXPECT_EQ(c.dst_ip, k.dst_ip);
  const Req r = parse_as<Req>(c, k.tid, AttrId::req);
  EXPECT_EQ(r.local_comm_id, k.comm_id);
  EXPECT_EQ(r.service_id, 0x0000000001060000u | k.port);
  EXPECT_EQ(cma_port_of(r.service_id), k.port);
  EXPECT_EQ(r.local_ca_guid, k.guid);
  EXPECT_EQ(r.local_qkey, 0u);
  EXPECT_EQ(r.local_qpn, k.qpn);
  EXPECT_EQ(r.responder_resources, k.rd_atomic);
  EXPECT_EQ(r.local_eecn, 0u);
  EXPECT_EQ(r.initiator_depth, k.rd_atomic);
  EXPECT_EQ(r.remote_eecn, 0u);
  EXPECT_EQ(r.remote_cm_response_timeout, 20);  // CMA_CM_RESPONSE_TIMEOUT
  EXPECT_EQ(r.transport_service_type, kTransportRc);
  EXPECT_EQ(r.end_to_end_flow_control, k.flow_control);
  EXPECT_EQ(r.starting_psn, k.psn);
  EXPECT_EQ(r.local_cm_response_timeout, 20);
  EXPECT_EQ(r.retry_count, 7);
  EXPECT_EQ(r.pkey, 0xFFFF);
  EXPECT_EQ(r.path_mtu, 3);  // 1024
  EXPECT_FALSE(r.rdc_exists);
  EXPECT_EQ(r.rnr_retry_count, 7);
  EXPECT_EQ(r.max_cm_retries, 15);  // CMA_MAX_CM_RETRIES
  EXPECT_FALSE(r.srq);
  EXPECT_EQ(r.extended_transport_type, 0);
  EXPECT_EQ(r.primary.local_lid, 0xFFFF);  // permissive LID
  EXPECT_EQ(r.primary.remote_lid, 0xFFFF);
  EXPECT_EQ(r.primary.local_gid, gid_ipv4(k.src_ip));
  EXPECT_EQ(r.primary.remote_gid, gid_ipv4(k.dst_ip));
  EXPECT_EQ(ipv4_of_gid(r.primary.local_gid), k.src_ip);
  EXPECT_EQ(r.primary.flow_label, k.flow_label);
  EXPECT_EQ(r.primary.flow_label, (k.sport * 31u + k.port) & 0xFFFFF);
  EXPECT_EQ(r.primary.packet_rate, 0);  // IB_RATE_PORT_CURRENT
  EXPECT_EQ(r.primary.traffic_class, 0);
  EXPECT_EQ(r.primary.hop_limit, 64);
  EXPECT_EQ(r.primary.sl, 0);
  EXPECT_FALSE(r.primary.subnet_local);
  EXPECT_EQ(r.primary.local_ack_timeout, 19);  // CMA_IBOE_PACKET_LIFETIME 18 + 1
  EXPECT_EQ(r.alternate, Path{});
  EXPECT_FALSE(r.sap_supported);
  CmaHdr cma;
  EXPECT_EQ(parse_cma_hdr(r.private_data, cma), CmaError::ok);
  EXPECT_EQ(cma.ip_version, 4);
  EXPECT_EQ(cma.src_port, k.sport);
  EXPECT_EQ(cma.src_ip4(), k.src_ip);
  EXPECT_EQ(cma.dst_ip4(), k.dst_ip);
  EXPECT_EQ(cma, cma_hdr_ipv4(k.src_ip, k.sport, k.dst_ip));  // the 12 pad bytes are zero
  std::array<std::uint8_t, kCmaHdrLen> hdr{};
  EXPECT_EQ(build_cma_hdr(cma, hdr), kCmaHdrLen);
  EXPECT_TRUE(std::equal(hdr.begin(), hdr.end(), r.private_data.begin()));
  return r;
}

struct RepCase {
  std::size_t frame;
  std::uint64_t tid;
  std::uint32_t comm_id, remote_comm_id;
  std::uint32_t qpn;
  std::uint32_t psn;
  std::uint8_t rd_atomic;
  bool flow_control;
};

Rep expect_rep(const CapturedMad& c, const RepCase& k) {
  EXPECT_EQ(c.frame, k.frame);
  EXPECT_EQ(c.src_ip, ip(2));
  const Rep r = parse_as<Rep>(c, k.tid, AttrId::rep);
  EXPECT_EQ(r.local_comm_id, k.comm_id);
  EXPECT_EQ(r.remote_comm_id, k.remote_comm_id);
  EXPECT_EQ(r.local_qkey, 0u);
  EXPECT_EQ(r.local_qpn, k.qpn);
  EXPECT_EQ(r.local_eecn, 0u);
  EXPECT_EQ(r.starting_psn, k.psn);
  EXPECT_EQ(r.responder_resources, k.rd_atomic);
  EXPECT_EQ(r.initiator_depth, k.rd_atomic);
  EXPECT_EQ(r.target_ack_delay, 15);
  EXPECT_EQ(r.failover_accepted, 0);
  EXPECT_EQ(r.end_to_end_flow_control, k.flow_control);
  EXPECT_EQ(r.rnr_retry_count, 7);
  EXPECT_FALSE(r.srq);
  EXPECT_EQ(r.local_ca_guid, kGuidA);
  return r;
}

void expect_rtu(const CapturedMad& c, std::size_t frame, std::uint64_t tid, std::uint32_t local, std::uint32_t remote) {
  EXPECT_EQ(c.frame, frame);
  const Rtu r = parse_as<Rtu>(c, tid, AttrId::rtu);
  EXPECT_EQ(r.local_comm_id, local);
  EXPECT_EQ(r.remote_comm_id, remote);
  EXPECT_TRUE(all_zero(r.private_data));
}

}  // namespace

// ---- known answers from the captures ----

TEST(IbCmCapture, RxeRpingConnectAndDisconnect) {
  LOAD_OR_SKIP("rxe_rping.pcap", mads);
  ASSERT_EQ(frames_of(mads), (std::vector<std::size_t>{3, 4, 5, 126, 127}));
  const std::uint64_t tid = 0x00000002bd2417c0;  // every message of the connection, both ways
  const Req req = expect_req(mads[0], {.frame = 3,
                                       .tid = tid,
                                       .comm_id = 0xc01724bd,
                                       .port = 7174,
                                       .guid = kGuidB,
                                       .qpn = 0x11,
                                       .rd_atomic = 1,
                                       .flow_control = false,
                                       .psn = 0xd44b6d,
                                       .src_ip = ip(3),
                                       .dst_ip = ip(2),
                                       .sport = 0xdde2,
                                       .flow_label = 0xafa64});
  EXPECT_TRUE(all_zero(req.private_data, kCmaHdrLen));  // rping sends no private data
  const Rep rep = expect_rep(mads[1], {.frame = 4,
                                       .tid = tid,
                                       .comm_id = 0x39920a7a,
                                       .remote_comm_id = 0xc01724bd,
                                       .qpn = 0x11,
                                       .psn = 0x327c48,
                                       .rd_atomic = 1,
                                       .flow_control = false});
  EXPECT_TRUE(all_zero(rep.private_data));
  expect_rtu(mads[2], 5, tid, 0xc01724bd, 0x39920a7a);

  const Dreq dreq = parse_as<Dreq>(mads[3], tid, AttrId::dreq);  // the client disconnects
  EXPECT_EQ(dreq.local_comm_id, 0xc01724bdu);
  EXPECT_EQ(dreq.remote_comm_id, 0x39920a7au);
  EXPECT_EQ(dreq.remote_qpn, 0x11u);
  EXPECT_TRUE(all_zero(dreq.private_data));
  const Drep drep = parse_as<Drep>(mads[4], tid, AttrId::drep);
  EXPECT_EQ(drep.local_comm_id, 0x39920a7au);
  EXPECT_EQ(drep.remote_comm_id, 0xc01724bdu);
  EXPECT_TRUE(all_zero(drep.private_data));
}

TEST(IbCmCapture, HostReqRetriedThenRejectedByTheInitiator) {
  LOAD_OR_SKIP("host_rxe_cm_req_to_host.pcap", mads);
  ASSERT_EQ(frames_of(mads), (std::vector<std::size_t>{3, 4, 5}));
  const std::uint64_t tid = 0x000000027c43a23a;
  const ReqCase k{.frame = 3,
                  .tid = tid,
                  .comm_id = 0x3aa2437c,
                  .port = 7174,
                  .guid = kGuidA,
                  .qpn = 0x11,
                  .rd_atomic = 1,
                  .flow_control = false,
                  .psn = 0xaf150e,
                  .src_ip = ip(2),
                  .dst_ip = ip(1),
                  .sport = 0xaab2,
                  .flow_label = 0x4c794};
  expect_req(mads[0], k);
  ReqCase retry = k;
  retry.frame = 4;
  expect_req(mads[1], retry);
  EXPECT_EQ(mads[0].mad, mads[1].mad);  // the retry is the same MAD, TID included

  // Nobody answered: rping's ID is destroyed in REQ_SENT, so its CM rejects its own REQ (Linux
  // cm_destroy_id: reason timeout, ARI = the node GUID).
  EXPECT_EQ(mads[2].src_ip, ip(2));
  EXPECT_EQ(mads[2].dst_ip, ip(1));
  const Rej rej = parse_as<Rej>(mads[2], tid, AttrId::rej);
  EXPECT_EQ(rej.local_comm_id, 0x3aa2437cu);
  EXPECT_EQ(rej.remote_comm_id, 0u);
  EXPECT_EQ(rej.msg_rejected, MsgKind::other);
  EXPECT_EQ(rej.reject_info_length, 8);
  EXPECT_EQ(rej.reason, RejReason::timeout);
  const std::array<std::uint8_t, 8> guid = {0x50, 0x54, 0x00, 0xff, 0xfe, 0x99, 0x01, 0x02};
  EXPECT_TRUE(std::equal(guid.begin(), guid.end(), rej.ari.begin()));
  EXPECT_TRUE(all_zero(rej.ari, guid.size()));
  EXPECT_TRUE(all_zero(rej.private_data));
}

TEST(IbCmCapture, RxeDtestPrivateDataAndFlowControl) {
  LOAD_OR_SKIP("rxe_dtest.first150.pcap", mads);
  ASSERT_EQ(frames_of(mads), (std::vector<std::size_t>{6, 7, 8}));
  const std::uint64_t tid = 0x00000002bd2417c3;
  const Req req = expect_req(mads[0], {.frame = 6,
                                       .tid = tid,
                                       .comm_id = 0xc31724bd,
                                       .port = 45248,
                                       .guid = kGuidB,
                                       .qpn = 0x1b,
                                       .rd_atomic = 4,
                                       .flow_control = true,
                                       .psn = 0x222de6,
                                       .src_ip = ip(3),
                                       .dst_ip = ip(2),
                                       .sport = 0xebc2,
                                       .flow_label = 0xd3d3e});
  // dtest's connect private data: 48 bytes 0x01..0x30 after the CMA header; its accept: 0x02..0x31.
  for (std::size_t i = 0; i < kCmaReqPrivateLen; ++i)
    EXPECT_EQ(req.private_data[kCmaHdrLen + i], i < 48 ? i + 1 : 0) << i;
  const Rep rep = expect_rep(mads[1], {.frame = 7,
                                       .tid = tid,
                                       .comm_id = 0x27920a7a,
                                       .remote_comm_id = 0xc31724bd,
                                       .qpn = 0x1b,
                                       .psn = 0xbfb5a3,
                                       .rd_atomic = 4,
                                       .flow_control = true});
  for (std::size_t i = 0; i < kRepPrivateLen; ++i) EXPECT_EQ(rep.private_data[i], i < 48 ? i + 2 : 0) << i;
  expect_rtu(mads[2], 8, tid, 0xc31724bd, 0x27920a7a);
}

TEST(IbCmCapture, RxeSendBwTwoConnections) {
  LOAD_OR_SKIP("rxe_send_bw_cm.first150.pcap", mads);
  ASSERT_EQ(frames_of(mads), (std::vector<std::size_t>{1, 2, 3, 24, 25, 26}));
  expect_req(mads[0], {.frame = 1,
                       .tid = 0x00000002bd2417c1,
                       .comm_id = 0xc11724bd,
                       .port = 18515,
                       .guid = kGuidB,
                       .qpn = 0x15,
                       .rd_atomic = 0,
                       .flow_control = false,
                       .psn = 0x1c6d91,
                       .src_ip = ip(3),
                       .dst_ip = ip(2),
                       .sport = 0x9a30,
                       .flow_label = 0x2f423});
  expect_rep(mads[1], {.frame = 2,
                       .tid = 0x00000002bd2417c1,
                       .comm_id = 0x3b920a7a,
                       .remote_comm_id = 0xc11724bd,
                       .qpn = 0x15,
                       .psn = 0x6fec2d,
                       .rd_atomic = 0,
                       .flow_control = false});
  expect_rtu(mads[2], 3, 0x00000002bd2417c1, 0xc11724bd, 0x3b920a7a);
  expect_req(mads[3], {.frame = 24,
                       .tid = 0x00000002bd2417c2,
                       .comm_id = 0xc21724bd,
                       .port = 18515,
                       .guid = kGuidB,
                       .qpn = 0x16,
                       .rd_atomic = 0,
                       .flow_control = false,
                       .psn = 0xae7354,
                       .src_ip = ip(3),
                       .dst_ip = ip(2),
                       .sport = 0xe6b0,
                       .flow_label = 0xc37a3});
  expect_rep(mads[4], {.frame = 25,
                       .tid = 0x00000002bd2417c2,
                       .comm_id = 0x25920a7a,
                       .remote_comm_id = 0xc21724bd,
                       .qpn = 0x16,
                       .psn = 0x55fab7,
                       .rd_atomic = 0,
                       .flow_control = false});
  expect_rtu(mads[5], 26, 0x00000002bd2417c2, 0xc21724bd, 0x25920a7a);
}

// Linux's TID: the agent's hi_tid (2 here) over the sender's comm ID as its bytes read
// little-endian (cm_form_tid ORs the __be32 local_id in as a host u32); answers echo it, so here
// every TID carries the initiator's comm ID (the initiator also sent the DREQ).
std::uint32_t initiator_comm_id(const Message& m) {
  if (const auto* r = std::get_if<Rep>(&m)) return r->remote_comm_id;
  if (const auto* d = std::get_if<Drep>(&m)) return d->remote_comm_id;
  return std::visit([](const auto& msg) { return msg.local_comm_id; }, m);
}

TEST(IbCmCapture, EveryMadRebuildsByteForByte) {
  std::size_t n = 0;
  for (const char* name :
       {"rxe_rping.pcap", "host_rxe_cm_req_to_host.pcap", "rxe_dtest.first150.pcap", "rxe_send_bw_cm.first150.pcap"}) {
    LOAD_OR_SKIP(name, mads);
    for (const auto& c : mads) {
      MadHdr h;
      Message m;
      ASSERT_EQ(parse(c.mad, h, m), CmError::ok) << name << " frame " << c.frame;
      Mad again{};
      ASSERT_EQ(build(m, h.tid, again), kMadLen);
      EXPECT_TRUE(std::equal(again.begin(), again.end(), c.mad.begin())) << name << " frame " << c.frame;
      EXPECT_EQ(h.tid >> 32, 2u);
      EXPECT_EQ(static_cast<std::uint32_t>(h.tid), __builtin_bswap32(initiator_comm_id(m)))
          << name << " frame " << c.frame;
      ++n;
    }
  }
  EXPECT_EQ(n, 17u);
}

// ---- field positions: IBTA tables 106-113 as ibta_vol1_c12.h has them ----

namespace {

using Bits = std::vector<std::pair<std::size_t, std::uint8_t>>;  // (byte offset in the message, mask)

Bits bytes(std::size_t off, std::size_t n) {
  Bits b;
  for (std::size_t i = 0; i < n; ++i) b.push_back({off + i, 0xFF});
  return b;
}
Bits shifted(const Bits& b, std::size_t by) {
  Bits out;
  for (auto [off, mask] : b) out.push_back({off + by, mask});
  return out;
}

template <typename M>
struct Field {
  const char* name;
  void (*set)(M&);  // sets the field to its largest value
  Bits bits;
};

const std::vector<Field<Path>> kPathFields = {
    // offsets from the path block's start
    {"local_lid", [](Path& p) { p.local_lid = 0xFFFF; }, bytes(0, 2)},
    {"remote_lid", [](Path& p) { p.remote_lid = 0xFFFF; }, bytes(2, 2)},
    {"local_gid", [](Path& p) { p.local_gid.fill(0xFF); }, bytes(4, 16)},
    {"remote_gid", [](Path& p) { p.remote_gid.fill(0xFF); }, bytes(20, 16)},
    {"flow_label", [](Path& p) { p.flow_label = 0xFFFFF; }, {{36, 0xFF}, {37, 0xFF}, {38, 0xF0}}},
    {"packet_rate", [](Path& p) { p.packet_rate = 63; }, {{39, 0x3F}}},
    {"traffic_class", [](Path& p) { p.traffic_class = 0xFF; }, {{40, 0xFF}}},
    {"hop_limit", [](Path& p) { p.hop_limit = 0xFF; }, {{41, 0xFF}}},
    {"sl", [](Path& p) { p.sl = 15; }, {{42, 0xF0}}},
    {"subnet_local", [](Path& p) { p.subnet_local = true; }, {{42, 0x08}}},
    {"local_ack_timeout", [](Path& p) { p.local_ack_timeout = 31; }, {{43, 0xF8}}},
};

std::vector<Field<Req>> req_fields() {
  std::vector<Field<Req>> f = {
      {"local_comm_id", [](Req& m) { m.local_comm_id = ~0u; }, bytes(0, 4)},
      {"service_id", [](Req& m) { m.service_id = ~0ull; }, bytes(8, 8)},
      {"local_ca_guid", [](Req& m) { m.local_ca_guid = ~0ull; }, bytes(16, 8)},
      {"local_qkey", [](Req& m) { m.local_qkey = ~0u; }, bytes(28, 4)},
      {"local_qpn", [](Req& m) { m.local_qpn = 0xFFFFFF; }, bytes(32, 3)},
      {"responder_resources", [](Req& m) { m.responder_resources = 0xFF; }, bytes(35, 1)},
      {"local_eecn", [](Req& m) { m.local_eecn = 0xFFFFFF; }, bytes(36, 3)},
      {"initiator_depth", [](Req& m) { m.initiator_depth = 0xFF; }, bytes(39, 1)},
      {"remote_eecn", [](Req& m) { m.remote_eecn = 0xFFFFFF; }, bytes(40, 3)},
      {"remote_cm_response_timeout", [](Req& m) { m.remote_cm_response_timeout = 31; }, {{43, 0xF8}}},
      {"transport_service_type", [](Req& m) { m.transport_service_type = 3; }, {{43, 0x06}}},
      {"end_to_end_flow_control", [](Req& m) { m.end_to_end_flow_control = true; }, {{43, 0x01}}},
      {"starting_psn", [](Req& m) { m.starting_psn = 0xFFFFFF; }, bytes(44, 3)},
      {"local_cm_response_timeout", [](Req& m) { m.local_cm_response_timeout = 31; }, {{47, 0xF8}}},
      {"retry_count", [](Req& m) { m.retry_count = 7; }, {{47, 0x07}}},
      {"pkey", [](Req& m) { m.pkey = 0xFFFF; }, bytes(48, 2)},
      {"path_mtu", [](Req& m) { m.path_mtu = 15; }, {{50, 0xF0}}},
      {"rdc_exists", [](Req& m) { m.rdc_exists = true; }, {{50, 0x08}}},
      {"rnr_retry_count", [](Req& m) { m.rnr_retry_count = 7; }, {{50, 0x07}}},
      {"max_cm_retries", [](Req& m) { m.max_cm_retries = 15; }, {{51, 0xF0}}},
      {"srq", [](Req& m) { m.srq = true; }, {{51, 0x08}}},
      {"extended_transport_type", [](Req& m) { m.extended_transport_type = 7; }, {{51, 0x07}}},
      {"sap_supported", [](Req& m) { m.sap_supported = true; }, {{139, 0x04}}},
      {"private_data", [](Req& m) { m.private_data.fill(0xFF); }, bytes(140, 92)},
  };
  // All path fields at once, at bytes 52 (primary) and 96 (alternate) (one at a time:
  // EveryFieldWhereIbtaPutsIt).
  Field<Req> primary{"primary.*",
                     [](Req& m) {
                       for (const auto& p : kPathFields) p.set(m.primary);
                     },
                     {}};
  Field<Req> alternate{"alternate.*",
                       [](Req& m) {
                         for (const auto& p : kPathFields) p.set(m.alternate);
                       },
                       {}};
  for (const auto& p : kPathFields) {
    for (auto b : shifted(p.bits, 52)) primary.bits.push_back(b);
    for (auto b : shifted(p.bits, 96)) alternate.bits.push_back(b);
  }
  f.push_back(primary);
  f.push_back(alternate);
  return f;
}

const std::vector<Field<Rep>> kRepFields = {
    {"local_comm_id", [](Rep& m) { m.local_comm_id = ~0u; }, bytes(0, 4)},
    {"remote_comm_id", [](Rep& m) { m.remote_comm_id = ~0u; }, bytes(4, 4)},
    {"local_qkey", [](Rep& m) { m.local_qkey = ~0u; }, bytes(8, 4)},
    {"local_qpn", [](Rep& m) { m.local_qpn = 0xFFFFFF; }, bytes(12, 3)},
    {"local_eecn", [](Rep& m) { m.local_eecn = 0xFFFFFF; }, bytes(16, 3)},
    {"starting_psn", [](Rep& m) { m.starting_psn = 0xFFFFFF; }, bytes(20, 3)},
    {"responder_resources", [](Rep& m) { m.responder_resources = 0xFF; }, bytes(24, 1)},
    {"initiator_depth", [](Rep& m) { m.initiator_depth = 0xFF; }, bytes(25, 1)},
    {"target_ack_delay", [](Rep& m) { m.target_ack_delay = 31; }, {{26, 0xF8}}},
    {"failover_accepted", [](Rep& m) { m.failover_accepted = 3; }, {{26, 0x06}}},
    {"end_to_end_flow_control", [](Rep& m) { m.end_to_end_flow_control = true; }, {{26, 0x01}}},
    {"rnr_retry_count", [](Rep& m) { m.rnr_retry_count = 7; }, {{27, 0xE0}}},
    {"srq", [](Rep& m) { m.srq = true; }, {{27, 0x10}}},
    {"local_ca_guid", [](Rep& m) { m.local_ca_guid = ~0ull; }, bytes(28, 8)},
    {"private_data", [](Rep& m) { m.private_data.fill(0xFF); }, bytes(36, 196)},
};

const std::vector<Field<Rej>> kRejFields = {
    {"local_comm_id", [](Rej& m) { m.local_comm_id = ~0u; }, bytes(0, 4)},
    {"remote_comm_id", [](Rej& m) { m.remote_comm_id = ~0u; }, bytes(4, 4)},
    {"msg_rejected", [](Rej& m) { m.msg_rejected = static_cast<MsgKind>(3); }, {{8, 0xC0}}},
    {"reject_info_length", [](Rej& m) { m.reject_info_length = 0x48; }, {{9, 0x90}}},  // 72 << 1
    {"reason", [](Rej& m) { m.reason = static_cast<RejReason>(0xFFFF); }, bytes(10, 2)},
    {"ari", [](Rej& m) { m.ari.fill(0xFF); }, bytes(12, 72)},
    {"private_data", [](Rej& m) { m.private_data.fill(0xFF); }, bytes(84, 148)},
};

const std::vector<Field<Mra>> kMraFields = {
    {"local_comm_id", [](Mra& m) { m.local_comm_id = ~0u; }, bytes(0, 4)},
    {"remote_comm_id", [](Mra& m) { m.remote_comm_id = ~0u; }, bytes(4, 4)},
    {"msg_mraed", [](Mra& m) { m.msg_mraed = static_cast<MsgKind>(3); }, {{8, 0xC0}}},
    {"service_timeout", [](Mra& m) { m.service_timeout = 31; }, {{9, 0xF8}}},
    {"private_data", [](Mra& m) { m.private_data.fill(0xFF); }, bytes(10, 222)},
};

const std::vector<Field<Rtu>> kRtuFields = {
    {"local_comm_id", [](Rtu& m) { m.local_comm_id = ~0u; }, bytes(0, 4)},
    {"remote_comm_id", [](Rtu& m) { m.remote_comm_id = ~0u; }, bytes(4, 4)},
    {"private_data", [](Rtu& m) { m.private_data.fill(0xFF); }, bytes(8, 224)},
};

const std::vector<Field<Dreq>> kDreqFields = {
    {"local_comm_id", [](Dreq& m) { m.local_comm_id = ~0u; }, bytes(0, 4)},
    {"remote_comm_id", [](Dreq& m) { m.remote_comm_id = ~0u; }, bytes(4, 4)},
    {"remote_qpn", [](Dreq& m) { m.remote_qpn = 0xFFFFFF; }, bytes(8, 3)},
    {"private_data", [](Dreq& m) { m.private_data.fill(0xFF); }, bytes(12, 220)},
};

const std::vector<Field<Drep>> kDrepFields = {
    {"local_comm_id", [](Drep& m) { m.local_comm_id = ~0u; }, bytes(0, 4)},
    {"remote_comm_id", [](Drep& m) { m.remote_comm_id = ~0u; }, bytes(4, 4)},
    {"private_data", [](Drep& m) { m.private_data.fill(0xFF); }, bytes(8, 224)},
};

template <typename M>
AttrId attr_of() {
  Mad mad{};
  build(M{}, 0, mad);
  return static_cast<AttrId>(mad[16] << 8 | mad[17]);
}

// Each field alone lands exactly on its bits, and parses back.
template <typename M>
void expect_field_bits(const std::vector<Field<M>>& fields) {
  for (const auto& f : fields) {
    M m{};
    f.set(m);
    Mad mad{};
    ASSERT_EQ(build(m, 0x1122334455667788, mad), kMadLen) << f.name;
    std::array<std::uint8_t, kCmMsgLen> want{};
    for (auto [off, mask] : f.bits) want[off] |= mask;
    for (std::size_t i = 0; i < kCmMsgLen; ++i)
      ASSERT_EQ(mad[kMadHdrLen + i], want[i]) << f.name << ": message byte " << i;
    MadHdr h;
    M back;
    ASSERT_EQ(parse(mad, h, back), CmError::ok) << f.name;
    EXPECT_TRUE(back == m) << f.name;
    EXPECT_EQ(h.tid, 0x1122334455667788u);
  }
}

// Every bit a message type defines (reserved bits are the rest).
template <typename M>
std::array<std::uint8_t, kCmMsgLen> defined_bits(const std::vector<Field<M>>& fields) {
  std::array<std::uint8_t, kCmMsgLen> mask{};
  for (const auto& f : fields)
    for (auto [off, m] : f.bits) mask[off] |= m;
  return mask;
}

}  // namespace

TEST(IbCmLayout, HeaderMatchesIbta) {
  Mad mad{};
  Rtu rtu;
  rtu.local_comm_id = 0x01020304;
  ASSERT_EQ(build(rtu, 0x0000000200000001, mad), kMadLen);
  const std::array<std::uint8_t, kMadHdrLen> hdr = {0x01, 0x07, 0x02, 0x03, 0, 0,    0, 0, 0, 0, 0, 2,
                                                    0,    0,    0,    1,    0, 0x14, 0, 0, 0, 0, 0, 0};
  EXPECT_TRUE(std::equal(hdr.begin(), hdr.end(), mad.begin()));
  EXPECT_EQ(attr_of<Req>(), AttrId::req);
  EXPECT_EQ(attr_of<Mra>(), AttrId::mra);
  EXPECT_EQ(attr_of<Rej>(), AttrId::rej);
  EXPECT_EQ(attr_of<Rep>(), AttrId::rep);
  EXPECT_EQ(attr_of<Rtu>(), AttrId::rtu);
  EXPECT_EQ(attr_of<Dreq>(), AttrId::dreq);
  EXPECT_EQ(attr_of<Drep>(), AttrId::drep);
}

TEST(IbCmLayout, EveryFieldWhereIbtaPutsIt) {
  for (const auto& p : kPathFields) {  // each path field alone, primary and alternate
    for (const bool alt : {false, true}) {
      Req m{};
      p.set(alt ? m.alternate : m.primary);
      Mad mad{};
      ASSERT_EQ(build(m, 0, mad), kMadLen);
      std::array<std::uint8_t, kCmMsgLen> want{};
      for (auto [off, mask] : shifted(p.bits, alt ? 96 : 52)) want[off] |= mask;
      EXPECT_TRUE(std::equal(want.begin(), want.end(), mad.begin() + kMadHdrLen)) << p.name << (alt ? " (alt)" : "");
      MadHdr h;
      Req back;
      ASSERT_EQ(parse(mad, h, back), CmError::ok);
      EXPECT_EQ(back, m) << p.name;
    }
  }
  expect_field_bits(req_fields());
  expect_field_bits(kRepFields);
  expect_field_bits(kRejFields);
  expect_field_bits(kMraFields);
  expect_field_bits(kRtuFields);
  expect_field_bits(kDreqFields);
  expect_field_bits(kDrepFields);
}

// Random message bodies: parse never fails on a good header, and building what it found gives
// the body back with the reserved bits cleared.
TEST(IbCmLayout, RandomBodiesRebuildWithoutReservedBits) {
  std::vector<std::pair<AttrId, std::array<std::uint8_t, kCmMsgLen>>> types = {
      {AttrId::req, defined_bits(req_fields())}, {AttrId::mra, defined_bits(kMraFields)},
      {AttrId::rej, defined_bits(kRejFields)},   {AttrId::rep, defined_bits(kRepFields)},
      {AttrId::rtu, defined_bits(kRtuFields)},   {AttrId::dreq, defined_bits(kDreqFields)},
      {AttrId::drep, defined_bits(kDrepFields)}};
  types[2].second[9] |= 0xFE;  // REJ's reject info length is 7 bits (the layout test sets it to 72)
  std::mt19937_64 rng(7);
  for (int i = 0; i < 3000; ++i) {
    const auto& [attr, mask] = types[i % types.size()];
    Mad mad{};
    ASSERT_EQ(build(Drep{}, rng(), mad), kMadLen);                                                 // a good header ...
    for (std::size_t j = kMadHdrLen; j < kMadLen; ++j) mad[j] = static_cast<std::uint8_t>(rng());  // ... random body
    mad[16] = static_cast<std::uint8_t>(static_cast<unsigned>(attr) >> 8);
    mad[17] = static_cast<std::uint8_t>(attr);
    MadHdr got;
    Message m;
    ASSERT_EQ(parse(mad, got, m), CmError::ok);
    ASSERT_EQ(got.attr_id, attr);
    Mad again{};
    const std::size_t n = build(m, got.tid, again);
    if (n == 0) {  // only a REJ claiming more ARI than the field holds cannot be sent
      ASSERT_TRUE(std::holds_alternative<Rej>(m));
      ASSERT_GT(std::get<Rej>(m).reject_info_length, kRejAriLen);
      continue;
    }
    ASSERT_EQ(n, kMadLen);
    EXPECT_TRUE(std::equal(again.begin(), again.begin() + kMadHdrLen, mad.begin()));
    for (std::size_t j = 0; j < kCmMsgLen; ++j)
      ASSERT_EQ(again[kMadHdrLen + j], mad[kMadHdrLen + j] & mask[j]) << to_string(attr) << " byte " << j;
  }
}

// ---- bad input ----

namespace {

Mad good_req() {
  Req r;
  r.local_comm_id = 0x12345678;
  r.local_qpn = 0x11;
  Mad mad{};
  EXPECT_EQ(build(r, 42, mad), kMadLen);
  return mad;
}

CmError parse_all_ways(std::span<const std::uint8_t> mad) {
  MadHdr h;
  Req r;
  Message m;
  const CmError e = parse_header(mad, h);
  EXPECT_EQ(parse(mad, h, r), e);
  EXPECT_EQ(parse(mad, h, m), e);
  return e;
}

}  // namespace

TEST(IbCmBadInput, TruncatedMads) {
  const Mad mad = good_req();
  for (std::size_t n : {0, 1, 23, 24, 25, 100, 255})
    EXPECT_EQ(parse_all_ways(std::span(mad.data(), n)), CmError::too_short) << n;
  EXPECT_EQ(parse_all_ways(mad), CmError::ok);
  Bytes longer(mad.begin(), mad.end());
  longer.resize(260, 0xEE);  // e.g. an ICRC left on: not looked at
  EXPECT_EQ(parse_all_ways(longer), CmError::ok);
}

TEST(IbCmBadInput, HeaderChecks) {
  auto with = [](std::size_t off, std::uint8_t v) {
    Mad mad = good_req();
    mad[off] = v;
    return mad;
  };
  auto with_attr = [](std::uint16_t attr) {
    Mad mad = good_req();
    mad[16] = static_cast<std::uint8_t>(attr >> 8);
    mad[17] = static_cast<std::uint8_t>(attr);
    return mad;
  };
  EXPECT_EQ(parse_all_ways(with(0, 2)), CmError::bad_base_version);
  EXPECT_EQ(parse_all_ways(with(0, 0)), CmError::bad_base_version);
  EXPECT_EQ(parse_all_ways(with(1, 0x03)), CmError::bad_mgmt_class);  // SA
  EXPECT_EQ(parse_all_ways(with(1, 0x81)), CmError::bad_mgmt_class);  // directed-route SMP
  EXPECT_EQ(parse_all_ways(with(2, 1)), CmError::bad_class_version);
  EXPECT_EQ(parse_all_ways(with(2, 3)), CmError::bad_class_version);
  for (std::uint16_t a : std::initializer_list<std::uint16_t>{0x0001, 0x0017, 0x0018, 0x0019, 0x001A})
    EXPECT_EQ(parse_all_ways(with_attr(a)), CmError::unsupported_attr) << a;
  for (std::uint16_t a : std::initializer_list<std::uint16_t>{0x0000, 0x0002, 0x000F, 0x001B, 0x0110, 0xFFFF})
    EXPECT_EQ(parse_all_ways(with_attr(a)), CmError::unknown_attr) << a;
  EXPECT_EQ(parse_all_ways(with(3, 0x01)), CmError::bad_method);  // Get
  EXPECT_EQ(parse_all_ways(with(3, 0x83)), CmError::bad_method);
  // The first broken thing is reported, and the header decoded anyway.
  Mad both = with(0, 9);
  both[1] = 0x55;
  MadHdr h;
  EXPECT_EQ(parse_header(both, h), CmError::bad_base_version);
  EXPECT_EQ(h.base_version, 9);
  EXPECT_EQ(h.mgmt_class, 0x55);
  EXPECT_EQ(h.tid, 42u);
}

TEST(IbCmBadInput, WrongMessageType) {
  const Mad mad = good_req();
  MadHdr h;
  Rep rep;
  Rtu rtu;
  Rej rej;
  Mra mra;
  Dreq dreq;
  Drep drep;
  EXPECT_EQ(parse(mad, h, rep), CmError::wrong_attr);
  EXPECT_EQ(parse(mad, h, rtu), CmError::wrong_attr);
  EXPECT_EQ(parse(mad, h, rej), CmError::wrong_attr);
  EXPECT_EQ(parse(mad, h, mra), CmError::wrong_attr);
  EXPECT_EQ(parse(mad, h, dreq), CmError::wrong_attr);
  EXPECT_EQ(parse(mad, h, drep), CmError::wrong_attr);
  EXPECT_EQ(h.attr_id, AttrId::req);
  Mad rtu_mad{};
  ASSERT_EQ(build(Rtu{}, 1, rtu_mad), kMadLen);
  Req req;
  EXPECT_EQ(parse(rtu_mad, h, req), CmError::wrong_attr);
}

TEST(IbCmBadInput, BuildRefusesWhatDoesNotFit) {
  Mad mad{};
  std::array<std::uint8_t, kMadLen - 1> small{};
  EXPECT_EQ(build(Req{}, 0, small), 0u);
  EXPECT_EQ(build(Rep{}, 0, small), 0u);
  EXPECT_EQ(build(Rtu{}, 0, small), 0u);
  EXPECT_EQ(build(Rej{}, 0, small), 0u);
  EXPECT_EQ(build(Mra{}, 0, small), 0u);
  EXPECT_EQ(build(Dreq{}, 0, small), 0u);
  EXPECT_EQ(build(Drep{}, 0, small), 0u);
  EXPECT_EQ(build(Message{Drep{}}, 0, small), 0u);

  const std::vector<void (*)(Req&)> bad_req = {
      [](Req& m) { m.local_qpn = 1u << 24; },
      [](Req& m) { m.local_eecn = 1u << 24; },
      [](Req& m) { m.remote_eecn = 1u << 24; },
      [](Req& m) { m.starting_psn = 1u << 24; },
      [](Req& m) { m.remote_cm_response_timeout = 32; },
      [](Req& m) { m.local_cm_response_timeout = 32; },
      [](Req& m) { m.transport_service_type = 4; },
      [](Req& m) { m.retry_count = 8; },
      [](Req& m) { m.path_mtu = 16; },
      [](Req& m) { m.rnr_retry_count = 8; },
      [](Req& m) { m.max_cm_retries = 16; },
      [](Req& m) { m.extended_transport_type = 8; },
      [](Req& m) { m.primary.flow_label = 1u << 20; },
      [](Req& m) { m.primary.packet_rate = 64; },
      [](Req& m) { m.primary.sl = 16; },
      [](Req& m) { m.primary.local_ack_timeout = 32; },
      [](Req& m) { m.alternate.local_ack_timeout = 32; },
  };
  for (std::size_t i = 0; i < bad_req.size(); ++i) {
    Req m;
    bad_req[i](m);
    EXPECT_EQ(build(m, 0, mad), 0u) << "case " << i;
  }
  const std::vector<void (*)(Rep&)> bad_rep = {
      [](Rep& m) { m.local_qpn = 1u << 24; },    [](Rep& m) { m.local_eecn = 1u << 24; },
      [](Rep& m) { m.starting_psn = 1u << 24; }, [](Rep& m) { m.target_ack_delay = 32; },
      [](Rep& m) { m.failover_accepted = 4; },   [](Rep& m) { m.rnr_retry_count = 8; },
  };
  for (std::size_t i = 0; i < bad_rep.size(); ++i) {
    Rep m;
    bad_rep[i](m);
    EXPECT_EQ(build(m, 0, mad), 0u) << "case " << i;
  }
  Rej rej;
  rej.reject_info_length = 73;
  EXPECT_EQ(build(rej, 0, mad), 0u);
  rej.reject_info_length = 72;
  rej.msg_rejected = static_cast<MsgKind>(4);
  EXPECT_EQ(build(rej, 0, mad), 0u);
  Mra mra;
  mra.service_timeout = 32;
  EXPECT_EQ(build(mra, 0, mad), 0u);
  mra.service_timeout = 31;
  mra.msg_mraed = static_cast<MsgKind>(4);
  EXPECT_EQ(build(mra, 0, mad), 0u);
  Dreq dreq;
  dreq.remote_qpn = 1u << 24;
  EXPECT_EQ(build(dreq, 0, mad), 0u);
}

TEST(IbCmBadInput, ErrorsHaveNames) {
  std::set<std::string_view> seen;
  for (auto e :
       {CmError::ok, CmError::too_short, CmError::bad_base_version, CmError::bad_mgmt_class, CmError::bad_class_version,
        CmError::unsupported_attr, CmError::unknown_attr, CmError::bad_method, CmError::wrong_attr}) {
    EXPECT_NE(to_string(e), "?");
    EXPECT_TRUE(seen.insert(to_string(e)).second) << to_string(e);
  }
  seen.clear();
  for (auto e : {CmaError::ok, CmaError::too_short, CmaError::bad_version, CmaError::bad_ip_version}) {
    EXPECT_NE(to_string(e), "?");
    EXPECT_TRUE(seen.insert(to_string(e)).second) << to_string(e);
  }
  EXPECT_EQ(to_string(AttrId::dreq), "DREQ");
  EXPECT_EQ(to_string(AttrId::lap), "LAP");
  EXPECT_EQ(to_string(static_cast<AttrId>(0x0099)), "?");
  EXPECT_EQ(to_string(RejReason::consumer_defined), "consumer defined");
  EXPECT_EQ(to_string(static_cast<RejReason>(34)), "?");
}

// ---- Linux's numbers, as ib_cm.h and cma.c have them ----

TEST(IbCmConstants, LinuxValues) {
  EXPECT_EQ(static_cast<int>(RejReason::timeout), 4);
  EXPECT_EQ(static_cast<int>(RejReason::invalid_service_id), 8);
  EXPECT_EQ(static_cast<int>(RejReason::stale_conn), 10);
  EXPECT_EQ(static_cast<int>(RejReason::consumer_defined), 28);
  EXPECT_EQ(static_cast<int>(RejReason::vendor_option_not_supported), 35);
  EXPECT_EQ(kReqPrivateLen, 92u);
  EXPECT_EQ(kRepPrivateLen, 196u);
  EXPECT_EQ(kRejPrivateLen, 148u);
  EXPECT_EQ(kRtuPrivateLen, 224u);
  EXPECT_EQ(kMraPrivateLen, 222u);
  EXPECT_EQ(kDreqPrivateLen, 220u);
  EXPECT_EQ(kDrepPrivateLen, 224u);
  EXPECT_EQ(kCmaReqPrivateLen, 56u);
  EXPECT_EQ(timeout_ns(0), 4096u);
  EXPECT_EQ(timeout_ns(20), 4294967296u);  // rdma_cm's CM response timeout: ~4.3 s
  static_assert(cma_service_id(kPsTcp, 7174) == 0x0000000001061c06);
  static_assert(cma_port_of(0x0000000001061c06) == 7174);
  EXPECT_EQ(cma_service_id(kPsUdp, 1), 0x0000000001110001u);
  EXPECT_EQ(cma_port_of(0x0000000001061c06, kPsUdp), std::nullopt);
  EXPECT_EQ(cma_port_of(0x0000000101061c06), std::nullopt);
  EXPECT_EQ(cma_port_of(0x0200000000001234), std::nullopt);  // an IB_CM_ASSIGN_SERVICE_ID one
}

TEST(IbCmGid, Ipv4Mapped) {
  const Gid g = gid_ipv4(ip(3));
  const Gid want = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 99, 1, 3};
  EXPECT_EQ(g, want);
  EXPECT_EQ(ipv4_of_gid(g), ip(3));
  Gid link_local{};
  link_local[0] = 0xFE;
  link_local[1] = 0x80;
  EXPECT_EQ(ipv4_of_gid(link_local), std::nullopt);
  Gid zero{};
  EXPECT_EQ(ipv4_of_gid(zero), std::nullopt);
}

// ---- CMA header ----

TEST(Cma, Ipv4BytesAsLinuxLaysThemOut) {
  std::array<std::uint8_t, kCmaHdrLen> out{};
  ASSERT_EQ(build_cma_hdr(cma_hdr_ipv4(ip(3), 0xdde2, ip(2)), out), kCmaHdrLen);
  const std::array<std::uint8_t, kCmaHdrLen> want = {0x00, 0x40, 0xdd, 0xe2, 0,  0,  0, 0, 0,  0,  0, 0,
                                                     0,    0,    0,    0,    10, 99, 1, 3, 0,  0,  0, 0,
                                                     0,    0,    0,    0,    0,  0,  0, 0, 10, 99, 1, 2};
  EXPECT_EQ(out, want);
}

TEST(Cma, Ipv6RoundTrip) {
  CmaHdr h{.ip_version = 6, .src_port = 40000};
  for (std::size_t i = 0; i < 16; ++i) {
    h.src_addr[i] = static_cast<std::uint8_t>(0x20 + i);
    h.dst_addr[i] = static_cast<std::uint8_t>(0x80 + i);
  }
  std::array<std::uint8_t, kReqPrivateLen> pd{};
  ASSERT_EQ(build_cma_hdr(h, pd), kCmaHdrLen);
  EXPECT_EQ(pd[1], 0x60);
  CmaHdr back;
  ASSERT_EQ(parse_cma_hdr(pd, back), CmaError::ok);
  EXPECT_EQ(back, h);
}

TEST(Cma, BadHeaders) {
  std::array<std::uint8_t, kCmaHdrLen> pd{};
  ASSERT_EQ(build_cma_hdr(cma_hdr_ipv4(ip(3), 1, ip(2)), pd), kCmaHdrLen);
  CmaHdr h;
  EXPECT_EQ(parse_cma_hdr(pd, h), CmaError::ok);
  for (std::size_t n : {0, 1, 4, 35}) EXPECT_EQ(parse_cma_hdr(std::span(pd.data(), n), h), CmaError::too_short) << n;
  auto with = [&](std::size_t off, std::uint8_t v) {
    auto p = pd;
    p[off] = v;
    return p;
  };
  EXPECT_EQ(parse_cma_hdr(with(0, 1), h), CmaError::bad_version);
  EXPECT_EQ(parse_cma_hdr(with(0, 0x10), h), CmaError::bad_version);
  for (std::uint8_t v : std::initializer_list<std::uint8_t>{0x00, 0x50, 0xF0, 0x0F})
    EXPECT_EQ(parse_cma_hdr(with(1, v), h), CmaError::bad_ip_version) << int{v};
  EXPECT_EQ(parse_cma_hdr(with(1, 0x4F), h), CmaError::ok);  // the low nibble is reserved
  EXPECT_EQ(h.ip_version, 4);

  std::array<std::uint8_t, kCmaHdrLen - 1> small{};
  EXPECT_EQ(build_cma_hdr(CmaHdr{}, small), 0u);
  std::array<std::uint8_t, kCmaHdrLen> out{};
  EXPECT_EQ(build_cma_hdr(CmaHdr{.ip_version = 5}, out), 0u);
  EXPECT_EQ(build_cma_hdr(CmaHdr{.ip_version = 0}, out), 0u);
}
