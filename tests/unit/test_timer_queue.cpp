// The engine's deadline queue: earliest first, re-arming earlier moves a key, later does not,
// cancel, keys armed again while firing.
#include <gtest/gtest.h>

#include <vector>

#include "timer_queue.hpp"

using softrnic::engine::TimerQueue;
using namespace std::chrono_literals;

namespace {

TimerQueue::Clock::time_point at(int ms) {
  return TimerQueue::Clock::time_point(std::chrono::milliseconds(ms));
}

std::vector<std::uint32_t> fire(TimerQueue& q, int now_ms) {
  std::vector<std::uint32_t> got;
  q.expire(at(now_ms), [&](std::uint32_t k) { got.push_back(k); });
  return got;
}

TEST(TimerQueue, FiresDueKeysEarliestFirstAndOnlyThem) {
  TimerQueue q;
  q.arm(3, at(30));
  q.arm(1, at(10));
  q.arm(2, at(20));
  EXPECT_EQ(q.next(), at(10));
  EXPECT_TRUE(fire(q, 5).empty());
  EXPECT_EQ(fire(q, 25), (std::vector<std::uint32_t>{1, 2}));
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(q.next(), at(30));
  EXPECT_EQ(fire(q, 30), (std::vector<std::uint32_t>{3}));
  EXPECT_FALSE(q.next());
}

TEST(TimerQueue, EarlierArmMovesTheKeyLaterDoesNot) {
  TimerQueue q;
  q.arm(7, at(50));
  q.arm(7, at(10));  // earlier: moves
  q.arm(7, at(90));  // later: ignored until it fires
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(q.next(), at(10));
  EXPECT_EQ(fire(q, 10), (std::vector<std::uint32_t>{7}));
  // Fired once only: the stale entry at 50 is not a deadline any more.
  EXPECT_TRUE(fire(q, 100).empty());
}

TEST(TimerQueue, CancelledKeysDoNotFire) {
  TimerQueue q;
  q.arm(1, at(10));
  q.arm(2, at(20));
  q.cancel(1);
  EXPECT_EQ(q.next(), at(20));
  EXPECT_EQ(fire(q, 100), (std::vector<std::uint32_t>{2}));
}

TEST(TimerQueue, KeyArmedAgainWhileFiringWaitsForItsTime) {
  TimerQueue q;
  q.arm(4, at(10));
  std::vector<std::uint32_t> got;
  q.expire(at(10), [&](std::uint32_t k) {
    got.push_back(k);
    q.arm(k, at(10));  // due already: not fired again in this call (no endless loop)
    q.arm(k + 1, at(40));
  });
  EXPECT_EQ(got, (std::vector<std::uint32_t>{4}));
  EXPECT_EQ(fire(q, 10), (std::vector<std::uint32_t>{4}));
  EXPECT_EQ(fire(q, 40), (std::vector<std::uint32_t>{5}));
}

}  // namespace
