// What crc32c.cpp, roce.cpp and crc_paths.cpp share: ISA-L's narrow codes, whether this CPU runs
// them, its wide codes as they must be called, and the sizes from which the wide codes are taken
// instead (crc_paths.hpp), read on every CRC.
#pragma once

#include <isa-l/crc.h>

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
// AVX: the wide codes may have left the vector registers' upper halves in use (below).
extern const bool have_avx;

// ISA-L's AVX-512 codes return with the upper halves of the vector registers in use (no
// VZEROUPPER). Intel cores then make every SSE-encoded instruction after them (this build's own
// code, compiled for x86-64, and the narrow codes) wait on those halves: on a Xeon with AVX-512 a
// 256-byte udp ping-pong took 8.4 us against 5.9 with the narrow code, its CPU per message 17.5
// us against 11.6. AMD's cores do not pay this. So the wide codes are called only through
// wide_crc32c and wide_crc32_gzip, which clear them.
#if defined(__x86_64__)
__attribute__((target("avx"))) inline void after_wide_code() noexcept {
  if (have_avx) __builtin_ia32_vzeroupper();
}
#else
inline void after_wide_code() noexcept {}
#endif

// The wide codes: ISA-L's dispatchers (AVX-512 with VPCLMULQDQ where the CPU has them).
inline unsigned int wide_crc32c(const unsigned char* p, int len, unsigned int crc) noexcept {
  crc = crc32_iscsi(const_cast<unsigned char*>(p), len, crc);
  after_wide_code();
  return crc;
}
inline std::uint32_t wide_crc32_gzip(std::uint32_t crc, const unsigned char* p, std::uint64_t len) noexcept {
  crc = crc32_gzip_refl(crc, p, len);
  after_wide_code();
  return crc;
}

}  // namespace softrnic::wire::detail
