// The pieces of the dpdk backend that need no DPDK: Ethernet/IPv4/UDP/ARP codecs with
// known-answer checksums, the netdev configuration grammar and its checks, the pcap tap.
#include <gtest/gtest.h>
#include <pcap/pcap.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "ethernet.hpp"
#include "softrnic/netdev/netdev.hpp"

using namespace softrnic::netdev;
namespace e = softrnic::netdev::eth;

namespace {

std::vector<std::uint8_t> hex(std::string_view s) {
  std::vector<std::uint8_t> v;
  for (std::size_t i = 0; i + 1 < s.size(); i += 2)
    v.push_back(static_cast<std::uint8_t>(std::stoi(std::string(s.substr(i, 2)), nullptr, 16)));
  return v;
}

// 10.78.0.1:5041 -> 10.78.0.2:5042, IP id 7, payload 01..0b; computed independently with the
// shared wirecheck tools' rdmawire.py (ipv4(..., ident=7), udp(..., csum=True)).
constexpr std::string_view kIpUdpKat = "4500002700074000401126210a4e00010a4e000213b113b200139fa80102030405060708090a0b";

}  // namespace

TEST(Checksum, Rfc1071Example) {
  // RFC 1071 section 3: 00 01 f2 03 f4 f5 f6 f7 sums to 0xddf2; the checksum is its complement.
  const auto d = hex("0001f203f4f5f6f7");
  e::Checksum c;
  c.add(d);
  EXPECT_EQ(c.finish(), static_cast<std::uint16_t>(~0xddf2));
  // The same bytes in odd-sized pieces give the same sum.
  e::Checksum c2;
  c2.add({d.data(), 3});
  c2.add({d.data() + 3, 1});
  c2.add({d.data() + 4, 4});
  EXPECT_EQ(c2.finish(), c.finish());
}

TEST(Checksum, Ipv4HeaderKnownAnswer) {
  // The classic example header: 4500 0073 0000 4000 4011 b861 c0a8 0001 c0a8 00c7.
  auto h = hex("450000730000400040110000c0a80001c0a800c7");
  EXPECT_EQ(e::ipv4_header_checksum(h), 0xb861);
  h[10] = 0xb8;
  h[11] = 0x61;
  EXPECT_EQ(e::ipv4_header_checksum(h), 0);  // a correct header sums to zero
}

TEST(Ethernet, UdpHeadersMatchIndependentBuilder) {
  const auto kat = hex(kIpUdpKat);
  std::vector<std::uint8_t> payload(kat.end() - 11, kat.end());
  std::uint32_t a = 0, b = 0;
  ASSERT_TRUE(parse_ipv4("10.78.0.1", a));
  ASSERT_TRUE(parse_ipv4("10.78.0.2", b));
  const e::UdpFrameAddrs addrs{e::mac_from_ip(a), e::mac_from_ip(b), {a, 5041}, {b, 5042}};
  std::uint8_t hdr[e::kUdpHeaders];
  // Payload given in three pieces with odd boundaries, as tx_burst gathers head/body/tail.
  e::write_udp_headers(
      hdr, addrs, 7,
      {std::span<const std::uint8_t>(payload.data(), 3), std::span<const std::uint8_t>(payload.data() + 3, 5),
       std::span<const std::uint8_t>(payload.data() + 8, 3)});
  EXPECT_EQ(std::vector<std::uint8_t>(hdr, hdr + 6), hex("02000a4e0002"));  // dst MAC
  EXPECT_EQ(std::vector<std::uint8_t>(hdr + 6, hdr + 12), hex("02000a4e0001"));
  EXPECT_EQ(hdr[12], 0x08);
  EXPECT_EQ(hdr[13], 0x00);
  EXPECT_EQ(std::vector<std::uint8_t>(hdr + 14, hdr + 42), std::vector<std::uint8_t>(kat.begin(), kat.begin() + 28));

  std::vector<std::uint8_t> frame(hdr, hdr + 42);
  frame.insert(frame.end(), payload.begin(), payload.end());
  frame.resize(e::kMinFrame, 0);  // Ethernet padding is ignored by the parser
  auto p = e::parse_frame(frame, true);
  ASSERT_EQ(p.kind, e::FrameKind::udp) << e::to_string(p.kind);
  EXPECT_EQ(p.src, (NetAddr{a, 5041}));
  EXPECT_EQ(p.dst, (NetAddr{b, 5042}));
  EXPECT_EQ(p.payload_off, 42u);
  EXPECT_EQ(p.payload_len, 11u);
  EXPECT_EQ(p.dst_mac, e::mac_from_ip(b));

  auto bad = frame;
  bad[e::kUdpHeaders + 4] ^= 0x01;  // payload byte: only the UDP checksum sees it
  EXPECT_EQ(e::parse_frame(bad, true).kind, e::FrameKind::bad_udp_checksum);
  EXPECT_EQ(e::parse_frame(bad, false).kind, e::FrameKind::udp);
  bad = frame;
  bad[14 + 8] ^= 0x01;  // TTL
  EXPECT_EQ(e::parse_frame(bad, false).kind, e::FrameKind::bad_ip_checksum);
  bad = frame;
  bad[14 + 6] = 0x20;  // MF
  bad[14 + 10] = bad[14 + 11] = 0;
  const auto c = e::ipv4_header_checksum({bad.data() + 14, 20});
  bad[14 + 10] = static_cast<std::uint8_t>(c >> 8);
  bad[14 + 11] = static_cast<std::uint8_t>(c);
  EXPECT_EQ(e::parse_frame(bad, false).kind, e::FrameKind::fragment);
  EXPECT_EQ(e::parse_frame({frame.data(), 13}, false).kind, e::FrameKind::short_frame);
  EXPECT_EQ(e::parse_frame({frame.data(), 30}, false).kind, e::FrameKind::short_frame);
  EXPECT_EQ(e::parse_frame({frame.data(), 50}, false).kind, e::FrameKind::bad_ipv4);  // total length beyond frame
  bad = frame;
  bad[12] = 0x86;
  bad[13] = 0xdd;
  EXPECT_EQ(e::parse_frame(bad, false).kind, e::FrameKind::not_ipv4);
}

TEST(Ethernet, UdpChecksumZeroAndPartialForOffload) {
  std::uint32_t a = 0, b = 0;
  ASSERT_TRUE(parse_ipv4("10.78.0.1", a));
  ASSERT_TRUE(parse_ipv4("10.78.0.2", b));
  const e::UdpFrameAddrs addrs{e::mac_from_ip(a), e::mac_from_ip(b), {a, 5041}, {b, 4791}};
  std::vector<std::uint8_t> payload(1001);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::uint8_t>(i * 7 + 3);
  std::uint8_t full[e::kUdpHeaders], zero[e::kUdpHeaders], partial[e::kUdpHeaders];
  e::write_udp_headers(full, addrs, 9, {payload}, e::UdpCsum::full);
  e::write_udp_headers(zero, addrs, 9, {payload}, e::UdpCsum::zero);
  e::write_udp_headers(partial, addrs, 9, {payload}, e::UdpCsum::partial);
  // Everything but the UDP checksum field (bytes 40-41) is the same.
  EXPECT_EQ(std::memcmp(full, zero, 40), 0);
  EXPECT_EQ(std::memcmp(full, partial, 40), 0);
  EXPECT_EQ(zero[40], 0);
  EXPECT_EQ(zero[41], 0);
  EXPECT_NE(full[40] | full[41], 0);
  // What a port's offload does with the partial field (DPDK's RTE_MBUF_F_TX_UDP_CKSUM: sum the
  // UDP header, field included, and the payload, and complement) gives the full checksum.
  e::Checksum hw;
  hw.add({partial + 34, e::kUdpHdr});
  hw.add(payload);
  const std::uint16_t done = hw.finish() == 0 ? 0xFFFF : hw.finish();
  EXPECT_EQ(done, (full[40] << 8) | full[41]);
  // A frame with checksum 0 is taken even by a receiver that checks UDP checksums.
  std::vector<std::uint8_t> frame(zero, zero + e::kUdpHeaders);
  frame.insert(frame.end(), payload.begin(), payload.end());
  EXPECT_EQ(e::parse_frame(frame, true).kind, e::FrameKind::udp);
}

TEST(Ethernet, UdpChecksumZeroIsSentAsFfff) {
  // Find a payload whose checksum computes to 0 and check it goes out as 0xFFFF (RFC 768).
  std::uint8_t udp[8] = {0x13, 0xb1, 0x13, 0xb2, 0x00, 0x0a, 0x00, 0x00};
  for (unsigned v = 0; v < 0x10000; ++v) {
    const std::uint8_t pl[2] = {static_cast<std::uint8_t>(v >> 8), static_cast<std::uint8_t>(v)};
    e::Checksum c;
    c.add32(0x0a4e0001);
    c.add32(0x0a4e0002);
    c.add16(17);
    c.add16(10);
    c.add(udp);
    c.add(pl);
    if (c.finish() == 0) {
      EXPECT_EQ(e::udp_checksum(0x0a4e0001, 0x0a4e0002, udp, {pl}), 0xFFFF);
      return;
    }
  }
  FAIL() << "no payload with checksum 0 found";
}

TEST(Ethernet, ArpFrames) {
  std::uint8_t f[e::kMinFrame];
  e::Mac me, peer;
  ASSERT_TRUE(e::parse_mac("02:00:00:00:00:01", me));
  ASSERT_TRUE(e::parse_mac("02-00-00-00-00-02", peer));
  const e::Arp req{e::ArpOp::request, me, e::Mac{}, 0x0a4e0001, 0x0a4e0002};
  ASSERT_EQ(e::write_arp_frame(f, e::kBroadcast, req), e::kMinFrame);
  // Known layout: broadcast, our MAC, 0806, htype 1, ptype 0800, 6, 4, op 1, sha, spa, tha, tpa.
  EXPECT_EQ(std::vector<std::uint8_t>(f, f + 42), hex("ffffffffffff0200000000010806000108000604000102000000000"
                                                      "10a4e0001000000000000"
                                                      "0a4e0002"));
  for (std::size_t i = 42; i < e::kMinFrame; ++i) EXPECT_EQ(f[i], 0) << i;
  auto p = e::parse_frame(f, true);
  ASSERT_EQ(p.kind, e::FrameKind::arp);
  EXPECT_EQ(p.arp.op, e::ArpOp::request);
  EXPECT_EQ(p.arp.sha, me);
  EXPECT_EQ(p.arp.spa, 0x0a4e0001u);
  EXPECT_EQ(p.arp.tpa, 0x0a4e0002u);
  f[21] = 9;  // opcode 9
  EXPECT_EQ(e::parse_frame(f, true).kind, e::FrameKind::bad_arp);
  const e::Arp rep{e::ArpOp::reply, peer, me, 0x0a4e0002, 0x0a4e0001};
  e::write_arp_frame(f, me, rep);
  p = e::parse_frame(f, true);
  ASSERT_EQ(p.kind, e::FrameKind::arp);
  EXPECT_EQ(p.arp.op, e::ArpOp::reply);
  EXPECT_EQ(p.arp.tha, me);
  EXPECT_EQ(p.dst_mac, me);
}

TEST(Ethernet, MacAndNeighbourSyntax) {
  e::Mac m;
  EXPECT_TRUE(e::parse_mac("0a:1B:2c:3D:4e:5F", m));
  EXPECT_EQ(e::to_string(m), "0a:1b:2c:3d:4e:5f");
  for (const char* bad :
       {"", "02:00:00:00:00", "02:00:00:00:00:0g", "02:00:00:00:00:001", "02:00-00:00:00:00", "0200.0000.0001"})
    EXPECT_FALSE(e::parse_mac(bad, m)) << bad;
  std::uint32_t ip = 0;
  std::string err;
  EXPECT_TRUE(e::parse_neighbour("10.0.0.2@02:00:00:00:00:02", ip, m, err)) << err;
  EXPECT_EQ(ip, 0x0a000002u);
  EXPECT_FALSE(e::parse_neighbour("10.0.0.2", ip, m, err));
  EXPECT_NE(err.find("not IPv4@MAC"), std::string::npos) << err;
  EXPECT_FALSE(e::parse_neighbour("10.0.0.2@ff:ff:ff:ff:ff:ff", ip, m, err));
  EXPECT_NE(err.find("bad unicast MAC"), std::string::npos) << err;
  EXPECT_FALSE(e::parse_neighbour("10.0.0@02:00:00:00:00:02", ip, m, err));
}

// ---- configuration grammar ----

namespace {
NetdevConfig parse_all(std::initializer_list<std::pair<const char*, const char*>> items) {
  NetdevConfig c;
  std::string err;
  for (auto [k, v] : items) EXPECT_EQ(parse_netdev_item(k, v, c, err), ItemResult::ok) << k << "=" << v << ": " << err;
  return c;
}
bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}
}  // namespace

TEST(NetdevConfig, DpdkKeys) {
  const auto c = parse_all({{"netdev", "dpdk"},
                            {"ip", "10.78.0.1"},
                            {"dpdk_vdev", "net_memif0;role=server;socket=/tmp/x/memif.sock"},
                            {"dpdk_eal", "--log-level=debug;-n;4"},
                            {"dpdk_lcore", "0"},
                            {"dpdk_prefix", "srv_1"},
                            {"dpdk_mem", "512"},
                            {"dpdk_rxd", "512"},
                            {"dpdk_txd", "2048"},
                            {"mac", "02:00:00:00:00:01"},
                            {"mtu", "9000"},
                            {"neigh", "10.78.0.2@02:00:00:00:00:02;10.78.0.3@02:00:00:00:00:03"},
                            {"neigh", "10.78.0.4@02:00:00:00:00:04"},
                            {"pcap", "/tmp/x.pcap"},
                            {"dpdk_link_timeout_ms", "2000"},
                            {"dpdk_tx_udp_csum", "sw"}});
  EXPECT_EQ(c.kind, "dpdk");
  EXPECT_EQ(c.dpdk.vdev, "net_memif0,role=server,socket=/tmp/x/memif.sock");
  EXPECT_EQ(c.dpdk.eal, (std::vector<std::string>{"--log-level=debug", "-n", "4"}));
  EXPECT_EQ(c.dpdk.lcore, 0);
  EXPECT_EQ(c.dpdk.file_prefix, "srv_1");
  EXPECT_EQ(c.dpdk.mem_mb, 512u);
  EXPECT_EQ(c.dpdk.rx_desc, 512);
  EXPECT_EQ(c.dpdk.tx_desc, 2048);
  EXPECT_EQ(c.dpdk.mac, "02:00:00:00:00:01");
  EXPECT_EQ(c.dpdk.mtu, 9000u);
  EXPECT_EQ(c.dpdk.neigh.size(), 3u);
  EXPECT_EQ(c.pcap, "/tmp/x.pcap");
  EXPECT_EQ(c.dpdk.tx_udp_csum, TxUdpCsum::software);
  EXPECT_EQ(parse_all({{"netdev", "dpdk"}}).dpdk.tx_udp_csum, TxUdpCsum::automatic);
  EXPECT_EQ(parse_all({{"netdev", "dpdk"}, {"dpdk_tx_udp_csum", "0"}}).dpdk.tx_udp_csum, TxUdpCsum::zero);
  std::string err;
  ASSERT_TRUE(validate_dpdk_config(c, err)) << err;
  std::vector<std::string> args;
  ASSERT_TRUE(dpdk_eal_args(c, args, err)) << err;
  EXPECT_TRUE(has(args, "--file-prefix=srv_1"));
  EXPECT_TRUE(has(args, "--no-huge"));
  EXPECT_TRUE(has(args, "--no-pci"));
  EXPECT_TRUE(has(args, "--no-telemetry"));
  EXPECT_TRUE(has(args, "--log-level=debug"));
  EXPECT_FALSE(has(args, "--log-level=warning"));
  EXPECT_TRUE(has(args, "--vdev=net_memif0,role=server,socket=/tmp/x/memif.sock,bsize=9216,socket-abstract=no"));
  const auto l = std::find(args.begin(), args.end(), "-l");
  ASSERT_NE(l, args.end());
  EXPECT_EQ(*(l + 1), "0");
  const auto m = std::find(args.begin(), args.end(), "-m");
  ASSERT_NE(m, args.end());
  EXPECT_EQ(*(m + 1), "512");
}

TEST(NetdevConfig, DefaultsPickALcoreAndAPerProcessPrefix) {
  const auto c = parse_all({{"netdev", "dpdk"}, {"ip", "10.77.0.11"}, {"dpdk_pci", "0000:03:00.0;rxq=2"}});
  std::vector<std::string> args;
  std::string err;
  ASSERT_TRUE(dpdk_eal_args(c, args, err)) << err;
  EXPECT_TRUE(has(args, "-l"));
  EXPECT_TRUE(has(args, "--file-prefix=softrnic_" + std::to_string(::getpid())));
  EXPECT_TRUE(has(args, "-a"));
  EXPECT_TRUE(has(args, "0000:03:00.0,rxq=2"));
  EXPECT_FALSE(has(args, "--no-pci"));
}

TEST(NetdevConfig, ItemErrorsNameTheItem) {
  struct Case {
    const char *key, *val, *msg;
  } cases[] = {
      {"netdev", "dpdkk", "bad value 'dpdkk' for netdev"},
      {"mac", "02:00:00:00:00", "bad value '02:00:00:00:00' for mac"},
      {"mac", "01:00:5e:00:00:01", "want a unicast MAC"},
      {"mtu", "100", "bad value '100' for mtu"},
      {"dpdk_lcore", "x", "bad value 'x' for dpdk_lcore"},
      {"dpdk_prefix", "a/b", "bad value 'a/b' for dpdk_prefix"},
      {"dpdk_rxd", "10", "bad value '10' for dpdk_rxd"},
      {"neigh", "10.0.0.1", "not IPv4@MAC"},
      {"neigh", "10.0.0.1@02:00:00:00:00:01;x", "'x' is not IPv4@MAC"},
      {"dpdk_vdev", "", "bad value '' for dpdk_vdev"},
      {"dpdk_tx_udp_csum", "on", "bad value 'on' for dpdk_tx_udp_csum (want auto, sw or 0)"},
  };
  for (const auto& c : cases) {
    NetdevConfig cfg;
    std::string err;
    EXPECT_EQ(parse_netdev_item(c.key, c.val, cfg, err), ItemResult::bad) << c.key << "=" << c.val;
    EXPECT_NE(err.find(c.msg), std::string::npos) << c.key << "=" << c.val << " -> " << err;
  }
  NetdevConfig cfg;
  std::string err;
  EXPECT_EQ(parse_netdev_item("busy_poll", "1", cfg, err), ItemResult::unknown);
}

TEST(NetdevConfig, DpdkValidationErrors) {
  struct Case {
    std::initializer_list<std::pair<const char*, const char*>> items;
    const char* msg;
  } cases[] = {
      {{{"dpdk_vdev", "net_bogus0"}}, "unknown PMD"},
      {{{"dpdk_vdev", "eth_memif0;socket=/tmp/a"}}, "unknown PMD"},
      {{{"dpdk_vdev", "net_memif0;role=server"}}, "net_memif needs socket="},
      {{{"dpdk_vdev", "net_memif0;socket=relative.sock"}}, "net_memif needs socket="},
      {{{"dpdk_vdev", "net_memif0;socket=/tmp/a;role=master"}}, "role must be server or client"},
      {{{"dpdk_vdev", "net_memif0;socket=/tmp/a;bsize=2048"}, {"mtu", "9000"}}, "bsize must be"},
      {{{"dpdk_vdev", "net_af_packet0"}}, "needs iface="},
      {{{"dpdk_vdev", "net_af_packet0;iface"}}, "is not key=value"},
      {{{"dpdk_vdev", "net_af_packet0;iface=veth0"}, {"mtu", "9000"}}, "needs framesz >= 9128"},
      {{{"dpdk_vdev", "net_af_packet0;iface=veth0;framesz=4096"}, {"mtu", "8000"}}, "needs framesz >= 8128"},
      {{{"dpdk_vdev", "net_tap0"}, {"dpdk_pci", "0000:03:00.0"}}, "not both"},
      {{{"dpdk_pci", "03:00"}}, "want a PCI address"},
      {{{"dpdk_eal", "--help"}}, "unsupported EAL argument '--help'"},
      {{{"dpdk_eal", "-v"}}, "unsupported EAL argument '-v'"},
      {{{"dpdk_eal", "--proc-type=auto"}}, "is set by softrnic"},
      {{{"dpdk_eal", "-l;1"}}, "'-l' is set by softrnic; use dpdk_lcore"},
      {{{"dpdk_eal", "--file-prefix=x"}}, "use dpdk_prefix"},
      {{{"dpdk_eal", "--in-memory"}}, "--in-memory needs hugepages"},
      {{{"dpdk_eal", "--socket-mem=256"}}, "--socket-mem needs hugepages"},
      {{{"dpdk_eal", "-n"}}, "'-n' needs a value"},
      {{{"dpdk_eal", "--no-telemetry=1"}}, "takes no value"},
      {{{"dpdk_eal", "--vdev=net_nope0"}}, "unknown PMD"},
      {{{"dpdk_eal", "--log-level=a b"}}, "bad --log-level"},
      {{{"dpdk_eal", "stray"}}, "unsupported EAL argument 'stray'"},
      {{{"max_datagram", "1500"}}, "exceeds mtu - 28 = 1472"},
      {{{"dpdk_lcore", "1000"}}, "CPUs"},
  };
  for (const auto& c : cases) {
    NetdevConfig cfg;
    std::string err;
    cfg.kind = "dpdk";
    cfg.ip = "10.78.0.1";
    for (auto [k, v] : c.items) {
      // ip "a b" style values cannot come from the grammar; set the raw fields for them
      if (std::string(k) == "dpdk_eal" && std::string(v).find(' ') != std::string::npos) {
        cfg.dpdk.eal.push_back(v);
        continue;
      }
      ASSERT_EQ(parse_netdev_item(k, v, cfg, err), ItemResult::ok) << k << "=" << v << ": " << err;
    }
    EXPECT_FALSE(validate_dpdk_config(cfg, err)) << c.msg;
    EXPECT_NE(err.find(c.msg), std::string::npos) << c.msg << " -> " << err;
    // make_netdev refuses it too, before anything reaches DPDK (so EAL stays unused here).
    std::string err2;
    EXPECT_FALSE(make_netdev(cfg, err2));
    EXPECT_FALSE(err2.empty());
  }
}

TEST(NetdevConfig, DpdkKeysOnAnotherBackendAreAnError) {
  NetdevConfig c;
  c.kind = "loopback";
  c.port = 7400;
  c.dpdk.mac = "02:00:00:00:00:01";
  std::string err;
  EXPECT_FALSE(make_netdev(c, err));
  EXPECT_NE(err.find("apply only to netdev=dpdk"), std::string::npos) << err;
}

TEST(NetdevConfig, WithoutDpdkTheErrorSaysSo) {
  if (dpdk_available()) GTEST_SKIP() << "this build has the dpdk backend";
  NetdevConfig c;
  c.kind = "dpdk";
  c.ip = "10.78.0.1";
  c.dpdk.vdev = "net_null0";
  std::string err;
  EXPECT_FALSE(make_netdev(c, err));
  EXPECT_NE(err.find("built without DPDK"), std::string::npos) << err;
}

// ---- pcap tap ----

TEST(PcapTap, WritesEveryDatagramAsADecodableFrame) {
  const auto path = std::filesystem::temp_directory_path() / ("softrnic_tap_" + std::to_string(::getpid()) + ".pcap");
  std::string err;
  NetdevConfig ca;
  ca.kind = "loopback";
  ca.port = 7450;
  ca.pcap = path.string();
  NetdevConfig cb = ca;
  cb.port = 7451;
  cb.pcap.clear();
  std::vector<std::uint8_t> sent_payload;
  {
    auto a = make_netdev(ca, err);
    ASSERT_TRUE(a) << err;
    auto b = make_netdev(cb, err);
    ASSERT_TRUE(b) << err;
    // a sends two datagrams (gathered from three pieces, odd sizes), b answers one.
    const std::uint8_t h[3] = {1, 2, 3}, body[1000] = {7}, t[4] = {9, 9, 9, 9};
    const TxFrame f[2] = {{b->local_addr(), h, body, t}, {b->local_addr(), {}, {body, 1}, {}}};
    ASSERT_EQ(a->tx_burst(f), 2u);
    sent_payload.assign(h, h + 3);
    sent_payload.insert(sent_payload.end(), body, body + 1000);
    sent_payload.insert(sent_payload.end(), t, t + 4);
    std::vector<std::uint8_t> buf(2200);
    RxFrame rf[2] = {{{}, buf.data(), 1100, 0}, {{}, buf.data() + 1100, 1100, 0}};
    std::size_t got = 0;
    for (int i = 0; i < 100 && got < 2; ++i) got += b->rx_burst({rf + got, 2 - got});
    ASSERT_EQ(got, 2u);
    const std::uint8_t pong[5] = {'p', 'o', 'n', 'g', '!'};
    const TxFrame r{a->local_addr(), pong, {}, {}};
    ASSERT_EQ(b->tx_burst({&r, 1}), 1u);
    RxFrame ra{{}, buf.data(), buf.size(), 0};
    std::size_t n = 0;
    for (int i = 0; i < 100 && n == 0; ++i) n = a->rx_burst({&ra, 1});
    ASSERT_EQ(n, 1u);
  }  // closing the netdev closes the file
  char ebuf[PCAP_ERRBUF_SIZE];
  pcap_t* p = pcap_open_offline(path.c_str(), ebuf);
  ASSERT_TRUE(p) << ebuf;
  EXPECT_EQ(pcap_datalink(p), DLT_EN10MB);
  std::vector<e::ParsedFrame> frames;
  std::vector<std::vector<std::uint8_t>> payloads;
  pcap_pkthdr* hdr;
  const u_char* data;
  while (pcap_next_ex(p, &hdr, &data) == 1) {
    ASSERT_EQ(hdr->caplen, hdr->len);
    const auto pf = e::parse_frame({data, hdr->caplen}, true);  // checksums verified
    ASSERT_EQ(pf.kind, e::FrameKind::udp) << e::to_string(pf.kind);
    frames.push_back(pf);
    payloads.emplace_back(data + pf.payload_off, data + pf.payload_off + pf.payload_len);
  }
  pcap_close(p);
  std::filesystem::remove(path);
  ASSERT_EQ(frames.size(), 3u);  // two sent by a, one received by a
  EXPECT_EQ(frames[0].src.port, 7450);
  EXPECT_EQ(frames[0].dst.port, 7451);
  EXPECT_EQ(frames[0].src.ip, 0x7f000001u);
  EXPECT_EQ(payloads[0], sent_payload);
  EXPECT_EQ(payloads[1].size(), 1u);
  EXPECT_EQ(frames[2].src.port, 7451);
  EXPECT_EQ(frames[2].dst.port, 7450);
  EXPECT_EQ(payloads[2], (std::vector<std::uint8_t>{'p', 'o', 'n', 'g', '!'}));
}

TEST(PcapTap, UnwritablePathIsAClearError) {
  NetdevConfig c;
  c.kind = "loopback";
  c.port = 7460;
  c.pcap = "/nonexistent-dir/x.pcap";
  std::string err;
  EXPECT_FALSE(make_netdev(c, err));
  EXPECT_NE(err.find("cannot create '/nonexistent-dir/x.pcap'"), std::string::npos) << err;
}
