#include "error.hpp"

namespace softrnic {

namespace w = wire;

std::string_view to_string(Error e) {
  switch (e) {
    case Error::local_catastrophic: return "local catastrophic error";
    case Error::ddp_version: return "bad DDP version";
    case Error::queue_number: return "invalid queue number";
    case Error::rdmap_version: return "bad RDMAP version";
    case Error::unexpected_opcode: return "unexpected opcode";
    case Error::msn_range: return "MSN out of range";
    case Error::no_buffer: return "no buffer for the MSN";
    case Error::message_too_long: return "message too long";
    case Error::bad_offset: return "invalid message offset";
    case Error::read_too_large: return "RDMA Read too large";
    case Error::invalid_stag: return "invalid STag";
    case Error::stag_not_associated: return "STag not associated";
    case Error::out_of_bounds: return "base or bounds violation";
    case Error::access_violation: return "access rights violation";
    case Error::cannot_invalidate: return "STag cannot be invalidated";
  }
  return "?";
}

TerminateCode terminate_code(Error e) {
  const auto u8 = [](auto v) { return static_cast<std::uint8_t>(v); };
  const auto untagged = u8(w::DdpEtype::untagged_buffer);
  const auto tagged = u8(w::DdpEtype::tagged_buffer);
  switch (e) {
    case Error::local_catastrophic:
      return {w::TermLayer::rdmap, u8(w::RdmapEtype::local_catastrophic), u8(w::RdmapError::catastrophic_local)};
    case Error::ddp_version: return {w::TermLayer::ddp, untagged, u8(w::DdpUntaggedError::invalid_version)};
    case Error::queue_number: return {w::TermLayer::ddp, untagged, u8(w::DdpUntaggedError::invalid_qn)};
    case Error::rdmap_version:
      return {w::TermLayer::rdmap, u8(w::RdmapEtype::remote_operation), u8(w::RdmapError::invalid_version)};
    case Error::unexpected_opcode:
      return {w::TermLayer::rdmap, u8(w::RdmapEtype::remote_operation), u8(w::RdmapError::unexpected_opcode)};
    case Error::msn_range: return {w::TermLayer::ddp, untagged, u8(w::DdpUntaggedError::invalid_msn_range)};
    case Error::no_buffer: return {w::TermLayer::ddp, untagged, u8(w::DdpUntaggedError::invalid_msn_no_buffer)};
    case Error::message_too_long: return {w::TermLayer::ddp, untagged, u8(w::DdpUntaggedError::message_too_long)};
    case Error::bad_offset: return {w::TermLayer::ddp, untagged, u8(w::DdpUntaggedError::invalid_mo)};
    case Error::read_too_large:
      return {w::TermLayer::rdmap, u8(w::RdmapEtype::remote_operation), u8(w::RdmapError::unspecified)};
    case Error::invalid_stag: return {w::TermLayer::ddp, tagged, u8(w::DdpTaggedError::invalid_stag)};
    case Error::stag_not_associated: return {w::TermLayer::ddp, tagged, u8(w::DdpTaggedError::stag_not_associated)};
    case Error::out_of_bounds: return {w::TermLayer::ddp, tagged, u8(w::DdpTaggedError::base_bounds)};
    case Error::access_violation:
      return {w::TermLayer::rdmap, u8(w::RdmapEtype::remote_protection), u8(w::RdmapError::access_violation)};
    case Error::cannot_invalidate:
      return {w::TermLayer::rdmap, u8(w::RdmapEtype::remote_operation), u8(w::RdmapError::stag_cannot_invalidate)};
  }
  return {w::TermLayer::rdmap, u8(w::RdmapEtype::remote_operation), u8(w::RdmapError::unspecified)};
}

std::uint8_t nak_syndrome(Error e) {
  switch (e) {
    case Error::invalid_stag:
    case Error::stag_not_associated:
    case Error::out_of_bounds:
    case Error::access_violation: return w::roce::kNakRemoteAccess;
    case Error::local_catastrophic: return w::roce::kNakRemoteOperation;
    case Error::ddp_version:
    case Error::queue_number:
    case Error::rdmap_version:
    case Error::unexpected_opcode:
    case Error::msn_range:
    case Error::no_buffer:
    case Error::message_too_long:
    case Error::bad_offset:
    case Error::read_too_large:
    case Error::cannot_invalidate: break;
  }
  return w::roce::kNakInvalidRequest;
}

Error tagged_error(MrCheck c) {
  switch (c) {
    case MrCheck::invalid_stag:
    case MrCheck::key_mismatch: return Error::invalid_stag;
    case MrCheck::pd_mismatch: return Error::stag_not_associated;
    case MrCheck::out_of_bounds: return Error::out_of_bounds;
    case MrCheck::access_denied:
    case MrCheck::ok: break;
  }
  return Error::access_violation;
}

Status local_status(MrCheck c) {
  switch (c) {
    case MrCheck::pd_mismatch: return Status::protection_violation;
    case MrCheck::out_of_bounds: return Status::invalid_param;
    case MrCheck::invalid_stag:
    case MrCheck::key_mismatch:
    case MrCheck::access_denied:
    case MrCheck::ok: break;
  }
  return Status::privileges_violation;
}

Error decode_error(w::DecodeError e) {
  switch (e) {
    case w::DecodeError::bad_ddp_version: return Error::ddp_version;
    case w::DecodeError::bad_qn: return Error::queue_number;
    case w::DecodeError::bad_rdmap_version: return Error::rdmap_version;
    case w::DecodeError::none:
    case w::DecodeError::too_short:
    case w::DecodeError::unknown_opcode:
    case w::DecodeError::model_mismatch: break;
  }
  return Error::unexpected_opcode;
}

WcStatus terminated_status(wire::TermLayer layer, std::uint8_t etype) {
  const bool access =
      (layer == w::TermLayer::ddp && etype == static_cast<std::uint8_t>(w::DdpEtype::tagged_buffer)) ||
      (layer == w::TermLayer::rdmap && etype == static_cast<std::uint8_t>(w::RdmapEtype::remote_protection));
  return access ? WcStatus::remote_access_error : WcStatus::remote_operation_error;
}

std::optional<WcStatus> nak_status(std::uint8_t syndrome) {
  switch (syndrome) {
    case w::roce::kNakInvalidRequest:
    case w::roce::kNakInvalidRdRequest: return WcStatus::remote_invalid_request;
    case w::roce::kNakRemoteAccess: return WcStatus::remote_access_error;
    case w::roce::kNakRemoteOperation: return WcStatus::remote_operation_error;
    default: return std::nullopt;
  }
}

}  // namespace softrnic
