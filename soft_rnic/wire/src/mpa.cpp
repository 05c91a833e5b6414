#include "softrnic/wire/mpa.hpp"

#include <algorithm>
#include <cstring>

namespace softrnic::wire {
namespace {

void put_le32(std::uint8_t* p, std::uint32_t v) {
  p[0] = static_cast<std::uint8_t>(v);
  p[1] = static_cast<std::uint8_t>(v >> 8);
  p[2] = static_cast<std::uint8_t>(v >> 16);
  p[3] = static_cast<std::uint8_t>(v >> 24);
}

std::uint32_t get_le32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}

std::uint16_t get_be16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] << 8 | p[1]);
}

// Whether the first `n` bytes of `in` agree with `key` (an empty `in` may have no data pointer).
bool key_prefix(std::span<const std::uint8_t> in, std::string_view key, std::size_t n) {
  return n == 0 || std::memcmp(in.data(), key.data(), n) == 0;
}

std::size_t to_marker(std::uint64_t pos) {
  return kMpaMarkerSpacing - static_cast<std::size_t>(pos % kMpaMarkerSpacing);
}

}  // namespace

std::string_view to_string(MpaError e) {
  switch (e) {
    case MpaError::none: return "none";
    case MpaError::need_more: return "frame incomplete";
    case MpaError::bad_key: return "not an MPA Request or Reply key";
    case MpaError::bad_revision: return "MPA revision above 2";
    case MpaError::pd_too_long: return "private data longer than 512 bytes";
    case MpaError::enhanced_bad_revision: return "enhanced (RFC 6581) flag with a revision other than 2";
    case MpaError::enhanced_pd_too_short: return "enhanced (RFC 6581) flag with less than 4 bytes of private data";
  }
  return "?";
}

std::string_view to_string(MpaRxError e) {
  switch (e) {
    case MpaRxError::none: return "none";
    case MpaRxError::ulpdu_too_short: return "ULPDU_Length shorter than a DDP header";
    case MpaRxError::ulpdu_too_long: return "ULPDU_Length above the receive limit";
    case MpaRxError::bad_crc: return "bad FPDU CRC32c";
    case MpaRxError::bad_marker: return "MPA marker does not point at its FPDU";
  }
  return "?";
}

std::size_t encode_mpa_req_rep(std::span<std::uint8_t> out, const MpaParams& p) {
  if (p.revision > kMpaMaxRevision) return 0;
  const std::size_t enh_len = p.enhanced ? kMpaEnhancedLen : 0;
  if (p.enhanced && (p.revision != 2 || p.enhanced->ird > kMpaIrdOrdMask || p.enhanced->ord > kMpaIrdOrdMask)) return 0;
  const std::size_t pd_len = enh_len + p.private_data.size();
  if (pd_len > kMpaMaxPrivateData || out.size() < kMpaReqRepHdrLen + pd_len) return 0;

  MpaReqRepHdrWire h{};
  const std::string_view key = p.reply ? kMpaKeyRep : kMpaKeyReq;
  std::memcpy(h.key.data(), key.data(), kMpaKeyLen);
  std::uint16_t bits = p.revision;
  if (p.markers) bits |= kMpaFlagMarkers;
  if (p.crc) bits |= kMpaFlagCrc;
  if (p.reject) bits |= kMpaFlagReject;
  if (p.enhanced) bits |= kMpaFlagEnhanced;
  h.bits.set(bits);
  h.pd_len.set(static_cast<std::uint16_t>(pd_len));
  std::memcpy(out.data(), &h, sizeof h);
  if (p.enhanced) {
    const MpaEnhanced& e = *p.enhanced;
    const auto ird = static_cast<std::uint16_t>(e.ird | (e.peer_to_peer ? kMpaIrdPeerToPeer : 0) |
                                                (e.rtr_send ? kMpaIrdSendRtr : 0));
    const auto ord =
        static_cast<std::uint16_t>(e.ord | (e.rtr_write ? kMpaOrdWriteRtr : 0) | (e.rtr_read ? kMpaOrdReadRtr : 0));
    const MpaEnhancedWire w{Be16(ird), Be16(ord)};
    std::memcpy(out.data() + kMpaReqRepHdrLen, &w, sizeof w);
  }
  if (!p.private_data.empty())
    std::memcpy(out.data() + kMpaReqRepHdrLen + enh_len, p.private_data.data(), p.private_data.size());
  return kMpaReqRepHdrLen + pd_len;
}

MpaError decode_mpa_req_rep(std::span<const std::uint8_t> in, MpaParams& out, std::size_t& consumed) {
  consumed = 0;
  const std::size_t k = std::min(in.size(), kMpaKeyLen);
  const bool req = key_prefix(in, kMpaKeyReq, k);
  const bool rep = key_prefix(in, kMpaKeyRep, k);
  if (!req && !rep) return MpaError::bad_key;
  if (in.size() < kMpaReqRepHdrLen) {
    consumed = kMpaReqRepHdrLen;
    return MpaError::need_more;
  }
  MpaReqRepHdrWire h;
  std::memcpy(&h, in.data(), sizeof h);
  const std::uint16_t bits = h.bits.get();
  const std::size_t pd_len = h.pd_len.get();
  const auto revision = static_cast<std::uint8_t>(bits & kMpaRevisionMask);
  const bool enhanced = (bits & kMpaFlagEnhanced) != 0;
  if (revision > kMpaMaxRevision) return MpaError::bad_revision;
  if (pd_len > kMpaMaxPrivateData) return MpaError::pd_too_long;
  if (enhanced && revision != 2) return MpaError::enhanced_bad_revision;
  if (enhanced && pd_len < kMpaEnhancedLen) return MpaError::enhanced_pd_too_short;
  if (in.size() < kMpaReqRepHdrLen + pd_len) {
    consumed = kMpaReqRepHdrLen + pd_len;
    return MpaError::need_more;
  }

  out = MpaParams{};
  out.reply = rep;
  out.markers = (bits & kMpaFlagMarkers) != 0;
  out.crc = (bits & kMpaFlagCrc) != 0;
  out.reject = (bits & kMpaFlagReject) != 0;
  out.revision = revision;
  std::span<const std::uint8_t> pd = in.subspan(kMpaReqRepHdrLen, pd_len);
  if (enhanced) {
    MpaEnhancedWire w;
    std::memcpy(&w, pd.data(), sizeof w);
    const std::uint16_t ird = w.ird.get();
    const std::uint16_t ord = w.ord.get();
    out.enhanced = MpaEnhanced{.ird = static_cast<std::uint16_t>(ird & kMpaIrdOrdMask),
                               .ord = static_cast<std::uint16_t>(ord & kMpaIrdOrdMask),
                               .peer_to_peer = (ird & kMpaIrdPeerToPeer) != 0,
                               .rtr_send = (ird & kMpaIrdSendRtr) != 0,
                               .rtr_write = (ord & kMpaOrdWriteRtr) != 0,
                               .rtr_read = (ord & kMpaOrdReadRtr) != 0};
    pd = pd.subspan(kMpaEnhancedLen);
  }
  out.private_data = pd;
  consumed = kMpaReqRepHdrLen + pd_len;
  return MpaError::none;
}

MpaNegotiated mpa_negotiate(const MpaParams& request, const MpaParams& reply) {
  return {.crc = request.crc || reply.crc,
          .initiator_sends_markers = reply.markers,
          .responder_sends_markers = request.markers};
}

std::size_t encode_mpa_len(std::span<std::uint8_t> out, std::size_t ulpdu_len) {
  if (out.size() < kMpaLenFieldLen || ulpdu_len > kMpaMaxUlpdu) return 0;
  const Be16 v(static_cast<std::uint16_t>(ulpdu_len));
  std::memcpy(out.data(), &v, sizeof v);
  return kMpaLenFieldLen;
}

std::size_t frame_mpa_fpdu(std::span<std::uint8_t> fpdu, std::size_t ulpdu_len, bool crc) {
  if (ulpdu_len > kMpaMaxUlpdu) return 0;
  const std::size_t n = mpa_fpdu_len(ulpdu_len);
  if (fpdu.size() < n) return 0;
  encode_mpa_len(fpdu, ulpdu_len);
  const std::size_t body = n - kMpaCrcLen;
  const std::size_t end = kMpaLenFieldLen + ulpdu_len;
  std::memset(fpdu.data() + end, 0, body - end);
  put_le32(fpdu.data() + body, crc ? crc32c(fpdu.first(body)) : 0);
  return n;
}

std::size_t encode_mpa_fpdu(std::span<std::uint8_t> out, std::span<const std::span<const std::uint8_t>> ulpdu,
                            bool crc) {
  std::size_t len = 0;
  for (const auto& s : ulpdu) len += s.size();
  if (len > kMpaMaxUlpdu || out.size() < mpa_fpdu_len(len)) return 0;
  std::size_t o = kMpaLenFieldLen;
  for (const auto& s : ulpdu) {
    if (!s.empty()) std::memcpy(out.data() + o, s.data(), s.size());
    o += s.size();
  }
  return frame_mpa_fpdu(out, len, crc);
}

std::size_t mpa_marked_len(std::uint64_t pos, std::size_t fpdu_len) {
  std::size_t total = 0;
  for (std::size_t left = fpdu_len; left > 0;) {
    if (pos % kMpaMarkerSpacing == 0) {  // a marker comes first (the leading one at the FPDU's start)
      pos += kMpaMarkerLen;
      total += kMpaMarkerLen;
    }
    const std::size_t take = std::min(left, to_marker(pos));
    pos += take;
    total += take;
    left -= take;
  }
  return total;
}

std::size_t mpa_insert_markers(std::span<std::uint8_t> out, std::uint64_t pos, std::span<const std::uint8_t> fpdu,
                               bool crc) {
  if (pos % 4 != 0 || fpdu.size() < kMpaLenFieldLen + kMpaCrcLen) return 0;
  if (mpa_fpdu_len(get_be16(fpdu.data())) != fpdu.size()) return 0;
  const std::size_t n = mpa_marked_len(pos, fpdu.size());
  if (out.size() < n) return 0;
  std::uint64_t len_pos = 0;  // stream position of ULPDU_Length
  std::size_t o = 0;
  for (std::size_t i = 0; i < fpdu.size();) {
    if (pos % kMpaMarkerSpacing == 0) {
      const auto ptr = static_cast<std::uint16_t>(i == 0 ? 0 : pos - len_pos);
      const MpaMarkerWire m{Be16(0), Be16(ptr)};
      std::memcpy(out.data() + o, &m, sizeof m);
      o += kMpaMarkerLen;
      pos += kMpaMarkerLen;
    }
    if (i == 0) len_pos = pos;
    const std::size_t take = std::min(fpdu.size() - i, to_marker(pos));
    std::memcpy(out.data() + o, fpdu.data() + i, take);
    o += take;
    pos += take;
    i += take;
  }
  // With pos and the FPDU 4-aligned no marker splits the CRC field, and none follows it: the CRC
  // field is the image's last 4 bytes, and everything before it is covered.
  put_le32(out.data() + n - kMpaCrcLen, crc ? crc32c(out.first(n - kMpaCrcLen)) : 0);
  return n;
}

MpaRx::MpaRx(const MpaRxConfig& cfg) : cfg_(cfg), pos_(cfg.stream_pos) {
  cfg_.max_ulpdu = std::min(cfg_.max_ulpdu, kMpaMaxUlpdu);
  buf_.resize(cfg_.max_ulpdu);
}

bool MpaRx::marker_due() const {
  return cfg_.markers && (marker_got_ > 0 || pos_ % kMpaMarkerSpacing == 0);
}

MpaRxResult MpaRx::fail(MpaRxError e, std::size_t consumed) {
  error_ = e;
  direct_ = nullptr;
  stats_.bytes += consumed;
  return {.status = MpaRxStatus::error, .consumed = consumed, .ulpdu = {}};
}

// At an FPDU boundary: when `in` holds the whole next FPDU and no marker lies inside its ULPDU,
// the ULPDU is handed out where it lies instead of being copied.
void MpaRx::plan_fast_path(std::span<const std::uint8_t> in) {
  const std::size_t lead = cfg_.markers && pos_ % kMpaMarkerSpacing == 0 ? kMpaMarkerLen : 0;
  if (in.size() < lead + kMpaLenFieldLen) return;
  const std::uint64_t len_pos = pos_ + lead;
  const std::uint64_t ulpdu_pos = len_pos + kMpaLenFieldLen;
  // (on a 4-aligned stream no marker splits the length field or comes right after it)
  if (cfg_.markers && (to_marker(len_pos) < kMpaLenFieldLen || ulpdu_pos % kMpaMarkerSpacing == 0)) return;
  const std::size_t len = get_be16(in.data() + lead);
  if (len < kMpaMinUlpdu || len > cfg_.max_ulpdu) return;  // the byte-wise path reports it
  if (cfg_.markers && to_marker(ulpdu_pos) < len) return;  // a marker inside the ULPDU: copy it out
  const std::size_t stream_len = cfg_.markers ? mpa_marked_len(pos_, mpa_fpdu_len(len)) : mpa_fpdu_len(len);
  if (in.size() < stream_len) return;
  direct_ = in.data() + lead + kMpaLenFieldLen;
}

MpaRxResult MpaRx::next(std::span<const std::uint8_t> in) {
  if (error_ != MpaRxError::none) return {.status = MpaRxStatus::stopped, .consumed = 0, .ulpdu = {}};
  if (at_boundary()) plan_fast_path(in);
  std::size_t used = 0;
  while (used < in.size()) {
    const std::span<const std::uint8_t> rest = in.subspan(used);
    const Step step = marker_due() ? take_marker(rest) : take_fpdu_bytes(rest);
    used += step.n;
    if (step.error != MpaRxError::none) return fail(step.error, used);
    if (step.fpdu_done) return deliver(used);
  }
  // (direct_ is set only when the whole FPDU is in `in`, so it is null here)
  stats_.bytes += used;
  return {.status = MpaRxStatus::need_more, .consumed = used, .ulpdu = {}};
}

MpaRx::Step MpaRx::take_marker(std::span<const std::uint8_t> rest) {
  const std::size_t n = std::min(kMpaMarkerLen - marker_got_, rest.size());
  std::memcpy(marker_buf_.data() + marker_got_, rest.data(), n);
  // Markers before the CRC field are covered by it (a leading one too); none lies inside
  // the field on a 4-aligned stream.
  if (cfg_.crc && !(phase_ == Phase::crc && crc_got_ > 0)) crc_.update(rest.first(n));
  marker_got_ += n;
  pos_ += n;
  if (marker_got_ < kMpaMarkerLen) return {.n = n};
  marker_got_ = 0;
  ++stats_.markers;
  const std::uint64_t marker_pos = pos_ - kMpaMarkerLen;
  const std::uint64_t expect = phase_ == Phase::len && len_got_ == 0 ? 0 : marker_pos - len_pos_;
  // (receivers treat FPDUPTR's two low bits as zero)
  if (((get_be16(marker_buf_.data() + 2) ^ expect) & 0xFFFC) != 0) {
    ++stats_.marker_errors;
    return {.n = n, .error = MpaRxError::bad_marker};
  }
  return {.n = n};
}

// Takes FPDU bytes up to the next marker (if markers are on), in the current phase.
MpaRx::Step MpaRx::take_fpdu_bytes(std::span<const std::uint8_t> rest) {
  const std::size_t avail = cfg_.markers ? std::min(rest.size(), to_marker(pos_)) : rest.size();
  const std::span<const std::uint8_t> piece = rest.first(avail);
  switch (phase_) {
    case Phase::len: return take_len(piece);
    case Phase::body: return take_body(piece);
    case Phase::crc: return take_crc(piece);
  }
  return {};
}

MpaRx::Step MpaRx::take_len(std::span<const std::uint8_t> piece) {
  const std::size_t n = std::min(piece.size(), kMpaLenFieldLen - len_got_);
  if (len_got_ == 0) len_pos_ = pos_;
  std::memcpy(len_buf_.data() + len_got_, piece.data(), n);
  if (cfg_.crc) crc_.update(piece.first(n));
  len_got_ += n;
  pos_ += n;
  if (len_got_ < kMpaLenFieldLen) return {.n = n};
  ulpdu_len_ = get_be16(len_buf_.data());
  if (ulpdu_len_ < kMpaMinUlpdu || ulpdu_len_ > cfg_.max_ulpdu) {
    ++stats_.length_errors;
    return {.n = n, .error = ulpdu_len_ < kMpaMinUlpdu ? MpaRxError::ulpdu_too_short : MpaRxError::ulpdu_too_long};
  }
  phase_ = Phase::body;
  body_got_ = 0;
  return {.n = n};
}

MpaRx::Step MpaRx::take_body(std::span<const std::uint8_t> piece) {
  const std::size_t total = ulpdu_len_ + mpa_pad(ulpdu_len_);
  const std::size_t n = std::min(piece.size(), total - body_got_);
  if (cfg_.crc) crc_.update(piece.first(n));
  if (direct_ == nullptr && body_got_ < ulpdu_len_)
    std::memcpy(buf_.data() + body_got_, piece.data(), std::min(n, ulpdu_len_ - body_got_));
  body_got_ += n;
  pos_ += n;
  if (body_got_ == total) {
    phase_ = Phase::crc;
    crc_got_ = 0;
  }
  return {.n = n};
}

MpaRx::Step MpaRx::take_crc(std::span<const std::uint8_t> piece) {
  const std::size_t n = std::min(piece.size(), kMpaCrcLen - crc_got_);
  std::memcpy(crc_buf_.data() + crc_got_, piece.data(), n);
  crc_got_ += n;
  pos_ += n;
  if (crc_got_ < kMpaCrcLen) return {.n = n};
  if (cfg_.crc && get_le32(crc_buf_.data()) != crc_.value()) {
    ++stats_.crc_errors;
    return {.n = n, .error = MpaRxError::bad_crc};
  }
  return {.n = n, .fpdu_done = true};
}

// Hands out the ULPDU of the FPDU just checked and gets ready for the next one.
MpaRxResult MpaRx::deliver(std::size_t used) {
  const std::span<const std::uint8_t> ulpdu(direct_ != nullptr ? direct_ : buf_.data(), ulpdu_len_);
  if (direct_ == nullptr) ++stats_.reassembled;
  ++stats_.fpdus;
  stats_.bytes += used;
  phase_ = Phase::len;
  len_got_ = 0;
  crc_ = Crc32c{};
  direct_ = nullptr;
  return {.status = MpaRxStatus::ulpdu, .consumed = used, .ulpdu = ulpdu};
}

}  // namespace softrnic::wire
