// MPA (RFC 5044) with the enhanced connection set-up of RFC 6581: the request/reply frames, FPDU
// framing (length prefix, pad, CRC32c trailer), markers, and a resumable receiver that cuts a TCP
// byte stream into ULPDUs. Pure codecs: no I/O, and no allocation after MpaRx's constructor.
//
// Stream positions (markers): offset 0 is SeqStart, the first octet a side sends after its own MPA
// Request (initiator) or Reply (responder); every octet after it counts, markers included. A
// marker sits at every multiple of 512. It belongs to the FPDU it lies in; one at the very start
// of an FPDU (before its ULPDU_Length) belongs to that FPDU and has FPDUPTR 0. The CRC covers an
// FPDU's stream image from its first octet (a leading marker included) to the end of the pad,
// markers included; ULPDU_Length and the pad count no markers.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "softrnic/wire/be.hpp"
#include "softrnic/wire/crc32c.hpp"
#include "softrnic/wire/ddp.hpp"

namespace softrnic::wire {

// ---- MPA Request / Reply (RFC 5044 section 7.1, RFC 6581 section 7.1) ----

inline constexpr std::string_view kMpaKeyReq = "MPA ID Req Frame";
inline constexpr std::string_view kMpaKeyRep = "MPA ID Rep Frame";
inline constexpr std::size_t kMpaKeyLen = 16;
inline constexpr std::size_t kMpaReqRepHdrLen = 20;     // key, bits, pd_len
inline constexpr std::size_t kMpaMaxPrivateData = 512;  // pd_len limit (MPA_MAX_PRIVDATA), enhanced header included
inline constexpr std::size_t kMpaEnhancedLen = 4;       // RFC 6581 IRD/ORD words at the start of the private data
inline constexpr std::uint8_t kMpaMaxRevision = 2;

// `bits`: M, C, R, the enhanced (RFC 6581) flag, 4 reserved bits, revision in the low byte.
inline constexpr std::uint16_t kMpaFlagMarkers = 0x8000;
inline constexpr std::uint16_t kMpaFlagCrc = 0x4000;
inline constexpr std::uint16_t kMpaFlagReject = 0x2000;
inline constexpr std::uint16_t kMpaFlagEnhanced = 0x1000;
inline constexpr std::uint16_t kMpaRevisionMask = 0x00FF;

// RFC 6581 IRD/ORD words: 14-bit values, control flags A, B (IRD) and C, D (ORD) on top.
inline constexpr std::uint16_t kMpaIrdOrdMask = 0x3FFF;
inline constexpr std::uint16_t kMpaIrdPeerToPeer = 0x8000;  // A: peer-to-peer connection model
inline constexpr std::uint16_t kMpaIrdSendRtr = 0x4000;     // B: zero-length Send as RTR
inline constexpr std::uint16_t kMpaOrdWriteRtr = 0x8000;    // C: zero-length RDMA Write as RTR
inline constexpr std::uint16_t kMpaOrdReadRtr = 0x4000;     // D: zero-length RDMA Read as RTR

struct MpaReqRepHdrWire {
  std::array<std::uint8_t, kMpaKeyLen> key;
  Be16 bits;
  Be16 pd_len;
};
static_assert(sizeof(MpaReqRepHdrWire) == kMpaReqRepHdrLen);

struct MpaEnhancedWire {
  Be16 ird;
  Be16 ord;
};
static_assert(sizeof(MpaEnhancedWire) == kMpaEnhancedLen);

struct MpaEnhanced {
  std::uint16_t ird = 0;  // RDMA Reads the sender accepts outstanding (<= kMpaIrdOrdMask)
  std::uint16_t ord = 0;  // RDMA Reads the sender wants outstanding (<= kMpaIrdOrdMask)
  bool peer_to_peer = false;
  bool rtr_send = false;
  bool rtr_write = false;
  bool rtr_read = false;
};

struct MpaParams {
  bool reply = false;  // key: Reply (true) or Request
  bool markers = false;
  bool crc = false;
  bool reject = false;
  std::uint8_t revision = kMpaMaxRevision;
  std::optional<MpaEnhanced> enhanced;         // the enhanced flag and the 4-byte IRD/ORD header (revision 2 only)
  std::span<const std::uint8_t> private_data;  // the consumer's part, after the enhanced header; decode
                                               // points it into the input
};

enum class MpaError : std::uint8_t {
  none,
  need_more,              // not an error: the frame is incomplete (see decode_mpa_req_rep)
  bad_key,                // neither "MPA ID Req Frame" nor "MPA ID Rep Frame"
  bad_revision,           // revision above 2
  pd_too_long,            // pd_len above 512
  enhanced_bad_revision,  // enhanced flag with a revision other than 2
  enhanced_pd_too_short,  // enhanced flag with pd_len below 4
};
std::string_view to_string(MpaError e);

// Writes the frame into `out`; returns its length (20 + pd_len), or 0 when `out` is too small or
// the parameters cannot be sent (revision above 2, enhanced with a revision other than 2, IRD or
// ORD above 0x3FFF, more than 512 bytes of private data with the enhanced header).
std::size_t encode_mpa_req_rep(std::span<std::uint8_t> out, const MpaParams& p);

// Decodes a frame at the start of `in`, which may hold only its first bytes (reads in pieces):
// need_more until 20 + pd_len bytes are there, and then `consumed` = the frame's full length so
// far known (20, then 20 + pd_len): read until `in` holds that many. A wrong key is reported as
// soon as the bytes present differ from both keys. On none, `consumed` = the frame's length and
// `out` describes it (bytes after it are not looked at). Reserved bits are ignored.
MpaError decode_mpa_req_rep(std::span<const std::uint8_t> in, MpaParams& out, std::size_t& consumed);

// What a Request/Reply pair settles (RFC 5044 section 7.1.2): CRC when either frame has C set;
// markers in the direction whose receiver set M (M in the Request: the responder sends markers).
struct MpaNegotiated {
  bool crc = false;
  bool initiator_sends_markers = false;
  bool responder_sends_markers = false;
};
MpaNegotiated mpa_negotiate(const MpaParams& request, const MpaParams& reply);

// ---- FPDU framing (RFC 5044 section 4) ----

inline constexpr std::size_t kMpaLenFieldLen = 2;
inline constexpr std::size_t kMpaCrcLen = 4;
inline constexpr std::size_t kMpaMarkerLen = 4;
inline constexpr std::size_t kMpaMarkerSpacing = 512;
inline constexpr std::size_t kMpaMaxUlpdu = 0xFFFF;
// The smallest ULPDU: a tagged DDP header, RDMAP control byte included (RFC 5041 section 4.2).
inline constexpr std::size_t kMpaMinUlpdu = sizeof(DdpTaggedHdr);

// Pad bytes after a ULPDU: 2 + ulpdu_len + pad is a multiple of 4.
constexpr std::size_t mpa_pad(std::size_t ulpdu_len) {
  return (0 - (ulpdu_len + kMpaLenFieldLen)) & 3;
}
// A marker-free FPDU's length: ULPDU_Length, ULPDU, pad, CRC.
constexpr std::size_t mpa_fpdu_len(std::size_t ulpdu_len) {
  return kMpaLenFieldLen + ulpdu_len + mpa_pad(ulpdu_len) + kMpaCrcLen;
}
static_assert(mpa_fpdu_len(34) == 40 && mpa_fpdu_len(17) == 24 && mpa_pad(14) == 0 && mpa_pad(15) == 3);

// Writes ULPDU_Length for a ULPDU of `ulpdu_len` bytes into out[0..2); returns 2, or 0 when `out`
// is too small or ulpdu_len is above kMpaMaxUlpdu.
std::size_t encode_mpa_len(std::span<std::uint8_t> out, std::size_t ulpdu_len);

// Frames in place the marker-free FPDU whose ULPDU (`ulpdu_len` bytes) is already at
// fpdu[2..]: writes ULPDU_Length, the pad (zeros) and the CRC field, the little-endian image of
// CRC32c over everything before it (zero without `crc`). The one FPDU framer: the MPA/TCP
// transport gathers a ULPDU into its buffer and frames it here, encode_mpa_fpdu copies and frames.
// Returns mpa_fpdu_len(ulpdu_len), or 0 when `fpdu` is too small or the ULPDU longer than
// kMpaMaxUlpdu.
std::size_t frame_mpa_fpdu(std::span<std::uint8_t> fpdu, std::size_t ulpdu_len, bool crc);

// Writes a whole marker-free FPDU whose ULPDU is the concatenation of `ulpdu` into `out`; returns
// mpa_fpdu_len(ULPDU length), or 0 when `out` is too small or the ULPDU longer than kMpaMaxUlpdu.
std::size_t encode_mpa_fpdu(std::span<std::uint8_t> out, std::span<const std::span<const std::uint8_t>> ulpdu,
                            bool crc);
inline std::size_t encode_mpa_fpdu(std::span<std::uint8_t> out,
                                   std::initializer_list<std::span<const std::uint8_t>> ulpdu, bool crc) {
  return encode_mpa_fpdu(out, std::span(ulpdu.begin(), ulpdu.size()), crc);
}

// ---- Markers (RFC 5044 section 4.3) ----

struct MpaMarkerWire {
  Be16 reserved;
  Be16 fpduptr;  // octets from the FPDU's ULPDU_Length back to this marker (0 before the FPDU)
};
static_assert(sizeof(MpaMarkerWire) == kMpaMarkerLen);

// The stream octets a marker-free FPDU of `fpdu_len` bytes takes when it starts at stream position
// `pos` (a multiple of 4): fpdu_len plus 4 per marker, a leading one at `pos` included.
std::size_t mpa_marked_len(std::uint64_t pos, std::size_t fpdu_len);

// Writes `fpdu` (a marker-free FPDU as encode_mpa_fpdu made it) as it goes on the stream at
// position `pos`: markers inserted, the CRC field recomputed over that image (zero without
// `crc`). Returns mpa_marked_len(pos, fpdu.size()), or 0 when `out` is too small, `pos` is not a
// multiple of 4 or `fpdu` is not one whole FPDU.
std::size_t mpa_insert_markers(std::span<std::uint8_t> out, std::uint64_t pos, std::span<const std::uint8_t> fpdu,
                               bool crc);

// ---- Resumable FPDU receiver ----

struct MpaRxConfig {
  bool crc = false;                      // CRC negotiated: check it (else the field is not looked at)
  bool markers = false;                  // the peer inserts markers
  std::size_t max_ulpdu = kMpaMaxUlpdu;  // longer ULPDU_Length values break the stream
  std::uint64_t stream_pos = 0;          // position of the first byte fed (0 = SeqStart; a multiple of 4)
};

enum class MpaRxError : std::uint8_t {
  none,
  ulpdu_too_short,  // ULPDU_Length below kMpaMinUlpdu
  ulpdu_too_long,   // ULPDU_Length above max_ulpdu
  bad_crc,
  bad_marker,  // FPDUPTR does not point at the FPDU's ULPDU_Length
};
std::string_view to_string(MpaRxError e);

enum class MpaRxStatus : std::uint8_t {
  need_more,  // every byte given was consumed and no ULPDU is complete
  ulpdu,      // one ULPDU is complete: call again with the input's rest
  error,      // the stream is broken (error() says why); reported by this one call
  stopped,    // an earlier call reported an error: nothing is consumed any more
};

struct MpaRxResult {
  MpaRxStatus status = MpaRxStatus::need_more;
  std::size_t consumed = 0;  // bytes of the input used
  // With status ulpdu: the DDP segment. It points into the input when the whole FPDU lay in it
  // with no marker inside the ULPDU, else into the receiver's buffer (valid until the next call).
  std::span<const std::uint8_t> ulpdu;
};

struct MpaRxStats {
  std::uint64_t fpdus = 0;        // ULPDUs delivered
  std::uint64_t bytes = 0;        // stream bytes consumed
  std::uint64_t reassembled = 0;  // ULPDUs delivered from the buffer (split across inputs, or markers inside)
  std::uint64_t markers = 0;      // markers removed
  std::uint64_t crc_errors = 0;
  std::uint64_t length_errors = 0;
  std::uint64_t marker_errors = 0;
};

// Cuts one direction of an MPA stream (from SeqStart, after the Request/Reply) into ULPDUs, fed
// in pieces of any size as TCP reads return them. Checks ULPDU_Length before anything else of the
// FPDU is taken, each marker, and the CRC; the first error stops the stream for good.
class MpaRx {
 public:
  explicit MpaRx(const MpaRxConfig& cfg);

  // Consumes bytes of `in` up to the end of the next complete FPDU (or all of them).
  MpaRxResult next(std::span<const std::uint8_t> in);

  // Consumes all of `in`, calling on_ulpdu(std::span<const std::uint8_t>) for each ULPDU (the span
  // is valid during the call only). Returns need_more, or error / stopped as next() does (the
  // ULPDUs before the error have been handed over).
  template <typename F>
  MpaRxStatus feed(std::span<const std::uint8_t> in, F&& on_ulpdu) {
    for (;;) {
      const MpaRxResult r = next(in);
      in = in.subspan(r.consumed);
      if (r.status != MpaRxStatus::ulpdu) return r.status;
      on_ulpdu(r.ulpdu);
    }
  }

  MpaRxError error() const { return error_; }
  const MpaRxStats& stats() const { return stats_; }
  std::uint64_t stream_pos() const { return pos_; }
  // True between FPDUs (no partial FPDU or marker held).
  bool at_boundary() const { return phase_ == Phase::len && len_got_ == 0 && marker_got_ == 0; }

 private:
  enum class Phase : std::uint8_t { len, body, crc };
  // What one step of next() took from the input, and whether that broke the stream or ended an FPDU.
  struct Step {
    std::size_t n = 0;
    MpaRxError error = MpaRxError::none;
    bool fpdu_done = false;
  };

  MpaRxResult fail(MpaRxError e, std::size_t consumed);
  bool marker_due() const;
  void plan_fast_path(std::span<const std::uint8_t> in);
  Step take_marker(std::span<const std::uint8_t> rest);
  Step take_fpdu_bytes(std::span<const std::uint8_t> rest);
  Step take_len(std::span<const std::uint8_t> piece);
  Step take_body(std::span<const std::uint8_t> piece);
  Step take_crc(std::span<const std::uint8_t> piece);
  MpaRxResult deliver(std::size_t used);

  MpaRxConfig cfg_;
  std::vector<std::uint8_t> buf_;  // reassembled ULPDU (sized once: max_ulpdu)
  Crc32c crc_;
  std::uint64_t pos_ = 0;
  std::uint64_t len_pos_ = 0;  // stream position of this FPDU's ULPDU_Length
  Phase phase_ = Phase::len;
  std::size_t ulpdu_len_ = 0;
  std::size_t body_got_ = 0;  // ULPDU + pad bytes taken
  std::array<std::uint8_t, kMpaLenFieldLen> len_buf_{};
  std::size_t len_got_ = 0;
  std::array<std::uint8_t, kMpaCrcLen> crc_buf_{};
  std::size_t crc_got_ = 0;
  std::array<std::uint8_t, kMpaMarkerLen> marker_buf_{};
  std::size_t marker_got_ = 0;
  const std::uint8_t* direct_ = nullptr;  // the ULPDU in the caller's input (fast path), or null
  MpaRxError error_ = MpaRxError::none;
  MpaRxStats stats_;
};

}  // namespace softrnic::wire
