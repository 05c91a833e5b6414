// The error map (core/error.cpp), row by row: for every Error the Terminate an iWARP peer gets
// (RFC 5040 7.2, RFC 5041 7.2), the AETH NAK a RoCEv2 requester gets (IBTA 9.7.5.2.8), and the
// completion status the refused request gets on each wire; then what a peer's NAK, a segment that
// does not decode and a failed region check map to.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "error.hpp"

using namespace softrnic;
namespace w = softrnic::wire;
namespace r = softrnic::wire::roce;

namespace {

struct Row {
  Error e;
  w::TermLayer layer;
  std::uint8_t etype, code;
  std::uint8_t nak;
  WcStatus iwarp_status, roce_status;
};

constexpr auto u8(auto v) {
  return static_cast<std::uint8_t>(v);
}

const auto kDdpT = u8(w::DdpEtype::tagged_buffer), kDdpU = u8(w::DdpEtype::untagged_buffer);
const auto kRemOp = u8(w::RdmapEtype::remote_operation), kRemProt = u8(w::RdmapEtype::remote_protection);
constexpr auto kOpErr = WcStatus::remote_operation_error, kAccErr = WcStatus::remote_access_error,
               kInvReq = WcStatus::remote_invalid_request;

const Row kRows[] = {
    {Error::local_catastrophic, w::TermLayer::rdmap, u8(w::RdmapEtype::local_catastrophic),
     u8(w::RdmapError::catastrophic_local), r::kNakRemoteOperation, kOpErr, kOpErr},
    {Error::ddp_version, w::TermLayer::ddp, kDdpU, u8(w::DdpUntaggedError::invalid_version), r::kNakInvalidRequest,
     kOpErr, kInvReq},
    {Error::queue_number, w::TermLayer::ddp, kDdpU, u8(w::DdpUntaggedError::invalid_qn), r::kNakInvalidRequest, kOpErr,
     kInvReq},
    {Error::rdmap_version, w::TermLayer::rdmap, kRemOp, u8(w::RdmapError::invalid_version), r::kNakInvalidRequest,
     kOpErr, kInvReq},
    {Error::unexpected_opcode, w::TermLayer::rdmap, kRemOp, u8(w::RdmapError::unexpected_opcode), r::kNakInvalidRequest,
     kOpErr, kInvReq},
    {Error::msn_range, w::TermLayer::ddp, kDdpU, u8(w::DdpUntaggedError::invalid_msn_range), r::kNakInvalidRequest,
     kOpErr, kInvReq},
    {Error::no_buffer, w::TermLayer::ddp, kDdpU, u8(w::DdpUntaggedError::invalid_msn_no_buffer), r::kNakInvalidRequest,
     kOpErr, kInvReq},
    {Error::message_too_long, w::TermLayer::ddp, kDdpU, u8(w::DdpUntaggedError::message_too_long),
     r::kNakInvalidRequest, kOpErr, kInvReq},
    {Error::bad_offset, w::TermLayer::ddp, kDdpU, u8(w::DdpUntaggedError::invalid_mo), r::kNakInvalidRequest, kOpErr,
     kInvReq},
    {Error::read_too_large, w::TermLayer::rdmap, kRemOp, u8(w::RdmapError::unspecified), r::kNakInvalidRequest, kOpErr,
     kInvReq},
    {Error::invalid_stag, w::TermLayer::ddp, kDdpT, u8(w::DdpTaggedError::invalid_stag), r::kNakRemoteAccess, kAccErr,
     kAccErr},
    {Error::stag_not_associated, w::TermLayer::ddp, kDdpT, u8(w::DdpTaggedError::stag_not_associated),
     r::kNakRemoteAccess, kAccErr, kAccErr},
    {Error::out_of_bounds, w::TermLayer::ddp, kDdpT, u8(w::DdpTaggedError::base_bounds), r::kNakRemoteAccess, kAccErr,
     kAccErr},
    {Error::access_violation, w::TermLayer::rdmap, kRemProt, u8(w::RdmapError::access_violation), r::kNakRemoteAccess,
     kAccErr, kAccErr},
    {Error::cannot_invalidate, w::TermLayer::rdmap, kRemOp, u8(w::RdmapError::stag_cannot_invalidate),
     r::kNakInvalidRequest, kOpErr, kInvReq},
};

}  // namespace

TEST(ErrorMap, EveryErrorHasItsFourImages) {
  ASSERT_EQ(std::size(kRows), static_cast<std::size_t>(kErrorCount));
  std::set<std::string> names;
  for (int i = 0; i < kErrorCount; ++i) {
    const Row& row = kRows[i];
    ASSERT_EQ(static_cast<int>(row.e), i) << "the table is in the enum's order";
    const std::string name(to_string(row.e));
    EXPECT_NE(name, "?");
    EXPECT_TRUE(names.insert(name).second) << name << " twice";

    const TerminateCode t = terminate_code(row.e);
    EXPECT_EQ(t.layer, row.layer) << name;
    EXPECT_EQ(t.etype, row.etype) << name;
    EXPECT_EQ(t.code, row.code) << name;
    EXPECT_EQ(terminated_status(t.layer, t.etype), row.iwarp_status) << name;

    EXPECT_EQ(nak_syndrome(row.e), row.nak) << name;
    EXPECT_EQ(nak_status(nak_syndrome(row.e)), row.roce_status) << name;
  }
}

TEST(ErrorMap, OnlyNaksThatRefuseARequestHaveAStatus) {
  for (int s = 0; s < 256; ++s) {
    const auto syn = static_cast<std::uint8_t>(s);
    const bool refuses = syn == r::kNakInvalidRequest || syn == r::kNakInvalidRdRequest || syn == r::kNakRemoteAccess ||
                         syn == r::kNakRemoteOperation;
    EXPECT_EQ(nak_status(syn).has_value(), refuses) << "syndrome " << s;  // ACKs, RNR NAKs, PSN sequence errors
  }
  EXPECT_EQ(nak_status(r::kNakInvalidRdRequest), WcStatus::remote_invalid_request);
}

TEST(ErrorMap, UndecodableSegmentsAndFailedRegionChecks) {
  EXPECT_EQ(decode_error(w::DecodeError::bad_ddp_version), Error::ddp_version);
  EXPECT_EQ(decode_error(w::DecodeError::bad_qn), Error::queue_number);
  EXPECT_EQ(decode_error(w::DecodeError::bad_rdmap_version), Error::rdmap_version);
  EXPECT_EQ(decode_error(w::DecodeError::too_short), Error::unexpected_opcode);
  EXPECT_EQ(decode_error(w::DecodeError::unknown_opcode), Error::unexpected_opcode);
  EXPECT_EQ(decode_error(w::DecodeError::model_mismatch), Error::unexpected_opcode);

  EXPECT_EQ(tagged_error(MrCheck::invalid_stag), Error::invalid_stag);
  EXPECT_EQ(tagged_error(MrCheck::key_mismatch), Error::invalid_stag);
  EXPECT_EQ(tagged_error(MrCheck::pd_mismatch), Error::stag_not_associated);
  EXPECT_EQ(tagged_error(MrCheck::out_of_bounds), Error::out_of_bounds);
  EXPECT_EQ(tagged_error(MrCheck::access_denied), Error::access_violation);
}

// What a post answers for its own memory (dat_srq_post_recv(3DAT)'s classes).
TEST(ErrorMap, ALocalSegmentThatFailsItsCheck) {
  EXPECT_EQ(local_status(MrCheck::invalid_stag), Status::privileges_violation);
  EXPECT_EQ(local_status(MrCheck::key_mismatch), Status::privileges_violation);
  EXPECT_EQ(local_status(MrCheck::access_denied), Status::privileges_violation);
  EXPECT_EQ(local_status(MrCheck::pd_mismatch), Status::protection_violation);
  EXPECT_EQ(local_status(MrCheck::out_of_bounds), Status::invalid_param);
}
