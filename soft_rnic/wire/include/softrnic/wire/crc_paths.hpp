// Which of ISA-L's CRC codes a buffer takes, chosen by a measurement on the running CPU.
//
// ISA-L has, for CRC-32C (MPA, our UDP framing) and zlib's CRC-32 (RoCEv2's ICRC), a "narrow"
// code (SSE4.2 / PCLMULQDQ on 128-bit registers) and, behind its dispatcher, a "wide" one
// (AVX-512 with VPCLMULQDQ where the CPU has them): about twice as fast on 1-8 KiB buffers on
// some CPUs (CRC-32C at 4 KiB, AMD EPYC: 49 against 27 GB/s; the ICRC's code 50 against 11). On
// others the wide code slows the whole core around it (Intel's 512-bit units power up and its
// frequency drops), which costs a ping-pong more than the CRC saves. So the wide code is taken
// from a size the calibration chooses: where it does not slow the core, from the smallest size
// at which it is faster; otherwise only for the large buffers of streams, as before.
//
//   SOFTRNIC_CRC=narrow|wide|measure   (default measure) narrow: the defaults below, whatever
//   the CPU; wide: the wide code from 257 bytes; a value of neither is an error that measures.
#pragma once

#include <cstddef>
#include <string>

namespace softrnic::wire {

struct CrcPaths {
  std::size_t crc32c_wide_from;  // CRC-32C of this many bytes or more takes the wide code
  std::size_t icrc_wide_from;    // the ICRC's CRC-32 of this many bytes or more takes it
  bool measured = false;         // chosen by calibrate_crc_paths (not the defaults)
  bool wide_slows_core = false;  // what it found: work beside the wide code ran slower
};

// The defaults, before a calibration or where the CPU has no choice: CRC-32C wide beyond 8 KiB
// (jumbo frames and 64 KiB datagrams come in streams, which keep the wide units busy
// and gain from them), the ICRC never wide (a RoCEv2 packet carries at most 4 KiB).
CrcPaths default_crc_paths() noexcept;
// The paths in force (its measured fields are not kept: calibrate_crc_paths returns them).
CrcPaths crc_paths() noexcept;
// Measures once per process (about 7 ms; Device::open calls it), sets crc_paths() and returns
// them; `error` says when SOFTRNIC_CRC held something else than it takes. Thread-safe; the
// CRCs give the same values on either path.
CrcPaths calibrate_crc_paths(std::string& error);
// Tests: the paths in force until the next set (calibrate_crc_paths measures only once).
void set_crc_paths(const CrcPaths& p) noexcept;
// "CRC-32C wide from 257 B, ICRC wide from 257 B (measured: ...)".
std::string describe(const CrcPaths& p);

}  // namespace softrnic::wire
