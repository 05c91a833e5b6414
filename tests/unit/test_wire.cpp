// Codecs against known answers: ../shared/tools/wirecheck/kat.py (CRC-32C) and the DDP/UDP
// reference capture ../shared/tools/wirecheck/captures/ddp_udp.pcap (frames 1-3, built by
// rdmawire.py), plus our own framing.
#include <gtest/gtest.h>
#include <isa-l/crc.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "softrnic/wire/crc32c.hpp"
#include "softrnic/wire/crc_paths.hpp"
#include "softrnic/wire/ddp.hpp"
#include "softrnic/wire/roce.hpp"
#include "softrnic/wire/udp_frame.hpp"

using namespace softrnic::wire;

namespace {

std::vector<std::uint8_t> hex(const std::string& s) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 1 < s.size(); i += 2)
    out.push_back(static_cast<std::uint8_t>(std::stoul(s.substr(i, 2), nullptr, 16)));
  return out;
}

std::uint32_t le32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}

// UDP payloads of ddp_udp.pcap: DDP segment + CRC32c trailer (LE).
const char* kUdpSend = "414300000000000000000000000100000000444450206f766572205544501add9d8a";
const char* kUdpWrite =
    "c140000012340000000000001000000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20212223242526"
    "2728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3ffbd9a669";
const char* kUdpReadReq =
    "41410000000000000001000000010000000000005678000000000000200000000040000012340000000000001000148c5171";

}  // namespace

TEST(Crc32c, KnownAnswers) {
  const std::string digits = "123456789";
  EXPECT_EQ(crc32c({reinterpret_cast<const std::uint8_t*>(digits.data()), digits.size()}), 0xE3069283u);
  std::vector<std::uint8_t> zeros(32, 0), ones(32, 0xFF), up(32), down(32);
  for (int i = 0; i < 32; ++i) {
    up[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(i);
    down[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(31 - i);
  }
  EXPECT_EQ(crc32c(zeros), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones), 0x62A8AB43u);
  EXPECT_EQ(crc32c(up), 0x46DD794Eu);
  EXPECT_EQ(crc32c(down), 0x113FDB5Cu);
}

TEST(Crc32c, IncrementalEqualsOneShot) {
  std::vector<std::uint8_t> d(1000);
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = static_cast<std::uint8_t>(i * 7);
  Crc32c c;
  c.update(std::span(d).first(3));
  c.update(std::span(d).subspan(3, 500));
  c.update(std::span(d).subspan(503));
  EXPECT_EQ(c.value(), crc32c(d));
}

// Small buffers take the CPU's instruction inline, mid-sized ones ISA-L's SSE4.2 + PCLMULQDQ
// code, large ones its dispatcher (AVX-512 where the CPU has it): all give the dispatcher's answer
// at every length and alignment around both switches (256 and 8192 bytes), one-shot and in
// pieces.
TEST(Crc32c, InlinePathAgreesWithIsaL) {
  std::vector<std::uint8_t> d(17000);
  std::uint32_t x = 12345;
  for (auto& b : d) b = static_cast<std::uint8_t>((x = x * 1103515245u + 12345u) >> 24);
  const auto step = [](std::size_t len) -> std::size_t { return len < 300 || (len > 8100 && len < 8220) ? 1 : 37; };
  for (std::size_t off = 0; off < 8; ++off) {
    for (std::size_t len = 0; len + off <= d.size(); len += step(len)) {
      const auto* p = d.data() + off;
      const std::uint32_t want = ~crc32_iscsi(const_cast<unsigned char*>(p), static_cast<int>(len), 0xFFFFFFFFu);
      ASSERT_EQ(crc32c({p, len}), want) << "len " << len << " offset " << off;
      Crc32c c;
      c.update({p, len / 3});
      c.update({p + len / 3, len - len / 3});
      ASSERT_EQ(c.value(), want) << "in two pieces, len " << len;
    }
  }
}

// The CRC codes a calibration chooses between (crc_paths.hpp) give the same CRC-32C and ICRC
// at every size around the switches, one-shot and in pieces.
TEST(CrcPaths, NarrowAndWideCodesAgreeAtEverySize) {
  std::vector<std::uint8_t> d(9000);
  std::uint32_t x = 777;
  for (auto& b : d) b = static_cast<std::uint8_t>((x = x * 1103515245u + 12345u) >> 24);
  const CrcPaths before = crc_paths();
  const CrcPaths narrow = default_crc_paths(), wide{257, 257};
  roce::IcrcAddr a;
  a.src_ip = 0x7F000001;
  a.dst_ip = 0x7F000002;
  a.sport = 50000;
  for (std::size_t len = 0; len <= d.size(); len += len < 300 || (len > 2000 && len < 2100) ? 1 : 61) {
    const std::span<const std::uint8_t> all(d.data() + 1, len - (len > 0 ? 1 : 0));
    const std::span<const std::uint8_t> pieces[] = {all.first(all.size() / 3), all.subspan(all.size() / 3)};
    set_crc_paths(narrow);
    const std::uint32_t c = crc32c(all), i = roce::icrc(a, pieces);
    set_crc_paths(wide);
    ASSERT_EQ(crc32c(all), c) << "CRC-32C, " << all.size() << " bytes";
    ASSERT_EQ(roce::icrc(a, pieces), i) << "ICRC, " << all.size() << " bytes";
  }
  set_crc_paths(before);
}

// The calibration chooses once per process, one of the sizes it knows, and says what it chose.
TEST(CrcPaths, CalibrationChoosesOnceAndSaysWhat) {
  const CrcPaths before = crc_paths();
  std::string error;
  const CrcPaths p = calibrate_crc_paths(error);
  if (!std::getenv("SOFTRNIC_CRC")) {
    EXPECT_EQ(error, "");
  }
  for (const std::size_t from : {p.crc32c_wide_from, p.icrc_wide_from})
    EXPECT_TRUE(from == 257 || from == 2049 || from == 8193 || from == SIZE_MAX) << from;
  EXPECT_EQ(crc_paths().crc32c_wide_from, p.crc32c_wide_from);
  EXPECT_EQ(crc_paths().icrc_wide_from, p.icrc_wide_from);
  const CrcPaths again = calibrate_crc_paths(error);
  EXPECT_EQ(again.crc32c_wide_from, p.crc32c_wide_from);
  EXPECT_EQ(again.icrc_wide_from, p.icrc_wide_from);
  const std::string text = describe(p);
  EXPECT_NE(text.find("CRC-32C wide "), std::string::npos) << text;
  EXPECT_NE(text.find("ICRC wide "), std::string::npos) << text;
  std::printf("%s\n", text.c_str());
  set_crc_paths(before);
}

TEST(Ddp, ReferenceCaptureCrcs) {
  for (const char* h : {kUdpSend, kUdpWrite, kUdpReadReq}) {
    const auto b = hex(h);
    EXPECT_EQ(crc32c(std::span(b).first(b.size() - 4)), le32(b.data() + b.size() - 4)) << h;
  }
}

TEST(Ddp, DecodesUntaggedSend) {
  const auto b = hex(kUdpSend);
  DdpSegment s;
  ASSERT_EQ(decode_ddp(std::span(b).first(b.size() - 4), s), DecodeError::none);
  EXPECT_EQ(s.opcode, RdmapOpcode::send);
  EXPECT_FALSE(s.tagged);
  EXPECT_TRUE(s.last);
  EXPECT_EQ(s.qn, 0u);
  EXPECT_EQ(s.msn, 1u);
  EXPECT_EQ(s.mo, 0u);
  EXPECT_EQ(std::string(s.payload.begin(), s.payload.end()), "DDP over UDP");
}

TEST(Ddp, DecodesTaggedWrite) {
  const auto b = hex(kUdpWrite);
  DdpSegment s;
  ASSERT_EQ(decode_ddp(std::span(b).first(b.size() - 4), s), DecodeError::none);
  EXPECT_EQ(s.opcode, RdmapOpcode::rdma_write);
  EXPECT_TRUE(s.tagged);
  EXPECT_TRUE(s.last);
  EXPECT_EQ(s.stag, 0x1234u);
  EXPECT_EQ(s.to, 0x1000u);
  ASSERT_EQ(s.payload.size(), 64u);
  for (std::size_t i = 0; i < 64; ++i) EXPECT_EQ(s.payload[i], i);
}

TEST(Ddp, DecodesReadRequestHeader) {
  const auto b = hex(kUdpReadReq);
  DdpSegment s;
  ASSERT_EQ(decode_ddp(std::span(b).first(b.size() - 4), s), DecodeError::none);
  EXPECT_EQ(s.opcode, RdmapOpcode::read_request);
  EXPECT_EQ(s.qn, kQnReadRequest);
  ASSERT_EQ(s.ulp_header.size(), sizeof(ReadRequestHdr));
  ReadRequestHdr r;
  std::memcpy(&r, s.ulp_header.data(), sizeof r);
  EXPECT_EQ(r.sink_stag.get(), 0x5678u);
  EXPECT_EQ(r.sink_to.get(), 0x2000u);
  EXPECT_EQ(r.size.get(), 0x40u);
  EXPECT_EQ(r.src_stag.get(), 0x1234u);
  EXPECT_EQ(r.src_to.get(), 0x1000u);
  EXPECT_TRUE(s.payload.empty());
}

TEST(Ddp, EncodersReproduceTheReferenceHeaders) {
  std::uint8_t h[32];
  ASSERT_EQ(encode_untagged(h, RdmapOpcode::send, true, kQnSend, 1, 0), 18u);
  const auto s = hex(kUdpSend);
  EXPECT_EQ(std::vector<std::uint8_t>(h, h + 18), std::vector<std::uint8_t>(s.begin(), s.begin() + 18));
  ASSERT_EQ(encode_tagged(h, RdmapOpcode::rdma_write, true, 0x1234, 0x1000), 14u);
  const auto w = hex(kUdpWrite);
  EXPECT_EQ(std::vector<std::uint8_t>(h, h + 14), std::vector<std::uint8_t>(w.begin(), w.begin() + 14));
  EXPECT_EQ(encode_tagged(std::span(h, 13), RdmapOpcode::rdma_write, true, 1, 2), 0u) << "too small a buffer";
}

TEST(Ddp, RoundTripEveryOpcode) {
  for (int op = 0; op < 16; ++op) {
    const auto& info = kOpcodeTable[static_cast<std::size_t>(op)];
    std::uint8_t b[64] = {};
    std::size_t n = info.tagged ? encode_tagged(b, static_cast<RdmapOpcode>(op), false, 7, 9)
                                : encode_untagged(b, static_cast<RdmapOpcode>(op), false, info.qn, 3, 5, 11);
    n += info.ulp_header;
    DdpSegment s;
    const DecodeError e = decode_ddp(std::span(b, n), s);
    if (!info.valid) {
      EXPECT_EQ(e, DecodeError::unknown_opcode) << op;
      continue;
    }
    ASSERT_EQ(e, DecodeError::none) << info.name;
    EXPECT_EQ(static_cast<int>(s.opcode), op);
    EXPECT_FALSE(s.last);
    if (info.tagged) {
      EXPECT_EQ(s.stag, 7u);
      EXPECT_EQ(s.to, 9u);
    } else {
      EXPECT_EQ(s.qn, info.qn);
      EXPECT_EQ(s.msn, 3u);
      EXPECT_EQ(s.mo, 5u);
      EXPECT_EQ(s.inv_stag, 11u);
    }
  }
}

TEST(Ddp, RejectsBadHeaders) {
  DdpSegment s;
  auto b = hex(kUdpSend);
  b.resize(b.size() - 4);
  EXPECT_EQ(decode_ddp(std::span(b).first(17), s), DecodeError::too_short);
  EXPECT_EQ(decode_ddp(std::span(b).first(1), s), DecodeError::too_short);
  auto v = b;
  v[0] = static_cast<std::uint8_t>((v[0] & ~3) | 2);
  EXPECT_EQ(decode_ddp(v, s), DecodeError::bad_ddp_version);
  v = b;
  v[1] = static_cast<std::uint8_t>((v[1] & 0x3F) | 0x80);
  EXPECT_EQ(decode_ddp(v, s), DecodeError::bad_rdmap_version);
  v = b;
  v[1] = 0x48;  // opcode 8
  EXPECT_EQ(decode_ddp(v, s), DecodeError::unknown_opcode);
  v = b;
  v[0] |= 0x80;  // Send marked tagged
  EXPECT_EQ(decode_ddp(v, s), DecodeError::model_mismatch);
  v = b;
  v[9] = 1;  // Send on QN 1
  EXPECT_EQ(decode_ddp(v, s), DecodeError::bad_qn);
  auto r = hex(kUdpReadReq);
  EXPECT_EQ(decode_ddp(std::span(r).first(18 + 27), s), DecodeError::too_short) << "Read Request header cut";
}

TEST(Ddp, TerminateControlRoundTrip) {
  const TerminateInfo t{TermLayer::ddp, static_cast<std::uint8_t>(DdpEtype::tagged_buffer),
                        static_cast<std::uint8_t>(DdpTaggedError::base_bounds), true, false};
  const TerminateHdr h = encode_terminate(t);
  EXPECT_EQ(h.ctrl.get(), 0x11014000u);
  const TerminateInfo back = decode_terminate(h);
  EXPECT_EQ(back.layer, TermLayer::ddp);
  EXPECT_EQ(back.etype, 1);
  EXPECT_EQ(back.code, 1);
  EXPECT_TRUE(back.ddp_header_present);
  EXPECT_FALSE(back.rdmap_header_present);
}

TEST(Frame, SealAndOpen) {
  std::vector<std::uint8_t> buf(kFrameHeaderLen + 5 + kFrameTrailerLen);
  write_frame_header(buf, {FrameType::ddp, kFlagAckValid, 0x123456, 0xABCDEF, 0xFFFFFFFE, 77});
  std::memcpy(buf.data() + kFrameHeaderLen, "hello", 5);
  ASSERT_EQ(seal_frame(buf, kFrameHeaderLen + 5), buf.size());
  FrameHeader h;
  std::span<const std::uint8_t> body;
  ASSERT_EQ(open_frame(buf, h, body), FrameError::none);
  EXPECT_EQ(h.type, FrameType::ddp);
  EXPECT_EQ(h.flags, kFlagAckValid);
  EXPECT_EQ(h.dst_qpn, 0x123456u);
  EXPECT_EQ(h.src_qpn, 0xABCDEFu);
  EXPECT_EQ(h.seq, 0xFFFFFFFEu);
  EXPECT_EQ(h.ack, 77u);
  EXPECT_EQ(std::string(body.begin(), body.end()), "hello");
  EXPECT_EQ(buf[0], 0x11) << "version 1, type 1";
}

TEST(Frame, EveryBitFlipIsCaught) {
  std::vector<std::uint8_t> buf(kFrameHeaderLen + 8 + kFrameTrailerLen);
  write_frame_header(buf, {FrameType::ack, kFlagAckValid, 1, 2, 3, 4});
  seal_frame(buf, kFrameHeaderLen + 8);
  FrameHeader h;
  std::span<const std::uint8_t> body;
  for (std::size_t i = 0; i < buf.size() * 8; ++i) {
    auto c = buf;
    c[i / 8] ^= static_cast<std::uint8_t>(1u << (i % 8));
    EXPECT_NE(open_frame(c, h, body), FrameError::none) << "bit " << i;
  }
}

TEST(Frame, RejectsShortAndUnknown) {
  FrameHeader h;
  std::span<const std::uint8_t> body;
  std::vector<std::uint8_t> small(kFrameOverhead - 1);
  EXPECT_EQ(open_frame(small, h, body), FrameError::too_short);
  std::vector<std::uint8_t> b(kFrameOverhead);
  write_frame_header(b, {FrameType::ack, 0, 0, 0, 0, 0});
  b[0] = 0x21;  // version 2
  seal_frame(b, kFrameHeaderLen);
  EXPECT_EQ(open_frame(b, h, body), FrameError::bad_version);
  b[0] = 0x19;  // type 9
  seal_frame(b, kFrameHeaderLen);
  EXPECT_EQ(open_frame(b, h, body), FrameError::bad_type);
}
