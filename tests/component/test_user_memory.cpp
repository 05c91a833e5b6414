// Issue 13: registered memory that is not there. A registration proves the range is mapped with
// the access it grants; memory the consumer unmaps or protects after registering it breaks the
// connection that touches it (a local catastrophic error, Terminate to the peer), never the
// process. And the network's word on a request: ICMP port unreachable fails a connect at once.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "harness.hpp"
#include "softrnic/rnic.hpp"

using namespace softrnic;
using namespace std::chrono_literals;
using softrnic::testing::poll_one;
using softrnic::testing::Sink;

namespace {

struct Mapping {
  std::size_t len = 0;
  std::uint8_t* p = nullptr;
  explicit Mapping(std::size_t n, int prot = PROT_READ | PROT_WRITE) : len(n) {
    void* m = ::mmap(nullptr, n, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    p = m == MAP_FAILED ? nullptr : static_cast<std::uint8_t*>(m);
  }
  ~Mapping() { unmap(); }
  void unmap() {
    if (p) ::munmap(p, len);
    p = nullptr;
  }
};

struct Ends : ::testing::Test {
  Sink sa, sb;
  std::unique_ptr<Device> a, b;
  Pd *pa = nullptr, *pb = nullptr;
  Cq *acq = nullptr, *bcq = nullptr;
  Qp *qa = nullptr, *qb = nullptr;
  std::vector<std::uint8_t> abuf = std::vector<std::uint8_t>(1 << 16, 0x5A);
  Mr* ma = nullptr;

  void SetUp() override {
    static std::uint16_t next = 21000;
    for (auto [dev, sink, pd, cq, qp, port] :
         {std::tuple{&a, &sa, &pa, &acq, &qa, static_cast<int>(next)}, std::tuple{&b, &sb, &pb, &bcq, &qb, next + 1}}) {
      DeviceConfig c;
      c.netdev.kind = "loopback";
      c.netdev.port = static_cast<std::uint16_t>(port);
      c.netdev.max_datagram = 1472;
      std::string e;
      *dev = Device::open(c, e);
      ASSERT_TRUE(*dev) << e;
      *pd = (*dev)->alloc_pd();
      *cq = (*dev)->create_cq(256, nullptr);
      QpInit init;
      init.pd = *pd;
      init.send_cq = *cq;
      init.recv_cq = *cq;
      init.ord = init.ird = 4;
      Sink* s = sink;
      init.on_event = [s](Qp*, const CmEvent& ev) { s->on_event(ev); };
      ASSERT_EQ((*dev)->create_qp(init, *qp), Status::ok);
    }
    next = static_cast<std::uint16_t>(next + 10);
    ASSERT_EQ(a->reg_mr(pa, abuf.data(), abuf.size(), Access::local_write | Access::remote_read, ma), Status::ok);
  }
  void TearDown() override {
    a.reset();
    b.reset();
  }
  void connect() {
    ASSERT_EQ(b->listen(5, [this](ConnRequest* r, const ConnRequestInfo& i) { sb.on_request(r, i); }), Status::ok);
    ASSERT_EQ(a->connect(qa, b->address(), 5, {}, 5000ms), Status::ok);
    ConnRequest* r = nullptr;
    ConnRequestInfo info;
    ASSERT_TRUE(sb.wait_request(r, info));
    ASSERT_EQ(b->accept(r, qb, {}), Status::ok);
    CmEvent e;
    ASSERT_TRUE(sa.wait_event(e));
    ASSERT_EQ(e.type, CmEventType::established);
    ASSERT_TRUE(sb.wait_event(e));
  }
};

}  // namespace

TEST_F(Ends, RegistrationProvesTheRangeIsMappedWithTheAccessGranted) {
  Mr* mr = nullptr;
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  Mapping gone(4 * page);
  ASSERT_TRUE(gone.p);
  std::uint8_t* const where = gone.p;
  gone.unmap();
  EXPECT_EQ(a->reg_mr(pa, where, 4 * page, Access::local_write, mr), Status::invalid_param) << "unmapped";
  Mapping none(4 * page, PROT_NONE);
  EXPECT_EQ(a->reg_mr(pa, none.p, 4 * page, Access::local_read, mr), Status::protection_violation) << "PROT_NONE";
  Mapping ro(4 * page, PROT_READ);
  EXPECT_EQ(a->reg_mr(pa, ro.p, 4 * page, Access::local_write, mr), Status::protection_violation) << "read-only";
  EXPECT_EQ(a->reg_mr(pa, ro.p, 4 * page, Access::remote_write, mr), Status::protection_violation) << "read-only";
  EXPECT_EQ(a->reg_mr(pa, ro.p, 4 * page, Access::local_read | Access::remote_read, mr), Status::ok)
      << "read-only memory for reading";
  // A range that runs off the end of a mapping into a hole.
  Mapping part(4 * page);
  ASSERT_EQ(::munmap(part.p + 2 * page, 2 * page), 0);
  EXPECT_EQ(a->reg_mr(pa, part.p, 4 * page, Access::local_write, mr), Status::invalid_param);
  EXPECT_EQ(a->reg_mr(pa, part.p, 2 * page, Access::local_write, mr), Status::ok);
  part.len = 2 * page;
}

// The consumer unmaps memory it registered for remote writes, and the peer writes to it: the
// RNIC's thread used to die in the copy. Now the connection breaks, with events on both sides.
TEST_F(Ends, AWriteIntoUnmappedRegisteredMemoryBreaksTheConnectionNotTheProcess) {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  Mapping target(16 * page);
  Mr* mt = nullptr;
  ASSERT_EQ(b->reg_mr(pb, target.p, target.len, Access::local_write | Access::remote_write, mt), Status::ok);
  const std::uint32_t stag = b->query_mr(mt).stag;
  const auto to = reinterpret_cast<std::uintptr_t>(target.p);
  connect();
  target.unmap();  // the consumer's bug
  const Sge s{a->query_mr(ma).stag, reinterpret_cast<std::uintptr_t>(abuf.data()), 8000};
  ASSERT_EQ(a->post_send(qa, SendWr{1, SendOpcode::rdma_write, {&s, 1}, stag, to}), Status::ok);
  CmEvent e;
  ASSERT_TRUE(sb.wait_event(e));
  EXPECT_EQ(e.type, CmEventType::broken);
  EXPECT_NE(e.reason.find("no longer mapped"), std::string::npos) << e.reason;
  EXPECT_GE(b->counters().memory_faults, 1u);
  ASSERT_TRUE(sa.wait_event(e));
  EXPECT_EQ(e.type, CmEventType::broken);
  Wc wc;
  ASSERT_TRUE(poll_one(*a, acq, wc));
  EXPECT_NE(wc.status, WcStatus::success);
}

// A read-only protect after registration: the same.
TEST_F(Ends, AReceiveIntoMemoryMadeReadOnlyBreaksTheConnection) {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  Mapping rbuf(page);
  Mr* mr = nullptr;
  ASSERT_EQ(b->reg_mr(pb, rbuf.p, page, Access::local_write, mr), Status::ok);
  const Sge rg{b->query_mr(mr).stag, reinterpret_cast<std::uintptr_t>(rbuf.p), 100};
  ASSERT_EQ(b->post_recv(qb, RecvWr{1, {&rg, 1}}), Status::ok);
  connect();
  ASSERT_EQ(::mprotect(rbuf.p, page, PROT_READ), 0);
  const Sge s{a->query_mr(ma).stag, reinterpret_cast<std::uintptr_t>(abuf.data()), 100};
  ASSERT_EQ(a->post_send(qa, SendWr{2, SendOpcode::send, {&s, 1}}), Status::ok);
  CmEvent e;
  ASSERT_TRUE(sb.wait_event(e));
  EXPECT_EQ(e.type, CmEventType::broken);
  Wc wc;
  ASSERT_TRUE(poll_one(*b, bcq, wc));
  EXPECT_EQ(wc.status, WcStatus::flushed);
  EXPECT_EQ(rbuf.p[0], 0) << "nothing placed";
}

// A local Send (and an RDMA Read Response) from memory unmapped after registration.
TEST_F(Ends, ASendFromUnmappedRegisteredMemoryCompletesInError) {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  Mapping src(4 * page);
  std::memset(src.p, 1, src.len);
  Mr* ms = nullptr;
  ASSERT_EQ(a->reg_mr(pa, src.p, src.len, Access::local_read, ms), Status::ok);
  std::vector<std::uint8_t> rmem(page);
  Mr* mr = nullptr;
  ASSERT_EQ(b->reg_mr(pb, rmem.data(), page, Access::local_write, mr), Status::ok);
  const Sge rg{b->query_mr(mr).stag, reinterpret_cast<std::uintptr_t>(rmem.data()), static_cast<std::uint32_t>(page)};
  ASSERT_EQ(b->post_recv(qb, RecvWr{1, {&rg, 1}}), Status::ok);
  connect();
  const Sge s{a->query_mr(ms).stag, reinterpret_cast<std::uintptr_t>(src.p), 1000};
  src.unmap();
  ASSERT_EQ(a->post_send(qa, SendWr{3, SendOpcode::send, {&s, 1}}), Status::ok);
  CmEvent e;
  ASSERT_TRUE(sa.wait_event(e));
  EXPECT_EQ(e.type, CmEventType::broken);
  Wc wc;
  ASSERT_TRUE(poll_one(*a, acq, wc));
  EXPECT_EQ(wc.wr_id, 3u);
  EXPECT_NE(wc.status, WcStatus::success);
  EXPECT_GE(a->counters().memory_faults, 1u);
}

// A connection request to a port where nothing listens: the kernel's ICMP port unreachable fails
// it at once (it used to wait for the whole timeout).
TEST(IcmpUnreachable, AConnectToAClosedPortFailsAtOnce) {
  // A port nothing holds: bind one, note it, let it go.
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(0x7F000001);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  socklen_t sl = sizeof sa;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &sl), 0);
  ::close(fd);
  const std::uint16_t closed = ntohs(sa.sin_port);

  Sink sink;
  DeviceConfig c;
  c.netdev.kind = "udp";
  c.netdev.port = 23000;
  std::string e;
  auto dev = Device::open(c, e);
  ASSERT_TRUE(dev) << e;
  Pd* pd = dev->alloc_pd();
  Cq* cq = dev->create_cq(16, nullptr);
  QpInit init;
  init.pd = pd;
  init.send_cq = cq;
  init.recv_cq = cq;
  init.on_event = [&](Qp*, const CmEvent& ev) { sink.on_event(ev); };
  Qp* qp = nullptr;
  ASSERT_EQ(dev->create_qp(init, qp), Status::ok);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(dev->connect(qp, {0x7F000001, closed}, 1, {}, 20000ms), Status::ok);
  CmEvent ev;
  ASSERT_TRUE(sink.wait_event(ev, 5000ms)) << "waited for the timeout";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2000ms);
  EXPECT_EQ(ev.type, CmEventType::no_listener);
  EXPECT_NE(ev.reason.find("ICMP port unreachable"), std::string::npos) << ev.reason;
  dev.reset();
}
