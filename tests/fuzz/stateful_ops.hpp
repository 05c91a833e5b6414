// The input language of fuzz_stateful (shared with fuzz_seeds, which writes seed programs in it).
//
// An input is a preamble and then operations, read front to back; whatever is missing past the
// end reads as zero. Multi-byte numbers are little-endian.
//   preamble: u8 flags (bit 0: side 1's QP takes its receives from an SRQ; bit 1: with the gap_fill
//             policy; bit 2: side 1 has receive watermarks, soft 2, hard 4), u8 ord, u8 ird (each
//             % 5), u8 receives to post on side 0, u8 on side 1 (each % 9)
//   then at most kMaxOps operations, each an opcode byte (% kOpCount) and its fields (see
//   fuzz_stateful.cpp). Side 0 connects to side 1 (its listener); "target" names the side a
//   hostile frame goes to, sent from the other side's address as if its RNIC had sent it.
#pragma once

#include <cstdint>
#include <vector>

namespace fuzzops {

enum Op : std::uint8_t {
  kProgress = 0,      // u8 rounds
  kPostSend,          // u8 side, u8 kind, u16 len, u16 local off, u16 remote off, u8 flags
  kPostRecv,          // u8 side, u8 sges, u16 len, u16 len2
  kInjectRaw,         // u8 target, u8 seal, u16 len, bytes
  kInjectFrame,       // u8 target, u8 type, header fields, u16 len, bytes
  kInjectDdp,         // u8 target, header fields, DDP fields
  kInjectAck,         // u8 target, header fields, SACK fields
  kInjectCm,          // u8 target, CM fields
  kInjectStreamCtrl,  // u8 target, header fields, u8 sel, u32 op
  kDropOwn,           // u8 side, u8 on: the side's own data frames are dropped (not sent)
  kBindWindow,        // u8 side, u16 off, u16 len (0: unbind)
  kDisconnect,        // u8 side, u8 how (% 3: abrupt, graceful, modify_qp to error)
  kAcceptNext,        // u8 side: the next connection request the listener sees is accepted on a spare QP
  kWait,              // u8 n: sleep (n % 4 + 1) * 500 us, at most 3 ms per input (retransmission timers)
  kOpCount
};
inline constexpr int kMaxOps = 96;

// A little builder for seed programs.
struct Program {
  std::vector<std::uint8_t> b;
  Program& u8(std::uint8_t v) {
    b.push_back(v);
    return *this;
  }
  Program& u16(std::uint16_t v) { return u8(static_cast<std::uint8_t>(v)).u8(static_cast<std::uint8_t>(v >> 8)); }
  Program& u32(std::uint32_t v) { return u16(static_cast<std::uint16_t>(v)).u16(static_cast<std::uint16_t>(v >> 16)); }
  Program& u64(std::uint64_t v) { return u32(static_cast<std::uint32_t>(v)).u32(static_cast<std::uint32_t>(v >> 32)); }
};

}  // namespace fuzzops
