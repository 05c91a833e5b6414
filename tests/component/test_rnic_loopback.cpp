// Two soft RNICs in one process over the loopback netdev: connection management, Send/Receive
// with segmentation, RDMA Write, protection checks that terminate, disconnect with flush.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <numeric>
#include <regex>
#include <vector>

#include "harness.hpp"
#include "softrnic/log.hpp"
#include "softrnic/rnic.hpp"

using namespace softrnic;
using namespace std::chrono_literals;
using softrnic::testing::connect_qps;
using softrnic::testing::poll_one;
using softrnic::testing::Sink;

namespace {

struct Side {
  Sink sink;  // declared first, destroyed last: the device's callbacks write here until it is gone
  std::unique_ptr<Device> dev;
  Pd* pd = nullptr;
  Cq* scq = nullptr;
  Cq* rcq = nullptr;
  Qp* qp = nullptr;
  std::vector<std::uint8_t> buf;
  Mr* mr = nullptr;

  netdev::HoldingNetdev* hold = nullptr;  // set when opened with `holding`: can hold what this side sends

  // The device goes before the memory it may still be sending from (a retransmitted Read
  // Response reads `buf`).
  ~Side() { dev.reset(); }

  // `window`, `rto`: the device's frames in flight per QP and its initial and minimum RTO (0:
  // the defaults).
  void open(std::uint16_t port, std::size_t max_dgram = 1472, bool holding = false, std::uint32_t window = 0,
            std::chrono::milliseconds rto = {}) {
    DeviceConfig c;
    c.name = "loop" + std::to_string(port);
    c.netdev.kind = "loopback";
    c.netdev.port = port;
    c.netdev.max_datagram = max_dgram;
    if (window) c.window = window;
    if (rto.count()) c.initial_rto = c.min_rto = rto;
    std::string e;
    dev = holding ? softrnic::testing::open_holding(c, hold, e) : Device::open(c, e);
    ASSERT_TRUE(dev) << e;
    pd = dev->alloc_pd();
    scq = dev->create_cq(1024, nullptr);
    rcq = dev->create_cq(1024, nullptr);
    QpInit init;
    init.pd = pd;
    init.send_cq = scq;
    init.recv_cq = rcq;
    init.max_sge = 4;
    init.on_event = [this](Qp*, const CmEvent& ev) { sink.on_event(ev); };
    ASSERT_EQ(dev->create_qp(init, qp), Status::ok);
    buf.assign(1 << 20, 0);
    ASSERT_EQ(dev->reg_mr(pd, buf.data(), buf.size(), Access::local_write | Access::remote_write, mr), Status::ok);
  }
  Sge sge(std::size_t off, std::uint32_t len) const {
    return Sge{stag(), reinterpret_cast<std::uintptr_t>(buf.data()) + off, len};
  }
  std::uint32_t stag() const { return dev->query_mr(mr).stag; }
  std::uint64_t addr(std::size_t off = 0) const { return reinterpret_cast<std::uintptr_t>(buf.data()) + off; }
};

struct Pair : ::testing::Test {
  Side a, b;  // a connects to b
  static constexpr std::uint64_t kQual = 77;
  std::uint16_t base = 0;

  bool hold_a = false;                 // a's sends can be held (see HoldingAPair)
  std::uint32_t window_a = 0;          // a's window (frames), 0: the default
  std::chrono::milliseconds rto_a{0};  // a's initial and minimum RTO, 0: the default
  bool hold_b = false;                 // b's sends can be held (see HoldingPair)

  void SetUp() override {
    static std::uint16_t next = 9000;
    base = next;
    next = static_cast<std::uint16_t>(next + 10);
    a.open(base, 1472, hold_a, window_a, rto_a);
    b.open(static_cast<std::uint16_t>(base + 1), 1472, hold_b);
  }

  // Releases everything b held and lets it send freely again.
  void release_b() {
    b.hold->set_holding(false);
    std::vector<std::size_t> all(b.hold->held().size());
    std::iota(all.begin(), all.end(), std::size_t{0});
    b.hold->release(all);
  }

  // Recreates both QPs with RDMA Read enabled (ORD/IRD per side).
  void with_reads(std::uint32_t ord_a, std::uint32_t ird_a, std::uint32_t ord_b, std::uint32_t ird_b) {
    for (Side* s : {&a, &b}) {
      ASSERT_EQ(s->dev->destroy_qp(s->qp), Status::ok);
      QpInit init;
      init.pd = s->pd;
      init.send_cq = s->scq;
      init.recv_cq = s->rcq;
      init.max_sge = 4;
      init.ord = s == &a ? ord_a : ord_b;
      init.ird = s == &a ? ird_a : ird_b;
      init.on_event = [s](Qp*, const CmEvent& ev) { s->sink.on_event(ev); };
      ASSERT_EQ(s->dev->create_qp(init, s->qp), Status::ok);
    }
  }

  void connect(const std::vector<std::uint8_t>& req_pd = {}, const std::vector<std::uint8_t>& rep_pd = {}) {
    ASSERT_EQ(b.dev->listen(kQual, [this](ConnRequest* r, const ConnRequestInfo& i) { b.sink.on_request(r, i); }),
              Status::ok);
    ASSERT_EQ(a.dev->connect(a.qp, b.dev->address(), kQual, req_pd, 5000ms), Status::ok);
    ConnRequest* r = nullptr;
    ConnRequestInfo info;
    ASSERT_TRUE(b.sink.wait_request(r, info));
    EXPECT_EQ(info.conn_qual, kQual);
    EXPECT_EQ(info.private_data, req_pd);
    EXPECT_EQ(info.remote, a.dev->address());
    ASSERT_EQ(b.dev->accept(r, b.qp, rep_pd), Status::ok);
    CmEvent ea, eb;
    ASSERT_TRUE(a.sink.wait_event(ea));
    EXPECT_EQ(ea.type, CmEventType::established);
    EXPECT_EQ(ea.private_data, rep_pd);
    ASSERT_TRUE(b.sink.wait_event(eb));
    EXPECT_EQ(eb.type, CmEventType::established);
    EXPECT_EQ(a.dev->qp_state(a.qp), QpState::rts);
    EXPECT_EQ(b.dev->qp_state(b.qp), QpState::rts);
  }
};

}  // namespace

TEST_F(Pair, ConnectWithPrivateDataBothWays) {
  std::vector<std::uint8_t> req(64), rep(256);
  std::iota(req.begin(), req.end(), 1);
  std::iota(rep.begin(), rep.end(), 7);
  connect(req, rep);
}

TEST_F(Pair, PrivateDataOverTheLimitIsRefused) {
  std::vector<std::uint8_t> big(257);
  EXPECT_EQ(a.dev->connect(a.qp, b.dev->address(), kQual, big, 1000ms), Status::length_error);
  EXPECT_EQ(a.dev->qp_state(a.qp), QpState::idle) << "nothing happened";
}

TEST_F(Pair, RejectCarriesPrivateData) {
  ASSERT_EQ(b.dev->listen(kQual, [this](ConnRequest* r, const ConnRequestInfo& i) { b.sink.on_request(r, i); }),
            Status::ok);
  ASSERT_EQ(a.dev->connect(a.qp, b.dev->address(), kQual, {}, 5000ms), Status::ok);
  ConnRequest* r = nullptr;
  ConnRequestInfo info;
  ASSERT_TRUE(b.sink.wait_request(r, info));
  const std::vector<std::uint8_t> why = {'n', 'o'};
  ASSERT_EQ(b.dev->reject(r, why), Status::ok);
  EXPECT_EQ(b.dev->reject(r, why), Status::invalid_state) << "a request is decided once";
  CmEvent e;
  ASSERT_TRUE(a.sink.wait_event(e));
  EXPECT_EQ(e.type, CmEventType::rejected);
  EXPECT_EQ(e.private_data, why);
}

TEST_F(Pair, NoListenerIsANonPeerReject) {
  ASSERT_EQ(a.dev->connect(a.qp, b.dev->address(), 1234, {}, 5000ms), Status::ok);
  CmEvent e;
  ASSERT_TRUE(a.sink.wait_event(e));
  EXPECT_EQ(e.type, CmEventType::no_listener);
}

TEST_F(Pair, NoPeerTimesOut) {
  ASSERT_EQ(a.dev->connect(a.qp, NetAddr{0x7F000001, 1}, kQual, {}, 300ms), Status::ok);
  CmEvent e;
  ASSERT_TRUE(a.sink.wait_event(e, 5000ms));
  EXPECT_EQ(e.type, CmEventType::unreachable);
}

TEST_F(Pair, SendsOfManySizesArriveInOrder) {
  // Receives posted before the connection exists are kept.
  const std::vector<std::uint32_t> sizes = {0, 1, 1400, 1430, 1431, 4096, 65536, 300000};
  std::size_t off = 0;
  std::vector<std::size_t> offs;
  for (std::uint32_t s : sizes) {
    const Sge g = b.sge(off, s == 0 ? 16 : s);
    ASSERT_EQ(b.dev->post_recv(b.qp, RecvWr{off, {&g, 1}}), Status::ok);
    offs.push_back(off);
    off += s + 16;
  }
  connect();
  for (std::size_t i = 0; i < a.buf.size(); ++i) a.buf[i] = static_cast<std::uint8_t>(i * 31 + 7);
  std::size_t src = 0;
  for (std::uint32_t s : sizes) {
    const Sge g = a.sge(src, s);
    ASSERT_EQ(a.dev->post_send(a.qp, SendWr{s, SendOpcode::send, {&g, s ? 1u : 0u}}), Status::ok);
    src += s;
  }
  src = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    Wc wc;
    ASSERT_TRUE(poll_one(*b.dev, b.rcq, wc)) << "receive " << i;
    EXPECT_EQ(wc.status, WcStatus::success);
    EXPECT_EQ(wc.opcode, WcOpcode::recv);
    EXPECT_EQ(wc.wr_id, offs[i]) << "completions in posting order";
    EXPECT_EQ(wc.byte_len, sizes[i]);
    EXPECT_EQ(0, std::memcmp(b.buf.data() + offs[i], a.buf.data() + src, sizes[i])) << "size " << sizes[i];
    src += sizes[i];
    Wc sc;
    ASSERT_TRUE(poll_one(*a.dev, a.scq, sc));
    EXPECT_EQ(sc.status, WcStatus::success);
    EXPECT_EQ(sc.wr_id, sizes[i]);
    EXPECT_EQ(sc.byte_len, sizes[i]);
  }
  // The loopback fabric is lossless and keeps order: b never sees a gap, and the sender never
  // overruns its window. (A retransmission is still possible: a host stalled past the RTO, as under
  // ThreadSanitizer on a busy machine, resends what was in flight; b then takes it as a duplicate.)
  const DeviceCounters cb = b.dev->counters();
  EXPECT_EQ(cb.rx_out_of_order, 0u);
  EXPECT_EQ(cb.rx_beyond_window, 0u);
  EXPECT_EQ(cb.rx_bad_frames, 0u);
  EXPECT_LE(cb.rx_duplicates, a.dev->counters().retransmits) << "b got nothing twice that a sent once";
}

TEST_F(Pair, ScatterGatherAcrossSges) {
  const Sge rg[3] = {b.sge(0, 10), b.sge(100, 3000), b.sge(5000, 90)};
  ASSERT_EQ(b.dev->post_recv(b.qp, RecvWr{1, rg}), Status::ok);
  connect();
  for (std::size_t i = 0; i < 4000; ++i) a.buf[i] = static_cast<std::uint8_t>(i);
  const Sge sg[2] = {a.sge(0, 1000), a.sge(1000, 2000)};
  ASSERT_EQ(a.dev->post_send(a.qp, SendWr{2, SendOpcode::send, sg}), Status::ok);
  Wc wc;
  ASSERT_TRUE(poll_one(*b.dev, b.rcq, wc));
  EXPECT_EQ(wc.byte_len, 3000u);
  EXPECT_EQ(0, std::memcmp(b.buf.data(), a.buf.data(), 10));
  EXPECT_EQ(0, std::memcmp(b.buf.data() + 100, a.buf.data() + 10, 2990));
}

TEST_F(Pair, RdmaWriteThenSendIsOrdered) {
  const Sge rg = b.sge(0, 64);
  ASSERT_EQ(b.dev->post_recv(b.qp, RecvWr{9, {&rg, 1}}), Status::ok);
  connect();
  for (std::size_t i = 0; i < 200000; ++i) a.buf[i] = static_cast<std::uint8_t>(i ^ 0x5A);
  const Sge w = a.sge(0, 200000);
  SendWr wr{5, SendOpcode::rdma_write, {&w, 1}, b.stag(), b.addr(4096)};
  ASSERT_EQ(a.dev->post_send(a.qp, wr), Status::ok);
  const Sge s = a.sge(0, 8);
  ASSERT_EQ(a.dev->post_send(a.qp, SendWr{6, SendOpcode::send, {&s, 1}, 0, 0, false}), Status::ok);
  Wc wc;
  ASSERT_TRUE(poll_one(*b.dev, b.rcq, wc));
  EXPECT_EQ(wc.wr_id, 9u);
  EXPECT_EQ(0, std::memcmp(b.buf.data() + 4096, a.buf.data(), 200000)) << "the write landed before the send completed";
  ASSERT_TRUE(poll_one(*a.dev, a.scq, wc));
  EXPECT_EQ(wc.wr_id, 5u);
  EXPECT_EQ(wc.opcode, WcOpcode::rdma_write);
  EXPECT_FALSE(poll_one(*a.dev, a.scq, wc, 100ms)) << "the unsignaled send makes no completion";
}

namespace {

// A write the target must refuse: it terminates the connection and places nothing.
void expect_refused_write(Pair& p, std::uint32_t stag, std::uint64_t addr, std::uint32_t len) {
  std::fill(p.b.buf.begin(), p.b.buf.end(), 0xEE);
  const Sge w = p.a.sge(0, len);
  ASSERT_EQ(p.a.dev->post_send(p.a.qp, SendWr{1, SendOpcode::rdma_write, {&w, 1}, stag, addr}), Status::ok);
  CmEvent ea, eb;
  ASSERT_TRUE(p.b.sink.wait_event(eb));
  EXPECT_EQ(eb.type, CmEventType::broken);
  EXPECT_NE(eb.reason.find("sent Terminate"), std::string::npos) << eb.reason;
  ASSERT_TRUE(p.a.sink.wait_event(ea));
  EXPECT_EQ(ea.type, CmEventType::broken);
  EXPECT_NE(ea.reason.find("peer sent Terminate"), std::string::npos) << ea.reason;
  EXPECT_TRUE(std::all_of(p.b.buf.begin(), p.b.buf.end(), [](std::uint8_t c) { return c == 0xEE; }))
      << "no byte placed";
  EXPECT_EQ(p.b.dev->counters().terminates_sent, 1u);
  EXPECT_EQ(p.a.dev->counters().terminates_received, 1u);
  EXPECT_EQ(p.b.dev->qp_counters(p.b.qp).terminates_sent, 1u) << "the QP's own count (softrnic_info)";
  EXPECT_EQ(p.a.dev->qp_counters(p.a.qp).terminates_received, 1u);
}

}  // namespace

// Issue 16: the log lines of a connection's life, each prefixed with the device and its QP as
// siw prefixes its own; a broken connection at warn, the rest at info.
TEST_F(Pair, LogLinesNameTheDeviceAndTheQp) {
  std::mutex mu;
  std::vector<std::pair<log::Level, std::string>> lines;
  log::set_sink([&](log::Level l, const std::string& s) {
    std::lock_guard lk(mu);
    lines.emplace_back(l, s);
  });
  const log::Level before = log::level();
  log::set_level(log::Level::info);
  connect();
  expect_refused_write(*this, b.stag() ^ 0x01, b.addr(), 100);
  log::set_level(before);
  log::set_sink(nullptr);
  std::lock_guard lk(mu);
  auto find = [&](const std::string& re_text, log::Level want) -> std::string {
    const std::regex re(re_text);
    for (const auto& [l, s] : lines)
      if (std::regex_search(s, re)) {
        EXPECT_EQ(l, want) << s;
        return s;
      }
    ADD_FAILURE() << "no line matches " << re_text;
    return {};
  };
  const std::string na = "loop" + std::to_string(base), nb = "loop" + std::to_string(base + 1);
  const std::string est_b = find(
      "^softrnic " + nb + " QP\\[[0-9]+\\]: established \\(peer 127\\.0\\.0\\.1:" + std::to_string(base) + "\\)\n$",
      log::Level::info);
  const std::string brk_b = find("^softrnic " + nb + " QP\\[[0-9]+\\]: broken .*sent Terminate", log::Level::warn);
  find("^softrnic " + na + " QP\\[[0-9]+\\]: established", log::Level::info);
  find("^softrnic " + na + " QP\\[[0-9]+\\]: broken .*peer sent Terminate", log::Level::warn);
  // the same QP speaks in both of b's lines
  EXPECT_EQ(est_b.substr(0, est_b.find(']')), brk_b.substr(0, brk_b.find(']')));
}

TEST_F(Pair, WriteWithWrongKeyTerminates) {
  connect();
  expect_refused_write(*this, b.stag() ^ 0x01, b.addr(), 100);
}

TEST_F(Pair, WriteOutOfBoundsTerminates) {
  connect();
  expect_refused_write(*this, b.stag(), b.addr(b.buf.size() - 50), 100);
}

TEST_F(Pair, WriteWithoutRemoteWriteAccessTerminates) {
  Mr* ro = nullptr;
  ASSERT_EQ(b.dev->reg_mr(b.pd, b.buf.data(), 4096, Access::local_write, ro), Status::ok);
  connect();
  expect_refused_write(*this, b.dev->query_mr(ro).stag, b.addr(), 100);
}

TEST_F(Pair, WriteToAnotherProtectionZoneTerminates) {
  Pd* other = b.dev->alloc_pd();
  Mr* mr = nullptr;
  ASSERT_EQ(b.dev->reg_mr(other, b.buf.data(), 4096, Access::remote_write, mr), Status::ok);
  connect();
  expect_refused_write(*this, b.dev->query_mr(mr).stag, b.addr(), 100);
}

TEST_F(Pair, SendWithoutReceiveBufferTerminates) {
  connect();
  const Sge s = a.sge(0, 8);
  ASSERT_EQ(a.dev->post_send(a.qp, SendWr{1, SendOpcode::send, {&s, 1}}), Status::ok);
  CmEvent e;
  ASSERT_TRUE(b.sink.wait_event(e));
  EXPECT_EQ(e.type, CmEventType::broken);
  EXPECT_NE(e.reason.find("no receive buffer posted for MSN 1"), std::string::npos) << e.reason;
}

TEST_F(Pair, SendLargerThanReceiveBufferTerminates) {
  const Sge rg = b.sge(0, 10);
  ASSERT_EQ(b.dev->post_recv(b.qp, RecvWr{1, {&rg, 1}}), Status::ok);
  connect();
  const Sge s = a.sge(0, 11);
  ASSERT_EQ(a.dev->post_send(a.qp, SendWr{1, SendOpcode::send, {&s, 1}}), Status::ok);
  CmEvent e;
  ASSERT_TRUE(b.sink.wait_event(e));
  EXPECT_EQ(e.type, CmEventType::broken);
  Wc wc;
  ASSERT_TRUE(poll_one(*b.dev, b.rcq, wc));
  EXPECT_EQ(wc.status, WcStatus::flushed);
  // The sender's Send completes in error, never in success (issue 13: it used to succeed after
  // the BROKEN event, its frame acknowledged by the Terminate that refused it).
  ASSERT_TRUE(a.sink.wait_event(e));
  EXPECT_EQ(e.type, CmEventType::broken);
  ASSERT_TRUE(poll_one(*a.dev, a.scq, wc));
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_EQ(wc.status, WcStatus::remote_operation_error);
}

TEST_F(Pair, LocalChecksRefuseBadPosts) {
  Sge bad = a.sge(0, 8);
  bad.lkey ^= 1;
  EXPECT_EQ(a.dev->post_recv(a.qp, RecvWr{1, {&bad, 1}}), Status::privileges_violation) << "a stale key";
  Sge outside = a.sge(0, 8);
  outside.addr += a.buf.size();
  EXPECT_EQ(a.dev->post_recv(a.qp, RecvWr{1, {&outside, 1}}), Status::invalid_param) << "outside its region";
  Pd* other = a.dev->alloc_pd();
  Mr* elsewhere = nullptr;
  ASSERT_EQ(a.dev->reg_mr(other, a.buf.data(), 64, Access::local_write, elsewhere), Status::ok);
  const Sge os{a.dev->query_mr(elsewhere).stag, a.addr(), 64};
  EXPECT_EQ(a.dev->post_recv(a.qp, RecvWr{1, {&os, 1}}), Status::protection_violation) << "another PD's region";
  Mr* ro = nullptr;
  ASSERT_EQ(a.dev->reg_mr(a.pd, a.buf.data(), 64, Access::local_read, ro), Status::ok);
  const Sge ros{a.dev->query_mr(ro).stag, a.addr(), 64};
  EXPECT_EQ(a.dev->post_recv(a.qp, RecvWr{1, {&ros, 1}}), Status::privileges_violation) << "receive needs local write";
  const Sge s = a.sge(0, 8);
  EXPECT_EQ(a.dev->post_send(a.qp, SendWr{1, SendOpcode::send, {&s, 1}}), Status::invalid_state) << "not connected";
  const Sge five[5] = {s, s, s, s, s};
  EXPECT_EQ(a.dev->post_recv(a.qp, RecvWr{1, five}), Status::invalid_param) << "more SGEs than max_sge";
}

TEST_F(Pair, GracefulDisconnectFlushesReceives) {
  const Sge rg = b.sge(0, 64);
  ASSERT_EQ(b.dev->post_recv(b.qp, RecvWr{42, {&rg, 1}}), Status::ok);
  connect();
  ASSERT_EQ(a.dev->disconnect(a.qp, true), Status::ok);
  CmEvent ea, eb;
  ASSERT_TRUE(a.sink.wait_event(ea));
  EXPECT_EQ(ea.type, CmEventType::disconnected);
  ASSERT_TRUE(b.sink.wait_event(eb));
  EXPECT_EQ(eb.type, CmEventType::disconnected);
  Wc wc;
  ASSERT_TRUE(poll_one(*b.dev, b.rcq, wc));
  EXPECT_EQ(wc.wr_id, 42u);
  EXPECT_EQ(wc.status, WcStatus::flushed);
  EXPECT_EQ(a.dev->qp_state(a.qp), QpState::idle);
  const Sge s = a.sge(0, 8);
  EXPECT_EQ(a.dev->post_send(a.qp, SendWr{1, SendOpcode::send, {&s, 1}}), Status::invalid_state);
}

TEST_F(Pair, AbruptDisconnectReachesThePeer) {
  connect();
  ASSERT_EQ(a.dev->disconnect(a.qp, false), Status::ok);
  CmEvent ea, eb;
  ASSERT_TRUE(a.sink.wait_event(ea));
  EXPECT_EQ(ea.type, CmEventType::disconnected);
  ASSERT_TRUE(b.sink.wait_event(eb));
  EXPECT_EQ(eb.type, CmEventType::disconnected);
  EXPECT_EQ(a.dev->qp_state(a.qp), QpState::error);
}

TEST_F(Pair, ResourcesInUseAreNotFreed) {
  EXPECT_EQ(a.dev->dealloc_pd(a.pd), Status::in_use);
  EXPECT_EQ(a.dev->destroy_cq(a.scq), Status::in_use);
  ASSERT_EQ(a.dev->destroy_qp(a.qp), Status::ok);
  EXPECT_EQ(a.dev->destroy_cq(a.scq), Status::ok);
  EXPECT_EQ(a.dev->dereg_mr(a.mr), Status::ok);
  EXPECT_EQ(a.dev->dealloc_pd(a.pd), Status::ok);
  a.qp = nullptr;
}

TEST_F(Pair, ReceiveIntoAFreedRegionPlacesNothing) {
  // A second region over the same memory, freed after the receive is posted.
  Mr* extra = nullptr;
  ASSERT_EQ(b.dev->reg_mr(b.pd, b.buf.data(), 4096, Access::local_write, extra), Status::ok);
  const Sge rg{b.dev->query_mr(extra).stag, b.addr(), 64};
  ASSERT_EQ(b.dev->post_recv(b.qp, RecvWr{1, {&rg, 1}}), Status::ok);
  ASSERT_EQ(b.dev->dereg_mr(extra), Status::ok);
  connect();
  std::fill(b.buf.begin(), b.buf.end(), 0xEE);
  const Sge s = a.sge(0, 8);
  ASSERT_EQ(a.dev->post_send(a.qp, SendWr{1, SendOpcode::send, {&s, 1}}), Status::ok);
  CmEvent e;
  ASSERT_TRUE(b.sink.wait_event(e));
  EXPECT_EQ(e.type, CmEventType::broken);
  EXPECT_NE(e.reason.find("region was freed"), std::string::npos) << e.reason;
  EXPECT_TRUE(std::all_of(b.buf.begin(), b.buf.end(), [](std::uint8_t c) { return c == 0xEE; })) << "no byte placed";
}

TEST_F(Pair, SendFromAFreedRegionBreaksTheConnection) {
  const Sge rg = b.sge(0, 64);
  ASSERT_EQ(b.dev->post_recv(b.qp, RecvWr{1, {&rg, 1}}), Status::ok);
  connect();
  Mr* extra = nullptr;
  ASSERT_EQ(a.dev->reg_mr(a.pd, a.buf.data(), 4096, Access::local_read, extra), Status::ok);
  const Sge s{a.dev->query_mr(extra).stag, a.addr(), 8};
  ASSERT_EQ(a.dev->dereg_mr(extra), Status::ok);
  EXPECT_EQ(a.dev->post_send(a.qp, SendWr{1, SendOpcode::send, {&s, 1}}), Status::privileges_violation)
      << "checked at post";
}

namespace {

// A connected pair whose B side can be made a black hole (its netdev then swallows everything).
struct BlackHolePair {
  Sink sa, sb;  // declared first, destroyed last
  std::unique_ptr<Device> a, b;
  netdev::HoldingNetdev* hole = nullptr;
  Pd *pa = nullptr, *pb = nullptr;
  Qp *qa = nullptr, *qb = nullptr;
  Cq *cqa = nullptr, *cqb = nullptr;

  void open(std::uint16_t port, int retry_limit, std::uint32_t ord_a, std::uint32_t ird_b) {
    DeviceConfig ca;
    ca.netdev.kind = "loopback";
    ca.netdev.port = port;
    ca.retry_limit = retry_limit;
    std::string e;
    a = Device::open(ca, e);
    ASSERT_TRUE(a) << e;
    netdev::NetdevConfig nb;
    nb.kind = "loopback";
    nb.port = static_cast<std::uint16_t>(port + 1);
    auto inner = netdev::make_netdev(nb, e);
    ASSERT_TRUE(inner) << e;
    auto hold = netdev::make_holding(std::move(inner), [](std::span<const std::uint8_t>) { return true; });
    hole = hold.get();
    b = Device::open(DeviceConfig{}, std::move(hold));
    pa = a->alloc_pd();
    pb = b->alloc_pd();
    cqa = a->create_cq(16, nullptr);
    cqb = b->create_cq(16, nullptr);
    QpInit ia;
    ia.pd = pa;
    ia.send_cq = ia.recv_cq = cqa;
    ia.ord = ord_a;
    ia.on_event = [this](Qp*, const CmEvent& ev) { sa.on_event(ev); };
    ASSERT_EQ(a->create_qp(ia, qa), Status::ok);
    QpInit ib;
    ib.pd = pb;
    ib.send_cq = ib.recv_cq = cqb;
    ib.ird = ird_b;
    ib.on_event = [this](Qp*, const CmEvent& ev) { sb.on_event(ev); };
    ASSERT_EQ(b->create_qp(ib, qb), Status::ok);
    ASSERT_EQ(b->listen(3, [this](ConnRequest* r, const ConnRequestInfo& i) { sb.on_request(r, i); }), Status::ok);
    ASSERT_EQ(a->connect(qa, b->address(), 3, {}, 5000ms), Status::ok);
    ConnRequest* r = nullptr;
    ConnRequestInfo info;
    ASSERT_TRUE(sb.wait_request(r, info));
    ASSERT_EQ(b->accept(r, qb, {}), Status::ok);
    CmEvent ev;
    ASSERT_TRUE(sa.wait_event(ev));
    ASSERT_EQ(ev.type, CmEventType::established);
  }
};

}  // namespace

TEST(RetryLimit, APeerThatStopsAnsweringBreaksTheConnection) {
  std::vector<std::uint8_t> buf(64);  // before the devices: they send from it until destroyed
  BlackHolePair p;
  p.open(9700, 3, 0, 0);
  if (HasFatalFailure()) return;
  p.hole->set_holding(true);
  Mr* mr = nullptr;
  ASSERT_EQ(p.a->reg_mr(p.pa, buf.data(), buf.size(), Access::local_read, mr), Status::ok);
  const Sge g{p.a->query_mr(mr).stag, reinterpret_cast<std::uintptr_t>(buf.data()), 64};
  ASSERT_EQ(p.a->post_send(p.qa, SendWr{9, SendOpcode::send, {&g, 1}}), Status::ok);
  CmEvent ev;
  ASSERT_TRUE(p.sa.wait_event(ev, 20000ms)) << "no event: the connection hangs";
  EXPECT_EQ(ev.type, CmEventType::broken);
  EXPECT_NE(ev.reason.find("retry limit"), std::string::npos) << ev.reason;
  Wc wc;
  ASSERT_TRUE(poll_one(*p.a, p.cqa, wc));
  EXPECT_EQ(wc.wr_id, 9u);
  EXPECT_EQ(wc.status, WcStatus::flushed) << "the Send is not reported as delivered";
  EXPECT_GE(p.a->counters().retransmits, 3u);
}

struct HoldingPair : Pair {
  void SetUp() override {
    hold_b = true;
    Pair::SetUp();
  }
};

TEST_F(HoldingPair, ReadsBeyondTheNegotiatedOrdWaitForASlot) {
  // A asks for ORD 4, B's IRD is 1: A may have one read outstanding. B sends nothing until
  // released, so A posts all four while the first is outstanding; B would terminate the
  // connection if a second Read Request arrived beyond its IRD.
  with_reads(4, 0, 0, 1);
  Mr* rd = nullptr;
  ASSERT_EQ(b.dev->reg_mr(b.pd, b.buf.data(), b.buf.size(), Access::remote_read, rd), Status::ok);
  connect();
  for (std::size_t i = 0; i < 4000; ++i) b.buf[i] = static_cast<std::uint8_t>(i * 7 + 3);
  b.hold->set_holding(true);
  std::vector<Sge> sinks;
  for (std::uint32_t i = 0; i < 4; ++i) sinks.push_back(a.sge(i * 1000, 1000));
  for (std::uint32_t i = 0; i < 4; ++i)
    ASSERT_EQ(
        a.dev->post_send(
            a.qp, SendWr{10 + i, SendOpcode::rdma_read, {&sinks[i], 1}, b.dev->query_mr(rd).stag, b.addr(i * 1000)}),
        Status::ok)
        << "read " << i << ": a read beyond the ORD waits instead of failing";
  EXPECT_FALSE(a.dev->qp_idle(a.qp).second);
  std::this_thread::sleep_for(50ms);
  Wc wc;
  EXPECT_EQ(a.dev->poll_cq(a.scq, {&wc, 1}), 0u) << "nothing completes while B's responses are held";
  release_b();
  for (std::uint32_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(poll_one(*a.dev, a.scq, wc)) << "read " << i;
    EXPECT_EQ(wc.wr_id, 10u + i) << "reads complete in posting order";
    EXPECT_EQ(wc.status, WcStatus::success);
    EXPECT_EQ(wc.opcode, WcOpcode::rdma_read);
  }
  EXPECT_EQ(0, std::memcmp(a.buf.data(), b.buf.data(), 4000));
  EXPECT_EQ(a.dev->qp_state(a.qp), QpState::rts);
  EXPECT_EQ(b.dev->counters().terminates_sent, 0u) << "B saw no Read Request beyond its IRD";
}

TEST_F(HoldingPair, ReadsSharingOneSinkAllComplete) {
  // dapltest's performance test reads again and again into one buffer: each response is counted
  // for the oldest read that still lacks bytes. A zero-length read among them completes too.
  with_reads(4, 0, 0, 4);
  Mr* rd = nullptr;
  ASSERT_EQ(b.dev->reg_mr(b.pd, b.buf.data(), b.buf.size(), Access::remote_read, rd), Status::ok);
  connect();
  std::fill(b.buf.begin(), b.buf.begin() + 3000, std::uint8_t{0x5A});
  b.hold->set_holding(true);
  const Sge sink = a.sge(0, 3000), empty = a.sge(0, 0);
  const std::uint32_t key = b.dev->query_mr(rd).stag;
  for (std::uint64_t id : {1u, 2u, 3u})
    ASSERT_EQ(a.dev->post_send(a.qp, SendWr{id, SendOpcode::rdma_read, {&sink, 1}, key, b.addr()}), Status::ok);
  ASSERT_EQ(a.dev->post_send(a.qp, SendWr{4, SendOpcode::rdma_read, {&empty, 1}, key, b.addr()}), Status::ok);
  release_b();
  Wc wc;
  for (std::uint64_t id : {1u, 2u, 3u, 4u}) {
    ASSERT_TRUE(poll_one(*a.dev, a.scq, wc)) << "read " << id;
    EXPECT_EQ(wc.wr_id, id);
    EXPECT_EQ(wc.status, WcStatus::success);
  }
  EXPECT_EQ(a.buf[2999], 0x5A);
  EXPECT_EQ(a.dev->qp_state(a.qp), QpState::rts);
}

TEST_F(HoldingPair, ReadFenceHoldsLaterRequestsUntilEarlierReadsComplete) {
  with_reads(2, 0, 0, 2);
  Mr* rd = nullptr;
  ASSERT_EQ(b.dev->reg_mr(b.pd, b.buf.data(), b.buf.size(), Access::remote_read | Access::remote_write, rd),
            Status::ok);
  connect();
  const std::uint32_t key = b.dev->query_mr(rd).stag;
  std::fill(b.buf.begin(), b.buf.begin() + 64, std::uint8_t{0x11});
  std::fill(a.buf.begin() + 1000, a.buf.begin() + 1064, std::uint8_t{0x22});
  std::fill(a.buf.begin() + 2000, a.buf.begin() + 2064, std::uint8_t{0x33});
  b.hold->set_holding(true);
  // Frames b has taken in (retransmissions aside). b counts and places a frame in one hold of its
  // device lock, and qp_counters takes that lock: once the count covers a frame, reading what it
  // placed is ordered after the placement. (Reading the buffer while a placement may be under way
  // would be a data race: ThreadSanitizer caught an earlier version of this test doing so.)
  const auto taken_in = [&] {
    const QpCounters c = b.dev->qp_counters(b.qp);
    return c.rx_frames - c.rx_duplicates - c.rx_beyond_window;
  };
  const std::uint64_t before = taken_in();
  const Sge sink = a.sge(0, 64), src1 = a.sge(1000, 64), src2 = a.sge(2000, 64);
  ASSERT_EQ(a.dev->post_send(a.qp, SendWr{1, SendOpcode::rdma_read, {&sink, 1}, key, b.addr(0)}), Status::ok);
  // Without a fence a Write goes at once, ahead of the read's completion ...
  ASSERT_EQ(a.dev->post_send(a.qp, SendWr{2, SendOpcode::rdma_write, {&src1, 1}, key, b.addr(4096)}), Status::ok);
  // ... with one it waits for the read.
  SendWr fenced{3, SendOpcode::rdma_write, {&src2, 1}, key, b.addr(8192)};
  fenced.fence = true;
  ASSERT_EQ(a.dev->post_send(a.qp, fenced), Status::ok);
  const auto placed = [&](std::size_t off) {
    b.dev->qp_counters(b.qp);
    return b.buf[off];
  };
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (taken_in() < before + 2 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(taken_in(), before + 2) << "b takes in the Read Request and the unfenced Write";
  EXPECT_EQ(placed(4096), 0x22) << "the unfenced Write is placed while the read is outstanding";
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(taken_in(), before + 2) << "the fenced Write is not sent before the read completed";
  EXPECT_EQ(placed(8192), 0) << "the fenced Write did not start before the read completed";
  release_b();
  Wc wc;
  for (std::uint64_t id : {1u, 2u, 3u}) {
    ASSERT_TRUE(poll_one(*a.dev, a.scq, wc));
    EXPECT_EQ(wc.wr_id, id);
    EXPECT_EQ(wc.status, WcStatus::success);
  }
  EXPECT_EQ(a.buf[0], 0x11);
  EXPECT_EQ(placed(8192), 0x33);
}

TEST_F(HoldingPair, AcksLatePastTheRtoBringOneProbeNotTheWholeWindowAgain) {
  // b takes in all 40 Writes but its acks are held for several RTOs, as when a host stalls. The
  // RTO resends the oldest frame only; the rest wait for what its ack says (here: all arrived).
  connect();
  constexpr std::uint32_t kN = 40;
  for (std::size_t i = 0; i < kN * 256; ++i) a.buf[i] = static_cast<std::uint8_t>(i * 13 + 1);
  b.hold->set_holding(true);
  const auto taken_in = [&] {
    const QpCounters c = b.dev->qp_counters(b.qp);
    return c.rx_frames - c.rx_duplicates - c.rx_beyond_window;
  };
  const std::uint64_t before = taken_in();
  std::vector<Sge> src;
  for (std::uint32_t i = 0; i < kN; ++i) src.push_back(a.sge(i * 256, 256));
  for (std::uint32_t i = 0; i < kN; ++i)
    ASSERT_EQ(a.dev->post_send(a.qp, SendWr{i, SendOpcode::rdma_write, {&src[i], 1}, b.stag(), b.addr(i * 256)}),
              Status::ok);
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (taken_in() < before + kN && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(taken_in(), before + kN);
  std::this_thread::sleep_for(150ms);  // several RTOs (20 ms before any round-trip sample, doubling)
  release_b();
  Wc wc;
  for (std::uint32_t i = 0; i < kN; ++i) {
    ASSERT_TRUE(poll_one(*a.dev, a.scq, wc)) << i;
    EXPECT_EQ(wc.wr_id, i);
    EXPECT_EQ(wc.status, WcStatus::success);
  }
  const QpCounters ca = a.dev->qp_counters(a.qp);
  EXPECT_GE(ca.retransmits, 1u) << "the RTO fired";
  EXPECT_LT(ca.retransmits, 10u) << "one probe per (doubling) RTO, not the " << kN << " frames in flight each time";
  b.dev->qp_counters(b.qp);  // orders the read below after b's placements
  EXPECT_EQ(0, std::memcmp(a.buf.data(), b.buf.data(), kN * 256));
}

struct HoldingAPair : Pair {
  void SetUp() override {
    hold_a = true;
    Pair::SetUp();
  }
  // A few round trips first: frames held later would otherwise be a's only RTT samples, and their
  // inflated minimum would make a quick ack look like a spurious resend's.
  void warm_up() {
    Wc wc;
    const Sge warm = a.sge(0, 64);
    for (std::uint64_t i = 0; i < 4; ++i) {
      ASSERT_EQ(a.dev->post_send(a.qp, SendWr{100 + i, SendOpcode::rdma_write, {&warm, 1}, b.stag(), b.addr(0)}),
                Status::ok);
      ASSERT_TRUE(poll_one(*a.dev, a.scq, wc));
    }
  }
  // n Writes of len bytes each, a.buf to b.buf at the same offsets, with a's sends held (wr_id i).
  void post_held_writes(std::uint32_t n, std::uint32_t len) {
    a.hold->set_holding(true);
    src_.clear();
    for (std::uint32_t i = 0; i < n; ++i) src_.push_back(a.sge(i * len, len));
    for (std::uint32_t i = 0; i < n; ++i)
      ASSERT_EQ(a.dev->post_send(a.qp, SendWr{i, SendOpcode::rdma_write, {&src_[i], 1}, b.stag(), b.addr(i * len)}),
                Status::ok);
  }

 private:
  std::vector<Sge> src_;  // the Writes' sources (a posted SGL must outlive its post)
};

TEST_F(HoldingAPair, ALostTailIsRecoveredAfterTheProbe) {
  // The last 4 of 10 Writes are lost and nothing follows them: no later delivery tells a they are
  // missing, so the RTO's probe (the oldest of them) does; its ack shows the 3 sent before it lost.
  connect();
  constexpr std::uint32_t kN = 10, kLost = 4;
  for (std::size_t i = 0; i < kN * 512; ++i) a.buf[i] = static_cast<std::uint8_t>(i * 7 + 5);
  Wc wc;
  ASSERT_NO_FATAL_FAILURE(warm_up());
  ASSERT_NO_FATAL_FAILURE(post_held_writes(kN, 512));
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (a.hold->held().size() < kN && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(a.hold->held().size(), kN);
  a.hold->set_holding(false);
  std::vector<std::size_t> pass(kN - kLost), lose(kLost);
  std::iota(pass.begin(), pass.end(), std::size_t{0});
  std::iota(lose.begin(), lose.end(), std::size_t{kN - kLost});
  a.hold->discard(lose);
  a.hold->release(pass);
  for (std::uint32_t i = 0; i < kN; ++i) {
    ASSERT_TRUE(poll_one(*a.dev, a.scq, wc)) << i;
    EXPECT_EQ(wc.wr_id, i) << "completions in order";
    EXPECT_EQ(wc.status, WcStatus::success);
  }
  const QpCounters ca = a.dev->qp_counters(a.qp);
  EXPECT_GE(ca.retransmits, kLost) << "each lost frame was resent";
  b.dev->qp_counters(b.qp);  // orders the read below after b's placements
  EXPECT_EQ(0, std::memcmp(a.buf.data(), b.buf.data(), kN * 512));
  std::printf("tail loss of %u: %llu retransmissions, %llu of them by RACK after the probe\n", kLost,
              static_cast<unsigned long long>(ca.retransmits), static_cast<unsigned long long>(ca.rack_retransmits));
}

struct HoldingASmallWindowPair : HoldingAPair {
  void SetUp() override {
    window_a = 8;
    rto_a = 2000ms;  // no RTO while the test holds frames: RACK alone resends
    HoldingAPair::SetUp();
  }
};

TEST_F(HoldingASmallWindowPair, AHoleBeingRepairedDoesNotStopTheFramesBehindIt) {
  // The window counts frames in flight the peer has not acknowledged, selectively or not (RFC
  // 6675's pipe). With the first of 8 frames lost and the other 7 selectively acknowledged, a
  // sends 7 more while the hole is repaired; counted from the hole, it would send nothing more
  // until the lost frame's resend is acknowledged.
  connect();
  constexpr std::uint32_t kN = 16, kLen = 512;
  for (std::size_t i = 0; i < kN * kLen; ++i) a.buf[i] = static_cast<std::uint8_t>(i * 13 + 1);
  Wc wc;
  ASSERT_NO_FATAL_FAILURE(warm_up());
  ASSERT_NO_FATAL_FAILURE(post_held_writes(kN, kLen));
  auto wait_held = [&](std::size_t n) {
    const auto until = std::chrono::steady_clock::now() + 3s;
    while (a.hold->held().size() < n && std::chrono::steady_clock::now() < until) {
      a.dev->progress();
      std::this_thread::sleep_for(1ms);
    }
    return a.hold->held().size();
  };
  ASSERT_EQ(wait_held(8), 8u) << "a window of 8 frames";
  std::this_thread::sleep_for(20ms);
  ASSERT_EQ(a.hold->held().size(), 8u) << "and no more";
  a.hold->discard({0});
  std::vector<std::size_t> pass(7);
  std::iota(pass.begin(), pass.end(), std::size_t{0});  // (indexes after the discard: frames 1..7)
  a.hold->release(pass);
  // Frames 8..14 (7 of them), and RACK's resend of frame 0 once b's acks show it missing.
  EXPECT_EQ(wait_held(8), 8u) << "frames behind the hole went out while it was repaired";
  a.hold->set_holding(false);
  std::vector<std::size_t> all(a.hold->held().size());
  std::iota(all.begin(), all.end(), std::size_t{0});
  a.hold->release(all);
  for (std::uint32_t i = 0; i < kN; ++i) {
    ASSERT_TRUE(poll_one(*a.dev, a.scq, wc)) << i;
    EXPECT_EQ(wc.wr_id, i) << "completions in order";
    EXPECT_EQ(wc.status, WcStatus::success);
  }
  b.dev->qp_counters(b.qp);  // orders the read below after b's placements
  EXPECT_EQ(0, std::memcmp(a.buf.data(), b.buf.data(), kN * kLen));
  const QpCounters ca = a.dev->qp_counters(a.qp);
  EXPECT_EQ(b.dev->qp_counters(b.qp).rx_duplicates, 0u) << "nothing was sent twice that had arrived: " << ca.retransmits
                                                        << " retransmissions, " << ca.rack_retransmits << " by RACK";
}

TEST_F(HoldingPair, GracefulDisconnectSendsWaitingRequestsFirst) {
  with_reads(1, 0, 0, 1);
  Mr* rd = nullptr;
  ASSERT_EQ(b.dev->reg_mr(b.pd, b.buf.data(), b.buf.size(), Access::remote_read, rd), Status::ok);
  connect();
  b.hold->set_holding(true);
  const Sge s1 = a.sge(0, 100), s2 = a.sge(200, 100);
  const std::uint32_t key = b.dev->query_mr(rd).stag;
  ASSERT_EQ(a.dev->post_send(a.qp, SendWr{1, SendOpcode::rdma_read, {&s1, 1}, key, b.addr(0)}), Status::ok);
  ASSERT_EQ(a.dev->post_send(a.qp, SendWr{2, SendOpcode::rdma_read, {&s2, 1}, key, b.addr(0)}), Status::ok);
  ASSERT_EQ(a.dev->disconnect(a.qp, true), Status::ok);
  release_b();
  Wc wc;
  for (std::uint64_t id : {1u, 2u}) {
    ASSERT_TRUE(poll_one(*a.dev, a.scq, wc));
    EXPECT_EQ(wc.wr_id, id);
    EXPECT_EQ(wc.status, WcStatus::success) << "a read waiting for the ORD is delivered before the disconnect";
  }
  CmEvent e;
  ASSERT_TRUE(a.sink.wait_event(e));
  EXPECT_EQ(e.type, CmEventType::disconnected);
}

TEST_F(Pair, RdmaReadFetchesRemoteMemory) {
  with_reads(2, 2, 2, 2);
  Mr* rd = nullptr;
  ASSERT_EQ(b.dev->reg_mr(b.pd, b.buf.data(), b.buf.size(), Access::remote_read, rd), Status::ok);
  connect();
  for (std::size_t i = 0; i < 300000; ++i) b.buf[i] = static_cast<std::uint8_t>(i * 13 + 1);
  const Sge sink = a.sge(0, 300000);
  SendWr wr{77, SendOpcode::rdma_read, {&sink, 1}, b.dev->query_mr(rd).stag, b.addr()};
  ASSERT_EQ(a.dev->post_send(a.qp, wr), Status::ok);
  const Sge s2 = a.sge(400000, 10);
  SendWr wr2{78, SendOpcode::rdma_read, {&s2, 1}, b.dev->query_mr(rd).stag, b.addr(5)};
  ASSERT_EQ(a.dev->post_send(a.qp, wr2), Status::ok);
  Wc wc;
  ASSERT_TRUE(poll_one(*a.dev, a.scq, wc));
  EXPECT_EQ(wc.wr_id, 77u);
  EXPECT_EQ(wc.opcode, WcOpcode::rdma_read);
  EXPECT_EQ(wc.status, WcStatus::success);
  EXPECT_EQ(wc.byte_len, 300000u);
  EXPECT_EQ(0, std::memcmp(a.buf.data(), b.buf.data(), 300000));
  ASSERT_TRUE(poll_one(*a.dev, a.scq, wc));
  EXPECT_EQ(wc.wr_id, 78u);
  EXPECT_EQ(0, std::memcmp(a.buf.data() + 400000, b.buf.data() + 5, 10));
}

// A read into a scatter list (three SGEs, odd sizes, across a datagram boundary): the Read
// Request names an internal STag over the list; the response lands in the list in order, and
// nothing outside it changes. The peer cannot write through that STag.
TEST_F(Pair, RdmaReadIntoAScatterList) {
  with_reads(2, 2, 2, 2);
  Mr* rd = nullptr;
  ASSERT_EQ(b.dev->reg_mr(b.pd, b.buf.data(), b.buf.size(), Access::remote_read, rd), Status::ok);
  connect();
  for (std::size_t i = 0; i < 10000; ++i) b.buf[i] = static_cast<std::uint8_t>(i * 7 + 3);
  std::fill(a.buf.begin(), a.buf.begin() + 20000, 0xEE);
  const Sge sinks[3] = {a.sge(100, 1000), a.sge(5000, 3), a.sge(9000, 8997)};
  ASSERT_EQ(a.dev->post_send(a.qp, SendWr{5, SendOpcode::rdma_read, sinks, b.dev->query_mr(rd).stag, b.addr()}),
            Status::ok);
  Wc wc;
  ASSERT_TRUE(poll_one(*a.dev, a.scq, wc));
  EXPECT_EQ(wc.status, WcStatus::success);
  EXPECT_EQ(wc.byte_len, 10000u);
  EXPECT_EQ(0, std::memcmp(a.buf.data() + 100, b.buf.data(), 1000));
  EXPECT_EQ(0, std::memcmp(a.buf.data() + 5000, b.buf.data() + 1000, 3));
  EXPECT_EQ(0, std::memcmp(a.buf.data() + 9000, b.buf.data() + 1003, 8997));
  for (std::size_t i : {std::size_t{99}, std::size_t{1100}, std::size_t{4999}, std::size_t{5003}, std::size_t{8999},
                        std::size_t{17997}})
    EXPECT_EQ(a.buf[i], 0xEE) << i;
  // A sink segment without local write access is refused at post time.
  Mr* ro = nullptr;
  ASSERT_EQ(a.dev->reg_mr(a.pd, a.buf.data() + 600000, 4096, Access::none, ro), Status::ok);
  const Sge bad[2] = {a.sge(0, 10), Sge{a.dev->query_mr(ro).stag, a.addr(600000), 10}};
  EXPECT_EQ(a.dev->post_send(a.qp, SendWr{6, SendOpcode::rdma_read, bad, b.dev->query_mr(rd).stag, b.addr()}),
            Status::privileges_violation);
  // An RDMA Write at an internal STag value (what the Read Request named) is refused.
  const Sge src = b.sge(0, 4);
  ASSERT_EQ(b.dev->post_send(b.qp, SendWr{7, SendOpcode::rdma_write, {&src, 1}, 1, 0}), Status::ok);
  CmEvent e;
  ASSERT_TRUE(a.sink.wait_event(e));
  EXPECT_EQ(e.type, CmEventType::broken);
  EXPECT_NE(e.reason.find("invalid"), std::string::npos) << e.reason;
}

TEST_F(Pair, RdmaReadWithoutRemoteReadAccessTerminates) {
  with_reads(2, 2, 2, 2);
  connect();
  std::fill(a.buf.begin(), a.buf.begin() + 100, 0xEE);
  const Sge sink = a.sge(0, 100);
  // b.mr grants local and remote write, not remote read.
  ASSERT_EQ(a.dev->post_send(a.qp, SendWr{1, SendOpcode::rdma_read, {&sink, 1}, b.stag(), b.addr()}), Status::ok);
  CmEvent e;
  ASSERT_TRUE(b.sink.wait_event(e));
  EXPECT_EQ(e.type, CmEventType::broken);
  EXPECT_NE(e.reason.find("RDMA Read needs remote read"), std::string::npos) << e.reason;
  Wc wc;
  ASSERT_TRUE(poll_one(*a.dev, a.scq, wc));
  // The request the peer refused completes in error (the Terminate does not acknowledge it).
  EXPECT_EQ(wc.status, WcStatus::remote_access_error);
  EXPECT_TRUE(std::all_of(a.buf.begin(), a.buf.begin() + 100, [](std::uint8_t c) { return c == 0xEE; }));
}

TEST_F(Pair, MemoryWindowsGrantBoundedRemoteAccessUntilInvalidated) {
  Mr* region = nullptr;
  ASSERT_EQ(b.dev->reg_mr(b.pd, b.buf.data(), 65536, Access::local_write, region), Status::ok);
  Mr* mw = nullptr;
  ASSERT_EQ(b.dev->alloc_mw(b.pd, mw), Status::ok);
  const Sge rg = b.sge(100000, 64);
  ASSERT_EQ(b.dev->post_recv(b.qp, RecvWr{5, {&rg, 1}}), Status::ok);
  connect();
  // Bind 4 KiB at offset 8192 for remote write; the bind completes in send-queue order.
  ASSERT_EQ(b.dev->bind_mw(b.qp, mw, region, b.addr(8192), 4096, Access::remote_write, 42, true), Status::ok);
  Wc wc;
  ASSERT_TRUE(poll_one(*b.dev, b.scq, wc));
  EXPECT_EQ(wc.opcode, WcOpcode::bind);
  EXPECT_EQ(wc.wr_id, 42u);
  const std::uint32_t stag = b.dev->query_mr(mw).stag;
  EXPECT_EQ(b.dev->dereg_mr(region), Status::in_use) << "a bound window still grants access to it";
  std::fill(a.buf.begin(), a.buf.begin() + 4096, 0x3C);
  const Sge w = a.sge(0, 4096);
  ASSERT_EQ(a.dev->post_send(a.qp, SendWr{1, SendOpcode::rdma_write, {&w, 1}, stag, b.addr(8192)}), Status::ok);
  ASSERT_TRUE(poll_one(*a.dev, a.scq, wc));
  EXPECT_EQ(wc.status, WcStatus::success);
  EXPECT_TRUE(std::all_of(b.buf.begin() + 8192, b.buf.begin() + 8192 + 4096, [](std::uint8_t c) { return c == 0x3C; }));
  // The peer invalidates the window with its Send; the window's STag is then refused.
  const Sge s = a.sge(0, 8);
  SendWr inv{2, SendOpcode::send_invalidate, {&s, 1}};
  inv.invalidate_stag = stag;
  ASSERT_EQ(a.dev->post_send(a.qp, inv), Status::ok);
  ASSERT_TRUE(poll_one(*b.dev, b.rcq, wc));
  EXPECT_EQ(wc.wr_id, 5u);
  EXPECT_EQ(wc.invalidated_stag, stag);
  EXPECT_EQ(b.dev->dereg_mr(region), Status::ok) << "no window is bound any more";
  ASSERT_EQ(a.dev->post_send(a.qp, SendWr{3, SendOpcode::rdma_write, {&w, 1}, stag, b.addr(8192)}), Status::ok);
  CmEvent e;
  ASSERT_TRUE(b.sink.wait_event(e));
  EXPECT_EQ(e.type, CmEventType::broken) << "an invalidated window's STag terminates";
}

TEST_F(Pair, WindowBoundsAndRebindKeys) {
  Mr* region = nullptr;
  ASSERT_EQ(b.dev->reg_mr(b.pd, b.buf.data(), 65536, Access::local_write, region), Status::ok);
  Mr* mw = nullptr;
  ASSERT_EQ(b.dev->alloc_mw(b.pd, mw), Status::ok);
  connect();
  EXPECT_EQ(b.dev->bind_mw(b.qp, mw, region, b.addr(65000), 4096, Access::remote_write, 1, false), Status::length_error)
      << "beyond the region";
  Mr* ro = nullptr;
  ASSERT_EQ(b.dev->reg_mr(b.pd, b.buf.data(), 4096, Access::local_read, ro), Status::ok);
  EXPECT_EQ(b.dev->bind_mw(b.qp, mw, ro, b.addr(), 64, Access::remote_write, 1, false), Status::protection_violation)
      << "remote write through a window needs a locally writable region";
  ASSERT_EQ(b.dev->bind_mw(b.qp, mw, region, b.addr(), 64, Access::remote_write, 1, false), Status::ok);
  const std::uint32_t first = b.dev->query_mr(mw).stag;
  ASSERT_EQ(b.dev->bind_mw(b.qp, mw, region, b.addr(128), 64, Access::remote_write, 2, false), Status::ok);
  const std::uint32_t second = b.dev->query_mr(mw).stag;
  EXPECT_NE(first, second) << "each bind gives a new key";
  const Sge w = a.sge(0, 100);
  // 100 bytes into a 64-byte window: out of bounds.
  ASSERT_EQ(a.dev->post_send(a.qp, SendWr{1, SendOpcode::rdma_write, {&w, 1}, second, b.addr(128)}), Status::ok);
  CmEvent e;
  ASSERT_TRUE(b.sink.wait_event(e));
  EXPECT_EQ(e.type, CmEventType::broken);
}

// The progress thread stands back only for a consumer that says it will go on polling: an
// event-driven consumer (an EVD with a CNO: DAT passes 0) polls once and then blocks elsewhere, and
// a progress thread standing back for it meanwhile delayed each message by up to 2 ms.
TEST(ProgressEngine, StandsBackOnlyForAConsumerThatSaysItGoesOnPolling) {
  Side s;
  s.open(9790);
  EXPECT_FALSE(s.dev->consumer_polling()) << "no consumer has polled";
  for (int i = 0; i < 16; ++i) {
    s.dev->progress(0us);
    EXPECT_FALSE(s.dev->consumer_polling()) << "a poll that announces nothing, call " << i;
  }
  for (int i = 0; i < 16; ++i) s.dev->progress(std::chrono::hours(1));
  EXPECT_TRUE(s.dev->consumer_polling()) << "a consumer that says it polls for the next hour";
}

TEST_F(HoldingAPair, TheLastSegmentOfASignaledRequestAsksForAnAck) {
  // A receiver delays the ack of a lone frame (a reply may carry it); a sender that waits for a
  // completion asks for the ack at once (flag 0x08 on the request's last segment), an unsignaled
  // request does not, and neither do the segments before the last.
  connect();
  a.hold->set_holding(true);
  const Sge big = a.sge(0, 3000);  // 3 segments of at most 1472 - headers
  const Sge small = a.sge(0, 64);
  SendWr signaled{1, SendOpcode::rdma_write, {&big, 1}, b.stag(), b.addr(0)};
  SendWr quiet{2, SendOpcode::rdma_write, {&small, 1}, b.stag(), b.addr(0)};
  quiet.signaled = false;
  ASSERT_EQ(a.dev->post_send(a.qp, signaled), Status::ok);
  a.dev->progress();  // rings the doorbell of a post deferred for a polling consumer
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (a.hold->held().size() < 3 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(a.dev->post_send(a.qp, quiet), Status::ok);
  a.dev->progress();
  while (a.hold->held().size() < 4 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
  const auto held = a.hold->held();
  ASSERT_EQ(held.size(), 4u) << "3 segments and one";
  std::vector<int> flags;
  for (const auto& h : held) flags.push_back(h.bytes.at(1));
  EXPECT_EQ(flags, (std::vector<int>{0x01, 0x01, 0x09, 0x01}));
  a.hold->set_holding(false);
  std::vector<std::size_t> all(held.size());
  std::iota(all.begin(), all.end(), std::size_t{0});
  a.hold->release(all);
  Wc wc;
  ASSERT_TRUE(poll_one(*a.dev, a.scq, wc));
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_EQ(wc.status, WcStatus::success);
}

TEST_F(Pair, PostsOfAPollingConsumerWaitForItsNextPoll) {
  // A consumer that polls says so (progress()); what it posts meanwhile to a QP with requests
  // outstanding goes out at its next poll, together. The progress thread takes over 2 ms after the consumer's last
  // poll, so on a loaded machine a try may see the frames gone early: one try of ten must show the deferral.
  connect();
  const Sge s = a.sge(0, 64);
  bool deferred_seen = false;
  Wc wc;
  for (int attempt = 0; attempt < 10 && !deferred_seen; ++attempt) {
    a.dev->progress();
    const std::uint64_t before = a.dev->qp_counters(a.qp).tx_frames;
    for (std::uint64_t i = 0; i < 3; ++i)
      ASSERT_EQ(a.dev->post_send(a.qp, SendWr{i, SendOpcode::rdma_write, {&s, 1}, b.stag(), b.addr(0)}), Status::ok);
    const std::uint64_t at_post = a.dev->qp_counters(a.qp).tx_frames;
    a.dev->progress();
    const std::uint64_t after = a.dev->qp_counters(a.qp).tx_frames;
    EXPECT_GE(after, before + 3) << "the poll after the posts sent them";
    // (the first goes at once: nothing else was outstanding to batch it with)
    deferred_seen = at_post < before + 3;
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(poll_one(*a.dev, a.scq, wc));
  }
  EXPECT_TRUE(deferred_seen) << "posts made between two polls went out before the second";
}

TEST(Doorbell, WithoutBatchingEachPostTransmitsAtOnce) {
  Side a, b;
  // (Side::open with batch_posts off: reopen the device with the key set.)
  DeviceConfig c;
  c.name = "nobatch";
  c.netdev.kind = "loopback";
  c.netdev.port = 9700;
  c.batch_posts = false;
  std::string e;
  auto dev = Device::open(c, e);
  ASSERT_TRUE(dev) << e;
  b.open(9701);
  Pd* pd = dev->alloc_pd();
  Cq* cq = dev->create_cq(64, nullptr);
  Qp* qp = nullptr;
  Sink sink;
  QpInit init;
  init.pd = pd;
  init.send_cq = cq;
  init.recv_cq = cq;
  init.on_event = [&](Qp*, const CmEvent& ev) { sink.on_event(ev); };
  ASSERT_EQ(dev->create_qp(init, qp), Status::ok);
  std::vector<std::uint8_t> buf(4096, 7);
  Mr* mr = nullptr;
  ASSERT_EQ(dev->reg_mr(pd, buf.data(), buf.size(), Access::local_write, mr), Status::ok);
  ASSERT_EQ(b.dev->listen(5, [&](ConnRequest* r, const ConnRequestInfo& i) { b.sink.on_request(r, i); }), Status::ok);
  ASSERT_EQ(dev->connect(qp, b.dev->address(), 5, {}, 5000ms), Status::ok);
  ConnRequest* r = nullptr;
  ConnRequestInfo info;
  ASSERT_TRUE(b.sink.wait_request(r, info));
  ASSERT_EQ(b.dev->accept(r, b.qp, {}), Status::ok);
  CmEvent ev;
  ASSERT_TRUE(sink.wait_event(ev));
  ASSERT_EQ(ev.type, CmEventType::established);
  const Sge s{dev->query_mr(mr).stag, reinterpret_cast<std::uintptr_t>(buf.data()), 64};
  Wc wc;
  for (int attempt = 0; attempt < 3; ++attempt) {
    dev->progress();
    const std::uint64_t before = dev->qp_counters(qp).tx_frames;
    // (back to back: with batch_posts=1 the second and third would wait for the next poll)
    for (std::uint64_t i = 0; i < 3; ++i) {
      ASSERT_EQ(dev->post_send(qp, SendWr{i, SendOpcode::rdma_write, {&s, 1}, b.stag(), b.addr(0)}), Status::ok);
      EXPECT_EQ(dev->qp_counters(qp).tx_frames, before + i + 1) << "batch_posts=0: sent before post_send returned";
    }
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(poll_one(*dev, cq, wc));
  }
  ASSERT_EQ(dev->destroy_qp(qp), Status::ok);
  dev.reset();
}

TEST(TxBudgetOverUdp, ConnectionsTogetherKeepWithinHalfTheReceiveBuffer) {
  // Four connections over the udp netdev with a 256 KiB socket buffer, each with more Writes
  // posted than its own window: what they all have in flight together (held at a's netdev, so
  // nothing is acknowledged) stays within half the receive buffer; released, everything
  // arrives and every QP completes.
  constexpr std::size_t kQps = 4, kWrites = 16, kLen = 16384;
  DeviceConfig ca;
  ca.name = "budget_a";
  ca.netdev.port = 9720;
  ca.netdev.socket_buffer = 256 << 10;
  ca.initial_rto = ca.min_rto = 2s;  // nothing is sent twice while held
  std::string e;
  netdev::HoldingNetdev* hold = nullptr;
  auto a = softrnic::testing::open_holding(ca, hold, e);
  ASSERT_TRUE(a) << e;
  const std::size_t rx_buffer = hold->rx_buffer_bytes();
  DeviceConfig cb = ca;
  cb.name = "budget_b";
  cb.netdev.port = 9730;
  auto b = Device::open(cb, e);
  ASSERT_TRUE(b) << e;
  Pd* pa = a->alloc_pd();
  Pd* pb = b->alloc_pd();
  Cq* acq = a->create_cq(1024, nullptr);
  Cq* bcq = b->create_cq(64, nullptr);
  std::vector<std::uint8_t> src(kQps * kLen), dst(kQps * kWrites * kLen, 0);
  for (std::size_t q = 0; q < kQps; ++q) std::memset(src.data() + q * kLen, static_cast<int>(0x30 + q), kLen);
  Mr *ms = nullptr, *md = nullptr;
  ASSERT_EQ(a->reg_mr(pa, src.data(), src.size(), Access::local_read, ms), Status::ok);
  ASSERT_EQ(b->reg_mr(pb, dst.data(), dst.size(), Access::remote_write, md), Status::ok);
  std::vector<Qp*> qa, qb;
  ASSERT_NO_FATAL_FAILURE(connect_qps(*a, *b, pa, pb, acq, bcq, kQps, 64, 6, qa, qb));
  hold->set_holding(true);
  const std::uint32_t rkey = b->query_mr(md).stag;
  for (std::size_t q = 0; q < kQps; ++q)
    for (std::size_t w = 0; w < kWrites; ++w) {
      const Sge s{a->query_mr(ms).stag, reinterpret_cast<std::uintptr_t>(src.data()) + q * kLen, kLen};
      ASSERT_EQ(a->post_send(qa[q], SendWr{q * kWrites + w,
                                           SendOpcode::rdma_write,
                                           {&s, 1},
                                           rkey,
                                           reinterpret_cast<std::uintptr_t>(dst.data()) + (q * kWrites + w) * kLen}),
                Status::ok);
    }
  // The engine sends what it may (posts may wait for its round): until nothing more comes for
  // 50 ms (a slow machine, a sanitizer), at most 2 s.
  std::size_t seen = 0;
  for (auto quiet = std::chrono::steady_clock::now(), end = quiet + 2s;
       std::chrono::steady_clock::now() < std::min(end, quiet + 50ms);) {
    a->progress();
    std::this_thread::sleep_for(1ms);
    if (const std::size_t n = hold->held().size(); n != seen) {
      seen = n;
      quiet = std::chrono::steady_clock::now();
    }
  }
  std::size_t held = 0;
  for (const auto& f : hold->held()) held += f.bytes.size();
  const std::size_t per_qp_window = rx_buffer / 4;
  // Each QP alone may have a quarter of the buffer out: without the shared budget they would
  // hold the whole buffer together.
  ASSERT_GT(kWrites * kLen, per_qp_window) << "the test needs each QP's posts to exceed its own window";
  EXPECT_LE(held, rx_buffer / 2 + 2048) << "in flight together: " << held << " of a " << rx_buffer << "-byte buffer";
  EXPECT_GE(held, rx_buffer / 2 - 2 * kLen) << "the budget is used";
  hold->set_holding(false);
  std::vector<std::size_t> all(hold->held().size());
  std::iota(all.begin(), all.end(), std::size_t{0});
  hold->release(all);
  std::vector<std::size_t> done(kQps, 0);
  for (std::size_t n = 0; n < kQps * kWrites; ++n) {
    Wc wc;
    ASSERT_TRUE(poll_one(*a, acq, wc, 10000ms)) << n << " Writes completed";
    ASSERT_EQ(wc.status, WcStatus::success);
    ++done[wc.wr_id / kWrites];
  }
  for (std::size_t q = 0; q < kQps; ++q) {
    EXPECT_EQ(done[q], kWrites) << "QP " << q;
    for (std::size_t w = 0; w < kWrites; ++w)
      EXPECT_EQ(dst[(q * kWrites + w) * kLen + kLen - 1], 0x30 + q) << "QP " << q << " Write " << w;
  }
  for (std::size_t q = 0; q < kQps; ++q) {
    a->destroy_qp(qa[q]);
    b->destroy_qp(qb[q]);
  }
}

// Counts what the device hands its netdev: bursts and the frames in them.
class CountingNetdev final : public softrnic::testing::ForwardingNetdev {
 public:
  using ForwardingNetdev::ForwardingNetdev;
  std::size_t tx_burst(std::span<const netdev::TxFrame> frames) override {
    bursts++;
    frames_sent += frames.size();
    return inner_->tx_burst(frames);
  }
  std::atomic<std::uint64_t> bursts{0}, frames_sent{0};
};

TEST(TxBatching, RepostsOnManyIdleQpsLeaveTogether) {
  // A stream over 8 QPs with one Write outstanding on each, reposting on each completion as a
  // polling consumer does: each QP is idle when its Write is posted again, yet what is posted
  // after one poll that took several completions leaves in one burst (the doorbell), and what a
  // receive round sends for several QPs too. Without either, each Write is a burst of its own.
  constexpr std::size_t kQps = 8, kTotal = 4000;
  DeviceConfig ca;
  ca.name = "batch_a";
  ca.netdev.kind = "loopback";
  ca.netdev.port = 9740;
  std::string e;
  auto inner = netdev::make_netdev(ca.netdev, e);
  ASSERT_TRUE(inner) << e;
  auto counting = std::make_unique<CountingNetdev>(std::move(inner));
  CountingNetdev* cnt = counting.get();
  auto a = Device::open(ca, std::move(counting));
  ASSERT_TRUE(a);
  DeviceConfig cb = ca;
  cb.name = "batch_b";
  cb.netdev.port = 9741;
  auto b = Device::open(cb, e);
  ASSERT_TRUE(b) << e;
  Pd* pa = a->alloc_pd();
  Pd* pb = b->alloc_pd();
  Cq* acq = a->create_cq(256, nullptr);
  Cq* bcq = b->create_cq(64, nullptr);
  std::vector<std::uint8_t> src(64, 1), dst(64 * kQps, 0);
  Mr *ms = nullptr, *md = nullptr;
  ASSERT_EQ(a->reg_mr(pa, src.data(), src.size(), Access::local_read, ms), Status::ok);
  ASSERT_EQ(b->reg_mr(pb, dst.data(), dst.size(), Access::remote_write, md), Status::ok);
  std::vector<Qp*> qa, qb;
  ASSERT_NO_FATAL_FAILURE(connect_qps(*a, *b, pa, pb, acq, bcq, kQps, 256, 7, qa, qb));
  std::this_thread::sleep_for(20ms);
  const Sge s{a->query_mr(ms).stag, reinterpret_cast<std::uintptr_t>(src.data()), 64};
  const std::uint32_t rkey = b->query_mr(md).stag;
  const auto post = [&](std::size_t q) {
    return a->post_send(
        qa[q], SendWr{q, SendOpcode::rdma_write, {&s, 1}, rkey, reinterpret_cast<std::uintptr_t>(dst.data()) + q * 64});
  };
  const std::uint64_t bursts0 = cnt->bursts, frames0 = cnt->frames_sent;
  for (std::size_t q = 0; q < kQps; ++q) ASSERT_EQ(post(q), Status::ok);
  std::size_t done = 0, posted = kQps;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (done < posted) {
    Wc wc[16];
    const std::size_t n = a->poll_cq(acq, wc);
    if (n == 0) {
      a->progress();
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << done << " of " << posted << " completed";
      continue;
    }
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(wc[i].status, WcStatus::success);
      ++done;
      if (posted < kTotal) {
        ASSERT_EQ(post(wc[i].wr_id), Status::ok);
        ++posted;
      }
    }
  }
  const double bursts = static_cast<double>(cnt->bursts - bursts0);
  const double frames = static_cast<double>(cnt->frames_sent - frames0);
  EXPECT_GE(frames, static_cast<double>(kTotal));
  EXPECT_GE(frames / bursts, 1.5) << frames << " frames in " << bursts << " bursts";
  for (std::size_t q = 0; q < kQps; ++q) {
    a->destroy_qp(qa[q]);
    b->destroy_qp(qb[q]);
  }
}
