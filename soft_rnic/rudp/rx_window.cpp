#include "rx_window.hpp"

namespace softrnic {

RxWindow::Verdict RxWindow::accept(std::uint32_t seq) {
  const auto d = static_cast<std::int32_t>(seq - next_);
  if (d < 0) return Verdict::duplicate;
  if (static_cast<std::uint32_t>(d) >= kSize) return Verdict::beyond;
  if (test(seq)) return Verdict::duplicate;
  set(seq);
  if (static_cast<std::int32_t>(seq + 1 - highest_) > 0) highest_ = seq + 1;
  while (test(next_)) {
    clear(next_);
    ++next_;
  }
  return Verdict::deliver;
}

std::size_t RxWindow::sack_blocks(std::span<SackBlock> out) const {
  std::size_t n = 0;
  std::uint32_t s = next_;
  while (n < out.size() && s != highest_) {
    while (s != highest_ && !test(s)) ++s;
    if (s == highest_) break;
    const std::uint32_t start = s;
    while (s != highest_ && test(s)) ++s;
    out[n++] = SackBlock{start, s};
  }
  return n;
}

}  // namespace softrnic
