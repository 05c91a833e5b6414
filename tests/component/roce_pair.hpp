// Two soft RNICs speaking RoCEv2 over the loopback netdev, each with a QP, a 4 MiB region and its
// CQs: connected out of band (RocePair::connect, as ibv_rc_pingpong connects) or through IB CM
// (RoceCm::cm_connect). Shared by the RoCEv2 component tests.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "harness.hpp"
#include "softrnic/netdev/netdev.hpp"
#include "softrnic/rnic.hpp"

namespace softrnic::testing {

using namespace std::chrono_literals;

struct RoceSide {
  Sink sink;
  std::unique_ptr<Device> dev;
  Pd* pd = nullptr;
  Cq* scq = nullptr;
  Cq* rcq = nullptr;
  Qp* qp = nullptr;
  Srq* srq = nullptr;
  std::vector<std::uint8_t> buf;
  Mr* mr = nullptr;

  ~RoceSide() { dev.reset(); }

  netdev::HoldingNetdev* hold = nullptr;  // set when opened with `holding`: can hold what this side sends
  // Set before open: changes the device's configuration.
  std::function<void(DeviceConfig&)> configure;
  // Set before open: wraps the netdev made from the configuration.
  std::function<std::unique_ptr<netdev::Netdev>(std::unique_ptr<netdev::Netdev>)> wrap;

  void open(std::uint32_t ip, const netdev::ImpairPlan& impair = {}, RoceConfig rc = {}, bool with_srq = false,
            bool holding = false) {
    DeviceConfig c;
    c.wire = Wire::roce;
    c.netdev.kind = "loopback";
    c.netdev.ip = netdev::ipv4_to_string(ip);
    c.netdev.port = 4791;
    c.netdev.max_datagram = 1472;  // path MTU 1024, as on Ethernet
    c.netdev.impair = impair;
    c.roce = rc;
    if (configure) configure(c);
    std::string e;
    if (wrap) {
      auto nd = netdev::make_netdev(c.netdev, e);
      ASSERT_TRUE(nd) << e;
      dev = Device::open(c, wrap(std::move(nd)));
    } else {
      dev = holding ? softrnic::testing::open_holding(c, hold, e) : Device::open(c, e);
    }
    ASSERT_TRUE(dev) << e;
    pd = dev->alloc_pd();
    scq = dev->create_cq(4096, nullptr);
    rcq = dev->create_cq(4096, nullptr);
    if (with_srq) {
      SrqInit si;
      si.pd = pd;
      si.max_wr = 64;
      ASSERT_EQ(dev->create_srq(si, srq), Status::ok);
    }
    QpInit init;
    init.pd = pd;
    init.send_cq = scq;
    init.recv_cq = rcq;
    init.max_sge = 4;
    init.max_send_wr = 1024;
    init.max_recv_wr = 1024;
    init.ord = init.ird = 8;
    init.srq = srq;
    init.on_event = [this](Qp*, const CmEvent& ev) { sink.on_event(ev); };
    ASSERT_EQ(dev->create_qp(init, qp), Status::ok);
    buf.assign(1 << 22, 0);
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
    const Sge g = sge(off, len);
    const Status st = srq ? dev->post_srq_recv(srq, RecvWr{id, {&g, 1}}) : dev->post_recv(qp, RecvWr{id, {&g, 1}});
    ASSERT_EQ(st, Status::ok);
  }
  Status post(SendOpcode op, std::uint64_t id, std::size_t off, std::uint32_t len, std::uint32_t rkey = 0,
              std::uint64_t raddr = 0) {
    const Sge g = sge(off, len);
    SendWr wr;
    wr.wr_id = id;
    wr.opcode = op;
    wr.sgl = {&g, 1};
    wr.rkey = rkey;
    wr.remote_addr = raddr;
    return dev->post_send(qp, wr);
  }
};

inline void fill(std::vector<std::uint8_t>& b, std::size_t off, std::size_t n, std::uint32_t seed) {
  for (std::size_t i = 0; i < n; ++i) b[off + i] = static_cast<std::uint8_t>((i * 131 + seed * 7 + (i >> 8)) & 0xFF);
}

struct RocePair : ::testing::Test {
  RoceSide a, b;
  static std::uint32_t next_ip() {
    static std::uint32_t ip = 0x7F640001;  // 127.100.0.1, .2, ...
    return ip++;
  }
  void open(const netdev::ImpairPlan& ia = {}, const netdev::ImpairPlan& ib = {}, RoceConfig rc = {},
            bool srq_b = false) {
    a.open(next_ip(), ia, rc);
    b.open(next_ip(), ib, rc, srq_b);
  }
  void connect() {
    RoceEndpoint ea, eb;
    ASSERT_EQ(a.dev->roce_local(a.qp, ea), Status::ok);
    ASSERT_EQ(b.dev->roce_local(b.qp, eb), Status::ok);
    EXPECT_EQ(ea.mtu, 1024u);
    EXPECT_EQ(ea.qpn, a.qp == nullptr ? 0 : ea.qpn);
    ASSERT_EQ(a.dev->roce_connect(a.qp, eb, 8, 8), Status::ok);
    ASSERT_EQ(b.dev->roce_connect(b.qp, ea, 8, 8), Status::ok);
    CmEvent ev;
    ASSERT_TRUE(a.sink.wait_event(ev));
    EXPECT_EQ(ev.type, CmEventType::established);
    ASSERT_TRUE(b.sink.wait_event(ev));
    EXPECT_EQ(ev.type, CmEventType::established);
  }
};

struct RoceCm : RocePair {
  static constexpr std::uint64_t kQual = 7174;
  void cm_connect(std::vector<std::uint8_t> req_pd, std::vector<std::uint8_t> rep_pd) {
    ASSERT_EQ(b.dev->listen(kQual, [this](ConnRequest* r, const ConnRequestInfo& i) { b.sink.on_request(r, i); }),
              Status::ok);
    ASSERT_EQ(a.dev->connect(a.qp, b.dev->address(), kQual, req_pd, 10000ms), Status::ok);
    ConnRequest* r = nullptr;
    ConnRequestInfo info;
    ASSERT_TRUE(b.sink.wait_request(r, info, 10000ms));
    EXPECT_EQ(info.conn_qual, kQual);
    EXPECT_EQ(info.remote.ip, a.dev->address().ip);
    ASSERT_GE(info.private_data.size(), req_pd.size());
    EXPECT_TRUE(std::equal(req_pd.begin(), req_pd.end(), info.private_data.begin()));
    ASSERT_EQ(b.dev->accept(r, b.qp, rep_pd), Status::ok);
    CmEvent ev;
    ASSERT_TRUE(a.sink.wait_event(ev, 10000ms));
    ASSERT_EQ(ev.type, CmEventType::established) << ev.reason;
    ASSERT_GE(ev.private_data.size(), rep_pd.size());
    EXPECT_TRUE(std::equal(rep_pd.begin(), rep_pd.end(), ev.private_data.begin()));
    ASSERT_TRUE(b.sink.wait_event(ev, 10000ms));
    ASSERT_EQ(ev.type, CmEventType::established) << ev.reason;
  }
};

}  // namespace softrnic::testing
