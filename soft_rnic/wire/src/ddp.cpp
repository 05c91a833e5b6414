#include "softrnic/wire/ddp.hpp"

#include <cstring>

namespace softrnic::wire {
namespace {

constexpr std::uint8_t kTaggedBit = 0x80;
constexpr std::uint8_t kLastBit = 0x40;

std::uint8_t ddp_ctrl(bool tagged, bool last) {
  return static_cast<std::uint8_t>((tagged ? kTaggedBit : 0) | (last ? kLastBit : 0) | kDdpVersion);
}
std::uint8_t rdmap_ctrl(RdmapOpcode op) {
  return static_cast<std::uint8_t>((kRdmapVersion << 6) | static_cast<std::uint8_t>(op));
}

}  // namespace

std::string_view to_string(DecodeError e) {
  switch (e) {
    case DecodeError::none: return "none";
    case DecodeError::too_short: return "segment shorter than its headers";
    case DecodeError::bad_ddp_version: return "DDP version is not 1";
    case DecodeError::bad_rdmap_version: return "RDMAP version is not 1";
    case DecodeError::unknown_opcode: return "unknown RDMAP opcode";
    case DecodeError::model_mismatch: return "DDP tagged flag does not match the RDMAP opcode";
    case DecodeError::bad_qn: return "DDP queue number does not match the RDMAP opcode";
  }
  return "?";
}

DecodeError decode_ddp(std::span<const std::uint8_t> b, DdpSegment& out) {
  if (b.size() < 2) return DecodeError::too_short;
  const std::uint8_t dc = b[0];
  const std::uint8_t rc = b[1];
  if ((dc & 0x03) != kDdpVersion) return DecodeError::bad_ddp_version;
  if ((rc >> 6) != kRdmapVersion) return DecodeError::bad_rdmap_version;
  if ((rc & 0x30) != 0) return DecodeError::unknown_opcode;
  const auto op = static_cast<RdmapOpcode>(rc & 0x0F);
  const OpcodeInfo& info = opcode_info(op);
  if (!info.valid) return DecodeError::unknown_opcode;
  out = DdpSegment{};
  out.opcode = op;
  out.tagged = (dc & kTaggedBit) != 0;
  out.last = (dc & kLastBit) != 0;
  if (out.tagged != info.tagged) return DecodeError::model_mismatch;
  std::size_t hdr = 0;
  if (out.tagged) {
    if (b.size() < sizeof(DdpTaggedHdr)) return DecodeError::too_short;
    DdpTaggedHdr h;
    std::memcpy(&h, b.data(), sizeof h);
    out.stag = h.stag.get();
    out.to = h.to.get();
    hdr = sizeof h;
  } else {
    if (b.size() < sizeof(DdpUntaggedHdr)) return DecodeError::too_short;
    DdpUntaggedHdr h;
    std::memcpy(&h, b.data(), sizeof h);
    out.inv_stag = h.rsvd_ulp.get();
    out.qn = h.qn.get();
    out.msn = h.msn.get();
    out.mo = h.mo.get();
    if (out.qn != info.qn) return DecodeError::bad_qn;
    hdr = sizeof h;
  }
  if (b.size() < hdr + info.ulp_header) return DecodeError::too_short;
  out.ulp_header = b.subspan(hdr, info.ulp_header);
  out.payload = b.subspan(hdr + info.ulp_header);
  return DecodeError::none;
}

std::size_t encode_tagged(std::span<std::uint8_t> out, RdmapOpcode op, bool last, std::uint32_t stag,
                          std::uint64_t to) {
  if (out.size() < sizeof(DdpTaggedHdr)) return 0;
  DdpTaggedHdr h{ddp_ctrl(true, last), rdmap_ctrl(op), Be32(stag), Be64(to)};
  std::memcpy(out.data(), &h, sizeof h);
  return sizeof h;
}

std::size_t encode_untagged(std::span<std::uint8_t> out, RdmapOpcode op, bool last, std::uint32_t qn, std::uint32_t msn,
                            std::uint32_t mo, std::uint32_t inv_stag) {
  if (out.size() < sizeof(DdpUntaggedHdr)) return 0;
  DdpUntaggedHdr h{ddp_ctrl(false, last), rdmap_ctrl(op), Be32(inv_stag), Be32(qn), Be32(msn), Be32(mo)};
  std::memcpy(out.data(), &h, sizeof h);
  return sizeof h;
}

TerminateHdr encode_terminate(const TerminateInfo& t) {
  std::uint32_t v = (static_cast<std::uint32_t>(t.layer) & 0xF) << 28 |
                    (static_cast<std::uint32_t>(t.etype) & 0xF) << 24 | static_cast<std::uint32_t>(t.code) << 16 |
                    (t.ddp_header_present ? 1u << 14 : 0u) | (t.rdmap_header_present ? 1u << 13 : 0u);
  return TerminateHdr{Be32(v)};
}

TerminateInfo decode_terminate(const TerminateHdr& h) {
  const std::uint32_t v = h.ctrl.get();
  TerminateInfo t;
  t.layer = static_cast<TermLayer>(v >> 28);
  t.etype = static_cast<std::uint8_t>((v >> 24) & 0xF);
  t.code = static_cast<std::uint8_t>((v >> 16) & 0xFF);
  t.ddp_header_present = (v >> 14) & 1;
  t.rdmap_header_present = (v >> 13) & 1;
  return t;
}

}  // namespace softrnic::wire
