#include "softrnic/wire/crc32c.hpp"

#include <isa-l/crc.h>

#include <climits>

namespace softrnic::wire {

void Crc32c::update(std::span<const std::uint8_t> data) {
  // ISA-L's crc32_iscsi takes the running (pre-inverted) value and returns it un-inverted.
  const std::uint8_t* p = data.data();
  std::size_t left = data.size();
  while (left > 0) {
    const int chunk = left > static_cast<std::size_t>(INT_MAX) ? INT_MAX : static_cast<int>(left);
    state_ = crc32_iscsi(const_cast<unsigned char*>(p), chunk, state_);
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
