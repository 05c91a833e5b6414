// Memory region checks: every refusal reason, and the STag key byte.
#include <gtest/gtest.h>

#include <set>

#include "mr_table.hpp"

using namespace softrnic;

namespace {

struct MrTableTest : ::testing::Test {
  MrTable t{16};
  Pd pd1{1, 0}, pd2{2, 0};
  Mr* mr = nullptr;
  void SetUp() override {
    ASSERT_EQ(t.reg(&pd1, 0x10000, 0x1000, Access::local_write | Access::remote_write, mr), Status::ok);
  }
};

}  // namespace

TEST_F(MrTableTest, AcceptsAccessInsideBounds) {
  Mr* found = nullptr;
  EXPECT_EQ(t.check(mr->stag, &pd1, 0x10000, 0x1000, Access::remote_write, &found), MrCheck::ok);
  EXPECT_EQ(found, mr);
  EXPECT_EQ(t.check(mr->stag, &pd1, 0x10FFF, 1, Access::local_write), MrCheck::ok);
  EXPECT_EQ(t.check(mr->stag, &pd1, 0x10800, 0, Access::none), MrCheck::ok);
}

TEST_F(MrTableTest, RefusesWrongKey) {
  const std::uint32_t wrong = (mr->stag & ~0xFFu) | ((mr->stag + 1) & 0xFF);
  EXPECT_EQ(t.check(wrong, &pd1, 0x10000, 1, Access::none), MrCheck::key_mismatch);
}

TEST_F(MrTableTest, RefusesUnknownAndZeroStag) {
  EXPECT_EQ(t.check(0, &pd1, 0x10000, 1, Access::none), MrCheck::invalid_stag);
  EXPECT_EQ(t.check(0x7700 | 1, &pd1, 0x10000, 1, Access::none), MrCheck::invalid_stag);
}

TEST_F(MrTableTest, RefusesWrongPd) {
  EXPECT_EQ(t.check(mr->stag, &pd2, 0x10000, 1, Access::none), MrCheck::pd_mismatch);
}

TEST_F(MrTableTest, RefusesOutOfBounds) {
  EXPECT_EQ(t.check(mr->stag, &pd1, 0xFFFF, 1, Access::none), MrCheck::out_of_bounds);
  EXPECT_EQ(t.check(mr->stag, &pd1, 0x10FFF, 2, Access::none), MrCheck::out_of_bounds);
  EXPECT_EQ(t.check(mr->stag, &pd1, 0x10000, 0x1001, Access::none), MrCheck::out_of_bounds);
  EXPECT_EQ(t.check(mr->stag, &pd1, ~std::uint64_t{0}, 2, Access::none), MrCheck::out_of_bounds) << "wrap";
}

TEST_F(MrTableTest, RefusesMissingAccess) {
  EXPECT_EQ(t.check(mr->stag, &pd1, 0x10000, 1, Access::remote_read), MrCheck::access_denied);
  EXPECT_EQ(t.check(mr->stag, &pd1, 0x10000, 1, Access::remote_write | Access::remote_read), MrCheck::access_denied);
}

TEST_F(MrTableTest, StaleStagAfterDeregIsRefused) {
  const std::uint32_t old = mr->stag;
  ASSERT_EQ(t.dereg(mr), Status::ok);
  EXPECT_EQ(t.check(old, &pd1, 0x10000, 1, Access::none), MrCheck::invalid_stag);
  Mr* again = nullptr;
  ASSERT_EQ(t.reg(&pd1, 0x10000, 0x1000, Access::remote_write, again), Status::ok);
  EXPECT_EQ(again->stag >> MrTable::kKeyBits, old >> MrTable::kKeyBits) << "slot reused";
  EXPECT_NE(again->stag, old) << "with a new key";
  EXPECT_EQ(t.check(old, &pd1, 0x10000, 1, Access::none), MrCheck::key_mismatch);
}

// ReDMArk (USENIX Security 2021): STags that follow from one another let a peer that has seen one
// forge the next. The key of a reused slot is drawn at random, not counted up.
TEST_F(MrTableTest, KeysAreUnpredictable) {
  std::set<std::uint32_t> keys;
  int steps_of_one = 0;
  std::uint32_t prev = mr->stag & MrTable::kKeyMask;
  for (int i = 0; i < 200; ++i) {
    ASSERT_EQ(t.dereg(mr), Status::ok);
    ASSERT_EQ(t.reg(&pd1, 0x10000, 0x1000, Access::remote_write, mr), Status::ok);
    const std::uint32_t key = mr->stag & MrTable::kKeyMask;
    EXPECT_NE(key, prev) << "a reused slot never gets its previous key back";
    EXPECT_NE(key, 0u);
    steps_of_one += key == ((prev + 1) & MrTable::kKeyMask);
    keys.insert(key);
    prev = key;
  }
  EXPECT_LT(steps_of_one, 5) << "keys counted up";
  EXPECT_GT(keys.size(), 190u) << "16 random bits: few repeats in 200";
}

TEST_F(MrTableTest, RegistrationLimitsAndArguments) {
  Mr* m = nullptr;
  EXPECT_EQ(t.reg(nullptr, 0x1000, 1, Access::none, m), Status::invalid_param);
  EXPECT_EQ(t.reg(&pd1, 0x1000, 0, Access::none, m), Status::invalid_param);
  EXPECT_EQ(t.reg(&pd1, ~std::uint64_t{0}, 2, Access::none, m), Status::invalid_param);
  for (int i = 1; i < 16; ++i) ASSERT_EQ(t.reg(&pd1, 0x1000, 1, Access::none, m), Status::ok);
  EXPECT_EQ(t.reg(&pd1, 0x1000, 1, Access::none, m), Status::insufficient_resources);
  EXPECT_EQ(pd1.users, 16u);
}
