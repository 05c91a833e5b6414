// DDP (RFC 5041) and RDMAP (RFC 5040) headers: layouts, one opcode table, and pure codecs.
// No I/O, no allocation.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "softrnic/wire/be.hpp"

namespace softrnic::wire {

enum class RdmapOpcode : std::uint8_t {
  rdma_write = 0x0,
  read_request = 0x1,
  read_response = 0x2,
  send = 0x3,
  send_invalidate = 0x4,
  send_se = 0x5,
  send_se_invalidate = 0x6,
  terminate = 0x7,
};

// Untagged queue numbers (RFC 5040 section 5.1).
inline constexpr std::uint32_t kQnSend = 0;
inline constexpr std::uint32_t kQnReadRequest = 1;
inline constexpr std::uint32_t kQnTerminate = 2;

inline constexpr std::uint8_t kDdpVersion = 1;
inline constexpr std::uint8_t kRdmapVersion = 1;

struct OpcodeInfo {
  std::string_view name;
  bool valid = false;
  bool tagged = false;         // DDP tagged buffer model
  std::uint32_t qn = 0;        // untagged queue number
  std::size_t ulp_header = 0;  // RDMAP header bytes after the DDP header (Read Request, Terminate)
  bool carries_inv_stag = false;
  bool solicited = false;
};

struct DdpTaggedHdr {
  std::uint8_t ddp_ctrl;
  std::uint8_t rdmap_ctrl;
  Be32 stag;
  Be64 to;
};
static_assert(sizeof(DdpTaggedHdr) == 14);

struct DdpUntaggedHdr {
  std::uint8_t ddp_ctrl;
  std::uint8_t rdmap_ctrl;
  Be32 rsvd_ulp;  // Invalidate STag for Send with Invalidate
  Be32 qn;
  Be32 msn;
  Be32 mo;
};
static_assert(sizeof(DdpUntaggedHdr) == 18);

struct ReadRequestHdr {
  Be32 sink_stag;
  Be64 sink_to;
  Be32 size;
  Be32 src_stag;
  Be64 src_to;
};
static_assert(sizeof(ReadRequestHdr) == 28);

// Terminate control word: Layer(4) EType(4) ErrorCode(8) M D R (3) reserved(13).
struct TerminateHdr {
  Be32 ctrl;
};
static_assert(sizeof(TerminateHdr) == 4);

inline constexpr std::array<OpcodeInfo, 16> kOpcodeTable = [] {
  std::array<OpcodeInfo, 16> t{};
  t[0x0] = {.name = "RDMA Write", .valid = true, .tagged = true};
  t[0x1] = {.name = "RDMA Read Request", .valid = true, .qn = kQnReadRequest, .ulp_header = sizeof(ReadRequestHdr)};
  t[0x2] = {.name = "RDMA Read Response", .valid = true, .tagged = true};
  t[0x3] = {.name = "Send", .valid = true, .qn = kQnSend};
  t[0x4] = {.name = "Send with Invalidate", .valid = true, .qn = kQnSend, .carries_inv_stag = true};
  t[0x5] = {.name = "Send with Solicited Event", .valid = true, .qn = kQnSend, .solicited = true};
  t[0x6] = {
      .name = "Send with SE and Invalidate", .valid = true, .qn = kQnSend, .carries_inv_stag = true, .solicited = true};
  t[0x7] = {.name = "Terminate", .valid = true, .qn = kQnTerminate, .ulp_header = sizeof(TerminateHdr)};
  return t;
}();
static_assert(kOpcodeTable[0x0].valid && kOpcodeTable[0x7].valid && !kOpcodeTable[0x8].valid);

constexpr const OpcodeInfo& opcode_info(RdmapOpcode op) {
  return kOpcodeTable[static_cast<std::uint8_t>(op) & 0xF];
}

enum class DecodeError : std::uint8_t {
  none,
  too_short,
  bad_ddp_version,
  bad_rdmap_version,
  unknown_opcode,
  model_mismatch,  // tagged flag disagrees with the opcode
  bad_qn,          // untagged QN does not match the opcode
};
std::string_view to_string(DecodeError e);

// One decoded DDP segment. `payload` points into the input.
struct DdpSegment {
  RdmapOpcode opcode = RdmapOpcode::send;
  bool tagged = false;
  bool last = false;
  std::uint32_t stag = 0;      // tagged
  std::uint64_t to = 0;        // tagged
  std::uint32_t inv_stag = 0;  // untagged
  std::uint32_t qn = 0;
  std::uint32_t msn = 0;
  std::uint32_t mo = 0;
  std::span<const std::uint8_t> ulp_header;  // Read Request or Terminate header
  std::span<const std::uint8_t> payload;
};

// Checks and decodes a DDP segment (header check before any data is looked at).
DecodeError decode_ddp(std::span<const std::uint8_t> bytes, DdpSegment& out);

// Header builders: write the header into `out` and return its length (0 if `out` is too small).
std::size_t encode_tagged(std::span<std::uint8_t> out, RdmapOpcode op, bool last, std::uint32_t stag, std::uint64_t to);
std::size_t encode_untagged(std::span<std::uint8_t> out, RdmapOpcode op, bool last, std::uint32_t qn, std::uint32_t msn,
                            std::uint32_t mo, std::uint32_t inv_stag = 0);

// Terminate (RFC 5040 section 4.8).
enum class TermLayer : std::uint8_t { rdmap = 0, ddp = 1, llp = 2 };
enum class RdmapEtype : std::uint8_t { local_catastrophic = 0, remote_protection = 1, remote_operation = 2 };
enum class DdpEtype : std::uint8_t { local_catastrophic = 0, tagged_buffer = 1, untagged_buffer = 2, rsvd = 3 };

// DDP tagged buffer error codes (RFC 5041 section 7.2).
enum class DdpTaggedError : std::uint8_t {
  invalid_stag = 0x00,
  base_bounds = 0x01,
  stag_not_associated = 0x02,
  to_wrap = 0x03,
  invalid_version = 0x04
};
// DDP untagged buffer error codes.
enum class DdpUntaggedError : std::uint8_t {
  invalid_qn = 0x01,
  invalid_msn_no_buffer = 0x02,
  invalid_msn_range = 0x03,
  invalid_mo = 0x04,
  message_too_long = 0x05,
  invalid_version = 0x06
};
// RDMAP error codes (RFC 5040 section 7.2), one table shared by the Remote Protection (etype 1)
// and Remote Operation (etype 2) error types.
enum class RdmapError : std::uint8_t {
  invalid_stag = 0x00,
  base_bounds = 0x01,
  access_violation = 0x02,
  stag_not_associated = 0x03,
  to_wrap = 0x04,
  invalid_version = 0x05,
  unexpected_opcode = 0x06,
  catastrophic_local = 0x07,
  catastrophic_global = 0x08,
  stag_cannot_invalidate = 0x09,
  unspecified = 0xFF
};

struct TerminateInfo {
  TermLayer layer = TermLayer::rdmap;
  std::uint8_t etype = 0;
  std::uint8_t code = 0;
  bool ddp_header_present = false;    // D
  bool rdmap_header_present = false;  // R
};
TerminateHdr encode_terminate(const TerminateInfo& t);
TerminateInfo decode_terminate(const TerminateHdr& h);

}  // namespace softrnic::wire
