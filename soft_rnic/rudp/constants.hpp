// The framing's timing and limits, and sequence-number arithmetic (internal to rudp/).
#pragma once

#include <sodium.h>

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace softrnic::rudp {

inline bool seq_lt(std::uint32_t a, std::uint32_t b) {
  return static_cast<std::int32_t>(a - b) < 0;
}
inline bool seq_le(std::uint32_t a, std::uint32_t b) {
  return static_cast<std::int32_t>(a - b) <= 0;
}

// Randomness an off-path attacker cannot predict (initial sequence numbers, connection ids,
// nonces: RFC 6528): the kernel's generator through libsodium.
inline std::uint32_t random32() {
  return randombytes_random();
}

inline constexpr std::chrono::milliseconds kCmRetry{100};
inline constexpr std::chrono::milliseconds kDisconnectTimeout{2000};
inline constexpr std::chrono::milliseconds kLinger{3000};
// RACK's reordering window: at least this (the engine's wake-up granularity on a loaded host),
// at most kMaxReorderWindow; its multiplier at most kMaxReoMult, kept kReoPersist recoveries.
inline constexpr std::chrono::microseconds kMinReorderWindow{200};
inline constexpr std::chrono::microseconds kMaxReorderWindow{100000};
inline constexpr std::uint32_t kMaxReoMult = 64;
inline constexpr std::uint32_t kReoPersist = 16;
inline constexpr std::chrono::milliseconds kResetRetry{20};
inline constexpr std::chrono::seconds kReqLinger{10};
inline constexpr std::chrono::milliseconds kReqSweep{100};
// The retransmission timeout backs off to at most this: retry_limit (12) then spans about 10 s,
// the keepalive bound, so a peer that stalls for seconds (a stopped process, a loaded host) is
// waited for, as TCP waits (RFC 6298 allows a maximum of 60 s and more).
inline constexpr std::chrono::microseconds kMaxRto{2000000};
// How long the ack of a lone in-order frame waits for outgoing data to carry it.
inline constexpr std::chrono::microseconds kAckDelay{100};
// How often the connection and retransmission timers are scanned, at most.
inline constexpr std::chrono::microseconds kTimerScan{100};
inline constexpr std::size_t kRxBurst = 32;
inline constexpr std::ptrdiff_t kMaxPendingRequests = 1024;
// A passive side that accepted waits this long (at most) for the initiator's confirmation: a
// request from an address that never confirms must not hold the listener's QP for long.
inline constexpr std::chrono::milliseconds kHalfOpenTimeout{5000};
// Sequenced frames must acknowledge something between this far below what was acknowledged and
// what was sent (RFC 5961 section 5): a blind injector must guess the ack as well as the seq.
inline constexpr std::uint32_t kMaxAckLag = 1u << 20;
// Challenge ACKs for control frames not at the exact sequence: at most one per QP per this long.
inline constexpr std::chrono::microseconds kChallengeGap{1000};
// Cookies (stateless request validation) change key epoch this often; one epoch back is accepted.
inline constexpr std::int64_t kCookieEpochSeconds = 64;

}  // namespace softrnic::rudp
