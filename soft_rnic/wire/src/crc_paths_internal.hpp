// What crc32c.cpp, roce.cpp and crc_paths.cpp share: ISA-L's narrow codes, whether this CPU runs
// them, and the sizes from which the wide codes are taken instead (crc_paths.hpp), read on every
// CRC.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

// ISA-L's narrow codes (SSE4.2 / SSE and PCLMULQDQ): exported (versioned, *_slver) but not
// declared in its public header, which offers only the dispatchers.
extern "C" unsigned int crc32_iscsi_01(unsigned char* buffer, int len, unsigned int init_crc);
extern "C" std::uint32_t crc32_gzip_refl_by8(std::uint32_t init_crc, const unsigned char* buf, std::uint64_t len);

namespace softrnic::wire::detail {

// SSE4.2 and PCLMULQDQ: the narrow codes run here. (Read before it is set, during another file's
// static initialisation, it is false: the dispatchers then, with the same CRCs.)
extern const bool have_pclmul;
extern std::atomic<std::size_t> crc32c_wide_from;
extern std::atomic<std::size_t> icrc_wide_from;

}  // namespace softrnic::wire::detail
