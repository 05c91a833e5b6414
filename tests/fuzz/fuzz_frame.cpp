// Fuzz target: one received datagram of the UDP framing (docs/wire.md). It goes through open_frame
// as it is (length, version, type and CRC checks; the CRC is mostly wrong), then again resealed
// with a correct CRC32c, so that mutated headers and bodies reach what parses a frame's body: SACK
// blocks (decode_sack), DDP/RDMAP segments (decode_ddp, decode_terminate), CM and stream-control
// headers. Each verdict is compared with a plain reading of the format, and what was decoded is
// encoded again and compared with the input.
#include <cstring>
#include <vector>

#include "fuzz_check.hpp"
#include "softrnic/wire/crc32c.hpp"
#include "softrnic/wire/udp_frame.hpp"
#include "wire_checks.hpp"

namespace w = softrnic::wire;
using fuzzcheck::be32;

namespace {

w::FrameError frame_reference(std::span<const std::uint8_t> d) {
  if (d.size() < w::kFrameOverhead) return w::FrameError::too_short;
  if ((d[0] >> 4) != 1) return w::FrameError::bad_version;
  if ((d[0] & 0x0F) < 1 || (d[0] & 0x0F) > 4) return w::FrameError::bad_type;
  // The CRC over the same bytes in two pieces (the running form, split at an arbitrary point).
  const std::size_t n = d.size() - w::kFrameTrailerLen;
  w::Crc32c c;
  c.update(d.first(n / 3));
  c.update(d.subspan(n / 3, n - n / 3));
  const std::uint32_t v = c.value();
  const auto t = w::frame_trailer(v);
  FUZZ_CHECK(v == w::crc32c(d.first(n)));
  return std::memcmp(t.data(), d.data() + n, 4) == 0 ? w::FrameError::none : w::FrameError::bad_crc;
}

void check_body(const w::FrameHeader& h, std::span<const std::uint8_t> body) {
  switch (h.type) {
    case w::FrameType::ack: fuzzcheck::check_sack(body); break;
    case w::FrameType::ddp: fuzzcheck::check_ddp(body); break;
    case w::FrameType::cm: {
      // As the engine reads it: a fixed header, then private data of the length it names.
      if (body.size() < sizeof(w::CmHdrWire)) break;
      w::CmHdrWire c;
      std::memcpy(&c, body.data(), sizeof c);
      FUZZ_CHECK(c.private_data_len.get() == (body[2] << 8 | body[3]));
      FUZZ_CHECK(c.conn_id.get() == be32(body.data() + 16) && c.init_seq.get() == be32(body.data() + 20));
      FUZZ_CHECK(c.conn_qual.get() == (std::uint64_t{be32(body.data() + 8)} << 32 | be32(body.data() + 12)));
      const std::size_t pd_len = c.private_data_len.get();
      if (pd_len <= body.size() - sizeof c) {
        const auto pd = body.subspan(sizeof c, pd_len);
        FUZZ_CHECK(pd.data() + pd.size() <= body.data() + body.size());
      }
      break;
    }
    case w::FrameType::stream_ctrl: {
      if (body.size() < sizeof(w::StreamCtrlWire)) break;
      w::StreamCtrlWire s;
      std::memcpy(&s, body.data(), sizeof s);
      FUZZ_CHECK(s.op.get() == be32(body.data()));
      break;
    }
  }
}

// A datagram open_frame accepted: the header fields are the wire's, the body is what lies between
// header and trailer, and the header written again from the fields is the same (but the reserved
// field, which is not kept and sent as zero).
void check_opened(std::span<const std::uint8_t> d, const w::FrameHeader& h, std::span<const std::uint8_t> body) {
  FUZZ_CHECK(body.data() == d.data() + w::kFrameHeaderLen);
  FUZZ_CHECK(body.size() == d.size() - w::kFrameOverhead);
  FUZZ_CHECK(static_cast<unsigned>(h.type) == (d[0] & 0x0F) && h.flags == d[1]);
  FUZZ_CHECK(h.dst_qpn == be32(d.data() + 4) && h.src_qpn == be32(d.data() + 8));
  FUZZ_CHECK(h.seq == be32(d.data() + 12) && h.ack == be32(d.data() + 16));
  std::vector<std::uint8_t> again(d.size());
  w::write_frame_header(again, h);
  FUZZ_CHECK(again[0] == d[0] && again[1] == d[1] && again[2] == 0 && again[3] == 0);
  FUZZ_CHECK(std::memcmp(again.data() + 4, d.data() + 4, w::kFrameHeaderLen - 4) == 0);
  // Sealed again with the same header bytes (reserved field as sent): the same trailer.
  std::memcpy(again.data(), d.data(), d.size() - w::kFrameTrailerLen);
  FUZZ_CHECK(w::seal_frame(again, d.size() - w::kFrameTrailerLen) == d.size());
  FUZZ_CHECK(std::memcmp(again.data(), d.data(), d.size()) == 0);
  check_body(h, body);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> raw(data, size);
  w::FrameHeader h;
  std::span<const std::uint8_t> body;
  // 1. As received.
  const w::FrameError e = w::open_frame(raw, h, body);
  FUZZ_CHECK_MSG(e == frame_reference(raw), "open_frame says %d", static_cast<int>(e));
  FUZZ_CHECK(!w::to_string(e).empty());
  if (e == w::FrameError::none) check_opened(raw, h, body);
  // 2. The same bytes with a correct CRC: what a peer that computes its CRCs could send.
  if (size < w::kFrameOverhead) return 0;
  std::vector<std::uint8_t> sealed(raw.begin(), raw.end());
  FUZZ_CHECK(w::seal_frame(sealed, size - w::kFrameTrailerLen) == size);
  w::FrameHeader h2;
  std::span<const std::uint8_t> body2;
  const w::FrameError e2 = w::open_frame(sealed, h2, body2);
  FUZZ_CHECK(e2 == frame_reference(sealed));
  FUZZ_CHECK(e2 != w::FrameError::bad_crc && e2 != w::FrameError::too_short);
  if (e2 == w::FrameError::none) check_opened(sealed, h2, body2);
  // 3. The body bytes under each body parser, whatever type the header names.
  if (size > w::kFrameOverhead) {
    const auto b = std::span<const std::uint8_t>(sealed).subspan(w::kFrameHeaderLen, size - w::kFrameOverhead);
    fuzzcheck::check_sack(b);
    fuzzcheck::check_ddp(b);
  }
  return 0;
}
