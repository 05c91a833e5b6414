// Two soft RNICs in one process speaking iWARP over MPA/TCP (kernel TCP on 127.0.0.1): the MPA
// exchange in its variants (revision 1 and 2, CRC on and off, markers, peer-to-peer RTR), private
// data both ways, reject with private data, Send/Write/Read with messages larger than a socket
// buffer, ordering, graceful and abortive close, and a hostile byte stream.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "softrnic/rnic.hpp"

using namespace softrnic;
using namespace std::chrono_literals;
using softrnic::testing::poll_one;
using softrnic::testing::Sink;

namespace {

constexpr std::size_t kBuf = 4 << 20;

struct Side {
  Sink sink;
  std::unique_ptr<Device> dev;
  Pd* pd = nullptr;
  Cq* scq = nullptr;
  Cq* rcq = nullptr;
  Qp* qp = nullptr;
  std::vector<std::uint8_t> buf;
  Mr* mr = nullptr;

  ~Side() { dev.reset(); }

  // (wrap: a decorator around the device's kernel TCP netdev)
  std::function<std::unique_ptr<netdev::StreamNetdev>(std::unique_ptr<netdev::StreamNetdev>)> wrap;

  void open(const MpaConfig& mpa, std::uint32_t ord = 4, std::uint32_t ird = 4) {
    DeviceConfig c;
    c.wire = Wire::tcp;
    c.mpa = mpa;
    c.netdev.ip = "127.0.0.1";
    std::string e;
    if (wrap) {
      auto nd = netdev::make_tcp_netdev(c.netdev, e);
      ASSERT_TRUE(nd) << e;
      dev = Device::open(c, wrap(std::move(nd)));
    } else {
      dev = Device::open(c, e);
    }
    ASSERT_TRUE(dev) << e;
    ASSERT_EQ(dev->wire(), Wire::tcp);
    pd = dev->alloc_pd();
    scq = dev->create_cq(4096, nullptr);
    rcq = dev->create_cq(4096, nullptr);
    QpInit init;
    init.pd = pd;
    init.send_cq = scq;
    init.recv_cq = rcq;
    init.max_sge = 4;
    init.ord = ord;
    init.ird = ird;
    init.on_event = [this](Qp*, const CmEvent& ev) { sink.on_event(ev); };
    ASSERT_EQ(dev->create_qp(init, qp), Status::ok);
    buf.assign(kBuf, 0);
    ASSERT_EQ(
        dev->reg_mr(pd, buf.data(), buf.size(), Access::local_write | Access::remote_write | Access::remote_read, mr),
        Status::ok);
  }
  Sge sge(std::size_t off, std::uint32_t len) const {
    return Sge{stag(), reinterpret_cast<std::uintptr_t>(buf.data()) + off, len};
  }
  std::uint32_t stag() const { return dev->query_mr(mr).stag; }
  std::uint64_t addr(std::size_t off = 0) const { return reinterpret_cast<std::uintptr_t>(buf.data()) + off; }
  void post_recv(std::uint64_t id, std::size_t off, std::uint32_t len) {
    const Sge s = sge(off, len);
    ASSERT_EQ(dev->post_recv(qp, RecvWr{id, {&s, 1}}), Status::ok);
  }
  void send(std::uint64_t id, std::size_t off, std::uint32_t len, SendOpcode op = SendOpcode::send,
            std::uint32_t rkey = 0, std::uint64_t raddr = 0) {
    const Sge s = sge(off, len);
    SendWr wr;
    wr.wr_id = id;
    wr.opcode = op;
    wr.sgl = {&s, 1};
    wr.rkey = rkey;
    wr.remote_addr = raddr;
    ASSERT_EQ(dev->post_send(qp, wr), Status::ok);
  }
  void fill(std::size_t off, std::size_t len, std::uint32_t seed) {
    std::mt19937 g(seed);
    for (std::size_t i = 0; i < len; ++i) buf[off + i] = static_cast<std::uint8_t>(g());
  }
};

// A TCP port (the conn_qual) b can listen on: tests run in parallel processes.
std::uint16_t listen_somewhere(Side& b, std::function<void(ConnRequest*, const ConnRequestInfo&)> cb) {
  std::mt19937 g(static_cast<unsigned>(::getpid()) * 7919u + static_cast<unsigned>(std::random_device{}()));
  for (int i = 0; i < 200; ++i) {
    const auto port = static_cast<std::uint16_t>(20000 + g() % 20000);
    if (b.dev->listen(port, cb) == Status::ok) return port;
  }
  return 0;
}

struct MpaPair : ::testing::TestWithParam<MpaConfig> {
  Side a, b;  // a connects to b
  std::uint16_t qual = 0;

  void SetUp() override {
    a.open(GetParam());
    b.open(GetParam());
  }

  void listen() {
    qual = listen_somewhere(b, [this](ConnRequest* r, const ConnRequestInfo& i) { b.sink.on_request(r, i); });
    ASSERT_NE(qual, 0);
  }

  void connect(const std::vector<std::uint8_t>& req_pd = {}, const std::vector<std::uint8_t>& rep_pd = {}) {
    listen();
    ASSERT_EQ(a.dev->connect(a.qp, b.dev->address(), qual, req_pd, 5000ms), Status::ok);
    ConnRequest* r = nullptr;
    ConnRequestInfo info;
    ASSERT_TRUE(b.sink.wait_request(r, info));
    EXPECT_EQ(info.conn_qual, qual);
    EXPECT_EQ(info.private_data, req_pd);
    EXPECT_EQ(info.remote.ip, a.dev->address().ip);
    ASSERT_EQ(b.dev->accept(r, b.qp, rep_pd), Status::ok);
    CmEvent ea, eb;
    ASSERT_TRUE(a.sink.wait_event(ea));
    EXPECT_EQ(ea.type, CmEventType::established) << ea.reason;
    EXPECT_EQ(ea.private_data, rep_pd);
    ASSERT_TRUE(b.sink.wait_event(eb));
    EXPECT_EQ(eb.type, CmEventType::established) << eb.reason;
  }
};

TEST_P(MpaPair, PrivateDataBothWaysAndSendBothWays) {
  std::vector<std::uint8_t> req(200), rep(256);
  std::iota(req.begin(), req.end(), std::uint8_t{1});
  std::iota(rep.begin(), rep.end(), std::uint8_t{7});
  a.post_recv(1, 0, 4096);
  b.post_recv(2, 0, 4096);
  connect(req, rep);
  a.fill(8192, 1000, 1);
  b.fill(8192, 3000, 2);
  // The responder sends first: its FPDU must wait for the initiator's first (RTR or data).
  b.send(20, 8192, 3000);
  a.send(10, 8192, 1000);
  Wc wc;
  ASSERT_TRUE(poll_one(*b.dev, b.rcq, wc));
  EXPECT_EQ(wc.status, WcStatus::success);
  EXPECT_EQ(wc.byte_len, 1000u);
  EXPECT_EQ(std::memcmp(b.buf.data(), a.buf.data() + 8192, 1000), 0);
  ASSERT_TRUE(poll_one(*a.dev, a.rcq, wc));
  EXPECT_EQ(wc.byte_len, 3000u);
  EXPECT_EQ(std::memcmp(a.buf.data(), b.buf.data() + 8192, 3000), 0);
  ASSERT_TRUE(poll_one(*a.dev, a.scq, wc));
  EXPECT_EQ(wc.wr_id, 10u);
  ASSERT_TRUE(poll_one(*b.dev, b.scq, wc));
  EXPECT_EQ(wc.wr_id, 20u);
}

// Messages larger than a socket buffer, many of them: short writes, FPDUs across reads, and the
// Write before the Send placed by the time the Send completes.
TEST_P(MpaPair, LargeWritesAndSendsInOrder) {
  constexpr int kMsgs = 8;
  constexpr std::uint32_t kLen = 1 << 20;
  for (int i = 0; i < kMsgs; ++i) b.post_recv(100 + static_cast<std::uint64_t>(i), 0, 64);
  connect();
  for (int i = 0; i < kMsgs; ++i) {
    const std::size_t off = static_cast<std::size_t>(i % 3) * kLen;
    a.fill(off, kLen, static_cast<std::uint32_t>(i) + 10);
    a.send(static_cast<std::uint64_t>(2 * i), off, kLen, SendOpcode::rdma_write, b.stag(), b.addr(kLen * 3));
    a.buf[kBuf - 64] = static_cast<std::uint8_t>(i);
    a.send(static_cast<std::uint64_t>(2 * i + 1), kBuf - 64, 1);
    Wc wc;
    ASSERT_TRUE(poll_one(*b.dev, b.rcq, wc, 10000ms)) << i;
    ASSERT_EQ(wc.status, WcStatus::success);
    EXPECT_EQ(b.buf[0], static_cast<std::uint8_t>(i));
    // The Write ahead of the Send is all there.
    ASSERT_EQ(std::memcmp(b.buf.data() + kLen * 3, a.buf.data() + off, kLen), 0) << i;
    for (int k = 0; k < 2; ++k) {
      ASSERT_TRUE(poll_one(*a.dev, a.scq, wc, 10000ms));
      EXPECT_EQ(wc.wr_id, static_cast<std::uint64_t>(2 * i + k));
      EXPECT_EQ(wc.status, WcStatus::success);
    }
  }
  const QpCounters ca = a.dev->qp_counters(a.qp);
  EXPECT_GT(ca.tx_frames, static_cast<std::uint64_t>(kMsgs) * kLen / 65536);  // FPDUs of at most an MSS
}

// Counts the write system calls that took bytes in the thread that made it (the test's: its
// posts, and the rounds its polls drive), apart from those of the device's progress thread.
class CountingWrites final : public softrnic::testing::ForwardingStreamNetdev {
 public:
  using ForwardingStreamNetdev::ForwardingStreamNetdev;
  std::ptrdiff_t write(netdev::StreamId id, std::span<const std::span<const std::uint8_t>> pieces) override {
    const std::ptrdiff_t n = inner_->write(id, pieces);
    if (n > 0 && std::this_thread::get_id() == owner_) own_.fetch_add(1, std::memory_order_relaxed);
    return n;
  }
  std::uint64_t own_writes() const { return own_.load(std::memory_order_relaxed); }

 private:
  const std::thread::id owner_ = std::this_thread::get_id();
  std::atomic<std::uint64_t> own_{0};
};

TEST_P(MpaPair, RepostsOneByOneWithCompletionsWaitingLeaveInOneWrite) {
  // A windowed stream whose consumer takes one completion and reposts one while more wait in
  // its CQ (softrnic_bench's write_bw): a request completes as the socket takes it, inside its
  // post, so each post made a write system call of its own. Its posts now wait for the
  // doorbell the consumer rings when its CQ runs dry, and leave in one gathered write.
  constexpr std::size_t kWindow = 16, kTotal = 2000, kSlots = 64;
  constexpr std::uint32_t kLen = 4096;
  CountingWrites* counted = nullptr;
  a.wrap = [&counted](std::unique_ptr<netdev::StreamNetdev> nd) {
    auto c = std::make_unique<CountingWrites>(std::move(nd));
    counted = c.get();
    return c;
  };
  ASSERT_NO_FATAL_FAILURE(a.open(GetParam()));  // (again, around the counter)
  b.post_recv(1, kBuf - 64, 64);
  connect();
  a.fill(0, kSlots * kLen, 7);
  const std::uint64_t writes0 = counted->own_writes(), all0 = a.dev->counters().tx_frames;
  const auto post = [&](std::size_t i) {
    const std::size_t off = (i % kSlots) * kLen;
    a.send(i, off, kLen, SendOpcode::rdma_write, b.stag(), b.addr(off));
  };
  std::size_t posted = 0, done = 0;
  for (; posted < kWindow; ++posted) ASSERT_NO_FATAL_FAILURE(post(posted));
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (done < kTotal) {
    Wc wc;
    if (a.dev->poll_cq(a.scq, {&wc, 1}) == 0) {
      a.dev->progress();
      b.dev->progress();  // (b reads as fast as a writes: a full socket would complete a's Writes one by one)
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << done << " of " << kTotal << " completed";
      continue;
    }
    ASSERT_EQ(wc.status, WcStatus::success);
    ASSERT_EQ(wc.wr_id, done++);
    if (posted < kTotal) {
      ASSERT_NO_FATAL_FAILURE(post(posted++));
    }
  }
  // (Counted in this thread only: a progress thread's round that comes between two reposts rings
  // the doorbell early, and a smaller batch leaves; how often depends on the host, and a
  // ThreadSanitizer build's posts are slow enough for it to come several times a batch. A post
  // that wrote at once would write here.)
  const std::uint64_t writes = counted->own_writes() - writes0, all = a.dev->counters().tx_frames - all0;
  EXPECT_LE(writes * 4, kTotal) << writes << " write system calls for " << kTotal << " RDMA Writes (" << all
                                << " with the progress thread's)";
  // Everything arrived: the Send behind the Writes is placed after them.
  a.buf[kBuf - 64] = 0x5A;
  a.send(kTotal, kBuf - 64, 1);
  Wc wc;
  ASSERT_TRUE(poll_one(*b.dev, b.rcq, wc, 10000ms));
  ASSERT_EQ(wc.status, WcStatus::success);
  EXPECT_EQ(std::memcmp(b.buf.data(), a.buf.data(), kSlots * kLen), 0);
}

TEST_P(MpaPair, RdmaReadBothWays) {
  connect();
  b.fill(1000, 300000, 5);
  a.fill(2000, 777, 6);
  a.send(1, 500000, 300000, SendOpcode::rdma_read, b.stag(), b.addr(1000));
  b.send(2, 400000, 777, SendOpcode::rdma_read, a.stag(), a.addr(2000));
  Wc wc;
  ASSERT_TRUE(poll_one(*a.dev, a.scq, wc, 10000ms));
  EXPECT_EQ(wc.status, WcStatus::success);
  EXPECT_EQ(wc.opcode, WcOpcode::rdma_read);
  EXPECT_EQ(std::memcmp(a.buf.data() + 500000, b.buf.data() + 1000, 300000), 0);
  ASSERT_TRUE(poll_one(*b.dev, b.scq, wc, 10000ms));
  EXPECT_EQ(wc.status, WcStatus::success);
  EXPECT_EQ(std::memcmp(b.buf.data() + 400000, a.buf.data() + 2000, 777), 0);
}

TEST_P(MpaPair, RdmaReadIntoAScatterList) {
  connect();
  b.fill(0, 200000, 9);
  std::fill(a.buf.begin(), a.buf.begin() + 300000, 0xEE);
  const Sge sinks[3] = {a.sge(10, 70000), a.sge(100000, 1), a.sge(150000, 129999)};
  SendWr wr;
  wr.wr_id = 42;
  wr.opcode = SendOpcode::rdma_read;
  wr.sgl = sinks;
  wr.rkey = b.stag();
  wr.remote_addr = b.addr();
  ASSERT_EQ(a.dev->post_send(a.qp, wr), Status::ok);
  Wc wc;
  ASSERT_TRUE(poll_one(*a.dev, a.scq, wc, 10000ms));
  EXPECT_EQ(wc.wr_id, 42u);
  EXPECT_EQ(wc.status, WcStatus::success);
  EXPECT_EQ(std::memcmp(a.buf.data() + 10, b.buf.data(), 70000), 0);
  EXPECT_EQ(a.buf[100000], b.buf[70000]);
  EXPECT_EQ(std::memcmp(a.buf.data() + 150000, b.buf.data() + 70001, 129999), 0);
  EXPECT_EQ(a.buf[9], 0xEE);
  EXPECT_EQ(a.buf[70010], 0xEE);
  EXPECT_EQ(a.buf[100001], 0xEE);
  EXPECT_EQ(a.buf[279999], 0xEE);
}

TEST_P(MpaPair, RejectCarriesPrivateData) {
  listen();
  ASSERT_EQ(a.dev->connect(a.qp, b.dev->address(), qual, std::vector<std::uint8_t>{1, 2, 3}, 5000ms), Status::ok);
  ConnRequest* r = nullptr;
  ConnRequestInfo info;
  ASSERT_TRUE(b.sink.wait_request(r, info));
  const std::vector<std::uint8_t> why{'n', 'o', 'p', 'e'};
  ASSERT_EQ(b.dev->reject(r, why), Status::ok);
  CmEvent e;
  ASSERT_TRUE(a.sink.wait_event(e));
  EXPECT_EQ(e.type, CmEventType::rejected);
  EXPECT_EQ(e.private_data, why);
  EXPECT_EQ(a.dev->accept(r, b.qp, {}), Status::invalid_state);
}

TEST_P(MpaPair, GracefulDisconnectCompletesWhatWasSent) {
  b.post_recv(1, 0, 100000);
  b.post_recv(2, 100000, 100);  // stays posted: flushed at the close
  connect();
  a.fill(0, 100000, 3);
  a.send(7, 0, 100000);
  ASSERT_EQ(a.dev->disconnect(a.qp, true), Status::ok);
  CmEvent e;
  ASSERT_TRUE(a.sink.wait_event(e));
  EXPECT_EQ(e.type, CmEventType::disconnected) << e.reason;
  ASSERT_TRUE(b.sink.wait_event(e));
  EXPECT_EQ(e.type, CmEventType::disconnected) << e.reason;
  Wc wc;
  ASSERT_TRUE(poll_one(*b.dev, b.rcq, wc));
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_EQ(wc.status, WcStatus::success);
  EXPECT_EQ(std::memcmp(b.buf.data(), a.buf.data(), 100000), 0);
  ASSERT_TRUE(poll_one(*b.dev, b.rcq, wc));
  EXPECT_EQ(wc.wr_id, 2u);
  EXPECT_EQ(wc.status, WcStatus::flushed);
  ASSERT_TRUE(poll_one(*a.dev, a.scq, wc));
  EXPECT_EQ(wc.status, WcStatus::success);
  EXPECT_EQ(a.dev->qp_state(a.qp), QpState::idle);
}

TEST_P(MpaPair, AbortiveDisconnectReachesThePeer) {
  connect();
  ASSERT_EQ(b.dev->disconnect(b.qp, false), Status::ok);
  CmEvent e;
  ASSERT_TRUE(b.sink.wait_event(e));
  EXPECT_EQ(e.type, CmEventType::disconnected);
  ASSERT_TRUE(a.sink.wait_event(e));
  EXPECT_EQ(e.type, CmEventType::disconnected);
  EXPECT_NE(a.dev->qp_state(a.qp), QpState::rts);
}

// A Send with no receive posted: the receiver terminates (RFC 5041: no buffer for the MSN) and
// both sides hear BROKEN. (Over TCP the Send completed when the socket took it, as siw completes
// it, so the Terminate that comes later cannot fail it: it completes once, success or flushed.)
TEST_P(MpaPair, SendWithoutReceiveTerminates) {
  connect();
  a.send(9, 0, 10);
  CmEvent e;
  ASSERT_TRUE(b.sink.wait_event(e));
  EXPECT_EQ(e.type, CmEventType::broken);
  EXPECT_NE(e.reason.find("Terminate"), std::string::npos) << e.reason;
  ASSERT_TRUE(a.sink.wait_event(e));
  EXPECT_EQ(e.type, CmEventType::broken) << e.reason;
  Wc wc;
  ASSERT_TRUE(poll_one(*a.dev, a.scq, wc));
  EXPECT_EQ(wc.wr_id, 9u);
  EXPECT_FALSE(poll_one(*a.dev, a.scq, wc, 100ms)) << "completed twice";
  EXPECT_NE(a.dev->qp_state(a.qp), QpState::rts);
}

INSTANTIATE_TEST_SUITE_P(Variants, MpaPair,
                         ::testing::Values(MpaConfig{2, true, false, true}, MpaConfig{2, false, false, true},
                                           MpaConfig{2, true, false, false}, MpaConfig{1, true, false, false},
                                           MpaConfig{1, false, false, false}, MpaConfig{2, true, true, true}),
                         [](const ::testing::TestParamInfo<MpaConfig>& i) {
                           const MpaConfig& m = i.param;
                           return "rev" + std::to_string(m.revision) + (m.crc ? "_crc" : "_nocrc") +
                                  (m.markers ? "_markers" : "") + (m.peer_to_peer ? "_p2p" : "");
                         });

// One side asks for CRC, the other does not: CRC is on (either side asks), data flows.
TEST(MpaMixed, CrcOnWhenEitherAsksAndMarkersOneWay) {
  Side a, b;
  a.open(MpaConfig{2, false, true, true});
  b.open(MpaConfig{2, true, false, false});
  const std::uint16_t qual =
      listen_somewhere(b, [&](ConnRequest* r, const ConnRequestInfo& i) { b.sink.on_request(r, i); });
  ASSERT_NE(qual, 0);
  a.post_recv(1, 0, 70000);
  b.post_recv(2, 0, 70000);
  ASSERT_EQ(a.dev->connect(a.qp, b.dev->address(), qual, {}, 5000ms), Status::ok);
  ConnRequest* r = nullptr;
  ConnRequestInfo info;
  ASSERT_TRUE(b.sink.wait_request(r, info));
  ASSERT_EQ(b.dev->accept(r, b.qp, {}), Status::ok);
  CmEvent e;
  ASSERT_TRUE(a.sink.wait_event(e));
  ASSERT_EQ(e.type, CmEventType::established);
  a.fill(100000, 70000, 1);
  b.fill(100000, 70000, 2);
  a.send(1, 100000, 70000);
  b.send(2, 100000, 70000);
  Wc wc;
  ASSERT_TRUE(poll_one(*b.dev, b.rcq, wc));
  EXPECT_EQ(std::memcmp(b.buf.data(), a.buf.data() + 100000, 70000), 0);
  ASSERT_TRUE(poll_one(*a.dev, a.rcq, wc));
  EXPECT_EQ(std::memcmp(a.buf.data(), b.buf.data() + 100000, 70000), 0);
}

TEST(MpaConnect, NothingListeningIsNoListener) {
  Side a;
  a.open(MpaConfig{});
  // A port just released: nothing listens there.
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  socklen_t sl = sizeof sa;
  ASSERT_EQ(::getsockname(s, reinterpret_cast<sockaddr*>(&sa), &sl), 0);
  const std::uint16_t port = ntohs(sa.sin_port);
  ::close(s);
  ASSERT_EQ(a.dev->connect(a.qp, a.dev->address(), port, {}, 5000ms), Status::ok);
  CmEvent e;
  ASSERT_TRUE(a.sink.wait_event(e));
  EXPECT_EQ(e.type, CmEventType::no_listener) << e.reason;
}

// A raw TCP client that speaks no MPA, or a broken one: the listener drops it and stays usable.
TEST(MpaHostile, GarbageAndBadFramesAreDropped) {
  Side b;
  b.open(MpaConfig{});
  const std::uint16_t qual =
      listen_somewhere(b, [&](ConnRequest* r, const ConnRequestInfo& i) { b.sink.on_request(r, i); });
  ASSERT_NE(qual, 0);
  auto raw = [&](const std::string& bytes) {
    const int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons(qual);
    EXPECT_EQ(::connect(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    EXPECT_EQ(::send(s, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
    // The listener closes it: read until EOF or reset (bounded by the 5 s request timeout).
    timeval tv{7, 0};
    ::setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char c;
    const ssize_t n = ::recv(s, &c, 1, 0);
    ::close(s);
    return n;
  };
  EXPECT_LE(raw(std::string(40, 'x')), 0);                                                  // not MPA
  EXPECT_LE(raw(std::string("MPA ID Req Frame") + std::string("\x00\x09\x00\x00", 4)), 0);  // revision 9
  EXPECT_LE(raw(std::string("MPA ID Req Frame") + std::string("\x00\x02\x02\x01", 4)), 0);  // pd_len 513
  EXPECT_LE(raw(std::string("MPA ID Rep Frame") + std::string("\x00\x02\x00\x00", 4)), 0);  // a reply
  ConnRequest* r = nullptr;
  ConnRequestInfo info;
  EXPECT_FALSE(b.sink.wait_request(r, info, 100ms)) << "no request reached the consumer";
  // Still listening: a real initiator gets through.
  Side a;
  a.open(MpaConfig{});
  ASSERT_EQ(a.dev->connect(a.qp, b.dev->address(), qual, {}, 5000ms), Status::ok);
  ASSERT_TRUE(b.sink.wait_request(r, info));
}

// A raw TCP connection to `port` on 127.0.0.1 (-1 when it cannot connect).
int raw_connect(std::uint16_t port) {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons(port);
  if (::connect(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    ::close(s);
    return -1;
  }
  return s;
}

// Issue 29: each request the consumer had not answered could hold 1 MiB of what its initiator
// sent behind it (300 of them took a server from 31 MB to 378 MB), and was dropped beyond that.
// Now nothing past the request is read until the consumer accepts: the bytes wait in the socket,
// TCP's window pushes back, and the request is still there to answer.
TEST(MpaHostile, BytesBehindAnUndecidedRequestStayInTheSocket) {
  Side b;
  b.open(MpaConfig{});
  const std::uint16_t qual =
      listen_somewhere(b, [&](ConnRequest* r, const ConnRequestInfo& i) { b.sink.on_request(r, i); });
  ASSERT_NE(qual, 0);
  constexpr int kConns = 8;
  const std::string req = std::string("MPA ID Req Frame") + std::string("\x00\x01\x00\x00", 4);  // revision 1
  const std::vector<char> junk(256 << 10, 'j');
  std::vector<int> socks;
  std::size_t behind = 0;
  for (int i = 0; i < kConns; ++i) {
    const int s = raw_connect(qual);
    ASSERT_GE(s, 0);
    socks.push_back(s);
    ASSERT_EQ(::send(s, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
    ::fcntl(s, F_SETFL, ::fcntl(s, F_GETFL) | O_NONBLOCK);
    // 1.5 MiB behind it, or what the kernel takes of it within 200 ms.
    for (std::size_t sent = 0; sent < (3u << 19);) {
      const ssize_t n = ::send(s, junk.data(), std::min(junk.size(), (3u << 19) - sent), MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<std::size_t>(n);
        behind += static_cast<std::size_t>(n);
        continue;
      }
      ASSERT_TRUE(n < 0 && errno == EAGAIN) << std::strerror(errno);
      pollfd p{s, POLLOUT, 0};
      if (::poll(&p, 1, 200) <= 0) break;
    }
  }
  EXPECT_GT(behind, static_cast<std::size_t>(kConns) << 20) << "more than 1 MiB behind each request, most of them";
  std::vector<ConnRequest*> reqs;
  for (int i = 0; i < kConns; ++i) {
    ConnRequest* r = nullptr;
    ConnRequestInfo info;
    ASSERT_TRUE(b.sink.wait_request(r, info)) << i;
    reqs.push_back(r);
  }
  std::this_thread::sleep_for(300ms);  // (the old reader dropped each request once 1 MiB had come)
  for (ConnRequest* r : reqs) ASSERT_EQ(b.dev->reject(r, std::vector<std::uint8_t>{7}), Status::ok);
  for (const int s : socks) {
    // Each initiator gets the reject: an MPA reply with the reject bit, not a reset.
    ::fcntl(s, F_SETFL, ::fcntl(s, F_GETFL) & ~O_NONBLOCK);
    timeval tv{5, 0};
    ::setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char rep[21] = {};
    std::size_t got = 0;
    while (got < sizeof rep) {
      const ssize_t n = ::recv(s, rep + got, sizeof rep - got, 0);
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    ASSERT_EQ(got, sizeof rep) << std::strerror(errno);
    EXPECT_EQ(std::string(rep, 16), "MPA ID Rep Frame");
    EXPECT_NE(rep[16] & 0x20, 0) << "the reject bit";
    EXPECT_EQ(rep[20], 7) << "the consumer's private data";
    ::close(s);
  }
}

// Issue 29: half-open connections (no request yet) were held 5 s each with no cap, so 400 idle
// ones on a server limited to 256 descriptors kept a real initiator waiting 3.4 s. Beyond 64,
// those idle for 250 ms with nothing in their socket go now, oldest first.
TEST(MpaHostile, IdleConnectionsDoNotKeepARealInitiatorWaiting) {
#if defined(__SANITIZE_ADDRESS__)
  // UBSan's vptr check reads memory through a pipe it opens; with the descriptors this test
  // exhausts it cannot, and reports a false "invalid vptr" (then hangs in its abort).
  GTEST_SKIP() << "descriptor exhaustion under ASan/UBSan (the main build runs it)";
#endif
  Side a, b;
  a.open(MpaConfig{});
  b.open(MpaConfig{});
  const std::uint16_t qual =
      listen_somewhere(b, [&](ConnRequest* r, const ConnRequestInfo& i) { b.sink.on_request(r, i); });
  ASSERT_NE(qual, 0);
  // This process may hold 150 more descriptors; 400 idle connections come from a child.
  int used = 0;
  for (int fd = 0; fd < 4096; ++fd) used += ::fcntl(fd, F_GETFD) != -1;
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit low = old;
  low.rlim_cur = static_cast<rlim_t>(used + 150);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::setrlimit(RLIMIT_NOFILE, &old);
    int opened = 0;
    for (int i = 0; i < 400; ++i) opened += raw_connect(qual) >= 0;
    const char c = static_cast<char>(opened >= 390);
    (void)!::write(ready[1], &c, 1);
    ::pause();
    ::_exit(0);
  }
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  std::this_thread::sleep_for(200ms);  // the listener has taken them
  // (The initiator shares this process's descriptors with the listener: its socket may have to
  // wait for the listener to shed idle connections too.)
  const auto until = std::chrono::steady_clock::now() + 4000ms;
  Status st = Status::in_use;
  while ((st = a.dev->connect(a.qp, b.dev->address(), qual, {}, 5000ms)) != Status::ok &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(20ms);
  ConnRequest* r = nullptr;
  ConnRequestInfo info;
  const bool got =
      st == Status::ok &&
      b.sink.wait_request(
          r, info, std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()));
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::setrlimit(RLIMIT_NOFILE, &old);
  ::close(ready[0]);
  ::close(ready[1]);
  EXPECT_TRUE(ok) << "the child opened its 400 connections";
  ASSERT_TRUE(got) << "the real request reached the consumer within 4 s, before the idle ones' 5 s timeout ("
                   << to_string(st) << ")";
  EXPECT_GE(b.dev->counters().rx_dropped_requests, 150u) << "idle ones beyond 64 went";
}

}  // namespace
