// The sizes crc32c.cpp and roce.cpp switch at (crc_paths.hpp), read on every CRC.
#pragma once

#include <atomic>
#include <cstddef>

namespace softrnic::wire::detail {

extern std::atomic<std::size_t> crc32c_wide_from;
extern std::atomic<std::size_t> icrc_wide_from;

}  // namespace softrnic::wire::detail
