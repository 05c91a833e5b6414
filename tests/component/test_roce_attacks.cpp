// Issue 29: RoCEv2 under attack and under stall. Forged IB CM messages (what an attacker could only
// guess, the comm IDs and the transaction, is taken from the real exchange, so each test shows
// what the remaining checks stop even for an attacker that guessed well), a peer that stops for
// seconds, a peer that dies while nothing is in flight, and a QP that breaks on its own side.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <variant>
#include <vector>

#include "harness.hpp"
#include "roce_pair.hpp"
#include "roce_tap.hpp"
#include "softrnic/rnic.hpp"
#include "softrnic/wire/ib_cm.hpp"
#include "softrnic/wire/roce.hpp"

using namespace softrnic;
using namespace std::chrono_literals;
using softrnic::testing::fill;
using softrnic::testing::poll_one;
using softrnic::testing::RoceCm;
using softrnic::testing::RocePair;
using softrnic::testing::RoceSide;
using softrnic::testing::RoceTap;
using softrnic::testing::tap;
namespace w = softrnic::wire::roce;
namespace cm = softrnic::wire::ibcm;

namespace {

// One Send each way, every byte checked: the connection still works.
void exchange(RoceSide& a, RoceSide& b, std::uint32_t seed) {
  constexpr std::uint32_t kLen = 3000;
  b.post_recv(500 + seed, 1 << 20, kLen);
  a.post_recv(600 + seed, 1 << 20, kLen);
  fill(a.buf, 0, kLen, seed);
  fill(b.buf, 0, kLen, seed + 1);
  ASSERT_EQ(a.post(SendOpcode::send, 1, 0, kLen), Status::ok);
  ASSERT_EQ(b.post(SendOpcode::send, 2, 0, kLen), Status::ok);
  Wc wc;
  for (RoceSide* s : {&a, &b}) {
    ASSERT_TRUE(poll_one(*s->dev, s->scq, wc, 10000ms));
    EXPECT_EQ(wc.status, WcStatus::success) << to_string(wc.status);
    ASSERT_TRUE(poll_one(*s->dev, s->rcq, wc, 10000ms));
    EXPECT_EQ(wc.status, WcStatus::success) << to_string(wc.status);
  }
  EXPECT_EQ(std::memcmp(a.buf.data(), b.buf.data() + (1 << 20), kLen), 0);
  EXPECT_EQ(std::memcmp(b.buf.data(), a.buf.data() + (1 << 20), kLen), 0);
}

struct RoceCmAttack : RoceCm {
  RoceTap* ta = nullptr;
  RoceTap* tb = nullptr;
  cm::MadHdr req_h;  // a's REQ: a's comm ID, the connection's transaction
  cm::Req req;
  cm::Rep rep;  // b's REP: b's comm ID
  netdev::NetAddr a_addr, b_addr;
  static constexpr netdev::NetAddr kStranger{0x7F0A0B0C, 4791};  // 127.10.11.12: a spoofed source

  void SetUp() override {
    tap(a, ta);
    tap(b, tb);
    open();
    cm_connect({1}, {2});
    ASSERT_TRUE(ta && tb);
    auto r = ta->sent<cm::Req>();
    auto p = tb->sent<cm::Rep>();
    ASSERT_TRUE(r && p);
    std::tie(req_h, req) = *r;
    rep = p->second;
    a_addr = {a.dev->address().ip, 4791};
    b_addr = {b.dev->address().ip, 4791};
  }
  // What b hears, as if a sent it (from a's address, naming both comm IDs, in the transaction).
  cm::Rej rej_to_b() const {
    cm::Rej j;
    j.local_comm_id = req.local_comm_id;
    j.remote_comm_id = rep.local_comm_id;
    j.msg_rejected = cm::MsgKind::rep;
    j.reason = cm::RejReason::consumer_defined;
    return j;
  }
  cm::Dreq dreq_to_b() const {
    cm::Dreq d;
    d.local_comm_id = req.local_comm_id;
    d.remote_comm_id = rep.local_comm_id;
    d.remote_qpn = rep.local_qpn;
    return d;
  }
  void expect_no_events() {
    CmEvent ev;
    EXPECT_FALSE(a.sink.wait_event(ev, 50ms)) << "a: " << to_string(ev.type) << " " << ev.reason;
    EXPECT_FALSE(b.sink.wait_event(ev, 50ms)) << "b: " << to_string(ev.type) << " " << ev.reason;
  }
};

// Issue 29: one REJ carrying the local comm ID alone, from any address, closed a live connection.
// IB CM lets a REJ answer only a REQ or a REP; after the RTU it closes nothing, even from the
// peer's own address in the right transaction. Nor does a DREQ from elsewhere or for another QP,
// a DREP nobody asked for, a late REP, RTU or MRA.
TEST_F(RoceCmAttack, ForgedCmMessagesLeaveAnEstablishedConnectionAlone) {
  const auto before = b.dev->counters().rx_stray_cm + a.dev->counters().rx_stray_cm;
  tb->inject(kStranger, rej_to_b(), req_h.tid);  // from elsewhere
  tb->inject(a_addr, rej_to_b(), req_h.tid);     // from the peer, after the RTU
  cm::Rej to_a = rej_to_b();
  std::swap(to_a.local_comm_id, to_a.remote_comm_id);
  ta->inject(b_addr, to_a, req_h.tid);  // to the active side, established
  cm::Dreq d = dreq_to_b();
  tb->inject(kStranger, d, 77);  // a DREQ right in every ID, from elsewhere
  d.remote_qpn ^= 1;
  tb->inject(a_addr, d, 77);  // for another QP
  cm::Drep drep;
  drep.local_comm_id = req.local_comm_id;
  drep.remote_comm_id = rep.local_comm_id;
  tb->inject(a_addr, drep, req_h.tid);  // no DREQ of b's asked for it
  cm::Rep late = rep;
  std::swap(late.local_comm_id, late.remote_comm_id);
  ta->inject(kStranger, late, req_h.tid);
  cm::Rtu rtu;
  rtu.local_comm_id = req.local_comm_id;
  rtu.remote_comm_id = rep.local_comm_id;
  tb->inject(kStranger, rtu, req_h.tid);
  cm::Mra mra;
  mra.remote_comm_id = req.local_comm_id;
  mra.service_timeout = 24;
  ta->inject(b_addr, mra, req_h.tid);
  std::this_thread::sleep_for(100ms);
  expect_no_events();
  EXPECT_EQ(a.dev->qp_state(a.qp), QpState::rts);
  EXPECT_EQ(b.dev->qp_state(b.qp), QpState::rts);
  exchange(a, b, 3);
  EXPECT_GE(b.dev->counters().rx_stray_cm + a.dev->counters().rx_stray_cm - before, 9u);
  // The real DREQ (from the peer, both IDs, our QPN) still closes it.
  ASSERT_EQ(a.dev->disconnect(a.qp, true), Status::ok);
  CmEvent ev;
  ASSERT_TRUE(b.sink.wait_event(ev));
  EXPECT_EQ(ev.type, CmEventType::disconnected) << ev.reason;
}

// While the request is open, a REJ or an MRA must come from the address the REQ went to and in
// its transaction: a stranger's REJ would fail the connect, a stranger's MRA would stall it for
// the 69 s it asks for.
TEST(RoceCmConnecting, ForgedRejAndMraFromElsewhereDoNotStopTheConnect) {
  RoceSide a, b;
  RoceTap* ta = nullptr;
  tap(a, ta);
  a.open(RocePair::next_ip());
  b.open(RocePair::next_ip());
  ASSERT_EQ(b.dev->listen(RoceCm::kQual, [&](ConnRequest* r, const ConnRequestInfo& i) { b.sink.on_request(r, i); }),
            Status::ok);
  ASSERT_EQ(a.dev->connect(a.qp, b.dev->address(), RoceCm::kQual, {}, 10000ms), Status::ok);
  ConnRequest* r = nullptr;
  ConnRequestInfo info;
  ASSERT_TRUE(b.sink.wait_request(r, info));
  const auto req = ta->sent<cm::Req>();
  ASSERT_TRUE(req);
  const netdev::NetAddr stranger{0x7F0A0B0D, 4791}, b_addr{b.dev->address().ip, 4791};
  cm::Mra mra;
  mra.remote_comm_id = req->second.local_comm_id;
  mra.service_timeout = 24;
  ta->inject(stranger, mra, req->first.tid);
  cm::Rej j;
  j.remote_comm_id = req->second.local_comm_id;
  j.reason = cm::RejReason::consumer_defined;
  ta->inject(stranger, j, req->first.tid);
  ta->inject(b_addr, j, req->first.tid ^ 0x100000000ull);  // the peer's address, another transaction
  std::this_thread::sleep_for(100ms);
  CmEvent ev;
  EXPECT_FALSE(a.sink.wait_event(ev, 50ms)) << to_string(ev.type) << " " << ev.reason;
  ASSERT_EQ(b.dev->accept(r, b.qp, {}), Status::ok);
  ASSERT_TRUE(a.sink.wait_event(ev));
  EXPECT_EQ(ev.type, CmEventType::established) << ev.reason;
  EXPECT_GE(a.dev->counters().rx_stray_cm, 3u) << "(taken from the tap before b's REP)";
  ASSERT_TRUE(b.sink.wait_event(ev));
  EXPECT_EQ(ev.type, CmEventType::established) << ev.reason;
  exchange(a, b, 5);
}

// Issue 29: the default ACK timeout (67 ms, 7 retries, no backoff) gave up after 0.54 s, and a
// peer stopped for 0.6 s broke the connection. Unset, it now backs off (67 ms doubling to 4.3 s),
// so a peer stopped for 3 s (nothing leaves it, what comes waits) costs retransmissions, not the
// connection, with requests in flight both ways.
TEST_F(RocePair, APeerStoppedForThreeSecondsIsWaitedFor) {
  RoceTap* tb = nullptr;
  tap(b, tb);
  open();
  connect();
  constexpr int kMsgs = 40;
  constexpr std::uint32_t kLen = 2000;
  for (int i = 0; i < kMsgs; ++i) {
    b.post_recv(i, (1 << 20) + i * kLen, kLen);
    a.post_recv(i, (1 << 20) + i * kLen, kLen);
  }
  fill(a.buf, 0, kMsgs * kLen, 1);
  fill(b.buf, 0, kMsgs * kLen, 2);
  tb->frozen = true;
  for (int i = 0; i < kMsgs; ++i) {
    ASSERT_EQ(a.post(SendOpcode::send, i, i * kLen, kLen), Status::ok);
    ASSERT_EQ(b.post(SendOpcode::send, i, i * kLen, kLen), Status::ok);
  }
  std::this_thread::sleep_for(3s);
  tb->frozen = false;
  for (RoceSide* s : {&a, &b})
    for (int i = 0; i < kMsgs; ++i) {
      Wc wc;
      ASSERT_TRUE(poll_one(*s->dev, s->scq, wc, 15000ms)) << i;
      EXPECT_EQ(wc.status, WcStatus::success) << to_string(wc.status);
      ASSERT_TRUE(poll_one(*s->dev, s->rcq, wc, 15000ms)) << i;
      EXPECT_EQ(wc.status, WcStatus::success) << to_string(wc.status);
    }
  EXPECT_EQ(std::memcmp(a.buf.data(), b.buf.data() + (1 << 20), kMsgs * kLen), 0);
  EXPECT_EQ(std::memcmp(b.buf.data(), a.buf.data() + (1 << 20), kMsgs * kLen), 0);
  EXPECT_GT(a.dev->counters().retransmits, 0u) << "a waited through a stop, not an idle moment";
  EXPECT_LT(a.dev->counters().retransmits, 20u) << "backed off: a fixed 67 ms timeout would resend 45 times in 3 s";
  CmEvent ev;
  EXPECT_FALSE(a.sink.wait_event(ev, 10ms)) << ev.reason;
}

// ... while a consumer that sets the ACK timeout gets exactly what it set: 4 ms, 3 retries, fixed.
TEST_F(RocePair, AnAckTimeoutTheConsumerSetIsKeptExactly) {
  RoceTap* tb = nullptr;
  tap(b, tb);
  RoceConfig rc;
  rc.timeout = 10;  // 4.2 ms
  rc.retry_cnt = 3;
  open({}, {}, rc);
  connect();
  tb->frozen = true;
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(a.post(SendOpcode::send, 1, 0, 100), Status::ok);
  Wc wc;
  ASSERT_TRUE(poll_one(*a.dev, a.scq, wc));
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(wc.status, WcStatus::transport_error);
  EXPECT_EQ(a.dev->counters().retransmits, 3u);
  EXPECT_LT(took, 1s) << "4 timeouts of 4.2 ms, not backed off to seconds";
}

// Issue 29: a RoCEv2 peer that died while nothing was in flight was never noticed (60 s and no
// event). A connection silent for keepalive_idle sends a probe (its last acknowledged request
// again, which every RC responder acknowledges again); keepalive_probes unanswered break it. A
// live, idle peer answers every probe and the connection stays.
TEST_F(RoceCm, ADeadIdlePeerIsNoticedByKeepalive) {
  RoceTap* tb = nullptr;
  tap(b, tb);
  // Probes every 200 ms, 5 unanswered break it: a live peer has a second to answer (a loaded CI
  // host stalls a thread for a while), a dead one is found within 300 ms + 5 intervals.
  a.configure = b.configure = [](DeviceConfig& c) {
    c.keepalive_idle = 300ms;
    c.keepalive_interval = 200ms;
    c.keepalive_probes = 5;
  };
  open();
  cm_connect({}, {});
  std::this_thread::sleep_for(1500ms);  // idle, both alive: probes go and are answered
  CmEvent ev;
  EXPECT_FALSE(a.sink.wait_event(ev, 10ms)) << ev.reason;
  EXPECT_FALSE(b.sink.wait_event(ev, 10ms)) << ev.reason;
  // (whichever side probes first keeps the other's idle timer fresh: count both)
  EXPECT_GE(a.dev->counters().keepalive_probes + b.dev->counters().keepalive_probes, 2u);
  EXPECT_EQ(a.dev->counters().dead_peers, 0u);
  exchange(a, b, 9);
  const auto t0 = std::chrono::steady_clock::now();
  tb->dead = true;
  ASSERT_TRUE(a.sink.wait_event(ev, 10000ms)) << "the dead peer was noticed";
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(ev.type, CmEventType::broken);
  EXPECT_NE(ev.reason.find("keepalive"), std::string::npos) << ev.reason;
  EXPECT_EQ(a.dev->counters().dead_peers, 1u);
  EXPECT_LT(took, 5000ms) << "about the bound: 300 ms of silence and 5 probes 200 ms apart";
}

// Issue 29: a QP that broke on its own side sent no DREQ, so a peer with nothing in flight never
// heard. Here a's Send runs out of RNR retries (b posted no receive): a breaks and tells b.
TEST_F(RoceCm, AQpThatBreaksOnItsOwnSideTellsItsPeer) {
  RoceConfig rc;
  rc.rnr_retry = 1;
  rc.min_rnr_timer = 1;
  open({}, {}, rc);
  cm_connect({}, {});
  ASSERT_EQ(a.post(SendOpcode::send, 1, 0, 100), Status::ok);
  Wc wc;
  ASSERT_TRUE(poll_one(*a.dev, a.scq, wc));
  EXPECT_EQ(wc.status, WcStatus::rnr_retry_exceeded);
  CmEvent ev;
  ASSERT_TRUE(a.sink.wait_event(ev));
  EXPECT_EQ(ev.type, CmEventType::broken);
  ASSERT_TRUE(b.sink.wait_event(ev, 3000ms)) << "b heard of it";
  EXPECT_EQ(ev.type, CmEventType::disconnected) << ev.reason;
}

}  // namespace
