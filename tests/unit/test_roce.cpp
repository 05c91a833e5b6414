// RoCEv2 codecs (soft_rnic/wire/roce.hpp) against known answers: a real hardware capture (two
// Huawei NICs) and the referee's Linux rxe captures (../shared/tools). Every RoCEv2 packet in them
// parses, its ICRC verifies, and our builder reproduces its headers byte for byte.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "pcap_udp.hpp"
#include "softrnic/wire/roce.hpp"

namespace softrnic::wire::roce {
namespace {

using testing::UdpFrame;

std::string shared(const char* rel) {
  return std::string(SOFTRNIC_SHARED_DIR) + "/" + rel;
}

IcrcAddr addr_of(const UdpFrame& f) {
  return IcrcAddr{f.src_ip, f.dst_ip, f.sport, f.dport, f.ip_id, f.frag_off};
}

struct CaptureCase {
  const char* path;
  std::size_t packets;                // RoCEv2 packets in it (counted with tshark)
  std::map<std::uint8_t, int> count;  // per opcode, some of them
};

// Counted independently: tshark -r F -d udp.port==4791,infiniband -T fields -e infiniband.bth.opcode.
const CaptureCase kCaptures[] = {
    {"tools/wirecheck/captures/oferby_proxy_roce.pcap", 105, {{0x00, 33}, {0x03, 33}, {0x05, 2}, {0x11, 37}}},
    {"tools/rdmavm/captures/rxe_rping.pcap", 0, {}},
    {"tools/rdmavm/captures/rxe_rc_pingpong.first200.pcap", 0, {}},
    {"tools/rdmavm/captures/rxe_write_bw.first150.pcap", 0, {}},
    {"tools/rdmavm/captures/rxe_read_bw.first150.pcap", 0, {}},
    {"tools/rdmavm/captures/rxe_send_bw_cm.first150.pcap", 0, {}},
    {"tools/rdmavm/captures/rxe_send_lat.first200.pcap", 0, {}},
    {"tools/rdmavm/captures/rxe_dtest.first150.pcap", 0, {}},
    {"tools/rdmavm/captures/host_rxe_rc_pingpong_server.pcap", 0, {}},
    {"tools/rdmavm/captures/host_rxe_cm_req_to_host.pcap", 0, {}},
};

// The RoCEv2 packets of a capture: UDP to 4791 (the hardware capture's source ports are 69 and
// 72, so the destination port decides).
std::vector<UdpFrame> roce_frames(const char* rel) {
  std::vector<UdpFrame> all, out;
  if (!testing::read_udp_frames(shared(rel), all)) return out;
  for (auto& f : all)
    if (f.dport == kUdpPort) out.push_back(std::move(f));
  return out;
}

TEST(Roce, CapturesParseVerifyAndRebuild) {
  std::size_t files = 0;
  for (const auto& c : kCaptures) {
    SCOPED_TRACE(c.path);
    const auto frames = roce_frames(c.path);
    if (frames.empty()) continue;
    ++files;
    if (c.packets) {
      EXPECT_EQ(frames.size(), c.packets);
    }
    std::map<std::uint8_t, int> count;
    for (const auto& f : frames) {
      SCOPED_TRACE("frame " + std::to_string(f.index + 1));
      Packet p;
      ASSERT_EQ(parse(f.payload, p), ParseError::ok);
      ++count[static_cast<std::uint8_t>(p.opcode)];
      EXPECT_TRUE(icrc_ok(addr_of(f), f.payload));
      // A receiver that cannot see the IP header finds the sender's IP ID.
      std::uint16_t id = 0xFFFF;
      EXPECT_TRUE(icrc_ok_any_id(addr_of(f), f.payload, id));
      EXPECT_EQ(id, f.ip_id);
      // Our headers for the same fields are the captured ones, but for BTH byte 4's reserved
      // bits (the Huawei NICs set 0x10 there; the ICRC masks the byte).
      std::array<std::uint8_t, kMaxHeaderLen> hdr{};
      const std::size_t n = build_headers(p, p.payload.size(), hdr);
      ASSERT_EQ(n, op_info(p.opcode).header_len);
      std::vector<std::uint8_t> want(f.payload.begin(), f.payload.begin() + static_cast<std::ptrdiff_t>(n));
      want[4] &= 0xC0;
      EXPECT_EQ(std::vector<std::uint8_t>(hdr.begin(), hdr.begin() + static_cast<std::ptrdiff_t>(n)), want);
      EXPECT_EQ(f.payload.size(), n + p.payload.size() + p.pad + kIcrcLen);
      if (op_info(p.opcode).has(Has::payload)) {
        EXPECT_EQ(p.pad, pad_of(p.payload.size()));
      }
      // Rebuilt whole (headers, payload, pad, our ICRC): the captured packet.
      std::vector<std::uint8_t> mine(hdr.begin(), hdr.begin() + static_cast<std::ptrdiff_t>(n));
      mine[4] = f.payload[4];
      mine.insert(mine.end(), p.payload.begin(), p.payload.end());
      mine.insert(mine.end(), f.payload.end() - static_cast<std::ptrdiff_t>(p.pad + kIcrcLen),
                  f.payload.end() - static_cast<std::ptrdiff_t>(kIcrcLen));
      const std::span<const std::uint8_t> pieces[] = {mine};
      const std::uint32_t ic = icrc(addr_of(f), pieces);
      for (int i = 0; i < 4; ++i) mine.push_back(static_cast<std::uint8_t>(ic >> (8 * i)));
      EXPECT_EQ(mine, f.payload);
    }
    for (const auto& [op, n] : c.count) EXPECT_EQ(count[op], n) << "opcode " << int(op);
  }
  if (files == 0) GTEST_SKIP() << "no reference captures under " << SOFTRNIC_SHARED_DIR;
}

// What Linux rxe puts on the wire: P_Key 0xFFFF, MigReq 0, DF with IP IDs that count up (not 0,
// as interop-facts.md has it), UDP source port from the path's flow label, here derived from
// both QPNs (no rdma_cm); middle packets carry exactly the path MTU; AckReq on the last packet
// of a request.
TEST(Roce, RxeWireFacts) {
  const auto frames = roce_frames("tools/rdmavm/captures/rxe_write_bw.first150.pcap");
  if (frames.empty()) GTEST_SKIP() << "no rxe capture";
  // Each direction's QPN is the destination QPN of the other direction's packets.
  std::map<std::uint32_t, std::set<std::uint32_t>> qpns_to;  // destination IP -> QPNs there
  for (const auto& f : frames) {
    Packet p;
    ASSERT_EQ(parse(f.payload, p), ParseError::ok);
    if (p.dest_qpn != kGsiQpn) qpns_to[f.dst_ip].insert(p.dest_qpn);
  }
  std::size_t writes = 0, middles = 0, sport_checked = 0;
  for (const auto& f : frames) {
    Packet p;
    ASSERT_EQ(parse(f.payload, p), ParseError::ok);
    EXPECT_EQ(p.pkey, kDefaultPkey);
    EXPECT_FALSE(p.mig_req);
    EXPECT_EQ(f.frag_off, 0x4000);
    bool from_qp = false;
    for (std::uint32_t q : qpns_to[f.src_ip]) from_qp |= source_port_of(0, q, p.dest_qpn) == f.sport;
    if (p.dest_qpn != kGsiQpn) {
      EXPECT_TRUE(from_qp) << "source port " << f.sport;
      ++sport_checked;
    }
    const OpInfo& op = op_info(p.opcode);
    if (op.has(Has::write)) {
      ++writes;
      if (!op.has(Has::last)) {
        EXPECT_EQ(p.payload.size(), 1024u);  // path MTU 1024 on a 1500-byte link
        EXPECT_EQ(p.pad, 0);
      }
      if (p.opcode == Opcode::write_middle) ++middles;
      if (op.has(Has::last)) {
        EXPECT_TRUE(p.ack_req);
      }
    }
  }
  EXPECT_GT(writes, 50u);
  EXPECT_GT(middles, 10u);
  EXPECT_GT(sport_checked, 50u);
  // The IDs count up per sender.
  std::map<std::uint32_t, std::uint16_t> last_id;
  std::size_t counted = 0;
  for (const auto& f : frames) {
    if (auto it = last_id.find(f.src_ip); it != last_id.end()) counted += f.ip_id == it->second + 1;
    last_id[f.src_ip] = f.ip_id;
  }
  EXPECT_GT(counted, frames.size() / 2);
  // CM MADs leave QP1 from the port hashed from QPN 1.
  const auto rping = roce_frames("tools/rdmavm/captures/rxe_rping.pcap");
  std::size_t mads = 0;
  for (const auto& f : rping) {
    Packet p;
    ASSERT_EQ(parse(f.payload, p), ParseError::ok);
    if (p.opcode != Opcode::ud_send_only) continue;
    ++mads;
    EXPECT_EQ(p.dest_qpn, kGsiQpn);
    ASSERT_TRUE(p.deth);
    EXPECT_EQ(p.deth->src_qpn, kGsiQpn);
    EXPECT_EQ(p.deth->qkey, kGsiQkey);
    EXPECT_EQ(f.sport, source_port_of(kGsiQpn));
  }
  EXPECT_GE(mads, 5u);  // REQ, REP, RTU, DREQ, DREP
}

TEST(Roce, CorruptCaptureFailsIcrc) {
  const auto good = roce_frames("tools/wirecheck/captures/roce_rc.pcap");
  const auto bad = roce_frames("tools/wirecheck/captures/roce_rc_corrupt.pcap");
  if (good.empty() || bad.empty()) GTEST_SKIP() << "no wirecheck captures";
  ASSERT_EQ(good.size(), bad.size());
  std::size_t failed = 0;
  for (std::size_t i = 0; i < good.size(); ++i) {
    EXPECT_TRUE(icrc_ok(addr_of(good[i]), good[i].payload));
    if (!icrc_ok(addr_of(bad[i]), bad[i].payload)) ++failed;
  }
  EXPECT_GE(failed, 1u);
}

TEST(Roce, IcrcDetectsEveryBitFlipAndMasksWhatTheSpecMasks) {
  Packet p;
  p.opcode = Opcode::write_only_imm;
  p.dest_qpn = 0x123456;
  p.psn = 0xABCDEF;
  p.ack_req = true;
  p.reth = Reth{0x1122334455667788, 0xCAFEBABE, 5};
  p.imm = 0x04030201;
  std::array<std::uint8_t, kMaxHeaderLen> hdr{};
  const std::size_t n = build_headers(p, 5, hdr);
  ASSERT_EQ(n, kBthLen + kRethLen + kImmLen);
  Packet without_reth = p;
  without_reth.reth.reset();
  EXPECT_EQ(build_headers(without_reth, 5, hdr), 0u) << "an RDMA WRITE Only without its RETH is not built";
  ASSERT_EQ(build_headers(p, 5, hdr), n);
  std::vector<std::uint8_t> pkt(hdr.begin(), hdr.begin() + static_cast<std::ptrdiff_t>(n));
  for (int b = 1; b <= 5; ++b) pkt.push_back(static_cast<std::uint8_t>(b));
  pkt.insert(pkt.end(), 3, 0);  // pad
  const IcrcAddr a{0x0A630101, 0x0A630102, source_port_of(0x123456), kUdpPort, 0, 0x4000};
  const std::span<const std::uint8_t> pieces[] = {pkt};
  const std::uint32_t ic = icrc(a, pieces);
  for (int i = 0; i < 4; ++i) pkt.push_back(static_cast<std::uint8_t>(ic >> (8 * i)));
  ASSERT_TRUE(icrc_ok(a, pkt));
  Packet q;
  ASSERT_EQ(parse(pkt, q), ParseError::ok);
  EXPECT_EQ(q.opcode, p.opcode);
  EXPECT_EQ(q.dest_qpn, p.dest_qpn);
  EXPECT_EQ(q.psn, p.psn);
  EXPECT_TRUE(q.ack_req);
  ASSERT_TRUE(q.reth);
  EXPECT_EQ(q.reth->va, p.reth->va);
  EXPECT_EQ(q.reth->rkey, p.reth->rkey);
  EXPECT_EQ(q.reth->dma_len, p.reth->dma_len);
  EXPECT_EQ(q.imm, p.imm);
  EXPECT_FALSE(q.aeth) << "no header the opcode does not carry";
  EXPECT_FALSE(q.atomic_eth);
  EXPECT_FALSE(q.inv_rkey);
  EXPECT_EQ(q.pad, 3);
  EXPECT_EQ(q.payload.size(), 5u);
  // The same packet split in pieces anywhere (a header in one, payload from memory in another).
  for (std::size_t cut = 1; cut < pkt.size() - kIcrcLen; ++cut) {
    const std::span<const std::uint8_t> two[] = {std::span(pkt).first(cut),
                                                 std::span(pkt).subspan(cut, pkt.size() - kIcrcLen - cut)};
    EXPECT_EQ(icrc(a, two), ic) << cut;
  }
  // BTH byte 4 (FECN/BECN) is masked; every other bit counts.
  for (std::size_t i = 0; i < pkt.size() - kIcrcLen; ++i)
    for (int bit = 0; bit < 8; ++bit) {
      auto c = pkt;
      c[i] ^= static_cast<std::uint8_t>(1 << bit);
      EXPECT_EQ(icrc_ok(a, c), i == 4) << i << "." << bit;
    }
  // Addresses and ports count; the IP ID counts (a receiver that knows it).
  for (auto m : {&IcrcAddr::src_ip, &IcrcAddr::dst_ip}) {
    IcrcAddr b = a;
    b.*m ^= 1;
    EXPECT_FALSE(icrc_ok(b, pkt));
  }
  IcrcAddr b = a;
  b.sport ^= 1;
  EXPECT_FALSE(icrc_ok(b, pkt));
  b = a;
  b.ip_id = 7;
  EXPECT_FALSE(icrc_ok(b, pkt));
  // Sent with IP ID 0x1234 by a NIC: found without seeing the IP header.
  b.ip_id = 0x1234;
  const std::span<const std::uint8_t> body[] = {std::span(pkt).first(pkt.size() - kIcrcLen)};
  const std::uint32_t ic2 = icrc(b, body);
  auto pkt2 = pkt;
  for (int i = 0; i < 4; ++i)
    pkt2[pkt2.size() - 4 + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(ic2 >> (8 * i));
  std::uint16_t id = 0;
  EXPECT_TRUE(icrc_ok_any_id(a, pkt2, id));
  EXPECT_EQ(id, 0x1234);
  // A sender that computed the ICRC for ID 0 corrects it for the ID its kernel gives (GSO).
  const std::uint32_t ic0 = icrc(a, body);
  EXPECT_EQ(ic0 ^ icrc_ip_id_effect(pkt.size(), 0x1234), ic2);
  EXPECT_EQ(icrc_ip_id_effect(pkt.size(), 0), 0u);
  for (const int k : {1, 2, 15, 0xFFFF}) {
    b.ip_id = static_cast<std::uint16_t>(k);
    EXPECT_EQ(ic0 ^ icrc_ip_id_effect(pkt.size(), b.ip_id), icrc(b, body)) << "ID " << k;
  }
}

TEST(Roce, BadPacketsAreRefused) {
  Packet p;
  std::vector<std::uint8_t> b(kBthLen + kIcrcLen, 0);
  b[0] = 0x04;  // SEND Only
  EXPECT_EQ(parse(b, p), ParseError::ok);
  EXPECT_TRUE(p.payload.empty());
  EXPECT_EQ(parse(std::span(b).first(kBthLen + 3), p), ParseError::too_short);
  EXPECT_EQ(parse({}, p), ParseError::too_short);
  b[1] = 0x01;  // transport version 1
  EXPECT_EQ(parse(b, p), ParseError::bad_version);
  b[1] = 0x30;  // pad 3 with no payload
  EXPECT_EQ(parse(b, p), ParseError::bad_pad);
  b[1] = 0;
  for (int op : {0x15, 0x18, 0x19, 0x20, 0x63, 0x66, 0x80, 0xFF}) {
    b[0] = static_cast<std::uint8_t>(op);
    EXPECT_EQ(parse(b, p), ParseError::unknown_opcode) << op;
  }
  b[0] = 0x0C;  // Read Request needs its RETH
  EXPECT_EQ(parse(b, p), ParseError::too_short);
  b.insert(b.begin() + kBthLen, kRethLen, 0);
  EXPECT_EQ(parse(b, p), ParseError::ok);
  b[1] = 0x10;  // pad on a Read Request (no payload)
  EXPECT_EQ(parse(b, p), ParseError::bad_pad);
  // Every length of every opcode: no read out of bounds (ASan), a verdict each time.
  std::vector<std::uint8_t> big(80, 0xA5);
  for (int op = 0; op < 256; ++op)
    for (std::size_t len = 0; len <= big.size(); ++len) {
      big[0] = static_cast<std::uint8_t>(op);
      big[1] = 0x30;
      const ParseError e = parse(std::span(big).first(len), p);
      if (e == ParseError::ok) {
        EXPECT_LE(p.payload.size() + op_info(p.opcode).header_len + p.pad + kIcrcLen, len);
      }
    }
}

TEST(Roce, Tables) {
  EXPECT_EQ(rnr_timer_us(0), 655360u);
  EXPECT_EQ(rnr_timer_us(1), 10u);
  EXPECT_EQ(rnr_timer_us(14), 1280u);
  EXPECT_EQ(rnr_timer_us(31), 491520u);
  EXPECT_EQ(path_mtu_for(1500), 1024u);
  EXPECT_EQ(path_mtu_for(9000), 4096u);
  EXPECT_EQ(path_mtu_for(65536), 4096u);
  EXPECT_EQ(path_mtu_for(4200), 4096u);
  EXPECT_EQ(path_mtu_for(200), 0u);
  for (std::uint32_t m : {256u, 512u, 1024u, 2048u, 4096u}) EXPECT_EQ(mtu_bytes(mtu_code(m)), m);
  EXPECT_EQ(mtu_code(1500), 0);
  EXPECT_EQ(mtu_bytes(0), 0u);
  EXPECT_EQ(mtu_bytes(6), 0u);
  EXPECT_EQ(psn_diff(0, kPsnMask), 1);
  EXPECT_EQ(psn_diff(kPsnMask, 0), -1);
  EXPECT_EQ(psn_diff(5, 5), 0);
  EXPECT_EQ(psn_add(kPsnMask, 2), 1u);
  EXPECT_EQ(op_info(Opcode::write_only_imm).header_len, kBthLen + kRethLen + kImmLen);
  EXPECT_EQ(op_info(Opcode::atomic_ack).header_len, kBthLen + kAethLen + kAtomicAckLen);
  EXPECT_EQ(op_info(Opcode::cmp_swap).header_len, kBthLen + kAtomicEthLen);
  EXPECT_EQ(op_info(Opcode::ud_send_only).header_len, kBthLen + kDethLen);
  EXPECT_EQ(op_info(Opcode::read_response_middle).header_len, kBthLen);
  EXPECT_EQ(op_info(Opcode::send_only_inv).header_len, kBthLen + kIethLen);
}

}  // namespace
}  // namespace softrnic::wire::roce
