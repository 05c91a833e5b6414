// The receive side of the reliable sequenced stream: which sequence numbers arrived, the
// cumulative point, and the selective-acknowledgement blocks above it. Pure logic.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "softrnic/wire/udp_frame.hpp"

namespace softrnic {

// [start, end): sequence numbers received above the cumulative point.
using SackBlock = wire::SackRange;

class RxWindow {
 public:
  static constexpr std::uint32_t kSize = 4096;  // sequence numbers accepted ahead of next()
  enum class Verdict { deliver, duplicate, beyond };

  void reset(std::uint32_t next) {
    next_ = next;
    highest_ = next;
    bits_.fill(0);
  }
  // Records `seq`: deliver (new, inside the window), duplicate (seen), or beyond the window.
  Verdict accept(std::uint32_t seq);
  // Every sequence number below next() has been received.
  std::uint32_t next() const { return next_; }
  // Whether anything above next() has been received.
  bool has_gap() const { return highest_ != next_; }
  // Up to out.size() blocks received above next(), lowest first; returns how many.
  std::size_t sack_blocks(std::span<SackBlock> out) const;

 private:
  bool test(std::uint32_t s) const { return bits_[(s % kSize) / 64] >> (s % 64) & 1; }
  void set(std::uint32_t s) { bits_[(s % kSize) / 64] |= std::uint64_t{1} << (s % 64); }
  void clear(std::uint32_t s) { bits_[(s % kSize) / 64] &= ~(std::uint64_t{1} << (s % 64)); }

  std::uint32_t next_ = 0;
  std::uint32_t highest_ = 0;  // one past the highest received
  std::array<std::uint64_t, kSize / 64> bits_{};
};

}  // namespace softrnic
