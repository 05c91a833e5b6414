// Checks shared by the wire fuzz targets: each decoder's verdict against a plain reading of the
// specification (docs/wire.md, RFC 5040/5041), and re-encoding what was decoded.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <span>

#include "fuzz_check.hpp"
#include "softrnic/wire/ddp.hpp"
#include "softrnic/wire/udp_frame.hpp"

namespace fuzzcheck {

namespace w = softrnic::wire;

inline std::uint32_t be32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) << 24 | static_cast<std::uint32_t>(p[1]) << 16 |
         static_cast<std::uint32_t>(p[2]) << 8 | p[3];
}

// An ACK body: empty (no blocks), or count, three zero bytes and `count` (<= 32) blocks of
// [start, end) with end after start (serial arithmetic).
inline bool sack_valid_reference(std::span<const std::uint8_t> b) {
  if (b.empty()) return true;
  if (b.size() < 4) return false;
  const std::size_t n = b[0];
  if (n > 32 || b.size() != 4 + 8 * n || b[1] != 0 || b[2] != 0 || b[3] != 0) return false;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t start = be32(b.data() + 4 + 8 * i), end = be32(b.data() + 8 + 8 * i);
    if (end == start || end - start >= 0x80000000u) return false;
  }
  return true;
}

inline void check_sack(std::span<const std::uint8_t> body) {
  std::array<w::SackRange, w::kMaxSackBlocks> blocks;
  const std::size_t n = w::decode_sack(body, std::span<w::SackRange>(blocks));
  FUZZ_CHECK((n != w::kSackInvalid) == sack_valid_reference(body));
  // An output array smaller than the block count: the body is refused, nothing written past it.
  std::array<w::SackRange, 2> small;
  const std::size_t m = w::decode_sack(body, std::span<w::SackRange>(small));
  FUZZ_CHECK(m == (n == w::kSackInvalid || n > small.size() ? w::kSackInvalid : n));
  if (n == w::kSackInvalid) return;
  FUZZ_CHECK(n <= w::kMaxSackBlocks);
  if (body.empty()) {
    FUZZ_CHECK(n == 0);
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    FUZZ_CHECK(blocks[i].start == be32(body.data() + 4 + 8 * i));
    FUZZ_CHECK(blocks[i].end == be32(body.data() + 8 + 8 * i));
  }
  std::array<std::uint8_t, 4 + 8 * w::kMaxSackBlocks> out{};
  FUZZ_CHECK(w::encode_sack(out, {blocks.data(), n}) == body.size());
  FUZZ_CHECK(std::memcmp(out.data(), body.data(), body.size()) == 0);
  // Too small an output: nothing written, length 0.
  if (n > 0) FUZZ_CHECK(w::encode_sack(std::span<std::uint8_t>(out.data(), 4 + 8 * n - 1), {blocks.data(), n}) == 0);
}

// decode_ddp's verdict as RFC 5041 section 4 / RFC 5040 section 4 read: DDP version 1 in the low
// bits of the DDP control, RDMAP version 1 and zero reserved bits before the opcode, opcodes 0..7,
// the tagged flag set for RDMA Write and Read Response only, untagged QN 0 for Sends, 1 for Read
// Requests, 2 for Terminates, and room for the headers (14 tagged, 18 untagged, plus 28 for a
// Read Request, 4 for a Terminate).
inline w::DecodeError ddp_reference(std::span<const std::uint8_t> b) {
  using E = w::DecodeError;
  if (b.size() < 2) return E::too_short;
  if ((b[0] & 0x03) != 1) return E::bad_ddp_version;
  if ((b[1] >> 6) != 1) return E::bad_rdmap_version;
  if ((b[1] & 0x30) != 0) return E::unknown_opcode;
  const unsigned op = b[1] & 0x0F;
  if (op > 7) return E::unknown_opcode;
  const bool tagged = (b[0] & 0x80) != 0;
  if (tagged != (op == 0 || op == 2)) return E::model_mismatch;
  const std::size_t hdr = tagged ? 14 : 18;
  if (b.size() < hdr) return E::too_short;
  if (!tagged) {
    const std::uint32_t want_qn = op == 1 ? 1 : op == 7 ? 2 : 0;
    if (be32(b.data() + 6) != want_qn) return E::bad_qn;
  }
  const std::size_t ulp = op == 1 ? 28 : op == 7 ? 4 : 0;
  if (b.size() < hdr + ulp) return E::too_short;
  return E::none;
}

inline void check_terminate(const w::TerminateHdr& th) {
  const w::TerminateInfo t = w::decode_terminate(th);
  FUZZ_CHECK(static_cast<unsigned>(t.layer) == th.ctrl.get() >> 28);
  // Layer, EType, code, D and R survive; M and the reserved bits are not kept.
  FUZZ_CHECK(w::encode_terminate(t).ctrl.get() == (th.ctrl.get() & 0xFFFF6000u));
}

// Decodes a DDP segment and checks the verdict, the spans and the re-encoded header.
inline void check_ddp(std::span<const std::uint8_t> b) {
  w::DdpSegment s;
  const w::DecodeError e = w::decode_ddp(b, s);
  FUZZ_CHECK_MSG(e == ddp_reference(b), "decode_ddp says %d, the reference %d", static_cast<int>(e),
                 static_cast<int>(ddp_reference(b)));
  FUZZ_CHECK(!w::to_string(e).empty());
  if (e != w::DecodeError::none) return;
  const w::OpcodeInfo& info = w::opcode_info(s.opcode);
  FUZZ_CHECK(info.valid && s.tagged == info.tagged && !info.name.empty());
  const std::size_t hdr = s.tagged ? sizeof(w::DdpTaggedHdr) : sizeof(w::DdpUntaggedHdr);
  FUZZ_CHECK(s.ulp_header.data() == b.data() + hdr && s.ulp_header.size() == info.ulp_header);
  FUZZ_CHECK(s.payload.data() == b.data() + hdr + info.ulp_header);
  FUZZ_CHECK(s.payload.size() == b.size() - hdr - info.ulp_header);
  FUZZ_CHECK(s.last == ((b[0] & 0x40) != 0));
  std::array<std::uint8_t, sizeof(w::DdpUntaggedHdr)> again{};
  const std::size_t n = s.tagged ? w::encode_tagged(again, s.opcode, s.last, s.stag, s.to)
                                 : w::encode_untagged(again, s.opcode, s.last, s.qn, s.msn, s.mo, s.inv_stag);
  FUZZ_CHECK(n == hdr);
  // The DDP control's reserved bits are ignored on receive and sent as zero; every other header
  // byte comes back as it was.
  FUZZ_CHECK((again[0] & 0x3C) == 0 && (again[0] & ~0x3C) == (b[0] & ~0x3C));
  FUZZ_CHECK(std::memcmp(again.data() + 1, b.data() + 1, hdr - 1) == 0);
  // Too small an output: nothing written, length 0.
  FUZZ_CHECK((s.tagged
                  ? w::encode_tagged(std::span<std::uint8_t>(again.data(), hdr - 1), s.opcode, s.last, s.stag, s.to)
                  : w::encode_untagged(std::span<std::uint8_t>(again.data(), hdr - 1), s.opcode, s.last, s.qn, s.msn,
                                       s.mo, s.inv_stag)) == 0);
  if (s.opcode == w::RdmapOpcode::terminate) {
    w::TerminateHdr th;
    std::memcpy(&th, s.ulp_header.data(), sizeof th);
    check_terminate(th);
  }
  if (s.opcode == w::RdmapOpcode::read_request) {
    w::ReadRequestHdr rr;
    std::memcpy(&rr, s.ulp_header.data(), sizeof rr);
    FUZZ_CHECK(rr.size.get() == be32(s.ulp_header.data() + 12));
  }
}

}  // namespace fuzzcheck
