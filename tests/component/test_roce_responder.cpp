// The RoCEv2 responder, one crafted request at a time: a QP connected out of band to a peer that
// is this test (its packets injected with their ICRC, what the QP answers recorded), and for each
// request it must refuse, the NAK it sends (IBTA 9.7.5.2.8, the syndrome core/error.cpp maps the
// Error to), the PSN it names and the state the QP is left in. Nothing of a refused request is
// placed.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "harness.hpp"
#include "roce_pair.hpp"
#include "roce_tap.hpp"
#include "softrnic/rnic.hpp"
#include "softrnic/wire/roce.hpp"

using namespace softrnic;
using namespace std::chrono_literals;
using softrnic::testing::RoceSide;
using softrnic::testing::RoceTap;
namespace w = softrnic::wire::roce;

namespace {

constexpr std::uint32_t kPeerQpn = 0x4242;
constexpr std::uint32_t kPeerPsn = 0x10000;           // the first PSN the peer (this test) sends
constexpr netdev::NetAddr kPeer{0x7F650002, 0xC123};  // 127.101.0.2, a source port as Linux picks

struct Responder : ::testing::Test {
  RoceSide b;
  RoceTap* tap = nullptr;
  RoceEndpoint local;
  Pd* other_pd = nullptr;
  Mr* read_only = nullptr;  // a region of b's PD granting remote read only
  Mr* elsewhere = nullptr;  // a region of another PD
  std::vector<std::uint8_t> ro_buf = std::vector<std::uint8_t>(4096, 0x5A), other_buf = std::vector<std::uint8_t>(4096);

  void SetUp() override {
    softrnic::testing::tap(b, tap);
    b.open(0x7F650001);  // 127.101.0.1
    ASSERT_TRUE(tap);
    ASSERT_EQ(b.dev->reg_mr(b.pd, ro_buf.data(), ro_buf.size(), Access::remote_read, read_only), Status::ok);
    other_pd = b.dev->alloc_pd();
    ASSERT_EQ(b.dev->reg_mr(other_pd, other_buf.data(), other_buf.size(), Access::local_write | Access::remote_write,
                            elsewhere),
              Status::ok);
    ASSERT_EQ(b.dev->roce_local(b.qp, local), Status::ok);
    ASSERT_EQ(b.dev->roce_connect(b.qp, RoceEndpoint{{kPeer.ip, 0}, kPeerQpn, kPeerPsn, 1024}, 8, 8), Status::ok);
    CmEvent ev;
    ASSERT_TRUE(b.sink.wait_event(ev));
    ASSERT_EQ(ev.type, CmEventType::established);
  }
  void TearDown() override {
    // Nothing of a refused request was placed: b's region is as it was opened (zeros).
    EXPECT_EQ(std::count(b.buf.begin(), b.buf.end(), 0), static_cast<std::ptrdiff_t>(b.buf.size()));
    EXPECT_EQ(std::count(other_buf.begin(), other_buf.end(), 0), static_cast<std::ptrdiff_t>(other_buf.size()));
  }

  w::Packet request(w::Opcode op, std::uint32_t psn_offset = 0) const {
    w::Packet p;
    p.opcode = op;
    p.dest_qpn = local.qpn;
    p.psn = (kPeerPsn + psn_offset) & w::kPsnMask;
    p.ack_req = true;
    return p;
  }
  std::uint32_t stag(const Mr* mr) const { return b.dev->query_mr(mr).stag; }
  std::uint64_t addr_of(const std::vector<std::uint8_t>& v, std::size_t off = 0) const {
    return reinterpret_cast<std::uintptr_t>(v.data()) + off;
  }

  // Injects `p` and returns the syndrome of the Acknowledge b sends naming `psn` (an earlier
  // packet's ACK may come first: a responder may acknowledge any packet it has received).
  std::uint8_t answer(const w::Packet& p, std::vector<std::uint8_t> payload = {}, std::uint32_t psn = kPeerPsn) {
    tap->inject(kPeer, p, payload);
    const auto ack = tap->wait_ack(psn);
    if (!ack) {
      ADD_FAILURE() << "no Acknowledge naming PSN " << psn << " from the responder";
      return 0xFF;
    }
    EXPECT_EQ(ack->p.dest_qpn, kPeerQpn);
    EXPECT_EQ(ack->to.ip, kPeer.ip);
    return ack->p.aeth ? ack->p.aeth->syndrome : 0xFE;
  }
  // A request refused with `nak`: the QP leaves RTS and tells its consumer.
  void expect_refused(const w::Packet& p, std::vector<std::uint8_t> payload, std::uint8_t nak) {
    EXPECT_EQ(answer(p, std::move(payload), p.psn), nak);  // the NAK names the refused packet
    CmEvent ev;
    ASSERT_TRUE(b.sink.wait_event(ev));
    EXPECT_EQ(ev.type, CmEventType::broken) << ev.reason;
    EXPECT_NE(b.dev->qp_state(b.qp), QpState::rts);
  }
};

std::vector<std::uint8_t> bytes(std::size_t n) {
  return std::vector<std::uint8_t>(n, 0xC3);
}

}  // namespace

TEST_F(Responder, APacketLongerThanThePathMtuIsAnInvalidRequest) {
  b.post_recv(1, 0, 4096);
  expect_refused(request(w::Opcode::send_only), bytes(1025), w::kNakInvalidRequest);
}

TEST_F(Responder, ASendLongerThanItsReceiveBufferIsAnInvalidRequest) {
  b.post_recv(1, 0, 16);
  expect_refused(request(w::Opcode::send_only), bytes(64), w::kNakInvalidRequest);
  Wc wc;
  ASSERT_TRUE(softrnic::testing::poll_one(*b.dev, b.rcq, wc));
  EXPECT_NE(wc.status, WcStatus::success);
}

TEST_F(Responder, ASendMiddleWithoutItsFirstIsAnInvalidRequest) {
  b.post_recv(1, 0, 4096);
  expect_refused(request(w::Opcode::send_middle), bytes(1024), w::kNakInvalidRequest);
}

TEST_F(Responder, ANewMessageBeforeTheLastEndedIsAnInvalidRequest) {
  b.post_recv(1, 0, 4096);
  b.post_recv(2, 4096, 4096);
  w::Packet first = request(w::Opcode::send_first);
  first.ack_req = false;
  tap->inject(kPeer, first, bytes(1024));
  // The first packet is placed into receive 1 (not acknowledged: it did not ask); the second
  // first is refused. Receive 1's bytes stay: forget them for TearDown's check.
  expect_refused(request(w::Opcode::send_first, 1), bytes(1024), w::kNakInvalidRequest);
  std::fill(b.buf.begin(), b.buf.end(), 0);
}

TEST_F(Responder, AWriteWithAnUnknownRkeyIsARemoteAccessError) {
  w::Packet p = request(w::Opcode::write_only);
  p.reth = w::Reth{b.addr(), stag(b.mr) ^ 0x00FF0000, 64};
  expect_refused(p, bytes(64), w::kNakRemoteAccess);
}

TEST_F(Responder, AWriteBeyondItsRegionIsARemoteAccessError) {
  w::Packet p = request(w::Opcode::write_only);
  p.reth = w::Reth{b.addr(b.buf.size() - 32), stag(b.mr), 64};
  expect_refused(p, bytes(64), w::kNakRemoteAccess);
}

TEST_F(Responder, AWriteToARegionWithoutRemoteWriteIsARemoteAccessError) {
  w::Packet p = request(w::Opcode::write_only);
  p.reth = w::Reth{addr_of(ro_buf), stag(read_only), 64};
  expect_refused(p, bytes(64), w::kNakRemoteAccess);
  EXPECT_EQ(std::count(ro_buf.begin(), ro_buf.end(), 0x5A), static_cast<std::ptrdiff_t>(ro_buf.size()));
}

TEST_F(Responder, AWriteToAnotherProtectionDomainIsARemoteAccessError) {
  w::Packet p = request(w::Opcode::write_only);
  p.reth = w::Reth{addr_of(other_buf), stag(elsewhere), 64};
  expect_refused(p, bytes(64), w::kNakRemoteAccess);
}

TEST_F(Responder, AWriteLongerThanTheLargestMessageIsAnInvalidRequest) {
  w::Packet p = request(w::Opcode::write_first);
  p.reth = w::Reth{b.addr(), stag(b.mr), 0xFFFFFFFF};
  expect_refused(p, bytes(1024), w::kNakInvalidRequest);
}

TEST_F(Responder, WriteDataBeyondItsRethLengthIsAnInvalidRequest) {
  w::Packet p = request(w::Opcode::write_only);
  p.reth = w::Reth{b.addr(), stag(b.mr), 8};
  expect_refused(p, bytes(16), w::kNakInvalidRequest);
}

TEST_F(Responder, AWriteLastWithoutItsFirstIsAnInvalidRequest) {
  expect_refused(request(w::Opcode::write_last), bytes(16), w::kNakInvalidRequest);
}

TEST_F(Responder, AReadWithAnUnknownRkeyIsARemoteAccessError) {
  w::Packet p = request(w::Opcode::read_request);
  p.reth = w::Reth{b.addr(), stag(b.mr) ^ 0x00FF0000, 64};
  expect_refused(p, {}, w::kNakRemoteAccess);
}

TEST_F(Responder, AReadLargerThanTheLargestMessageIsAnInvalidRequest) {
  w::Packet p = request(w::Opcode::read_request);
  p.reth = w::Reth{b.addr(), stag(b.mr), 0xFFFFFFFF};
  expect_refused(p, {}, w::kNakInvalidRequest);
}

TEST_F(Responder, AMisalignedAtomicIsAnInvalidRequest) {
  w::Packet p = request(w::Opcode::fetch_add);
  p.atomic_eth = w::AtomicEth{b.addr(4), stag(b.mr), 1, 0};
  expect_refused(p, {}, w::kNakInvalidRequest);
}

TEST_F(Responder, AnAtomicOnARegionWithoutAtomicAccessIsARemoteAccessError) {
  w::Packet p = request(w::Opcode::cmp_swap);
  p.atomic_eth = w::AtomicEth{b.addr(8), stag(b.mr), 7, 0};  // local write, remote read and write: no remote atomic
  expect_refused(p, {}, w::kNakRemoteAccess);
}

// Not errors: a Send with no receive buffer is told to come back (RNR NAK with a timer), a packet
// ahead of the expected PSN gets one PSN sequence error NAK naming the expected PSN. The QP stays.
TEST_F(Responder, ASendWithNoReceiveBufferGetsAnRnrNak) {
  const std::uint8_t syn = answer(request(w::Opcode::send_only), bytes(64));
  EXPECT_EQ(syn & w::kAethTypeMask, w::kAethRnrNak);
  EXPECT_EQ(b.dev->qp_state(b.qp), QpState::rts);
}

TEST_F(Responder, APacketAheadOfTheExpectedPsnGetsASequenceErrorNak) {
  b.post_recv(1, 0, 4096);
  EXPECT_EQ(answer(request(w::Opcode::send_only, 5), bytes(64)), w::kNakPsnSeqError);
  EXPECT_EQ(b.dev->qp_state(b.qp), QpState::rts);
  CmEvent ev;
  EXPECT_FALSE(b.sink.wait_event(ev, 50ms)) << to_string(ev.type) << " " << ev.reason;
}
