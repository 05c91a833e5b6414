// Ring: the FIFO behind frames in flight, CQs and EVD queues (keeps its storage).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "softrnic/ring.hpp"

using softrnic::Ring;

// Order is kept across wrap-around and growth; every element popped or cleared is destroyed
// (frames hold references to posted buffers), and what is left is destroyed with the ring.
TEST(Ring, FifoAcrossWrapAndGrowthDestroysWhatItPops) {
  auto live = std::make_shared<int>(0);
  struct Counted {
    std::shared_ptr<int> live;
    int v;
    Counted(std::shared_ptr<int> l, int x) : live(std::move(l)), v(x) { ++*live; }
    Counted(Counted&& o) noexcept : live(o.live), v(o.v) { ++*live; }
    Counted& operator=(Counted&&) = delete;
    ~Counted() { --*live; }
  };
  {
    Ring<Counted> r;
    EXPECT_TRUE(r.empty());
    int next_in = 0, next_out = 0;
    // Push 5 pop 3, over and over: the head walks around the storage while the ring grows.
    for (int round = 0; round < 40; ++round) {
      for (int i = 0; i < 5; ++i) r.emplace_back(live, next_in++);
      for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(r.front().v, next_out++);
        r.pop_front();
      }
      ASSERT_EQ(r.size(), static_cast<std::size_t>(next_in - next_out));
      ASSERT_EQ(*live, next_in - next_out) << "one live element per queued one";
      int expect = next_out;
      for (const Counted& c : r) ASSERT_EQ(c.v, expect++);
      ASSERT_EQ(r[r.size() - 1].v, next_in - 1);
      ASSERT_EQ(r.back().v, next_in - 1);
    }
    r.clear();
    EXPECT_TRUE(r.empty());
    EXPECT_EQ(*live, 0);
    r.emplace_back(live, 7);
    r.emplace_back(live, 8);
    EXPECT_EQ(r.front().v, 7);
  }
  EXPECT_EQ(*live, 0) << "the ring's destructor destroyed what was left";
}
