// Hostile frames: the sender's datagrams are mutated (random bytes and fields changed) and then
// resealed with a correct CRC32c, so they pass the integrity check and reach every parser of the
// receiver: framing, SACK blocks, CM messages, DDP/RDMAP headers, Read Requests, Terminates.
// Whatever arrives, the receiver must not crash or touch memory it should not (this also runs
// under ASan), must place nothing outside the registered buffers, and must end each connection it
// cannot continue with an event rather than hang.
#include <gtest/gtest.h>

#include <cstring>
#include <mutex>
#include <random>

#include "harness.hpp"
#include "softrnic/netdev/netdev.hpp"
#include "softrnic/rnic.hpp"
#include "softrnic/wire/udp_frame.hpp"

using namespace softrnic;
using namespace std::chrono_literals;

namespace {

class Mutator final : public softrnic::testing::ForwardingNetdev {
 public:
  Mutator(std::unique_ptr<netdev::Netdev> inner, double p, std::uint64_t seed)
      : ForwardingNetdev(std::move(inner)), p_(p), rng_(seed) {}

  std::size_t tx_burst(std::span<const netdev::TxFrame> frames) override {
    std::lock_guard lk(mu_);
    for (const auto& f : frames) {
      std::vector<std::uint8_t> b;
      for (auto part : {f.head, f.body, f.tail}) b.insert(b.end(), part.begin(), part.end());
      if (std::uniform_real_distribution<double>(0, 1)(rng_) < p_ && b.size() > wire::kFrameOverhead) {
        mutated_++;
        const int flips = 1 + static_cast<int>(rng_() % 4);
        for (int i = 0; i < flips; ++i) {
          // Mostly the protocol headers (frame, CM / DDP / RDMAP / Read Request), sometimes anywhere.
          const std::size_t span = (rng_() % 4 == 0) ? b.size() - wire::kFrameTrailerLen
                                                     : std::min<std::size_t>(b.size() - wire::kFrameTrailerLen, 80);
          const std::size_t at = rng_() % span;
          b[at] = static_cast<std::uint8_t>(rng_());
        }
        wire::seal_frame(b, b.size() - wire::kFrameTrailerLen);  // a valid CRC: the parsers see it
      }
      const netdev::TxFrame out{f.to, b, {}, {}};
      inner_->tx_burst({&out, 1});
    }
    return frames.size();
  }
  std::uint64_t mutated() const {
    std::lock_guard lk(mu_);
    return mutated_;
  }

 private:
  double p_;
  mutable std::mutex mu_;
  std::mt19937_64 rng_;
  std::uint64_t mutated_ = 0;
};

struct Events {
  std::mutex mu;
  std::vector<CmEvent> list;
  ConnRequest* req = nullptr;
};

}  // namespace

TEST(HostileFrames, MutatedFramesWithValidCrcsNeverCorruptTheReceiver) {
  const std::uint64_t seed = 20261122;
  SCOPED_TRACE("seed " + std::to_string(seed));
  Events ea, eb;  // outlive the devices
  // B's memory: a guarded buffer; nothing outside its middle part may ever change. Declared before
  // the devices, like A's: they may send from it until they are destroyed.
  constexpr std::size_t kGuard = 4096, kBuf = 1 << 20;
  std::vector<std::uint8_t> bmem(kGuard + kBuf + kGuard, 0xA5);
  std::vector<std::uint8_t> amem(kBuf, 0x11);
  netdev::NetdevConfig na;
  na.kind = "loopback";
  na.port = 9800;
  na.max_datagram = 1472;
  std::string e;
  auto inner = netdev::make_netdev(na, e);
  ASSERT_TRUE(inner) << e;
  auto mut = std::make_unique<Mutator>(std::move(inner), 0.02, seed);
  Mutator* m = mut.get();
  DeviceConfig ca;
  ca.retry_limit = 4;
  auto a = Device::open(ca, std::move(mut));
  DeviceConfig cb;
  cb.netdev.kind = "loopback";
  cb.netdev.port = 9801;
  cb.netdev.max_datagram = 1472;
  cb.retry_limit = 4;
  auto b = Device::open(cb, e);
  ASSERT_TRUE(b) << e;
  Pd* pa = a->alloc_pd();
  Pd* pb = b->alloc_pd();
  std::uint8_t* bbuf = bmem.data() + kGuard;
  Mr *mb = nullptr, *mbr = nullptr;
  ASSERT_EQ(b->reg_mr(pb, bbuf, kBuf, Access::local_write | Access::remote_write, mb), Status::ok);
  ASSERT_EQ(b->reg_mr(pb, bbuf, kBuf, Access::remote_read, mbr), Status::ok);
  Mr* ma = nullptr;
  ASSERT_EQ(a->reg_mr(pa, amem.data(), kBuf, Access::local_write | Access::local_read, ma), Status::ok);
  Cq* acq = a->create_cq(65536, nullptr);
  Cq* bcq = b->create_cq(65536, nullptr);
  ASSERT_EQ(b->listen(7,
                      [&](ConnRequest* r, const ConnRequestInfo&) {
                        std::lock_guard lk(eb.mu);
                        eb.req = r;
                      }),
            Status::ok);
  int connections = 0, broken = 0;
  std::mt19937_64 rng(seed);
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  for (int round = 0; round < 30 && std::chrono::steady_clock::now() < deadline; ++round) {
    Qp *qa = nullptr, *qb = nullptr;
    QpInit ia;
    ia.pd = pa;
    ia.send_cq = ia.recv_cq = acq;
    ia.max_send_wr = 512;
    ia.max_sge = 1;
    ia.ord = ia.ird = 4;
    ia.on_event = [&](Qp*, const CmEvent& ev) {
      std::lock_guard lk(ea.mu);
      ea.list.push_back(ev);
    };
    ASSERT_EQ(a->create_qp(ia, qa), Status::ok);
    QpInit ib = ia;
    ib.pd = pb;
    ib.send_cq = ib.recv_cq = bcq;
    ib.max_recv_wr = 512;
    ib.on_event = [&](Qp*, const CmEvent& ev) {
      std::lock_guard lk(eb.mu);
      eb.list.push_back(ev);
    };
    ASSERT_EQ(b->create_qp(ib, qb), Status::ok);
    for (int i = 0; i < 64; ++i) {
      const Sge g{b->query_mr(mb).stag, reinterpret_cast<std::uintptr_t>(bbuf) + std::uint64_t(i) * 8192, 8192};
      b->post_recv(qb, RecvWr{static_cast<std::uint64_t>(i), {&g, 1}});
    }
    {
      std::lock_guard lk(eb.mu);
      eb.req = nullptr;
    }
    a->connect(qa, b->address(), 7, {}, 2000ms);
    ConnRequest* req = nullptr;
    for (int t = 0; t < 2000 && !req; ++t) {
      {
        std::lock_guard lk(eb.mu);
        req = eb.req;
      }
      if (!req) std::this_thread::sleep_for(1ms);
    }
    if (req && b->accept(req, qb, {}) == Status::ok) {
      for (int t = 0; t < 2000 && a->qp_state(qa) == QpState::idle; ++t) std::this_thread::sleep_for(1ms);
      if (a->qp_state(qa) == QpState::rts) {
        connections++;
        // Random traffic: Sends, Writes into B's buffer, Reads from it.
        for (int op = 0; op < 200; ++op) {
          const auto len = static_cast<std::uint32_t>(rng() % 8192);
          const auto off = rng() % (kBuf - 8192);
          const Sge g{a->query_mr(ma).stag, reinterpret_cast<std::uintptr_t>(amem.data()) + off, len};
          SendWr wr{static_cast<std::uint64_t>(op), SendOpcode::send, {&g, 1}};
          switch (rng() % 3) {
            case 0: break;
            case 1:
              wr.opcode = SendOpcode::rdma_write;
              wr.rkey = b->query_mr(mb).stag;
              wr.remote_addr = reinterpret_cast<std::uintptr_t>(bbuf) + off;
              break;
            default:
              wr.opcode = SendOpcode::rdma_read;
              wr.rkey = b->query_mr(mbr).stag;
              wr.remote_addr = reinterpret_cast<std::uintptr_t>(bbuf) + off;
              break;
          }
          if (a->post_send(qa, wr) == Status::invalid_state) break;  // the connection ended
          if (op % 16 == 0) std::this_thread::sleep_for(1ms);        // reads free up ORD
        }
        // Let it run until the connection settles or breaks.
        for (int t = 0; t < 300; ++t) {
          Wc wc[64];
          a->poll_cq(acq, wc);
          b->poll_cq(bcq, wc);
          if (a->qp_state(qa) != QpState::rts) break;
          std::this_thread::sleep_for(1ms);
        }
      }
    }
    if (a->qp_state(qa) != QpState::rts) broken++;
    a->disconnect(qa, false);
    std::this_thread::sleep_for(5ms);
    Wc wc[256];
    while (a->poll_cq(acq, wc) || b->poll_cq(bcq, wc)) {
    }
    ASSERT_EQ(a->destroy_qp(qa), Status::ok);
    ASSERT_EQ(b->destroy_qp(qb), Status::ok);
  }
  std::printf(
      "hostile frames: %llu mutated, %d connections, %d ended early; B: bad frames %llu, unknown QP %llu, "
      "Terminates sent %llu\n",
      static_cast<unsigned long long>(m->mutated()), connections, broken,
      static_cast<unsigned long long>(b->counters().rx_bad_frames),
      static_cast<unsigned long long>(b->counters().rx_unknown_qp),
      static_cast<unsigned long long>(b->counters().terminates_sent));
  EXPECT_GT(m->mutated(), 30u) << "the receiver saw mutated frames";
  EXPECT_GT(connections, 0);
  for (std::size_t i = 0; i < kGuard; ++i) {
    ASSERT_EQ(bmem[i], 0xA5) << "byte before B's buffer changed";
    ASSERT_EQ(bmem[kGuard + kBuf + i], 0xA5) << "byte after B's buffer changed";
  }
}
