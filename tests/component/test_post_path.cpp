// The post/poll path without the device lock (device.cpp, "Posting"; device_lock.hpp; Cq): a post
// does not wait for the lock's holder, threads that post and poll at once lose and reorder
// nothing, and a CQ the consumer lets overflow keeps every completion in order.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "softrnic/rnic.hpp"

using namespace softrnic;
using namespace std::chrono_literals;
using softrnic::testing::connect_qps;
using softrnic::testing::poll_one;

namespace {

// Two devices over the loopback netdev (ports `port` and port + 1), a PD each, a's CQ of `depth`
// (with `notify`) and b's of 64; and a source region on a, a sink on b.
struct Two {
  std::unique_ptr<Device> a, b;
  Pd *pa = nullptr, *pb = nullptr;
  Cq *acq = nullptr, *bcq = nullptr;
  Mr *ms = nullptr, *md = nullptr;

  Two(const std::string& name, std::uint16_t port, std::uint32_t depth, std::vector<std::uint8_t>& src,
      std::vector<std::uint8_t>& dst, Access dst_access, std::function<void()> notify = nullptr,
      std::chrono::microseconds min_rto = 5000us) {
    for (int i = 0; i < 2; ++i) {
      DeviceConfig c;
      c.name = name + (i ? "_b" : "_a");
      c.netdev.kind = "loopback";
      c.netdev.port = static_cast<std::uint16_t>(port + i);
      c.min_rto = min_rto;
      std::string e;
      (i ? b : a) = Device::open(c, e);
      if (!(i ? b : a)) ADD_FAILURE() << e;
    }
    if (!a || !b) return;
    pa = a->alloc_pd();
    pb = b->alloc_pd();
    acq = a->create_cq(depth, std::move(notify));
    bcq = b->create_cq(64, nullptr);
    EXPECT_EQ(a->reg_mr(pa, src.data(), src.size(), Access::local_read, ms), Status::ok);
    EXPECT_EQ(b->reg_mr(pb, dst.data(), dst.size(), dst_access, md), Status::ok);
  }
  bool ok() const { return a && b && ms && md; }
};

}  // namespace

TEST(PostPath, APostDoesNotWaitForTheDeviceLock) {
  // a's engine pushes a completion and calls the CQ's notify under the device lock; the notify
  // holds it there until the test's thread has posted again (or 5 s pass). The post returns at
  // once, and its Send leaves when the engine lets go of the lock. (With posts taking the device
  // lock, the post waited the 5 s.)
  std::mutex mu;
  std::condition_variable cv;
  bool inside = false, posted = false, posted_in_time = false;
  std::atomic<bool> armed{false};
  const auto test_thread = std::this_thread::get_id();
  std::vector<std::uint8_t> src(2 * 64, 0x5A), dst(2 * 64, 0);
  src[64] = 0xA5;
  Two t("postpath", 9740, 64, src, dst, Access::local_write, [&] {
    // (never in the test's own thread: it would wait for itself)
    if (std::this_thread::get_id() == test_thread || !armed.exchange(false)) return;
    std::unique_lock lk(mu);
    inside = true;
    cv.notify_all();
    posted_in_time = cv.wait_for(lk, 5s, [&] { return posted; });
  });
  ASSERT_TRUE(t.ok());
  auto &a = t.a, &b = t.b;
  Cq *acq = t.acq, *bcq = t.bcq;
  Mr *ms = t.ms, *md = t.md;
  std::vector<Qp*> qa, qb;
  ASSERT_NO_FATAL_FAILURE(connect_qps(*a, *b, t.pa, t.pb, acq, bcq, 1, 64, 11, qa, qb));
  for (std::uint64_t i = 0; i < 2; ++i) {
    const Sge s{b->query_mr(md).stag, reinterpret_cast<std::uintptr_t>(dst.data()) + i * 64, 64};
    ASSERT_EQ(b->post_recv(qb[0], RecvWr{i, {&s, 1}}), Status::ok);
  }
  const auto send = [&](std::uint64_t i) {
    const Sge s{a->query_mr(ms).stag, reinterpret_cast<std::uintptr_t>(src.data()) + i * 64, 64};
    return a->post_send(qa[0], SendWr{i, SendOpcode::send, {&s, 1}});
  };
  armed = true;
  ASSERT_EQ(send(0), Status::ok);
  {
    std::unique_lock lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, 5s, [&] { return inside; })) << "the first Send's completion was not pushed";
  }
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(send(1), Status::ok);
  const auto took = std::chrono::steady_clock::now() - t0;
  {
    std::lock_guard lk(mu);
    posted = true;
  }
  cv.notify_all();
  Wc wc;
  for (std::uint64_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(poll_one(*a, acq, wc)) << "send " << i;
    EXPECT_EQ(wc.wr_id, i);
    EXPECT_EQ(wc.status, WcStatus::success);
    ASSERT_TRUE(poll_one(*b, bcq, wc)) << "receive " << i;
    EXPECT_EQ(wc.wr_id, i);
    EXPECT_EQ(wc.status, WcStatus::success);
  }
  EXPECT_TRUE(posted_in_time) << "the post waited "
                              << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                              << " ms for the engine's lock";
  EXPECT_EQ(0, std::memcmp(dst.data(), src.data(), src.size()));
}

TEST(PostPath, ACqThatOverflowsKeepsEveryCompletionInOrder) {
  // A CQ of 4 entries and 40 signaled Writes not polled until all are done: all 40 are there,
  // in posting order, after the ring's 4 (the rest waited behind it).
  std::vector<std::uint8_t> src(4096, 1), dst(4096, 0);
  Two t("postpath_cq", 9742, 4, src, dst, Access::remote_write);
  ASSERT_TRUE(t.ok());
  auto &a = t.a, &b = t.b;
  Cq* acq = t.acq;
  Mr *ms = t.ms, *md = t.md;
  std::vector<Qp*> qa, qb;
  ASSERT_NO_FATAL_FAILURE(connect_qps(*a, *b, t.pa, t.pb, acq, t.bcq, 1, 64, 12, qa, qb));
  constexpr std::uint64_t kWrites = 40;
  for (std::uint64_t i = 0; i < kWrites; ++i) {
    const Sge s{a->query_mr(ms).stag, reinterpret_cast<std::uintptr_t>(src.data()) + i * 100, 100};
    ASSERT_EQ(a->post_send(qa[0], SendWr{i,
                                         SendOpcode::rdma_write,
                                         {&s, 1},
                                         b->query_mr(md).stag,
                                         reinterpret_cast<std::uintptr_t>(dst.data()) + i * 100}),
              Status::ok);
  }
  for (int i = 0; i < 5000 && a->cq_count(acq) < kWrites; ++i) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(a->cq_count(acq), kWrites);
  EXPECT_FALSE(a->cq_empty(acq));
  std::array<Wc, 7> wcs;  // (not a divisor of 40, nor of the ring's size)
  std::uint64_t next = 0;
  for (std::size_t n; (n = a->poll_cq(acq, wcs)) > 0;)
    for (std::size_t i = 0; i < n; ++i) {
      EXPECT_EQ(wcs[i].wr_id, next++);
      EXPECT_EQ(wcs[i].status, WcStatus::success);
    }
  EXPECT_EQ(next, kWrites);
  EXPECT_TRUE(a->cq_empty(acq));
  EXPECT_EQ(a->cq_count(acq), 0u);
  // And the CQ goes on as before once drained.
  const Sge s{a->query_mr(ms).stag, reinterpret_cast<std::uintptr_t>(src.data()), 8};
  ASSERT_EQ(
      a->post_send(
          qa[0],
          SendWr{
              99, SendOpcode::rdma_write, {&s, 1}, b->query_mr(md).stag, reinterpret_cast<std::uintptr_t>(dst.data())}),
      Status::ok);
  Wc wc;
  ASSERT_TRUE(poll_one(*a, acq, wc));
  EXPECT_EQ(wc.wr_id, 99u);
}

TEST(PostPath, ThreadsThatPostAndPollAtOnceLoseNothing) {
  // 8 threads post Sends on a, two to each of 4 QPs (so posts to one QP race each other too); one
  // thread polls a's CQ (16 entries: it overflows), one polls b's and posts each buffer again, one
  // calls verbs that take the device lock (posts hand off to it), while both engines run. Every
  // Send completes once, each thread's in its order, with its data. Run under TSan (label
  // component) for the memory orders.
  constexpr std::size_t kQps = 4, kThreads = 8, kPerThread = 400, kRecvs = 128, kMsg = 64, kSlots = 1024;
  std::vector<std::uint8_t> src(kThreads * kSlots * kMsg), dst(kQps * kRecvs * kMsg, 0);
  Two two("postpath_mt", 9744, 16, src, dst, Access::local_write);
  ASSERT_TRUE(two.ok());
  auto &a = two.a, &b = two.b;
  Cq *acq = two.acq, *bcq = two.bcq;
  Mr *ms = two.ms, *md = two.md;
  const std::uint32_t lkey_a = a->query_mr(ms).stag, lkey_b = b->query_mr(md).stag;
  std::vector<Qp*> qa, qb;
  ASSERT_NO_FATAL_FAILURE(connect_qps(*a, *b, two.pa, two.pb, acq, bcq, kQps, 64, 13, qa, qb));
  const auto recv_sge = [&](std::size_t q, std::size_t k) {
    return Sge{lkey_b, reinterpret_cast<std::uintptr_t>(dst.data()) + (q * kRecvs + k) * kMsg, kMsg};
  };
  std::array<std::atomic<int>, kQps> credits;  // receives posted on b and not yet consumed
  for (std::size_t q = 0; q < kQps; ++q) {
    for (std::size_t k = 0; k < kRecvs; ++k) {
      const Sge s = recv_sge(q, k);
      ASSERT_EQ(b->post_recv(qb[q], RecvWr{q * kRecvs + k, {&s, 1}}), Status::ok);
    }
    credits[q] = static_cast<int>(kRecvs);
  }
  std::atomic<bool> failed{false}, stop{false};
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  const auto late = [&] { return failed || std::chrono::steady_clock::now() > deadline; };

  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      const std::size_t q = t % kQps;
      for (std::uint32_t seq = 0; seq < kPerThread && !late();) {
        int c = credits[q].load();
        if (c == 0 || !credits[q].compare_exchange_weak(c, c - 1)) {
          std::this_thread::yield();
          continue;
        }
        std::uint8_t* m = src.data() + (t * kSlots + seq % kSlots) * kMsg;
        std::memset(m, static_cast<int>(seq & 0xFF), kMsg);
        std::memcpy(m, &t, sizeof t);
        std::memcpy(m + 8, &seq, sizeof seq);
        const Sge s{lkey_a, reinterpret_cast<std::uintptr_t>(m), kMsg};
        const Status st = a->post_send(qa[q], SendWr{(std::uint64_t{t} << 32) | seq, SendOpcode::send, {&s, 1}});
        if (st == Status::insufficient_resources) {  // its send queue is full: wait for completions
          credits[q]++;
          std::this_thread::yield();
          continue;
        }
        if (st != Status::ok) {
          ADD_FAILURE() << "post_send: " << to_string(st);
          failed = true;
        }
        ++seq;
      }
    });
  std::size_t sends_done = 0, recvs_done = 0;
  threads.emplace_back([&] {  // a's CQ: each thread's Sends complete in its order
    std::array<std::uint32_t, kThreads> next{};
    std::array<Wc, 5> wcs;
    while (sends_done < kThreads * kPerThread && !late()) {
      const std::size_t n = a->poll_cq(acq, wcs);
      for (std::size_t i = 0; i < n; ++i) {
        const auto t = static_cast<std::size_t>(wcs[i].wr_id >> 32);
        const auto seq = static_cast<std::uint32_t>(wcs[i].wr_id);
        if (wcs[i].status != WcStatus::success || t >= kThreads || seq != next[t]) {
          ADD_FAILURE() << "send completion " << t << "/" << seq << " (" << to_string(wcs[i].status) << ")";
          failed = true;
          return;
        }
        ++next[t];
        ++sends_done;
      }
      if (n == 0) std::this_thread::sleep_for(50us);  // (lets the CQ fill up now and then)
    }
  });
  threads.emplace_back([&] {  // b's CQ: each thread's messages arrive in its order, and go again
    std::array<std::uint32_t, kThreads> next{};
    std::array<Wc, 8> wcs;
    while (recvs_done < kThreads * kPerThread && !late()) {
      const std::size_t n = b->poll_cq(bcq, wcs);
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t q = wcs[i].wr_id / kRecvs, k = wcs[i].wr_id % kRecvs;
        const std::uint8_t* m = dst.data() + wcs[i].wr_id * kMsg;
        std::size_t t = 0;
        std::uint32_t seq = 0;
        std::memcpy(&t, m, sizeof t);
        std::memcpy(&seq, m + 8, sizeof seq);
        if (wcs[i].status != WcStatus::success || wcs[i].byte_len != kMsg || t >= kThreads || t % kQps != q ||
            seq != next[t] || m[kMsg - 1] != (seq & 0xFF)) {
          ADD_FAILURE() << "receive " << wcs[i].wr_id << ": thread " << t << " seq " << seq;
          failed = true;
          return;
        }
        ++next[t];
        ++recvs_done;
        const Sge s = recv_sge(q, k);
        if (b->post_recv(qb[q], RecvWr{wcs[i].wr_id, {&s, 1}}) != Status::ok) {
          ADD_FAILURE() << "post_recv";
          failed = true;
          return;
        }
        credits[q]++;
      }
    }
  });
  std::thread verbs([&] {  // takes and lets go of both device locks all along
    while (!stop) {
      for (std::size_t q = 0; q < kQps; ++q) {
        (void)a->qp_counters(qa[q]);
        (void)b->recv_counts(qb[q]);
      }
      std::this_thread::sleep_for(20us);
    }
  });
  for (auto& th : threads) th.join();
  stop = true;
  verbs.join();
  EXPECT_FALSE(failed);
  EXPECT_EQ(sends_done, kThreads * kPerThread);
  EXPECT_EQ(recvs_done, kThreads * kPerThread);
  for (std::size_t q = 0; q < kQps; ++q) EXPECT_EQ(b->recv_counts(qb[q]).allocated, kRecvs) << "QP " << q;
}

// A signaled Send asks for its ACK (the sender waits for it); the receiver holds that ACK one
// round, so the reply its consumer posts carries it: a signaled ping-pong sends one frame per
// message each way, not a data frame and a pure ACK (a system call between a Send's arrival and
// its consumer seeing it). And an ACK nothing carries still goes at once after that round.
TEST(RudpAcks, ASignaledPingPongSendsNoPureAcks) {
  std::vector<std::uint8_t> src(64, 1), dst(64, 0);
  // (A retransmission timeout of at least 200 ms: one below means the ACK was lost, not late on
  // a loaded host.)
  Two t("rudpacks", 9790, 256, src, dst, Access::local_write, nullptr, 200000us);
  ASSERT_TRUE(t.ok());
  auto &a = t.a, &b = t.b;
  Mr* ma2 = nullptr;
  ASSERT_EQ(a->reg_mr(t.pa, dst.data(), dst.size(), Access::local_write, ma2), Status::ok);
  std::vector<Qp*> qa, qb;
  ASSERT_NO_FATAL_FAILURE(connect_qps(*a, *b, t.pa, t.pb, t.acq, t.bcq, 1, 64, 19, qa, qb));
  const Sge sa{a->query_mr(t.ms).stag, reinterpret_cast<std::uintptr_t>(src.data()), 64};
  const Sge sb{b->query_mr(t.md).stag, reinterpret_cast<std::uintptr_t>(dst.data()), 64};
  const Sge ra{a->query_mr(ma2).stag, reinterpret_cast<std::uintptr_t>(dst.data()), 64};
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(b->post_recv(qb[0], RecvWr{1, {&sb, 1}}), Status::ok);
    ASSERT_EQ(a->post_recv(qa[0], RecvWr{1, {&ra, 1}}), Status::ok);
  }
  // Polls as a busy consumer does until a receive completes; counts the sends completed.
  std::size_t sends_a = 0, sends_b = 0;
  auto wait_recv = [](Device& d, Cq* cq, std::size_t& sends) {
    Wc wc[4];
    const auto end = std::chrono::steady_clock::now() + 5s;
    while (std::chrono::steady_clock::now() < end) {
      d.progress();
      const std::size_t k = d.poll_cq(cq, wc);
      bool got = false;
      for (std::size_t j = 0; j < k; ++j) {
        EXPECT_EQ(wc[j].status, WcStatus::success);
        if (wc[j].opcode == WcOpcode::recv)
          got = true;
        else
          sends++;
      }
      if (got) return true;
    }
    return false;
  };
  constexpr int kRounds = 200;
  const auto tx_a = a->counters().tx_frames, tx_b = b->counters().tx_frames;
  for (int i = 0; i < kRounds; ++i) {
    ASSERT_EQ(a->post_send(qa[0], SendWr{1, SendOpcode::send, {&sa, 1}}), Status::ok);  // signaled
    ASSERT_TRUE(wait_recv(*b, t.bcq, sends_b)) << i;
    ASSERT_EQ(b->post_recv(qb[0], RecvWr{1, {&sb, 1}}), Status::ok);
    ASSERT_EQ(b->post_send(qb[0], SendWr{1, SendOpcode::send, {&sb, 1}}), Status::ok);
    ASSERT_TRUE(wait_recv(*a, t.acq, sends_a)) << i;
    ASSERT_EQ(a->post_recv(qa[0], RecvWr{1, {&ra, 1}}), Status::ok);
  }
  const auto sent_a = a->counters().tx_frames - tx_a, sent_b = b->counters().tx_frames - tx_b;
  // (The progress thread may run a round between a receive and its reply now and then.)
  EXPECT_LE(sent_a, kRounds * 5 / 4) << "frames a sent for " << kRounds << " messages";
  EXPECT_LE(sent_b, kRounds * 5 / 4) << "frames b sent for " << kRounds << " messages";
  EXPECT_GE(sends_a + 1, static_cast<std::size_t>(kRounds)) << "each ping completed (the pong carried its ack)";

  // A Send b does not answer: its ACK goes a round later, without a retransmission.
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(a->post_send(qa[0], SendWr{2, SendOpcode::send, {&sa, 1}}), Status::ok);
  Wc wc;
  bool done = false;
  while (!done && std::chrono::steady_clock::now() < t0 + 5s) {
    Wc w[4];
    const std::size_t k = a->poll_cq(t.acq, w);
    for (std::size_t j = 0; j < k; ++j) done = done || w[j].wr_id == 2;
  }
  ASSERT_TRUE(done);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 150ms);
  EXPECT_EQ(a->counters().retransmits, 0u);
}
