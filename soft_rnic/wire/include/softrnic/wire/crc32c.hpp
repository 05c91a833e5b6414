// CRC-32C (Castagnoli), as MPA and our UDP framing use it. Backed by ISA-L.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace softrnic::wire {

// The CRC-32C value of `data` ("123456789" -> 0xE3069283). On the wire it is sent as the
// little-endian image of this value.
std::uint32_t crc32c(std::span<const std::uint8_t> data);

// The same over data that arrives in pieces.
class Crc32c {
 public:
  void update(std::span<const std::uint8_t> data);
  std::uint32_t value() const { return ~state_; }

 private:
  std::uint32_t state_ = 0xFFFFFFFFu;
};

}  // namespace softrnic::wire
