// The pieces of the post/poll path without the device lock: SpscRing (a QP's post rings, a
// CQ's completions) and DeviceLock's hand-off (device_lock.hpp). Run under TSan (label unit).
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "device_lock.hpp"
#include "spsc_ring.hpp"

using softrnic::SpscRing;
using softrnic::engine::DeviceLock;

TEST(SpscRing, HoldsItsCapacityInOrderAndNoMore) {
  SpscRing<int> r(5);  // rounded up to 8
  EXPECT_EQ(r.capacity(), 8u);
  EXPECT_EQ(r.consumer_slot(), nullptr);
  for (int round = 0; round < 3; ++round) {  // across wrap-around
    for (int i = 0; i < 8; ++i) {
      int* s = r.producer_slot();
      ASSERT_NE(s, nullptr) << i;
      *s = round * 100 + i;
      r.publish();
    }
    EXPECT_EQ(r.producer_slot(), nullptr) << "full";
    EXPECT_EQ(r.size(), 8u);
    for (int i = 0; i < 8; ++i) {
      int* s = r.consumer_slot();
      ASSERT_NE(s, nullptr);
      EXPECT_EQ(*s, round * 100 + i);
      r.consume();
    }
    EXPECT_TRUE(r.empty());
    EXPECT_EQ(r.consumer_slot(), nullptr);
  }
}

TEST(SpscRing, AProducerAndAConsumerThreadPassEverySlotWhole) {
  // Each slot is written field by field before it is published: the consumer must see every
  // field of it (release/acquire), and the producer must not write a slot the consumer reads.
  struct Slot {
    std::uint64_t seq = 0;
    std::uint64_t words[7] = {};
  };
  SpscRing<Slot> r(16);
  constexpr std::uint64_t kN = 200000;
  std::thread producer([&] {
    for (std::uint64_t i = 0; i < kN;) {
      Slot* s = r.producer_slot();
      if (!s) {
        std::this_thread::yield();
        continue;
      }
      s->seq = i;
      for (auto& w : s->words) w = i * 31 + 7;
      r.publish();
      ++i;
    }
  });
  std::uint64_t next = 0, bad = 0;
  while (next < kN) {
    Slot* s = r.consumer_slot();
    if (!s) {
      std::this_thread::yield();
      continue;
    }
    if (s->seq != next) ++bad;
    for (auto w : s->words)
      if (w != next * 31 + 7) ++bad;
    r.consume();
    ++next;
  }
  producer.join();
  EXPECT_EQ(bad, 0u);
  EXPECT_TRUE(r.empty());
}

namespace {
// Work "posted" into a counter (the poster's read-modify-write of the list); the drain takes it
// all in (under the lock).
struct Work : DeviceLock::Drain {
  std::atomic<std::uint64_t> waiting{0};
  std::uint64_t taken = 0;  // under the lock
  bool has_posts() const override { return waiting.load(std::memory_order_relaxed) != 0; }
  void take_posts() override { taken += waiting.exchange(0); }
};
}  // namespace

TEST(DeviceLock, WhatIsPostedWhileTheLockIsHeldIsTakenInWhenItIsLetGo) {
  // Posters find the lock held and return at once; the holder's unlock() takes their work in,
  // with no one taking the lock after it.
  DeviceLock lock;
  Work w;
  lock.set_drain(&w);
  lock.lock();
  std::vector<std::thread> posters;
  for (int t = 0; t < 3; ++t)
    posters.emplace_back([&] {
      for (int i = 0; i < 100; ++i) {
        w.waiting.fetch_add(1);
        lock.posted();  // (returns: the lock is held)
      }
    });
  for (auto& p : posters) p.join();
  EXPECT_EQ(w.taken, 0u);
  EXPECT_TRUE(lock.pending());
  lock.unlock();
  EXPECT_EQ(w.taken, 300u);  // (this thread's unlock took it in: read after it, in this thread)
  EXPECT_FALSE(lock.pending());
}

TEST(DeviceLock, NoPostIsLeftBehindByAHolderThatLetsGo) {
  // Posters add work and hand it to the lock while another thread takes and lets go of it all
  // along (a stress of the hand-off's races, for TSan). Once every poster and the holder have
  // returned, all the work has been taken in.
  for (int round = 0; round < 50; ++round) {
    DeviceLock lock;
    Work w;
    lock.set_drain(&w);
    std::atomic<bool> stop{false};
    std::thread holder([&] {
      while (!stop.load()) {
        std::lock_guard lk(lock);
        std::this_thread::yield();  // (holds it a while: posters find it taken)
      }
    });
    std::vector<std::thread> posters;
    for (int t = 0; t < 3; ++t)
      posters.emplace_back([&] {
        for (int i = 0; i < 200; ++i) {
          w.waiting.fetch_add(1);
          lock.posted();
        }
      });
    for (auto& p : posters) p.join();
    stop = true;
    holder.join();
    EXPECT_EQ(w.taken, 600u) << "round " << round;  // (after the joins: the holder's last unlock)
    EXPECT_FALSE(lock.pending());
  }
}
