// Typed network-order fields: not arithmetic types, so a missing conversion does not compile.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>

namespace softrnic::wire {

template <typename T>
constexpr T byteswap(T v) {  // byteswap is C++23
  if constexpr (sizeof(T) == 2) return static_cast<T>(__builtin_bswap16(v));
  if constexpr (sizeof(T) == 4) return static_cast<T>(__builtin_bswap32(v));
  if constexpr (sizeof(T) == 8) return static_cast<T>(__builtin_bswap64(v));
}

template <typename T>
class Be {
  static_assert(std::is_unsigned_v<T>);

 public:
  Be() = default;
  explicit Be(T host) { set(host); }
  T get() const {
    T v;
    std::memcpy(&v, raw_.data(), sizeof v);
    return byteswap(v);
  }
  void set(T host) {
    T v = byteswap(host);
    std::memcpy(raw_.data(), &v, sizeof v);
  }

 private:
  std::array<std::uint8_t, sizeof(T)> raw_{};
};

// A 24-bit field (InfiniBand's QPNs, PSNs and MSNs); set keeps the low 24 bits.
class Be24 {
 public:
  Be24() = default;
  explicit Be24(std::uint32_t host) { set(host); }
  std::uint32_t get() const {
    return static_cast<std::uint32_t>(raw_[0]) << 16 | static_cast<std::uint32_t>(raw_[1]) << 8 | raw_[2];
  }
  void set(std::uint32_t host) {
    raw_ = {static_cast<std::uint8_t>(host >> 16), static_cast<std::uint8_t>(host >> 8),
            static_cast<std::uint8_t>(host)};
  }

 private:
  std::array<std::uint8_t, 3> raw_{};
};

using Be16 = Be<std::uint16_t>;
using Be32 = Be<std::uint32_t>;
using Be64 = Be<std::uint64_t>;
static_assert(sizeof(Be16) == 2 && sizeof(Be24) == 3 && sizeof(Be32) == 4 && sizeof(Be64) == 8);
static_assert(alignof(Be64) == 1);

}  // namespace softrnic::wire
