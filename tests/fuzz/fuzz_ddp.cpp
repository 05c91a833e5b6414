// Fuzz target: DDP/RDMAP segments (RFC 5041/5040) straight into the decoders, without the framing:
// decode_ddp on the input (verdict against the reference reading, spans, re-encoded header),
// decode_terminate on its first four bytes, and the other way round: headers built by
// encode_tagged / encode_untagged from fields taken from the input, then decoded again.
#include <cstring>
#include <vector>

#include "fuzz_check.hpp"
#include "softrnic/wire/ddp.hpp"
#include "wire_checks.hpp"

namespace w = softrnic::wire;

namespace {

template <typename T>
T take(std::span<const std::uint8_t>& in) {
  T v{};
  const std::size_t n = std::min(sizeof v, in.size());
  std::memcpy(&v, in.data(), n);
  in = in.subspan(n);
  return v;
}

// Fields from the input -> header (+ the rest of the input as ULP header and payload) -> decode.
void encode_then_decode(std::span<const std::uint8_t> in) {
  const auto sel = take<std::uint8_t>(in);
  const auto op = static_cast<w::RdmapOpcode>(sel & 0x0F);
  const bool last = (sel & 0x80) != 0;
  const auto stag = take<std::uint32_t>(in);
  const auto to = take<std::uint64_t>(in);
  const auto msn = take<std::uint32_t>(in);
  const auto mo = take<std::uint32_t>(in);
  const auto inv = take<std::uint32_t>(in);
  // Mostly the queue number the opcode wants, sometimes any.
  const auto qn_pick = take<std::uint8_t>(in);
  const w::OpcodeInfo& info = w::opcode_info(op);
  const std::uint32_t qn = qn_pick < 0xF0 ? info.qn : qn_pick & 0x0F;
  const bool tagged = (sel & 0x40) ? !info.tagged : info.tagged;  // sometimes the wrong model
  std::vector<std::uint8_t> seg(sizeof(w::DdpUntaggedHdr) + in.size());
  const std::size_t hl =
      tagged ? w::encode_tagged(seg, op, last, stag, to) : w::encode_untagged(seg, op, last, qn, msn, mo, inv);
  FUZZ_CHECK(hl == (tagged ? sizeof(w::DdpTaggedHdr) : sizeof(w::DdpUntaggedHdr)));
  if (!in.empty()) std::memcpy(seg.data() + hl, in.data(), in.size());
  seg.resize(hl + in.size());
  fuzzcheck::check_ddp(seg);
  w::DdpSegment s;
  const w::DecodeError e = w::decode_ddp(seg, s);
  if (!info.valid) {
    FUZZ_CHECK(e == w::DecodeError::unknown_opcode);
    return;
  }
  if (tagged != info.tagged) {
    FUZZ_CHECK(e == w::DecodeError::model_mismatch);
    return;
  }
  if (!tagged && qn != info.qn) {
    FUZZ_CHECK(e == w::DecodeError::bad_qn);
    return;
  }
  if (in.size() < info.ulp_header) {
    FUZZ_CHECK(e == w::DecodeError::too_short);
    return;
  }
  FUZZ_CHECK(e == w::DecodeError::none);
  FUZZ_CHECK(s.opcode == op && s.last == last && s.tagged == tagged);
  if (tagged) {
    FUZZ_CHECK(s.stag == stag && s.to == to);
  } else {
    FUZZ_CHECK(s.qn == qn && s.msn == msn && s.mo == mo && s.inv_stag == inv);
  }
  FUZZ_CHECK(s.payload.size() == in.size() - info.ulp_header);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> in(data, size);
  fuzzcheck::check_ddp(in);
  if (size >= sizeof(w::TerminateHdr)) {
    w::TerminateHdr th;
    std::memcpy(&th, data, sizeof th);
    fuzzcheck::check_terminate(th);
  }
  encode_then_decode(in);
  return 0;
}
