// The project's own framing for iWARP over UDP (docs/wire.md): a 20-byte header that names the
// destination QP and carries sequence/ack numbers, one body (a DDP segment, an ACK, a
// connection-management message or an in-stream control), and a CRC32c trailer.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "softrnic/wire/be.hpp"

namespace softrnic::wire {

inline constexpr std::uint8_t kFrameVersion = 1;

enum class FrameType : std::uint8_t {
  ddp = 1,          // sequenced: one DDP segment
  ack = 2,          // not sequenced: acknowledgement only
  cm = 3,           // not sequenced: connection management (CmHdr + private data)
  stream_ctrl = 4,  // sequenced: in-stream control (StreamCtrlHdr)
};

enum FrameFlags : std::uint8_t {
  kFlagAckValid = 0x01,
  kFlagProbe = 0x02,       // ACK frame: a keepalive probe; answer with an ACK now (seq = a nonce)
  kFlagProbeReply = 0x04,  // ACK frame: the answer to a probe (seq = the probe's nonce)
  kFlagAckReq = 0x08,      // sequenced frame: its sender waits for the ack (acknowledge it without delay)
};

struct FrameHdrWire {
  std::uint8_t ver_type;  // version << 4 | type
  std::uint8_t flags;
  Be16 reserved;
  Be32 dst_qpn;
  Be32 src_qpn;
  Be32 seq;
  Be32 ack;  // cumulative: next sequence number expected from the peer
};
static_assert(sizeof(FrameHdrWire) == 20);

inline constexpr std::size_t kFrameHeaderLen = sizeof(FrameHdrWire);
inline constexpr std::size_t kFrameTrailerLen = 4;
inline constexpr std::size_t kFrameOverhead = kFrameHeaderLen + kFrameTrailerLen;

struct FrameHeader {
  FrameType type = FrameType::ddp;
  std::uint8_t flags = 0;
  std::uint32_t dst_qpn = 0;
  std::uint32_t src_qpn = 0;
  std::uint32_t seq = 0;
  std::uint32_t ack = 0;
};

enum class CmOp : std::uint8_t {
  connect_request = 1,
  connect_reply = 2,
  reject = 3,
  ready_to_use = 4,  // initiator confirms the reply
  reset = 5,         // abrupt close: the sender's QP is gone; header ack = what it received,
                     // header seq = the exact sequence number the receiver must expect next
  reset_ack = 6,     // the reset was seen (the sender stops repeating it)
  pending = 7,       // the request arrived and waits for the listener's consumer (as IB CM's MRA)
  cookie = 8,        // the listener's answer to a request without a valid cookie: header seq =
                     // the cookie, which the initiator echoes in the seq field of its request
};

struct CmHdrWire {
  std::uint8_t op;
  std::uint8_t reserved;
  Be16 private_data_len;
  Be16 ird;
  Be16 ord;
  Be64 conn_qual;
  Be32 conn_id;   // chosen by the initiator; names the attempt in retransmissions
  Be32 init_seq;  // first sequence number the sender will use on the connection
};
static_assert(sizeof(CmHdrWire) == 24);

// ACK body: count (1 byte), 3 reserved bytes, then `count` blocks of [start, end) sequence numbers
// (big-endian) received above the cumulative acknowledgement.
inline constexpr std::size_t kMaxSackBlocks = 32;
inline constexpr std::size_t kSackInvalid = ~std::size_t{0};
struct SackRange {
  std::uint32_t start = 0;
  std::uint32_t end = 0;
};
// Writes the ACK body into `out` (4 + 8 * blocks.size() bytes); returns its length.
std::size_t encode_sack(std::span<std::uint8_t> out, std::span<const SackRange> blocks);
// Decodes an ACK body into `out`; returns the block count, or kSackInvalid for a malformed body.
template <typename Block>
std::size_t decode_sack(std::span<const std::uint8_t> body, std::span<Block> out) {
  if (body.empty()) return 0;
  if (body.size() < 4) return kSackInvalid;
  const std::size_t n = body[0];
  if (n > kMaxSackBlocks || n > out.size() || body.size() != 4 + 8 * n || body[1] || body[2] || body[3])
    return kSackInvalid;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint8_t* p = body.data() + 4 + 8 * i;
    out[i].start = static_cast<std::uint32_t>(p[0]) << 24 | static_cast<std::uint32_t>(p[1]) << 16 |
                   static_cast<std::uint32_t>(p[2]) << 8 | p[3];
    out[i].end = static_cast<std::uint32_t>(p[4]) << 24 | static_cast<std::uint32_t>(p[5]) << 16 |
                 static_cast<std::uint32_t>(p[6]) << 8 | p[7];
    if (static_cast<std::int32_t>(out[i].end - out[i].start) <= 0) return kSackInvalid;
  }
  return n;
}

enum class StreamCtrlOp : std::uint32_t {
  disconnect = 1,  // graceful close: every earlier frame of the stream has been delivered
};
struct StreamCtrlWire {
  Be32 op;
};
static_assert(sizeof(StreamCtrlWire) == 4);

enum class FrameError : std::uint8_t { none, too_short, bad_version, bad_type, bad_crc };
std::string_view to_string(FrameError e);

// Writes the header at the start of `out` (which must hold kFrameHeaderLen bytes).
void write_frame_header(std::span<std::uint8_t> out, const FrameHeader& h);

// Appends the CRC32c trailer after the first `len` bytes of `buf` (which must hold len + 4) and
// returns the datagram length.
std::size_t seal_frame(std::span<std::uint8_t> buf, std::size_t len);

// The trailer for a frame whose CRC32c is `crc` (little-endian image).
std::array<std::uint8_t, kFrameTrailerLen> frame_trailer(std::uint32_t crc);

// Checks a received datagram (length, version, type, CRC) and splits it into header and body.
FrameError open_frame(std::span<const std::uint8_t> dgram, FrameHeader& hdr, std::span<const std::uint8_t>& body);

}  // namespace softrnic::wire
