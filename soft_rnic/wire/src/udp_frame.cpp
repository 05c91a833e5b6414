#include "softrnic/wire/udp_frame.hpp"

#include <algorithm>
#include <cstring>

#include "softrnic/wire/crc32c.hpp"

namespace softrnic::wire {

std::string_view to_string(FrameError e) {
  switch (e) {
    case FrameError::none: return "none";
    case FrameError::too_short: return "datagram shorter than header and trailer";
    case FrameError::bad_version: return "unknown framing version";
    case FrameError::bad_type: return "unknown frame type";
    case FrameError::bad_crc: return "CRC32c mismatch";
  }
  return "?";
}

void write_frame_header(std::span<std::uint8_t> out, const FrameHeader& h) {
  FrameHdrWire w{static_cast<std::uint8_t>(kFrameVersion << 4 | static_cast<std::uint8_t>(h.type)),
                 h.flags,
                 Be16(0),
                 Be32(h.dst_qpn),
                 Be32(h.src_qpn),
                 Be32(h.seq),
                 Be32(h.ack)};
  std::memcpy(out.data(), &w, sizeof w);
}

std::array<std::uint8_t, kFrameTrailerLen> frame_trailer(std::uint32_t crc) {
  return {static_cast<std::uint8_t>(crc), static_cast<std::uint8_t>(crc >> 8), static_cast<std::uint8_t>(crc >> 16),
          static_cast<std::uint8_t>(crc >> 24)};
}

std::size_t seal_frame(std::span<std::uint8_t> buf, std::size_t len) {
  const auto t = frame_trailer(crc32c(buf.first(len)));
  std::memcpy(buf.data() + len, t.data(), t.size());
  return len + t.size();
}

std::size_t encode_sack(std::span<std::uint8_t> out, std::span<const SackRange> blocks) {
  const std::size_t n = std::min(blocks.size(), kMaxSackBlocks);
  if (out.size() < 4 + 8 * n) return 0;
  out[0] = static_cast<std::uint8_t>(n);
  out[1] = out[2] = out[3] = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const Be32 a(blocks[i].start), b(blocks[i].end);
    std::memcpy(out.data() + 4 + 8 * i, &a, 4);
    std::memcpy(out.data() + 8 + 8 * i, &b, 4);
  }
  return 4 + 8 * n;
}

FrameError open_frame(std::span<const std::uint8_t> d, FrameHeader& hdr, std::span<const std::uint8_t>& body) {
  if (d.size() < kFrameOverhead) return FrameError::too_short;
  FrameHdrWire w;
  std::memcpy(&w, d.data(), sizeof w);
  if ((w.ver_type >> 4) != kFrameVersion) return FrameError::bad_version;
  const std::uint8_t type = w.ver_type & 0x0F;
  if (type < 1 || type > 4) return FrameError::bad_type;
  const std::size_t n = d.size() - kFrameTrailerLen;
  const std::uint32_t wire_crc = static_cast<std::uint32_t>(d[n]) | static_cast<std::uint32_t>(d[n + 1]) << 8 |
                                 static_cast<std::uint32_t>(d[n + 2]) << 16 |
                                 static_cast<std::uint32_t>(d[n + 3]) << 24;
  if (crc32c(d.first(n)) != wire_crc) return FrameError::bad_crc;
  hdr.type = static_cast<FrameType>(type);
  hdr.flags = w.flags;
  hdr.dst_qpn = w.dst_qpn.get();
  hdr.src_qpn = w.src_qpn.get();
  hdr.seq = w.seq.get();
  hdr.ack = w.ack.get();
  body = d.subspan(kFrameHeaderLen, n - kFrameHeaderLen);
  return FrameError::none;
}

}  // namespace softrnic::wire
