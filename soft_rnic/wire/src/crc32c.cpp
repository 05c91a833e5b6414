#include "softrnic/wire/crc32c.hpp"

#include <isa-l/crc.h>

#include <climits>
#include <cstring>

#include "crc_paths_internal.hpp"

namespace softrnic::wire {
namespace {

// Below this many bytes the CPU's CRC32 instruction (SSE4.2, the same Castagnoli polynomial),
// called inline, beats ISA-L's call and dispatch: a frame header or a small message costs a
// dozen instructions instead of ~80.
constexpr std::size_t kInlineMax = 256;
#if defined(__x86_64__)
__attribute__((target("sse4.2"))) std::uint32_t crc_sse42(std::uint32_t crc, const std::uint8_t* p, std::size_t n) {
  std::uint64_t c = crc;
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    c = __builtin_ia32_crc32di(c, v);
  }
  auto c32 = static_cast<std::uint32_t>(c);
  for (; n > 0; --n, ++p) c32 = __builtin_ia32_crc32qi(c32, *p);
  return c32;
}
// (__builtin_cpu_init first: this may run among other static initialisers, before libgcc has)
const bool kHaveSse42 = (__builtin_cpu_init(), __builtin_cpu_supports("sse4.2"));
#endif

}  // namespace

void Crc32c::update(std::span<const std::uint8_t> data) {
  // The running value is kept pre-inverted, as both ISA-L's crc32_iscsi and the instruction take
  // and return it.
  const std::uint8_t* p = data.data();
  std::size_t left = data.size();
#if defined(__x86_64__)
  if (left <= kInlineMax && kHaveSse42) {
    state_ = crc_sse42(state_, p, left);
    return;
  }
  // Beyond the inline sizes ISA-L's narrow code, up to the size from which its wide code is
  // taken (crc_paths.hpp: chosen by a measurement on this CPU).
  if (left < detail::crc32c_wide_from.load(std::memory_order_relaxed) && detail::have_pclmul) {
    state_ = crc32_iscsi_01(const_cast<unsigned char*>(p), static_cast<int>(left), state_);
    return;
  }
#endif
  while (left > 0) {
    const int chunk = left > static_cast<std::size_t>(INT_MAX) ? INT_MAX : static_cast<int>(left);
    state_ = detail::wide_crc32c(p, chunk, state_);
    p += chunk;
    left -= static_cast<std::size_t>(chunk);
  }
}

std::uint32_t crc32c(std::span<const std::uint8_t> data) {
  Crc32c c;
  c.update(data);
  return c.value();
}

}  // namespace softrnic::wire
