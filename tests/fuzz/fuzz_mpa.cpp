// Fuzz target: MPA (RFC 5044/6581), the codec the MPA/TCP wire parses a peer's bytes with.
// - decode_mpa_req_rep on the input: a verdict, `consumed` within the input and equal to the
//   frame's length, and what decoded encodes back to a frame that decodes to the same fields;
// - the FPDU reassembler (MpaRx) on the input as a byte stream, with CRC and markers chosen by
//   the first byte: the same ULPDUs and the same verdict whether the stream comes whole, byte by
//   byte or in pieces of input-chosen sizes; every ULPDU within the configured bounds;
// - the other way round: ULPDUs cut from the input, framed by the encoder (with markers at the
//   stream position, CRC or not), come back out of the reassembler unchanged, without error.
#include <cstring>
#include <vector>

#include "fuzz_check.hpp"
#include "softrnic/wire/mpa.hpp"

namespace w = softrnic::wire;

namespace {

struct Outcome {
  std::vector<std::vector<std::uint8_t>> ulpdus;
  w::MpaRxStatus last = w::MpaRxStatus::need_more;
  w::MpaRxError error = w::MpaRxError::none;
  bool operator==(const Outcome&) const = default;
};

// Feeds `in` in pieces whose sizes come from `sizes` (0: the rest at once).
Outcome run(const w::MpaRxConfig& cfg, std::span<const std::uint8_t> in, std::span<const std::uint8_t> sizes) {
  w::MpaRx rx(cfg);
  Outcome o;
  std::size_t k = 0;
  while (!in.empty()) {
    std::size_t n = sizes.empty() ? in.size() : std::size_t{sizes[k++ % sizes.size()]} + 1;
    n = std::min(n, in.size());
    std::span<const std::uint8_t> piece = in.first(n);
    in = in.subspan(n);
    for (;;) {
      const w::MpaRxResult r = rx.next(piece);
      FUZZ_CHECK(r.consumed <= piece.size());
      piece = piece.subspan(r.consumed);
      if (r.status == w::MpaRxStatus::ulpdu) {
        FUZZ_CHECK(r.ulpdu.size() >= w::kMpaMinUlpdu && r.ulpdu.size() <= cfg.max_ulpdu);
        o.ulpdus.emplace_back(r.ulpdu.begin(), r.ulpdu.end());
        continue;
      }
      o.last = r.status;
      if (r.status == w::MpaRxStatus::error) {
        o.error = rx.error();
        FUZZ_CHECK(o.error != w::MpaRxError::none);
        // Broken for good: nothing more is taken.
        const std::span<const std::uint8_t> rest = piece.empty() ? in : piece;
        if (!rest.empty()) {
          const w::MpaRxResult again = rx.next(rest);
          FUZZ_CHECK(again.status == w::MpaRxStatus::stopped && again.consumed == 0);
        }
        return o;
      }
      FUZZ_CHECK(r.status == w::MpaRxStatus::need_more && piece.empty());
      break;
    }
  }
  return o;
}

void req_rep(std::span<const std::uint8_t> in) {
  w::MpaParams p;
  std::size_t used = 0;
  const w::MpaError e = w::decode_mpa_req_rep(in, p, used);
  if (e == w::MpaError::need_more) return;
  if (e != w::MpaError::none) {
    FUZZ_CHECK(!w::to_string(e).empty());
    return;
  }
  FUZZ_CHECK(used >= w::kMpaReqRepHdrLen && used <= in.size());
  FUZZ_CHECK(used <= w::kMpaReqRepHdrLen + w::kMpaMaxPrivateData);
  std::vector<std::uint8_t> b(w::kMpaReqRepHdrLen + w::kMpaMaxPrivateData);
  const std::size_t n = w::encode_mpa_req_rep(b, p);
  FUZZ_CHECK(n == used);
  w::MpaParams q;
  std::size_t used2 = 0;
  FUZZ_CHECK(w::decode_mpa_req_rep({b.data(), n}, q, used2) == w::MpaError::none && used2 == n);
  FUZZ_CHECK(q.reply == p.reply && q.markers == p.markers && q.crc == p.crc && q.reject == p.reject &&
             q.revision == p.revision && q.enhanced.has_value() == p.enhanced.has_value());
  if (p.enhanced)
    FUZZ_CHECK(q.enhanced->ird == p.enhanced->ird && q.enhanced->ord == p.enhanced->ord &&
               q.enhanced->peer_to_peer == p.enhanced->peer_to_peer && q.enhanced->rtr_send == p.enhanced->rtr_send &&
               q.enhanced->rtr_write == p.enhanced->rtr_write && q.enhanced->rtr_read == p.enhanced->rtr_read);
  FUZZ_CHECK(q.private_data.size() == p.private_data.size() &&
             std::memcmp(q.private_data.data(), p.private_data.data(), p.private_data.size()) == 0);
}

// ULPDUs cut from the input, framed, reassembled.
void round_trip(bool crc, bool markers, std::span<const std::uint8_t> in) {
  std::vector<std::vector<std::uint8_t>> sent;
  std::vector<std::uint8_t> stream;
  std::uint64_t pos = 0;
  while (in.size() >= 2 && sent.size() < 64) {
    const std::size_t want = w::kMpaMinUlpdu + (std::size_t{in[0]} << 8 | in[1]) % 3000;
    in = in.subspan(2);
    std::vector<std::uint8_t> u(want);
    const std::size_t n = std::min(want, in.size());
    if (n) std::memcpy(u.data(), in.data(), n);
    in = in.subspan(n);
    std::vector<std::uint8_t> fpdu(w::mpa_fpdu_len(u.size()));
    const std::span<const std::uint8_t> piece[1] = {u};
    FUZZ_CHECK(w::encode_mpa_fpdu(fpdu, piece, crc) == fpdu.size());
    if (markers) {
      std::vector<std::uint8_t> marked(w::mpa_marked_len(pos, fpdu.size()));
      FUZZ_CHECK(w::mpa_insert_markers(marked, pos, fpdu, crc) == marked.size());
      fpdu = std::move(marked);
    }
    pos += fpdu.size();
    stream.insert(stream.end(), fpdu.begin(), fpdu.end());
    sent.push_back(std::move(u));
  }
  w::MpaRxConfig cfg;
  cfg.crc = crc;
  cfg.markers = markers;
  const std::uint8_t sizes[] = {0, 6, 200, 1, 255, 31};
  const Outcome o = run(cfg, stream, sizes);
  FUZZ_CHECK(o.error == w::MpaRxError::none && o.last != w::MpaRxStatus::error);
  FUZZ_CHECK(o.ulpdus == sent);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t mode = data[0];
  const std::span<const std::uint8_t> in(data + 1, size - 1);
  req_rep(in);
  w::MpaRxConfig cfg;
  cfg.crc = mode & 1;
  cfg.markers = mode & 2;
  cfg.max_ulpdu = (mode & 4) ? 1500 : w::kMpaMaxUlpdu;
  // Chunk sizes come from the input's tail (up to 8 of them).
  const std::span<const std::uint8_t> sizes = in.last(std::min<std::size_t>(8, in.size()));
  const Outcome whole = run(cfg, in, {});
  const std::uint8_t one[] = {0};
  FUZZ_CHECK(run(cfg, in, one) == whole);
  FUZZ_CHECK(run(cfg, in, sizes) == whole);
  round_trip(mode & 8, mode & 16, in);
  return 0;
}
