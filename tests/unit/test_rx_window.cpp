// The receive window of the reliable stream and the SACK encoding.
#include <gtest/gtest.h>

#include <array>

#include "rx_window.hpp"

using namespace softrnic;
using V = RxWindow::Verdict;

TEST(RxWindow, InOrderAdvancesTheCumulativePoint) {
  RxWindow w;
  w.reset(100);
  for (std::uint32_t s = 100; s < 110; ++s) EXPECT_EQ(w.accept(s), V::deliver);
  EXPECT_EQ(w.next(), 110u);
  EXPECT_FALSE(w.has_gap());
  EXPECT_EQ(w.accept(105), V::duplicate);
}

TEST(RxWindow, GapsAreReportedAsSackBlocks) {
  RxWindow w;
  w.reset(0xFFFFFFF0u);  // across the wrap
  EXPECT_EQ(w.accept(0xFFFFFFF2u), V::deliver);
  EXPECT_EQ(w.accept(0xFFFFFFF3u), V::deliver);
  EXPECT_EQ(w.accept(0xFFFFFFFEu), V::deliver);
  EXPECT_EQ(w.accept(2), V::deliver);
  EXPECT_EQ(w.accept(0xFFFFFFF3u), V::duplicate) << "seen above the gap";
  EXPECT_EQ(w.next(), 0xFFFFFFF0u);
  EXPECT_TRUE(w.has_gap());
  std::array<SackBlock, 8> b;
  ASSERT_EQ(w.sack_blocks(b), 3u);
  EXPECT_EQ(b[0].start, 0xFFFFFFF2u);
  EXPECT_EQ(b[0].end, 0xFFFFFFF4u);
  EXPECT_EQ(b[1].start, 0xFFFFFFFEu);
  EXPECT_EQ(b[1].end, 0xFFFFFFFFu);
  EXPECT_EQ(b[2].start, 2u);
  EXPECT_EQ(b[2].end, 3u);
  std::array<SackBlock, 2> two;
  EXPECT_EQ(w.sack_blocks(two), 2u) << "as many as fit, lowest first";
  EXPECT_EQ(w.accept(0xFFFFFFF0u), V::deliver);
  EXPECT_EQ(w.accept(0xFFFFFFF1u), V::deliver);
  EXPECT_EQ(w.next(), 0xFFFFFFF4u) << "filling the gap carries the point over the received block";
}

TEST(RxWindow, BeyondTheWindowIsRefused) {
  RxWindow w;
  w.reset(7);
  EXPECT_EQ(w.accept(7 + RxWindow::kSize), V::beyond);
  EXPECT_EQ(w.accept(7 + RxWindow::kSize - 1), V::deliver);
  EXPECT_EQ(w.accept(6), V::duplicate);
}

TEST(Sack, EncodeDecodeAndMalformed) {
  const std::array<wire::SackRange, 2> in = {{{10, 12}, {20, 25}}};
  std::array<std::uint8_t, 300> buf{};
  const std::size_t n = wire::encode_sack(buf, in);
  ASSERT_EQ(n, 4u + 16u);
  std::array<wire::SackRange, 8> out;
  ASSERT_EQ(wire::decode_sack(std::span<const std::uint8_t>(buf.data(), n), std::span<wire::SackRange>(out)), 2u);
  EXPECT_EQ(out[1].start, 20u);
  EXPECT_EQ(out[1].end, 25u);
  EXPECT_EQ(wire::decode_sack(std::span<const std::uint8_t>(buf.data(), n - 1), std::span<wire::SackRange>(out)),
            wire::kSackInvalid)
      << "length disagrees with the count";
  auto bad = buf;
  bad[0] = 33;
  EXPECT_EQ(wire::decode_sack(std::span<const std::uint8_t>(bad.data(), 4 + 8 * 33), std::span<wire::SackRange>(out)),
            wire::kSackInvalid)
      << "more blocks than allowed";
  bad = buf;
  bad[8 + 3] = 10;  // block 0 end = start: empty
  EXPECT_EQ(wire::decode_sack(std::span<const std::uint8_t>(bad.data(), n), std::span<wire::SackRange>(out)),
            wire::kSackInvalid);
  EXPECT_EQ(wire::decode_sack(std::span<const std::uint8_t>(), std::span<wire::SackRange>(out)), 0u) << "no blocks";
}
