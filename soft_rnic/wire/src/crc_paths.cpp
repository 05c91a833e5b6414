// The CRC codes' calibration (crc_paths.hpp).
#include "softrnic/wire/crc_paths.hpp"

#include <isa-l/crc.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string_view>
#include <vector>

#include "crc_paths_internal.hpp"

namespace softrnic::wire {

namespace {
constexpr std::size_t kNever = SIZE_MAX;
constexpr std::size_t kCrc32cStreamsFrom = 8193;  // the default: CRC-32C wide beyond 8 KiB
constexpr std::size_t kWideFromAll = 257;         // (CRC-32C up to 256 bytes is the inline instruction's)
}  // namespace

namespace detail {
#if defined(__x86_64__)
// (__builtin_cpu_init first: this may run among other static initialisers, before libgcc has)
extern const bool have_pclmul =
    (__builtin_cpu_init(), __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul"));
extern const bool have_avx = (__builtin_cpu_init(), __builtin_cpu_supports("avx"));
#else
extern const bool have_pclmul = false;
extern const bool have_avx = false;
#endif
std::atomic<std::size_t> crc32c_wide_from{kCrc32cStreamsFrom};
std::atomic<std::size_t> icrc_wide_from{kNever};
}  // namespace detail

namespace {

using Clock = std::chrono::steady_clock;
using Fn = std::uint32_t (*)(const unsigned char*, std::size_t, std::uint32_t);

std::uint32_t narrow_c(const unsigned char* p, std::size_t n, std::uint32_t c) {
  return crc32_iscsi_01(const_cast<unsigned char*>(p), static_cast<int>(n), c);
}
std::uint32_t wide_c(const unsigned char* p, std::size_t n, std::uint32_t c) {
  return detail::wide_crc32c(p, static_cast<int>(n), c);
}
std::uint32_t narrow_g(const unsigned char* p, std::size_t n, std::uint32_t c) {
  return crc32_gzip_refl_by8(c, p, n);
}
std::uint32_t wide_g(const unsigned char* p, std::size_t n, std::uint32_t c) {
  return detail::wide_crc32_gzip(c, p, n);
}

volatile std::uint64_t g_sink;  // (keeps the measured work from being optimised away)

// About 0.3 us of the work that runs beside a CRC: a chain of dependent multiplies, which no
// vector code can take, and a chain of SSE-encoded adds, as this build's own code is compiled.
// Where the wide code slows either (a lower clock; vector registers left in use), it shows.
#if defined(__x86_64__)
std::uint64_t scalar_work(std::uint64_t x) {
  __m128i a = _mm_set1_epi64x(static_cast<long long>(x));
  const __m128i b = _mm_set1_epi64x(3);
  for (int i = 0; i < 256; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    a = _mm_add_epi64(a, b);
    asm volatile("" : "+r"(x), "+x"(a));
  }
  return x + static_cast<std::uint64_t>(_mm_cvtsi128_si64(a));
}
#else
std::uint64_t scalar_work(std::uint64_t x) {
  for (int i = 0; i < 256; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x;
}
#endif

double ns(Clock::duration d) {
  return std::chrono::duration<double, std::nano>(d).count();
}

// The time the scalar work takes in rounds of (work, one CRC by f): a CPU whose wide code
// lowers the core's clock, or leaves the vector registers in a state that slows what follows,
// shows it here, in the work beside the CRC, not in the CRC's own time. The median round: a
// preemption of the thread (a busy host) lands in a few rounds and moves a sum, not the median.
double work_ns_beside(Fn f, const std::vector<unsigned char>& buf) {
  constexpr int kRounds = 3000;  // about 1.5 ms: long enough for a change of the clock to show
  std::vector<double> round(kRounds);
  std::uint64_t x = 1;
  std::uint32_t c = 0;
  for (int i = 0; i < kRounds; ++i) {
    const auto t0 = Clock::now();
    x = scalar_work(x);
    round[static_cast<std::size_t>(i)] = ns(Clock::now() - t0);
    c = f(buf.data(), buf.size(), c);
  }
  g_sink = x + c;
  const auto mid = round.begin() + kRounds / 2;
  std::nth_element(round.begin(), mid, round.end());
  return *mid;
}

bool wide_slows_core(const std::vector<unsigned char>& buf) {
  // Alternated, each kind's best: a run right after the wide one may still pay its clock.
  const double n1 = work_ns_beside(narrow_c, buf), w1 = work_ns_beside(wide_c, buf);
  const double n2 = work_ns_beside(narrow_c, buf), w2 = work_ns_beside(wide_c, buf);
  return std::min(w1, w2) > 1.05 * std::min(n1, n2);
}

double ns_per_call(Fn f, const std::vector<unsigned char>& buf, std::size_t n) {
  constexpr int kCalls = 200;
  double best = 1e300;
  std::uint32_t c = 0;
  for (int trial = 0; trial < 3; ++trial) {
    const auto t0 = Clock::now();
    for (int i = 0; i < kCalls; ++i) c = f(buf.data(), n, c);
    best = std::min(best, ns(Clock::now() - t0) / kCalls);
  }
  g_sink = c;
  return best;
}

// From which size the wide code is taken: the smallest of 1 KiB and 4 KiB from which it is
// clearly (10 %) faster, or `otherwise`.
std::size_t wide_from(Fn narrow, Fn wide, const std::vector<unsigned char>& buf, std::size_t otherwise) {
  const auto faster = [&](std::size_t n) { return ns_per_call(wide, buf, n) < 0.9 * ns_per_call(narrow, buf, n); };
  if (!faster(4096)) return otherwise;
  return faster(1024) ? kWideFromAll : 2049;
}

CrcPaths measure() {
  CrcPaths p = default_crc_paths();
#if defined(__x86_64__)
  if (!detail::have_pclmul) return p;  // no narrow code to choose
  const std::vector<unsigned char> buf(4096, 0x5A);
  p.measured = true;
  p.wide_slows_core = wide_slows_core(buf);
  if (p.wide_slows_core) return p;
  p.crc32c_wide_from = wide_from(narrow_c, wide_c, buf, kCrc32cStreamsFrom);
  p.icrc_wide_from = wide_from(narrow_g, wide_g, buf, kNever);
#endif
  return p;
}

std::string size_text(std::size_t n) {
  if (n == kNever) return "never";
  return "from " + std::to_string(n) + " B";
}

}  // namespace

CrcPaths default_crc_paths() noexcept {
  return CrcPaths{kCrc32cStreamsFrom, kNever};
}

CrcPaths crc_paths() noexcept {
  return CrcPaths{detail::crc32c_wide_from.load(std::memory_order_relaxed),
                  detail::icrc_wide_from.load(std::memory_order_relaxed)};
}

void set_crc_paths(const CrcPaths& p) noexcept {
  detail::crc32c_wide_from.store(p.crc32c_wide_from, std::memory_order_relaxed);
  detail::icrc_wide_from.store(p.icrc_wide_from, std::memory_order_relaxed);
}

CrcPaths calibrate_crc_paths(std::string& error) {
  static std::once_flag once;
  static CrcPaths chosen;
  static std::string chosen_error;
  std::call_once(once, [] {
    const char* env = std::getenv("SOFTRNIC_CRC");
    const std::string_view want = env ? env : "measure";
    if (want == "narrow") {
      chosen = default_crc_paths();
    } else if (want == "wide") {
      chosen = CrcPaths{kWideFromAll, kWideFromAll};
    } else {
      if (want != "measure")
        chosen_error = "SOFTRNIC_CRC=" + std::string(want) + ": not narrow, wide or measure (measuring)";
      chosen = measure();
    }
    set_crc_paths(chosen);
  });
  error = chosen_error;
  return chosen;
}

std::string describe(const CrcPaths& p) {
  std::string s = "CRC-32C wide " + size_text(p.crc32c_wide_from) + ", ICRC wide " + size_text(p.icrc_wide_from);
  if (p.measured) s += p.wide_slows_core ? " (measured: the wide code slows the core)" : " (measured)";
  return s;
}

}  // namespace softrnic::wire
