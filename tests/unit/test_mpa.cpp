// MPA (RFC 5044 / RFC 6581) codec: Request/Reply frames, FPDU framing, markers and the resumable
// receiver. Known answers: ../shared/tools/wirecheck/kat.py (an FPDU tshark calls "Good CRC32"),
// values computed with ../shared/tools/wirecheck/rdmawire.py (its own table CRC32c and marker
// builder), and the captures of Linux siw in ../shared/tools/rdmavm/captures plus the marker
// capture in ../shared/tools/wirecheck/captures (both validated by tshark).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "softrnic/wire/crc32c.hpp"
#include "softrnic/wire/ddp.hpp"
#include "softrnic/wire/mpa.hpp"

using namespace softrnic::wire;

namespace {

using Bytes = std::vector<std::uint8_t>;

Bytes hex(const std::string& s) {
  Bytes out;
  for (std::size_t i = 0; i + 1 < s.size(); i += 2)
    out.push_back(static_cast<std::uint8_t>(std::stoul(s.substr(i, 2), nullptr, 16)));
  return out;
}

Bytes str_bytes(std::string_view s) {
  return Bytes(s.begin(), s.end());
}

// The pattern the rdmawire.py vectors use: byte i = (i * 31 + seed) & 0xFF.
Bytes pattern(std::size_t n, unsigned seed) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>((i * 31 + seed) & 0xFF);
  return b;
}

std::uint32_t le32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}

Bytes fpdu_of(std::span<const std::uint8_t> ulpdu, bool crc) {
  Bytes f(mpa_fpdu_len(ulpdu.size()));
  EXPECT_EQ(encode_mpa_fpdu(f, {ulpdu}, crc), f.size());
  return f;
}

// Appends the stream image of an FPDU for `ulpdu` at stream position `pos` (markers or not).
void append_fpdu(Bytes& stream, std::uint64_t& pos, std::span<const std::uint8_t> ulpdu, bool crc, bool markers) {
  const Bytes f = fpdu_of(ulpdu, crc);
  if (!markers) {
    stream.insert(stream.end(), f.begin(), f.end());
    pos += f.size();
    return;
  }
  Bytes m(mpa_marked_len(pos, f.size()));
  ASSERT_EQ(mpa_insert_markers(m, pos, f, crc), m.size());
  stream.insert(stream.end(), m.begin(), m.end());
  pos += m.size();
}

// How a stream is cut into reads.
enum class Chunking { whole, bytewise, random, given };

std::vector<std::size_t> cut(std::size_t total, Chunking how, std::uint32_t seed = 5044) {
  std::vector<std::size_t> sizes;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::size_t> dist(1, 3000);
  for (std::size_t left = total; left > 0;) {
    std::size_t n = left;
    if (how == Chunking::bytewise) n = 1;
    if (how == Chunking::random) n = std::min(left, dist(rng));
    sizes.push_back(n);
    left -= n;
  }
  return sizes;
}

struct RxRun {
  std::vector<Bytes> ulpdus;
  std::vector<std::size_t> fpdu_offsets;  // stream offset at which each FPDU's bytes begin
  std::size_t end = 0;                    // stream offset after the last complete FPDU
  MpaRxStatus last = MpaRxStatus::need_more;
  MpaRxStats stats;
  bool at_boundary = false;
};

// Feeds `stream` to a fresh receiver in reads of `sizes` through the pull API.
RxRun run_rx(const MpaRxConfig& cfg, std::span<const std::uint8_t> stream, const std::vector<std::size_t>& sizes) {
  MpaRx rx(cfg);
  RxRun r;
  std::size_t off = 0, fpdu_start = 0;
  for (const std::size_t n : sizes) {
    std::span<const std::uint8_t> in = stream.subspan(off, n);
    while (!in.empty()) {
      const MpaRxResult res = rx.next(in);
      in = in.subspan(res.consumed);
      off += res.consumed;
      r.last = res.status;
      if (res.status == MpaRxStatus::ulpdu) {
        r.ulpdus.emplace_back(res.ulpdu.begin(), res.ulpdu.end());
        r.fpdu_offsets.push_back(fpdu_start);
        fpdu_start = off;
        r.end = off;
      } else if (res.status != MpaRxStatus::need_more) {
        r.stats = rx.stats();
        return r;
      }
    }
  }
  EXPECT_EQ(off, stream.size());
  r.stats = rx.stats();
  r.at_boundary = rx.at_boundary();
  return r;
}

}  // namespace

// ---------------------------------------------------------------- Request / Reply

TEST(MpaReqRep, EnhancedRequestKnownAnswer) {
  const Bytes user = str_bytes("abc");
  MpaParams p;
  p.crc = true;
  p.revision = 2;
  p.enhanced = MpaEnhanced{.ird = 0x10, .ord = 0x20, .peer_to_peer = true, .rtr_write = true};
  p.private_data = user;
  Bytes out(64);
  const std::size_t n = encode_mpa_req_rep(out, p);
  out.resize(n);
  // key | bits: C (0x4000) + enhanced (0x1000) + rev 2 | pd_len 7 | IRD 0x10 + A | ORD 0x20 + C | "abc"
  EXPECT_EQ(out, hex("4d504120494420526571204672616d65"
                     "5002"
                     "0007"
                     "8010"
                     "8020"
                     "616263"));

  MpaParams d;
  std::size_t consumed = 0;
  ASSERT_EQ(decode_mpa_req_rep(out, d, consumed), MpaError::none);
  EXPECT_EQ(consumed, 27u);
  EXPECT_FALSE(d.reply);
  EXPECT_TRUE(d.crc);
  EXPECT_FALSE(d.markers);
  EXPECT_FALSE(d.reject);
  EXPECT_EQ(d.revision, 2);
  ASSERT_TRUE(d.enhanced.has_value());
  EXPECT_EQ(d.enhanced->ird, 0x10);
  EXPECT_EQ(d.enhanced->ord, 0x20);
  EXPECT_TRUE(d.enhanced->peer_to_peer);
  EXPECT_FALSE(d.enhanced->rtr_send);
  EXPECT_TRUE(d.enhanced->rtr_write);
  EXPECT_FALSE(d.enhanced->rtr_read);
  EXPECT_EQ(Bytes(d.private_data.begin(), d.private_data.end()), user);
  EXPECT_EQ(d.private_data.data(), out.data() + 24);  // points into the input
}

TEST(MpaReqRep, SiwRequestFromCapture) {
  // siw_rping.pcap frame 6: rev 2, enhanced, no M/C, IRD 1 / ORD 1, no user data.
  const Bytes req =
      hex("4d504120494420526571204672616d65"
          "1002"
          "0004"
          "0001"
          "0001");
  MpaParams d;
  std::size_t consumed = 0;
  ASSERT_EQ(decode_mpa_req_rep(req, d, consumed), MpaError::none);
  EXPECT_EQ(consumed, req.size());
  EXPECT_FALSE(d.crc || d.markers || d.reject || d.reply);
  ASSERT_TRUE(d.enhanced.has_value());
  EXPECT_EQ(d.enhanced->ird, 1);
  EXPECT_EQ(d.enhanced->ord, 1);
  EXPECT_FALSE(d.enhanced->peer_to_peer || d.enhanced->rtr_send || d.enhanced->rtr_write || d.enhanced->rtr_read);
  EXPECT_TRUE(d.private_data.empty());
  Bytes again(64);
  again.resize(encode_mpa_req_rep(again, d));
  EXPECT_EQ(again, req);
}

TEST(MpaReqRep, AllControlBitsAndReply) {
  MpaParams p;
  p.reply = true;
  p.markers = true;
  p.reject = true;
  p.enhanced = MpaEnhanced{
      .ird = 0x3FFF, .ord = 0, .peer_to_peer = true, .rtr_send = true, .rtr_write = false, .rtr_read = true};
  Bytes out(64);
  out.resize(encode_mpa_req_rep(out, p));
  EXPECT_EQ(out, hex("4d504120494420526570204672616d65"
                     "b002"
                     "0004"
                     "ffff"
                     "4000"));
  MpaParams d;
  std::size_t consumed = 0;
  ASSERT_EQ(decode_mpa_req_rep(out, d, consumed), MpaError::none);
  EXPECT_TRUE(d.reply && d.markers && d.reject && !d.crc);
  EXPECT_EQ(d.enhanced->ird, 0x3FFF);
  EXPECT_EQ(d.enhanced->ord, 0);
  EXPECT_TRUE(d.enhanced->peer_to_peer && d.enhanced->rtr_send && d.enhanced->rtr_read && !d.enhanced->rtr_write);

  // Revision 1, no enhanced header: the private data is all the consumer's.
  const Bytes user = pattern(100, 3);
  MpaParams v1{.reply = false,
               .markers = false,
               .crc = true,
               .reject = false,
               .revision = 1,
               .enhanced = {},
               .private_data = user};
  Bytes f(200);
  f.resize(encode_mpa_req_rep(f, v1));
  ASSERT_EQ(f.size(), 120u);
  EXPECT_EQ(f[16], 0x40);
  EXPECT_EQ(f[17], 1);
  ASSERT_EQ(decode_mpa_req_rep(f, d, consumed), MpaError::none);
  EXPECT_FALSE(d.enhanced.has_value());
  EXPECT_EQ(d.revision, 1);
  EXPECT_EQ(Bytes(d.private_data.begin(), d.private_data.end()), user);

  // Reserved bits are ignored on receive.
  f[16] |= 0x0F;
  ASSERT_EQ(decode_mpa_req_rep(f, d, consumed), MpaError::none);
  EXPECT_TRUE(d.crc && !d.markers && !d.reject && !d.enhanced.has_value());
}

TEST(MpaReqRep, IncrementalReads) {
  const Bytes user = pattern(40, 9);
  MpaParams p;
  p.enhanced = MpaEnhanced{.ird = 4, .ord = 4};
  p.private_data = user;
  Bytes f(100);
  f.resize(encode_mpa_req_rep(f, p));
  ASSERT_EQ(f.size(), 64u);
  for (std::size_t have = 0; have < f.size(); ++have) {
    MpaParams d;
    std::size_t want = 0;
    ASSERT_EQ(decode_mpa_req_rep(std::span(f).first(have), d, want), MpaError::need_more) << have;
    EXPECT_EQ(want, have < kMpaReqRepHdrLen ? kMpaReqRepHdrLen : f.size()) << have;
  }
  {  // nothing read yet: an empty vector's span has no data pointer (UBSan checks memcmp's)
    MpaParams d;
    std::size_t want = 0;
    EXPECT_EQ(decode_mpa_req_rep(std::span<const std::uint8_t>{}, d, want), MpaError::need_more);
    EXPECT_EQ(want, kMpaReqRepHdrLen);
  }
  MpaParams d;
  std::size_t consumed = 0;
  Bytes more = f;
  more.push_back(0xAA);  // what follows is not looked at
  ASSERT_EQ(decode_mpa_req_rep(more, d, consumed), MpaError::none);
  EXPECT_EQ(consumed, f.size());
}

TEST(MpaReqRep, DecodeErrors) {
  auto frame = [](std::string_view key, std::uint16_t bits, std::uint16_t pd_len, std::size_t body) {
    Bytes f(key.begin(), key.end());
    f.push_back(static_cast<std::uint8_t>(bits >> 8));
    f.push_back(static_cast<std::uint8_t>(bits));
    f.push_back(static_cast<std::uint8_t>(pd_len >> 8));
    f.push_back(static_cast<std::uint8_t>(pd_len));
    f.resize(f.size() + body);
    return f;
  };
  auto decode = [](std::span<const std::uint8_t> in) {
    MpaParams d;
    std::size_t consumed = 99;
    const MpaError e = decode_mpa_req_rep(in, d, consumed);
    if (e != MpaError::none && e != MpaError::need_more) {
      EXPECT_EQ(consumed, 0u);
    }
    return e;
  };
  EXPECT_EQ(decode(frame("MPA ID Rex Frame", 0x0001, 0, 0)), MpaError::bad_key);
  EXPECT_EQ(decode(frame("GET / HTTP/1.1\r\n", 0x0001, 0, 0)), MpaError::bad_key);
  const Bytes early = str_bytes("MPA ID Rx");  // wrong before the key is complete
  EXPECT_EQ(decode(early), MpaError::bad_key);
  EXPECT_EQ(decode(std::span(early).first(8)), MpaError::need_more);
  EXPECT_EQ(decode(frame(kMpaKeyReq, 0x0003, 0, 0)), MpaError::bad_revision);
  EXPECT_EQ(decode(frame(kMpaKeyRep, 0x00FF, 0, 0)), MpaError::bad_revision);
  // pd_len is checked as soon as the header is in, before the private data.
  EXPECT_EQ(decode(frame(kMpaKeyReq, 0x0001, 513, 0)), MpaError::pd_too_long);
  EXPECT_EQ(decode(frame(kMpaKeyReq, 0x0001, 512, 511)), MpaError::need_more);
  EXPECT_EQ(decode(frame(kMpaKeyReq, 0x0001, 512, 512)), MpaError::none);
  EXPECT_EQ(decode(frame(kMpaKeyReq, 0x1001, 4, 4)), MpaError::enhanced_bad_revision);
  EXPECT_EQ(decode(frame(kMpaKeyRep, 0x1000, 4, 4)), MpaError::enhanced_bad_revision);
  EXPECT_EQ(decode(frame(kMpaKeyReq, 0x1002, 3, 3)), MpaError::enhanced_pd_too_short);
  EXPECT_EQ(decode(frame(kMpaKeyReq, 0x1002, 0, 0)), MpaError::enhanced_pd_too_short);
  EXPECT_EQ(decode(frame(kMpaKeyReq, 0x1002, 4, 4)), MpaError::none);
  EXPECT_EQ(decode(frame(kMpaKeyReq, 0x0002, 0, 0)), MpaError::none);  // revision 2 without the enhanced header
  EXPECT_EQ(decode(frame(kMpaKeyReq, 0x0000, 0, 0)), MpaError::none);  // revision 0 (pre-RFC drafts)

  for (auto e : {MpaError::none, MpaError::need_more, MpaError::bad_key, MpaError::bad_revision, MpaError::pd_too_long,
                 MpaError::enhanced_bad_revision, MpaError::enhanced_pd_too_short})
    EXPECT_NE(to_string(e), "?");
}

TEST(MpaReqRep, EncodeRefusesWhatCannotBeSent) {
  Bytes out(1024);
  const Bytes pd508(508), pd509(509), pd513(513);
  MpaParams p;
  p.revision = 3;
  EXPECT_EQ(encode_mpa_req_rep(out, p), 0u);
  p.revision = 1;
  p.enhanced = MpaEnhanced{};
  EXPECT_EQ(encode_mpa_req_rep(out, p), 0u);  // enhanced needs revision 2
  p.revision = 2;
  p.enhanced->ird = 0x4000;
  EXPECT_EQ(encode_mpa_req_rep(out, p), 0u);
  p.enhanced->ird = 0x3FFF;
  p.enhanced->ord = 0x4000;
  EXPECT_EQ(encode_mpa_req_rep(out, p), 0u);
  p.enhanced->ord = 1;
  p.private_data = pd509;
  EXPECT_EQ(encode_mpa_req_rep(out, p), 0u);  // 4 + 509 > 512
  p.private_data = pd508;
  EXPECT_EQ(encode_mpa_req_rep(out, p), 532u);
  EXPECT_EQ(encode_mpa_req_rep(std::span(out).first(531), p), 0u);
  p.enhanced.reset();
  p.private_data = pd513;
  EXPECT_EQ(encode_mpa_req_rep(out, p), 0u);
}

TEST(MpaReqRep, Negotiation) {
  MpaParams req, rep;
  rep.reply = true;
  MpaNegotiated n = mpa_negotiate(req, rep);
  EXPECT_FALSE(n.crc || n.initiator_sends_markers || n.responder_sends_markers);
  rep.crc = true;      // C in either frame turns CRC on both ways
  req.markers = true;  // the initiator wants markers on what it receives
  n = mpa_negotiate(req, rep);
  EXPECT_TRUE(n.crc);
  EXPECT_TRUE(n.responder_sends_markers);
  EXPECT_FALSE(n.initiator_sends_markers);
}

// ---------------------------------------------------------------- FPDU framing

TEST(MpaFpdu, LengthsAndPad) {
  EXPECT_EQ(mpa_pad(14), 0u);
  EXPECT_EQ(mpa_pad(15), 3u);
  EXPECT_EQ(mpa_pad(16), 2u);
  EXPECT_EQ(mpa_pad(17), 1u);
  EXPECT_EQ(mpa_fpdu_len(14), 20u);
  EXPECT_EQ(mpa_fpdu_len(15), 24u);
  EXPECT_EQ(mpa_fpdu_len(18), 24u);
  EXPECT_EQ(mpa_fpdu_len(0xFFFF), 2u + 0xFFFF + 3 + 4);
  Bytes b(2);
  EXPECT_EQ(encode_mpa_len(b, 0x1234), 2u);
  EXPECT_EQ(b, hex("1234"));
  EXPECT_EQ(encode_mpa_len(b, 0x10000), 0u);
  EXPECT_EQ(encode_mpa_len(std::span(b).first(1), 1), 0u);
}

TEST(MpaFpdu, KatPyKnownAnswer) {
  // kat.py / wirecheck captures/iwarp_tcp.pcap frame 6: Send, QN 0, MSN 1, MO 0, "Hello iWARP SEND";
  // tshark: "Good CRC32". No pad (2 + 34 = 36).
  const Bytes fpdu =
      hex("0022414300000000000000000000000100000000"
          "48656c6c6f2069574152502053454e44"
          "54a700e5");
  const std::span<const std::uint8_t> ulpdu = std::span(fpdu).subspan(2, 34);
  EXPECT_EQ(fpdu_of(ulpdu, true), fpdu);
  // Header and payload given apart: the same bytes.
  Bytes out(64);
  ASSERT_EQ(encode_mpa_fpdu(out, {ulpdu.first(18), ulpdu.subspan(18)}, true), 40u);
  EXPECT_EQ(Bytes(out.begin(), out.begin() + 40), fpdu);
  // Framed in place, as the transport does: the ULPDU gathered at offset 2, the rest written.
  Bytes in_place(40, 0xEE);
  std::copy(ulpdu.begin(), ulpdu.end(), in_place.begin() + 2);
  ASSERT_EQ(frame_mpa_fpdu(in_place, ulpdu.size(), true), 40u);
  EXPECT_EQ(in_place, fpdu);
  EXPECT_EQ(le32(fpdu.data() + 36), crc32c(std::span(fpdu).first(36)));
}

TEST(MpaFpdu, PadKnownAnswer) {
  // rdmawire.py: mpa_fpdu(ddp_tagged(0, 0x1234, 0x1000, last=1, payload=b"abc")), one pad byte.
  const Bytes ulpdu = hex("c140000012340000000000001000616263");
  const Bytes want =
      hex("0011c140000012340000000000001000616263"
          "00"
          "a766d9ff");
  EXPECT_EQ(fpdu_of(ulpdu, true), want);
  // Framed in place over a buffer whose pad and CRC bytes held something else: the pad is zeroed.
  Bytes in_place(want.size(), 0xEE);
  std::copy(ulpdu.begin(), ulpdu.end(), in_place.begin() + 2);
  ASSERT_EQ(frame_mpa_fpdu(in_place, ulpdu.size(), true), want.size());
  EXPECT_EQ(in_place, want);
  // Without CRC: zero pad, zero CRC field (as siw sends it).
  std::fill(in_place.begin() + 2 + static_cast<std::ptrdiff_t>(ulpdu.size()), in_place.end(), 0xEE);
  ASSERT_EQ(frame_mpa_fpdu(in_place, ulpdu.size(), false), want.size());
  EXPECT_EQ(Bytes(in_place.end() - 5, in_place.end()), hex("0000000000"));
  EXPECT_EQ(frame_mpa_fpdu(std::span(in_place).first(want.size() - 1), ulpdu.size(), true), 0u);
  Bytes nocrc = want;
  std::fill(nocrc.end() - 4, nocrc.end(), 0);
  EXPECT_EQ(fpdu_of(ulpdu, false), nocrc);
  // Too small an output, too long a ULPDU.
  Bytes small(want.size() - 1);
  EXPECT_EQ(encode_mpa_fpdu(small, {ulpdu}, true), 0u);
  const Bytes huge(kMpaMaxUlpdu + 1);
  Bytes big(mpa_fpdu_len(huge.size()));
  EXPECT_EQ(encode_mpa_fpdu(big, {huge}, true), 0u);
}

// ---------------------------------------------------------------- the receiver

namespace {

std::vector<Bytes> sample_ulpdus() {
  std::vector<Bytes> u;
  std::mt19937 rng(6581);
  for (const std::size_t n : {14, 15, 16, 17, 18, 100, 1021, 4000, 1460, 14})
    u.push_back(pattern(n, static_cast<unsigned>(u.size())));
  std::uniform_int_distribution<std::size_t> len(kMpaMinUlpdu, 3000);
  for (int i = 0; i < 40; ++i) u.push_back(pattern(len(rng), static_cast<unsigned>(i)));
  return u;
}

}  // namespace

TEST(MpaRx, SameUlpdusInEveryChunking) {
  for (const bool crc : {false, true}) {
    const std::vector<Bytes> ulpdus = sample_ulpdus();
    Bytes stream;
    std::uint64_t pos = 0;
    for (const Bytes& u : ulpdus) append_fpdu(stream, pos, u, crc, false);
    const MpaRxConfig cfg{.crc = crc};
    for (const Chunking how : {Chunking::whole, Chunking::bytewise, Chunking::random}) {
      const RxRun r = run_rx(cfg, stream, cut(stream.size(), how));
      ASSERT_EQ(r.last, MpaRxStatus::ulpdu) << static_cast<int>(how);
      EXPECT_EQ(r.ulpdus, ulpdus) << static_cast<int>(how);
      EXPECT_TRUE(r.at_boundary);
      EXPECT_EQ(r.stats.fpdus, ulpdus.size());
      EXPECT_EQ(r.stats.bytes, stream.size());
      EXPECT_EQ(r.stats.crc_errors + r.stats.length_errors + r.stats.marker_errors, 0u);
      if (how == Chunking::whole) {
        EXPECT_EQ(r.stats.reassembled, 0u);  // no copy when contiguous
      }
      if (how == Chunking::bytewise) {
        EXPECT_EQ(r.stats.reassembled, ulpdus.size());
      }
    }
  }
}

TEST(MpaRx, ZeroCopyPointsIntoTheInput) {
  const Bytes u = pattern(100, 1);
  Bytes stream = fpdu_of(u, true);
  const Bytes second = fpdu_of(pattern(50, 2), true);
  stream.insert(stream.end(), second.begin(), second.end());
  MpaRx rx(MpaRxConfig{.crc = true});
  // The whole first FPDU and half the second: the first is handed out in place.
  const std::span<const std::uint8_t> in = std::span(stream).first(stream.size() - 30);
  MpaRxResult r = rx.next(in);
  ASSERT_EQ(r.status, MpaRxStatus::ulpdu);
  EXPECT_EQ(r.consumed, mpa_fpdu_len(100));
  EXPECT_EQ(r.ulpdu.data(), stream.data() + 2);
  r = rx.next(in.subspan(r.consumed));
  EXPECT_EQ(r.status, MpaRxStatus::need_more);
  EXPECT_FALSE(rx.at_boundary());
  r = rx.next(std::span(stream).last(30));
  ASSERT_EQ(r.status, MpaRxStatus::ulpdu);
  EXPECT_EQ(Bytes(r.ulpdu.begin(), r.ulpdu.end()), pattern(50, 2));
  EXPECT_EQ(rx.stats().reassembled, 1u);

  // The callback API.
  MpaRx rx2(MpaRxConfig{.crc = true});
  std::vector<Bytes> got;
  EXPECT_EQ(rx2.feed(stream, [&](std::span<const std::uint8_t> s) { got.emplace_back(s.begin(), s.end()); }),
            MpaRxStatus::need_more);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], u);
}

TEST(MpaRx, BadCrcIsReportedOnceAndCounted) {
  const std::vector<Bytes> ulpdus = sample_ulpdus();
  Bytes stream;
  std::uint64_t pos = 0;
  for (const Bytes& u : ulpdus) append_fpdu(stream, pos, u, true, false);
  const std::size_t bad_at = mpa_fpdu_len(ulpdus[0].size()) + mpa_fpdu_len(ulpdus[1].size()) + 5;  // 3rd FPDU
  stream[bad_at] ^= 0x01;
  for (const Chunking how : {Chunking::whole, Chunking::bytewise, Chunking::random}) {
    const RxRun r = run_rx(MpaRxConfig{.crc = true}, stream, cut(stream.size(), how));
    EXPECT_EQ(r.last, MpaRxStatus::error);
    EXPECT_EQ(r.ulpdus.size(), 2u);
    EXPECT_EQ(r.stats.crc_errors, 1u);
    EXPECT_EQ(r.stats.fpdus, 2u);
  }
  MpaRx rx(MpaRxConfig{.crc = true});
  std::size_t delivered = 0;
  EXPECT_EQ(rx.feed(stream, [&](std::span<const std::uint8_t>) { ++delivered; }), MpaRxStatus::error);
  EXPECT_EQ(delivered, 2u);
  EXPECT_EQ(rx.error(), MpaRxError::bad_crc);
  // Later input is not taken, and the error is not reported again.
  const MpaRxResult again = rx.next(stream);
  EXPECT_EQ(again.status, MpaRxStatus::stopped);
  EXPECT_EQ(again.consumed, 0u);
  EXPECT_EQ(rx.feed(stream, [&](std::span<const std::uint8_t>) { ++delivered; }), MpaRxStatus::stopped);
  EXPECT_EQ(rx.stats().crc_errors, 1u);
  EXPECT_EQ(delivered, 2u);

  // Without CRC negotiated the field is not checked (siw sends zero; anything goes).
  Bytes f = fpdu_of(ulpdus[0], true);
  f.back() ^= 0xFF;
  MpaRx off(MpaRxConfig{.crc = false});
  EXPECT_EQ(off.next(f).status, MpaRxStatus::ulpdu);
}

TEST(MpaRx, LengthChecksComeFirst) {
  // 13 < the smallest DDP header: refused as soon as the length field is in.
  MpaRx rx(MpaRxConfig{});
  const Bytes short_len = hex("000d");
  MpaRxResult r = rx.next(std::span(short_len).first(1));
  EXPECT_EQ(r.status, MpaRxStatus::need_more);
  r = rx.next(std::span(short_len).subspan(1));
  EXPECT_EQ(r.status, MpaRxStatus::error);
  EXPECT_EQ(r.consumed, 1u);
  EXPECT_EQ(rx.error(), MpaRxError::ulpdu_too_short);
  EXPECT_EQ(rx.stats().length_errors, 1u);

  MpaRx rx2(MpaRxConfig{.max_ulpdu = 100});
  const Bytes ok = fpdu_of(pattern(100, 1), false);
  const Bytes too_long = fpdu_of(pattern(101, 1), false);
  EXPECT_EQ(rx2.next(ok).status, MpaRxStatus::ulpdu);
  r = rx2.next(too_long);
  EXPECT_EQ(r.status, MpaRxStatus::error);
  EXPECT_EQ(r.consumed, 2u);
  EXPECT_EQ(rx2.error(), MpaRxError::ulpdu_too_long);

  MpaRx rx3(MpaRxConfig{});
  const Bytes min = fpdu_of(pattern(kMpaMinUlpdu, 0), false);
  EXPECT_EQ(rx3.next(min).status, MpaRxStatus::ulpdu);

  for (auto e : {MpaRxError::none, MpaRxError::ulpdu_too_short, MpaRxError::ulpdu_too_long, MpaRxError::bad_crc,
                 MpaRxError::bad_marker})
    EXPECT_NE(to_string(e), "?");
}

// ---------------------------------------------------------------- markers

TEST(MpaMarkers, FpduAcrossTwoMarkers) {
  // An FPDU of a 600-byte ULPDU (608 bytes without markers) at stream position 500: ULPDU_Length
  // at 500, markers at 512 (FPDUPTR 12) and 1024 (FPDUPTR 524), inside the ULPDU. Values from
  // rdmawire.build_fpdus_with_markers([pattern(600, 1)], 500).
  const Bytes u = pattern(600, 1);
  const Bytes f = fpdu_of(u, true);
  ASSERT_EQ(f.size(), 608u);
  EXPECT_EQ(mpa_marked_len(500, f.size()), 616u);
  Bytes m(616);
  ASSERT_EQ(mpa_insert_markers(m, 500, f, true), 616u);
  EXPECT_EQ(Bytes(m.begin() + 12, m.begin() + 16), hex("0000000c"));
  EXPECT_EQ(Bytes(m.begin() + 524, m.begin() + 528), hex("0000020c"));
  EXPECT_EQ(Bytes(m.end() - 4, m.end()), hex("d5a25d89"));
  EXPECT_EQ(crc32c(m), 0x48674bc7u);
  EXPECT_EQ(le32(m.data() + 612), crc32c(std::span(m).first(612)));  // the CRC covers the markers
  // Strip: everything but the markers is the FPDU, CRC field aside.
  Bytes stripped(m.begin(), m.begin() + 12);
  stripped.insert(stripped.end(), m.begin() + 16, m.begin() + 524);
  stripped.insert(stripped.end(), m.begin() + 528, m.end() - 4);
  EXPECT_EQ(stripped, Bytes(f.begin(), f.end() - 4));
  // Without CRC the field is zero.
  ASSERT_EQ(mpa_insert_markers(m, 500, fpdu_of(u, false), false), 616u);
  EXPECT_EQ(Bytes(m.end() - 4, m.end()), hex("00000000"));

  ASSERT_EQ(mpa_insert_markers(m, 500, f, true), 616u);
  const RxRun r = run_rx(MpaRxConfig{.crc = true, .markers = true, .stream_pos = 500}, m, {616});
  ASSERT_EQ(r.ulpdus.size(), 1u);
  EXPECT_EQ(r.ulpdus[0], u);
  EXPECT_EQ(r.stats.markers, 2u);
  EXPECT_EQ(r.stats.reassembled, 1u);  // markers inside the ULPDU: copied out
}

TEST(MpaMarkers, LeadingMarkerAndMarkerBeforeCrc) {
  // At position 0: the leading marker (FPDUPTR 0), ULPDU_Length at 4, a 506-byte ULPDU ending at
  // 511, a marker at 512 between the (empty) pad and the CRC (FPDUPTR 508), CRC at 516.
  // rdmawire.build_fpdus_with_markers([pattern(506, 2)], 0).
  const Bytes u = pattern(506, 2);
  const Bytes f = fpdu_of(u, true);
  ASSERT_EQ(f.size(), 512u);
  Bytes m(mpa_marked_len(0, f.size()));
  ASSERT_EQ(m.size(), 520u);
  ASSERT_EQ(mpa_insert_markers(m, 0, f, true), 520u);
  EXPECT_EQ(Bytes(m.begin(), m.begin() + 4), hex("00000000"));
  EXPECT_EQ(Bytes(m.begin() + 512, m.begin() + 516), hex("000001fc"));
  EXPECT_EQ(Bytes(m.begin() + 516, m.end()), hex("2be0175e"));
  EXPECT_EQ(le32(m.data() + 516), crc32c(std::span(m).first(516)));  // leading marker included

  // No marker inside the ULPDU: handed out in place.
  MpaRx rx(MpaRxConfig{.crc = true, .markers = true});
  const MpaRxResult r = rx.next(m);
  ASSERT_EQ(r.status, MpaRxStatus::ulpdu);
  EXPECT_EQ(r.consumed, 520u);
  EXPECT_EQ(r.ulpdu.data(), m.data() + 6);
  EXPECT_EQ(Bytes(r.ulpdu.begin(), r.ulpdu.end()), u);
  EXPECT_EQ(rx.stats().markers, 2u);
  EXPECT_EQ(rx.stats().reassembled, 0u);
  EXPECT_EQ(rx.stream_pos(), 520u);

  Bytes out(600);
  EXPECT_EQ(mpa_insert_markers(out, 2, f, true), 0u);  // not 4-aligned
  EXPECT_EQ(mpa_insert_markers(std::span(out).first(519), 0, f, true), 0u);
  EXPECT_EQ(mpa_insert_markers(out, 0, std::span(f).first(508), true), 0u);  // not a whole FPDU
}

TEST(MpaMarkers, StreamRoundTrip) {
  // rdmawire.build_fpdus_with_markers([pattern(n, k) for k, n in enumerate(sizes)], 0): 8368
  // bytes, CRC32c of the whole image 0x32c95591.
  const std::vector<std::size_t> sizes{14, 600, 1500, 15, 506, 18, 1021, 4000, 16, 17, 511};
  std::vector<Bytes> ulpdus;
  for (std::size_t k = 0; k < sizes.size(); ++k) ulpdus.push_back(pattern(sizes[k], static_cast<unsigned>(k)));
  Bytes stream;
  std::uint64_t pos = 0;
  std::size_t plain = 0;
  for (const Bytes& u : ulpdus) {
    append_fpdu(stream, pos, u, true, true);
    plain += mpa_fpdu_len(u.size());
  }
  ASSERT_EQ(stream.size(), 8368u);
  EXPECT_EQ(crc32c(stream), 0x32c95591u);
  for (std::size_t at = 0; at < stream.size(); at += kMpaMarkerSpacing)
    EXPECT_EQ(stream[at] | stream[at + 1], 0) << "marker reserved field at " << at;

  for (const bool crc : {true, false}) {
    Bytes s;
    std::uint64_t p = 0;
    for (const Bytes& u : ulpdus) append_fpdu(s, p, u, crc, true);
    for (const Chunking how : {Chunking::whole, Chunking::bytewise, Chunking::random}) {
      const RxRun r = run_rx(MpaRxConfig{.crc = crc, .markers = true}, s, cut(s.size(), how, 7));
      ASSERT_EQ(r.last, MpaRxStatus::ulpdu);
      EXPECT_EQ(r.ulpdus, ulpdus);
      EXPECT_EQ(r.stats.markers, (s.size() - plain) / kMpaMarkerLen);
      EXPECT_EQ(r.stats.crc_errors + r.stats.marker_errors, 0u);
      // Re-inserting each FPDU at its position gives the stream back.
      Bytes again;
      std::uint64_t q = 0;
      for (const Bytes& u : r.ulpdus) append_fpdu(again, q, u, crc, true);
      EXPECT_EQ(again, s);
    }
  }
}

TEST(MpaMarkers, BadMarkerAndReservedBits) {
  const Bytes u = pattern(600, 1);
  Bytes m(616);
  ASSERT_EQ(mpa_insert_markers(m, 500, fpdu_of(u, true), true), 616u);
  // A wrong FPDUPTR breaks the stream.
  Bytes bad = m;
  bad[527] = 0x10;  // 0x0210 instead of 0x020c
  RxRun r = run_rx(MpaRxConfig{.crc = true, .markers = true, .stream_pos = 500}, bad, {bad.size()});
  EXPECT_EQ(r.last, MpaRxStatus::error);
  EXPECT_EQ(r.stats.marker_errors, 1u);
  // Its two low bits are ignored; so is the reserved field, but the CRC covers both.
  Bytes low = m;
  low[15] |= 0x03;
  r = run_rx(MpaRxConfig{.crc = false, .markers = true, .stream_pos = 500}, low, cut(low.size(), Chunking::bytewise));
  EXPECT_EQ(r.last, MpaRxStatus::ulpdu);
  r = run_rx(MpaRxConfig{.crc = true, .markers = true, .stream_pos = 500}, low, {low.size()});
  EXPECT_EQ(r.last, MpaRxStatus::error);
  EXPECT_EQ(r.stats.crc_errors, 1u);
  Bytes rsvd = m;
  rsvd[12] = 0xFF;
  r = run_rx(MpaRxConfig{.crc = false, .markers = true, .stream_pos = 500}, rsvd, {rsvd.size()});
  EXPECT_EQ(r.last, MpaRxStatus::ulpdu);
  r = run_rx(MpaRxConfig{.crc = true, .markers = true, .stream_pos = 500}, rsvd, {rsvd.size()});
  EXPECT_EQ(r.stats.crc_errors, 1u);
}

// ---------------------------------------------------------------- captures

namespace {

struct TcpDir {
  bool have_isn = false;
  std::uint32_t isn = 0;                // sequence number of the first payload byte
  std::map<std::uint32_t, Bytes> segs;  // by relative sequence number (from the isn)
  std::size_t first_frame = ~std::size_t{0};
};

struct Stream {
  Bytes data;
  std::vector<std::size_t> segment_sizes;  // the reads as TCP delivered them
  std::size_t holes = 0;
};

std::uint16_t be16at(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] << 8 | p[1]);
}
std::uint32_t be32at(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) << 24 | static_cast<std::uint32_t>(p[1]) << 16 |
         static_cast<std::uint32_t>(p[2]) << 8 | p[3];
}

using DirKey = std::tuple<Bytes, std::uint16_t, Bytes, std::uint16_t>;  // src ip, port, dst ip, port

// Classic pcap (either byte order, Ethernet), IPv4/IPv6, TCP: the payload of each direction.
bool read_tcp(const std::string& path, std::map<DirKey, TcpDir>& dirs) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  const Bytes file((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (file.size() < 24) return false;
  const std::uint32_t magic = le32(file.data());
  const bool swapped = magic == 0xd4c3b2a1u || magic == 0x4d3cb2a1u;
  if (!swapped && magic != 0xa1b2c3d4u && magic != 0xa1b23c4du) return false;
  auto u32 = [&](std::size_t off) { return swapped ? be32at(file.data() + off) : le32(file.data() + off); };
  if (u32(20) != 1) return false;  // LINKTYPE_ETHERNET
  std::size_t frame = 0;
  for (std::size_t off = 24; off + 16 <= file.size(); ++frame) {
    const std::size_t caplen = u32(off + 8);
    const std::uint8_t* p = file.data() + off + 16;
    off += 16 + caplen;
    if (off > file.size()) return false;
    std::size_t n = caplen;
    if (n < 14) continue;
    std::uint16_t type = be16at(p + 12);
    p += 14;
    n -= 14;
    while ((type == 0x8100 || type == 0x88a8) && n >= 4) {
      type = be16at(p + 2);
      p += 4;
      n -= 4;
    }
    Bytes src, dst;
    const std::uint8_t* tcp = nullptr;
    std::size_t tcp_len = 0;
    if (type == 0x0800 && n >= 20 && p[9] == 6) {
      const std::size_t ihl = (p[0] & 0x0F) * 4u;
      const std::size_t total = std::min<std::size_t>(be16at(p + 2), n);  // drops Ethernet padding
      if (total < ihl) continue;
      src.assign(p + 12, p + 16);
      dst.assign(p + 16, p + 20);
      tcp = p + ihl;
      tcp_len = total - ihl;
    } else if (type == 0x86DD && n >= 40 && p[6] == 6) {
      src.assign(p + 8, p + 24);
      dst.assign(p + 24, p + 40);
      tcp = p + 40;
      tcp_len = std::min<std::size_t>(be16at(p + 4), n - 40);
    } else {
      continue;
    }
    if (tcp_len < 20) continue;
    const std::size_t doff = (tcp[12] >> 4) * 4u;
    if (doff > tcp_len) continue;
    const std::uint32_t seq = be32at(tcp + 4);
    const bool syn = (tcp[13] & 0x02) != 0;
    TcpDir& d = dirs[DirKey{src, be16at(tcp), dst, be16at(tcp + 2)}];
    d.first_frame = std::min(d.first_frame, frame);
    if (syn) {
      d.have_isn = true;
      d.isn = seq + 1;
    }
    if (tcp_len == doff) continue;
    if (!d.have_isn) {  // no SYN seen: count from the first payload
      d.have_isn = true;
      d.isn = seq;
    }
    const std::uint32_t rel = seq - d.isn;
    Bytes& seg = d.segs[rel];
    if (tcp_len - doff > seg.size()) seg.assign(tcp + doff, tcp + tcp_len);  // keep the longest copy
  }
  return true;
}

// The direction's bytes in sequence order up to the first hole (overlaps and repeats dropped).
Stream reassemble(const TcpDir& d) {
  Stream s;
  for (const auto& [rel, seg] : d.segs) {
    if (rel > s.data.size()) {
      ++s.holes;
      break;
    }
    const std::size_t skip = s.data.size() - rel;
    if (skip >= seg.size()) continue;
    s.data.insert(s.data.end(), seg.begin() + static_cast<std::ptrdiff_t>(skip), seg.end());
    s.segment_sizes.push_back(seg.size() - skip);
  }
  return s;
}

struct CaptureCase {
  const char* path;  // under SOFTRNIC_SHARED_DIR
  // FPDUs per MPA connection (in the order the connections start): initiator's, responder's
  std::vector<std::pair<std::size_t, std::size_t>> fpdus;
  bool crc;
  bool markers;
  std::size_t dirty_pads;  // FPDUs whose PAD is not zero
};

// Counted independently (python, wirecheck/rdmawire.py; tshark for the marker capture). Linux
// siw 6.1 leaves stale bytes in the PAD of small inline Sends (perftest's rdma_cm exchange),
// where RFC 5044 section 4.1 says the sender sets it to zero and the receiver ignores it.
const CaptureCase kCaptures[] = {
    {"tools/rdmavm/captures/host_siw_rping_client_mpa2_crc.pcap", {{2, 2}}, true, false, 0},
    {"tools/rdmavm/captures/siw_rping.pcap", {{30, 40}}, false, false, 0},
    {"tools/rdmavm/captures/siw_send_lat.first200.pcap", {{10, 10}, {80, 80}}, false, false, 2},
    {"tools/rdmavm/captures/siw_send_bw.first120.pcap", {{10, 10}, {60, 0}}, false, false, 2},
    {"tools/rdmavm/captures/siw_write_bw.first120.pcap", {{9, 9}, {60, 0}}, false, false, 2},
    {"tools/rdmavm/captures/siw_read_bw.first120.pcap", {{9, 9}, {128, 52}}, false, false, 2},
    {"tools/rdmavm/captures/siw_dtest.first150.pcap", {{33, 65}}, false, false, 0},
    {"tools/wirecheck/captures/iwarp_tcp_markers.pcap", {{6, 1}}, true, true, 0},
};

// Compares our image of an FPDU (at stream position `pos`) with the captured one: equal but for
// the PAD, and for the CRC field when it covers a PAD that differs. Sets `dirty_pad` when the
// PADs differ.
bool same_but_pad(std::span<const std::uint8_t> mine, std::span<const std::uint8_t> captured, std::uint64_t pos,
                  std::size_t ulpdu_len, bool crc, bool markers, bool& dirty_pad) {
  const std::size_t fpdu_len = mpa_fpdu_len(ulpdu_len);
  const std::size_t pad_begin = kMpaLenFieldLen + ulpdu_len;
  const std::size_t crc_begin = fpdu_len - kMpaCrcLen;
  constexpr std::size_t kMarker = ~std::size_t{0};
  std::vector<std::size_t> index(mine.size(), kMarker);  // image offset -> marker-free offset
  for (std::size_t j = 0, o = 0; j < fpdu_len; ++j, ++o, ++pos) {
    if (markers && pos % kMpaMarkerSpacing == 0) {
      pos += kMpaMarkerLen;
      o += kMpaMarkerLen;
    }
    if (o >= index.size()) return false;
    index[o] = j;
  }
  dirty_pad = false;
  bool crc_differs = false;
  for (std::size_t o = 0; o < mine.size(); ++o) {
    if (mine[o] == captured[o]) continue;
    const std::size_t j = index[o];
    if (j != kMarker && j >= pad_begin && j < crc_begin) {
      dirty_pad = true;
    } else if (j != kMarker && j >= crc_begin) {
      crc_differs = true;
    } else {
      return false;
    }
  }
  return !crc_differs || (crc && dirty_pad);
}

// One direction after its Request/Reply: every chunking gives the same ULPDUs, each a valid DDP
// segment, and re-encoding each gives the captured bytes (PAD aside). Returns the number of
// FPDUs with a PAD that is not zero.
std::size_t check_fpdu_stream(const std::string& what, std::span<const std::uint8_t> fpdus,
                              const std::vector<std::size_t>& segments, bool crc, bool markers, std::size_t want) {
  SCOPED_TRACE(what);
  const MpaRxConfig cfg{.crc = crc, .markers = markers};
  const RxRun whole = run_rx(cfg, fpdus, cut(fpdus.size(), Chunking::whole));
  EXPECT_NE(whole.last, MpaRxStatus::error);
  EXPECT_TRUE(whole.at_boundary);
  EXPECT_EQ(whole.end, fpdus.size());
  EXPECT_EQ(whole.ulpdus.size(), want);
  EXPECT_EQ(whole.stats.crc_errors + whole.stats.length_errors + whole.stats.marker_errors, 0u);
  if (!markers) {
    EXPECT_EQ(whole.stats.reassembled, 0u);  // every FPDU handed out in place
  }
  for (const Chunking how : {Chunking::bytewise, Chunking::random, Chunking::given}) {
    const RxRun r = run_rx(cfg, fpdus, how == Chunking::given ? segments : cut(fpdus.size(), how));
    EXPECT_EQ(r.ulpdus, whole.ulpdus) << "chunking " << static_cast<int>(how);
    EXPECT_EQ(r.stats.fpdus, want);
  }
  std::uint64_t pos = 0;
  std::size_t dirty = 0;
  for (std::size_t i = 0; i < whole.ulpdus.size(); ++i) {
    const Bytes& u = whole.ulpdus[i];
    DdpSegment seg;
    EXPECT_EQ(decode_ddp(u, seg), DecodeError::none) << "ULPDU " << i;
    const std::uint64_t at = pos;
    Bytes again;
    append_fpdu(again, pos, u, crc, markers);
    const std::size_t off = whole.fpdu_offsets[i];
    const std::size_t len = (i + 1 < whole.ulpdus.size() ? whole.fpdu_offsets[i + 1] : whole.end) - off;
    EXPECT_EQ(again.size(), len) << "FPDU " << i;
    if (again.size() != len) return dirty;
    bool dirty_pad = false;
    EXPECT_TRUE(same_but_pad(again, fpdus.subspan(off, len), at, u.size(), crc, markers, dirty_pad)) << "FPDU " << i;
    dirty += dirty_pad;
    const std::uint32_t crc_field = le32(fpdus.data() + off + len - kMpaCrcLen);
    if (!crc) {
      EXPECT_EQ(crc_field, 0u) << "FPDU " << i;  // Linux siw sends zero without CRC
    }
  }
  return dirty;
}

}  // namespace

class MpaCapture : public ::testing::TestWithParam<CaptureCase> {};

TEST_P(MpaCapture, DecodesAndReencodes) {
  const CaptureCase& c = GetParam();
  const std::string path = std::string(SOFTRNIC_SHARED_DIR) + "/" + c.path;
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "capture not found: " << path;
  std::map<DirKey, TcpDir> dirs;
  ASSERT_TRUE(read_tcp(path, dirs)) << path;

  // MPA connections: a direction whose stream starts with the Request key, in order of start.
  std::vector<std::pair<std::size_t, DirKey>> initiators;
  for (const auto& [key, d] : dirs) {
    const Stream s = reassemble(d);
    if (s.data.size() >= kMpaKeyLen && std::equal(kMpaKeyReq.begin(), kMpaKeyReq.end(), s.data.begin()))
      initiators.emplace_back(d.first_frame, key);
  }
  std::sort(initiators.begin(), initiators.end());
  ASSERT_EQ(initiators.size(), c.fpdus.size());
  std::size_t dirty_pads = 0;

  for (std::size_t i = 0; i < initiators.size(); ++i) {
    const DirKey& ik = initiators[i].second;
    const DirKey rk{std::get<2>(ik), std::get<3>(ik), std::get<0>(ik), std::get<1>(ik)};
    ASSERT_TRUE(dirs.count(rk));
    const Stream is = reassemble(dirs[ik]);
    const Stream rs = reassemble(dirs[rk]);
    EXPECT_EQ(is.holes + rs.holes, 0u);

    MpaParams req, rep;
    std::size_t req_len = 0, rep_len = 0;
    ASSERT_EQ(decode_mpa_req_rep(is.data, req, req_len), MpaError::none);
    ASSERT_EQ(decode_mpa_req_rep(rs.data, rep, rep_len), MpaError::none);
    EXPECT_FALSE(req.reply);
    EXPECT_TRUE(rep.reply);
    EXPECT_FALSE(rep.reject);
    // Read in two steps as a receiver does: the header, then pd_len more.
    std::size_t want = 0;
    MpaParams tmp;
    EXPECT_EQ(decode_mpa_req_rep(std::span(is.data).first(kMpaReqRepHdrLen - 1), tmp, want), MpaError::need_more);
    EXPECT_EQ(decode_mpa_req_rep(std::span(is.data).first(kMpaReqRepHdrLen), tmp, want),
              req_len == kMpaReqRepHdrLen ? MpaError::none : MpaError::need_more);
    EXPECT_EQ(want, req_len);
    // Each frame re-encodes to the captured bytes.
    auto reencodes = [](const MpaParams& params, const Bytes& captured, std::size_t len) {
      Bytes again(kMpaReqRepHdrLen + kMpaMaxPrivateData);
      again.resize(encode_mpa_req_rep(again, params));
      return again.size() == len && std::equal(again.begin(), again.end(), captured.begin());
    };
    EXPECT_TRUE(reencodes(req, is.data, req_len));
    EXPECT_TRUE(reencodes(rep, rs.data, rep_len));

    const MpaNegotiated neg = mpa_negotiate(req, rep);
    EXPECT_EQ(neg.crc, c.crc);
    EXPECT_EQ(neg.initiator_sends_markers, c.markers);
    EXPECT_EQ(neg.responder_sends_markers, c.markers);

    // The segments after the Request/Reply, as reads (the first may have shared the frame's).
    auto reads_after = [](const Stream& s, std::size_t skip) {
      std::vector<std::size_t> out;
      for (std::size_t n : s.segment_sizes) {
        const std::size_t drop = std::min(n, skip);
        skip -= drop;
        if (n > drop) out.push_back(n - drop);
      }
      return out;
    };
    dirty_pads +=
        check_fpdu_stream("connection " + std::to_string(i) + " initiator", std::span(is.data).subspan(req_len),
                          reads_after(is, req_len), neg.crc, neg.initiator_sends_markers, c.fpdus[i].first);
    dirty_pads +=
        check_fpdu_stream("connection " + std::to_string(i) + " responder", std::span(rs.data).subspan(rep_len),
                          reads_after(rs, rep_len), neg.crc, neg.responder_sends_markers, c.fpdus[i].second);
  }
  EXPECT_EQ(dirty_pads, c.dirty_pads);
}

INSTANTIATE_TEST_SUITE_P(Mpa, MpaCapture, ::testing::ValuesIn(kCaptures),
                         [](const ::testing::TestParamInfo<CaptureCase>& p) {
                           std::string name = std::filesystem::path(p.param.path).stem().string();
                           std::replace_if(
                               name.begin(), name.end(),
                               [](char ch) { return !std::isalnum(static_cast<unsigned char>(ch)); }, '_');
                           return name;
                         });
