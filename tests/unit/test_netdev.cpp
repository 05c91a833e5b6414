// netdev backends: address parsing, loopback delivery, udp port probing and bursts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "softrnic/netdev/netdev.hpp"

using namespace softrnic::netdev;

TEST(NetAddr, ParseIpv4) {
  std::uint32_t ip = 0;
  EXPECT_TRUE(parse_ipv4("127.0.0.1", ip));
  EXPECT_EQ(ip, 0x7F000001u);
  EXPECT_TRUE(parse_ipv4("255.255.255.255", ip));
  for (const char* bad : {"", "1.2.3", "1.2.3.4.5", "256.1.1.1", "a.b.c.d", "1..2.3", "01234.1.1.1", "1.2.3.4 "})
    EXPECT_FALSE(parse_ipv4(bad, ip)) << bad;
  EXPECT_EQ(to_string(NetAddr{0x7F000001, 5041}), "127.0.0.1:5041");
}

// The MTU of the interface that holds an address (what DAT_IB_TRANSPORT_MTU is derived from):
// lo's for 127.0.0.1, as sysfs says; 0 for an address no interface has.
TEST(NetAddr, InterfaceMtu) {
  unsigned lo = 0;
  if (FILE* f = std::fopen("/sys/class/net/lo/mtu", "r")) {
    if (std::fscanf(f, "%u", &lo) != 1) lo = 0;
    std::fclose(f);
  }
  if (lo == 0) GTEST_SKIP() << "no /sys/class/net/lo/mtu";
  EXPECT_EQ(interface_mtu(0x7F000001), lo);
  EXPECT_EQ(interface_mtu(0xC0000201), 0u) << "192.0.2.1 (TEST-NET-1) is nobody's";
}

namespace {

std::size_t recv_some(Netdev& d, std::vector<std::vector<std::uint8_t>>& got, NetAddr& from, int max_wait_ms = 2000) {
  std::vector<std::uint8_t> buf(70000);
  RxFrame f{{}, buf.data(), buf.size(), 0};
  for (int i = 0; i < max_wait_ms; ++i) {
    if (d.rx_burst({&f, 1}) == 1) {
      const auto b = f.bytes();
      got.emplace_back(b.begin(), b.end());
      from = f.from;
      return 1;
    }
    d.wait_rx(std::chrono::milliseconds(1));
  }
  return 0;
}

// Two netdevs of one configuration (the second takes the next free port).
void open_pair(const NetdevConfig& c, std::unique_ptr<Netdev>& a, std::unique_ptr<Netdev>& b) {
  std::string e;
  a = make_netdev(c, e);
  ASSERT_TRUE(a) << e;
  b = make_netdev(c, e);
  ASSERT_TRUE(b) << e;
}

void exchange(const char* kind, std::uint16_t port) {
  NetdevConfig c;
  c.kind = kind;
  c.port = port;
  std::unique_ptr<Netdev> a, b;
  ASSERT_NO_FATAL_FAILURE(open_pair(c, a, b));
  EXPECT_EQ(a->local_addr().port, port);
  EXPECT_EQ(b->local_addr().port, port + 1) << "the next free port";
  EXPECT_EQ(a->max_datagram(), 65000u) << "automatic size on 127/8";
  const std::uint8_t head[] = {1, 2, 3}, body[] = {4, 5}, tail[] = {6};
  const TxFrame f{b->local_addr(), head, body, tail};
  ASSERT_EQ(a->tx_burst({&f, 1}), 1u);
  std::vector<std::vector<std::uint8_t>> got;
  NetAddr from;
  ASSERT_EQ(recv_some(*b, got, from), 1u);
  EXPECT_EQ(got[0], (std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(from, a->local_addr());
  EXPECT_EQ(b->stats().rx_frames, 1u);
}

}  // namespace

TEST(Netdev, LoopbackExchange) {
  exchange("loopback", 7100);
}
TEST(Netdev, UdpExchange) {
  exchange("udp", 7200);
}

TEST(Netdev, BadConfigurationIsAClearError) {
  std::string e;
  NetdevConfig c;
  c.kind = "carrier-pigeon";
  EXPECT_FALSE(make_netdev(c, e));
  EXPECT_NE(e.find("unknown kind 'carrier-pigeon'"), std::string::npos) << e;
  c = NetdevConfig{};
  c.ip = "300.1.1.1";
  EXPECT_FALSE(make_netdev(c, e));
  EXPECT_NE(e.find("bad IPv4 address"), std::string::npos) << e;
  c = NetdevConfig{};
  c.ip = "192.0.2.1";  // not on this host
  c.port = 7300;
  EXPECT_FALSE(make_netdev(c, e));
  EXPECT_NE(e.find("cannot bind"), std::string::npos) << e;
  c = NetdevConfig{};
  c.max_datagram = 100;
  EXPECT_FALSE(make_netdev(c, e));
  EXPECT_NE(e.find("outside 256..65507"), std::string::npos) << e;
}

TEST(Netdev, FixedPortTakenFails) {
  NetdevConfig c;
  c.kind = "udp";
  c.port = 7400;
  c.port_fixed = true;
  std::string e;
  auto a = make_netdev(c, e);
  ASSERT_TRUE(a) << e;
  EXPECT_FALSE(make_netdev(c, e));
  EXPECT_NE(e.find("cannot bind 127.0.0.1:7400"), std::string::npos) << e;
}

TEST(Netdev, WakeEndsAWait) {
  NetdevConfig c;
  c.kind = "udp";
  c.port = 7500;
  std::string e;
  auto a = make_netdev(c, e);
  ASSERT_TRUE(a) << e;
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    a->wake();
  });
  const auto t0 = std::chrono::steady_clock::now();
  a->wait_rx(std::chrono::seconds(20));
  t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
}

namespace {

// Sends `n` numbered datagrams a -> b through an impairment plan; returns what b received.
// Sends n numbered datagrams through `plan` and returns what arrives. `one_burst`: all in one
// tx_burst, so the plan's decisions depend on the seed alone, not on how long the sends take (a
// datagram held past the 1 ms limit is released by time; under ASan a loop of sends can take that
// long). Otherwise one send each, so the hold limit bounds how far a datagram moves.
std::vector<std::uint32_t> impaired_run(const ImpairPlan& plan, int n, std::uint16_t port, ImpairStats* st = nullptr,
                                        bool one_burst = false) {
  NetdevConfig c;
  c.kind = "loopback";
  c.port = port;
  c.impair = plan;
  std::string e;
  auto a = make_netdev(c, e);
  c.impair = ImpairPlan{};
  auto b = make_netdev(c, e);
  std::vector<std::uint32_t> got;
  std::vector<std::array<std::uint8_t, 64>> data(static_cast<std::size_t>(n));
  std::vector<TxFrame> frames;
  for (std::uint32_t i = 0; i < static_cast<std::uint32_t>(n); ++i) {
    data[i].fill(0);
    std::memcpy(data[i].data(), &i, 4);
    frames.push_back(TxFrame{b->local_addr(), data[i], {}, {}});
  }
  if (one_burst) {
    a->tx_burst(frames);
  } else {
    for (const TxFrame& f : frames) a->tx_burst({&f, 1});
  }
  std::vector<std::uint8_t> buf(70000);
  for (int idle = 0; idle < 50;) {
    RxFrame rf{{}, buf.data(), buf.size(), 0};
    a->rx_burst({&rf, 0});  // lets the plan release what it holds
    a->wait_rx(std::chrono::microseconds(200));
    if (b->rx_burst({&rf, 1}) == 1) {
      const auto d = rf.bytes();
      std::uint32_t v;
      std::memcpy(&v, d.data(), 4);
      bool clean = true;
      for (std::size_t k = 4; k < 64; ++k) clean = clean && d[k] == 0;
      got.push_back(clean ? v : 0xFFFFFFFF);
      idle = 0;
    } else {
      ++idle;
    }
  }
  if (st) *st = a->impair_stats();
  return got;
}

}  // namespace

TEST(Impair, ParseAndErrors) {
  ImpairPlan p;
  std::string e;
  ASSERT_TRUE(parse_impair("seed=9,drop=0.1,dup=0.2,reorder=4,delay=50,corrupt=0.3", ',', p, e)) << e;
  EXPECT_EQ(p.seed, 9u);
  EXPECT_DOUBLE_EQ(p.drop, 0.1);
  EXPECT_DOUBLE_EQ(p.dup, 0.2);
  EXPECT_EQ(p.reorder, 4u);
  EXPECT_EQ(p.delay_us, 50u);
  EXPECT_DOUBLE_EQ(p.corrupt, 0.3);
  EXPECT_FALSE(parse_impair("drop=1.5", ',', p, e));
  EXPECT_NE(e.find("bad value '1.5' for drop"), std::string::npos);
  EXPECT_FALSE(parse_impair("drop", ',', p, e));
  EXPECT_NE(e.find("'drop' is not key=value"), std::string::npos);
  EXPECT_FALSE(parse_impair("reorder=-1", ',', p, e));
  EXPECT_FALSE(parse_impair("lose=0.1", ',', p, e));
  EXPECT_NE(e.find("unknown key 'lose'"), std::string::npos);
}

TEST(Impair, SameSeedSameRun) {
  ImpairPlan p;
  p.seed = 42;
  p.drop = 0.1;
  p.dup = 0.1;
  p.reorder = 8;
  const auto r1 = impaired_run(p, 500, 7600, nullptr, true);
  const auto r2 = impaired_run(p, 500, 7610, nullptr, true);
  EXPECT_EQ(r1, r2);
  p.seed = 43;
  EXPECT_NE(impaired_run(p, 500, 7620, nullptr, true), r1) << "another seed, another run";
}

TEST(Impair, EachImpairmentDoesWhatItSays) {
  ImpairStats st;
  ImpairPlan drop;
  drop.drop = 0.2;
  auto r = impaired_run(drop, 1000, 7630, &st);
  EXPECT_EQ(r.size(), 1000 - st.dropped);
  EXPECT_GT(st.dropped, 120u);
  EXPECT_LT(st.dropped, 280u);
  EXPECT_TRUE(std::is_sorted(r.begin(), r.end())) << "dropping alone keeps the order";

  ImpairPlan dup;
  dup.dup = 0.3;
  r = impaired_run(dup, 1000, 7640, &st);
  EXPECT_EQ(r.size(), 1000 + st.duplicated);
  EXPECT_GT(st.duplicated, 200u);

  ImpairPlan reorder;
  reorder.reorder = 16;
  r = impaired_run(reorder, 1000, 7650, &st);
  ASSERT_EQ(r.size(), 1000u) << "reordering loses nothing";
  EXPECT_FALSE(std::is_sorted(r.begin(), r.end()));
  auto sorted = r;
  std::sort(sorted.begin(), sorted.end());
  for (std::uint32_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  for (std::size_t i = 0; i < r.size(); ++i)
    EXPECT_LT(std::abs(static_cast<long>(r[i]) - static_cast<long>(i)), 200) << "displacement bounded by the window";

  ImpairPlan corrupt;
  corrupt.corrupt = 0.25;
  r = impaired_run(corrupt, 1000, 7660, &st);
  EXPECT_EQ(r.size(), 1000u);
  std::uint64_t changed = 0;
  for (std::uint32_t i = 0; i < r.size(); ++i) changed += r[i] != i;
  EXPECT_EQ(changed, st.corrupted) << "every corrupted datagram differs from what was sent, no other does";
  EXPECT_GT(st.corrupted, 150u);
}

namespace {

// A netdev that records what it is given, and refuses one frame when asked (a full socket).
class RecordingNetdev final : public Netdev {
 public:
  std::vector<std::size_t> bursts;                                        // the size of each tx_burst call
  std::vector<std::pair<std::vector<std::uint8_t>, std::uint16_t>> sent;  // bytes, from_port
  std::size_t refuse_at = ~std::size_t{0};                                // the n-th frame overall is refused
  NetAddr local_addr() const override { return {0x7f000001, 9}; }
  std::size_t max_datagram() const override { return 65000; }
  std::size_t tx_burst(std::span<const TxFrame> frames) override {
    bursts.push_back(frames.size());
    std::size_t i = 0;
    for (; i < frames.size(); ++i) {
      if (seen_++ == refuse_at) return i;
      std::vector<std::uint8_t> b;
      for (auto part : {frames[i].head, frames[i].body, frames[i].tail}) b.insert(b.end(), part.begin(), part.end());
      sent.emplace_back(std::move(b), frames[i].from_port);
    }
    return i;
  }
  std::size_t rx_burst(std::span<RxFrame>) override { return 0; }
  NetdevStats stats() const override { return {}; }
  std::size_t rx_buffer_bytes() const override { return 1 << 20; }
  void wait_rx(std::chrono::microseconds) override {}
  void wake() override {}
  // Grants every even port asked for (a netdev that opened sockets for them), else its own.
  std::uint16_t source_port(std::uint16_t wanted) override { return wanted % 2 == 0 ? wanted : 9; }

 private:
  std::size_t seen_ = 0;
};

}  // namespace

// A plan that holds nothing (drop, duplicate, corrupt: no reordering, no delay) hands what
// survives to the netdev below in one burst, source ports kept, and a frame the netdev refuses
// costs only that frame. (It copied every datagram and sent them one by one, so goodput under
// loss measured the decorator more than the recovery.)
TEST(Impair, APlanThatHoldsNothingSendsTheBurstOnWhole) {
  auto rec = std::make_unique<RecordingNetdev>();
  RecordingNetdev* r = rec.get();
  r->refuse_at = 10;
  ImpairPlan p;
  p.drop = 0.2;
  p.corrupt = 0.1;
  auto nd = make_impaired(std::move(rec), p);
  std::vector<std::array<std::uint8_t, 8>> data(64);
  std::vector<TxFrame> frames;
  for (std::size_t i = 0; i < data.size(); ++i) {
    data[i].fill(static_cast<std::uint8_t>(i));
    frames.push_back(TxFrame{{0x7f000001, 7}, {data[i].data(), 3}, {data[i].data() + 3, 5}, {}, 49152});
  }
  EXPECT_EQ(nd->tx_burst(frames), frames.size());
  const ImpairStats st = nd->impair_stats();
  const std::size_t survivors = frames.size() - st.dropped;
  ASSERT_GT(st.dropped, 0u);
  ASSERT_GT(st.corrupted, 0u);
  ASSERT_GT(survivors, 11u);
  EXPECT_EQ(r->bursts.front(), survivors) << "one burst of every survivor";
  EXPECT_EQ(r->bursts.size(), 2u) << "and one more for those behind the refused frame";
  EXPECT_EQ(r->sent.size(), survivors - 1) << "only the refused frame is lost";
  std::size_t clean = 0;
  for (const auto& [bytes, port] : r->sent) {
    EXPECT_EQ(port, 49152);
    ASSERT_EQ(bytes.size(), 8u);
    clean += std::all_of(bytes.begin(), bytes.end(), [&](std::uint8_t b) { return b == bytes[0]; });
  }
  EXPECT_GE(clean + st.corrupted, r->sent.size());
  EXPECT_LT(clean, r->sent.size());
}

// The decorators (impairment, held frames, pcap tap) ask the netdev below which source ports it
// grants and keep each frame's own on the way down: else RoCEv2's per-QP source ports were
// never granted under an impairment plan or a capture, and a held frame lost its port.
TEST(Decorators, KeepTheSourcePortsOfTheNetdevBelow) {
  std::uint8_t data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const TxFrame f{{0x7f000001, 7}, data, {}, {}, 49152};
  {
    auto rec = std::make_unique<RecordingNetdev>();
    RecordingNetdev* r = rec.get();
    ImpairPlan p;
    p.reorder = 4;  // holds frames: the copy path
    p.seed = 3;
    auto nd = make_impaired(std::move(rec), p);
    EXPECT_EQ(nd->source_port(49152), 49152);
    EXPECT_EQ(nd->source_port(49153), 9);
    for (int i = 0; i < 8; ++i) nd->tx_burst({&f, 1});
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    RxFrame none[1];
    nd->rx_burst(none);  // releases what the plan held
    ASSERT_EQ(r->sent.size(), 8u);
    for (const auto& [bytes, port] : r->sent) EXPECT_EQ(port, 49152);
  }
  {
    auto rec = std::make_unique<RecordingNetdev>();
    RecordingNetdev* r = rec.get();
    auto nd = make_holding(std::move(rec), [](std::span<const std::uint8_t>) { return true; });
    EXPECT_EQ(nd->source_port(49152), 49152);
    EXPECT_EQ(nd->source_port(49153), 9);
    nd->tx_burst({&f, 1});  // not holding: straight on
    nd->set_holding(true);
    nd->tx_burst({&f, 1});
    ASSERT_EQ(nd->held().size(), 1u);
    EXPECT_EQ(nd->held()[0].from_port, 49152);
    nd->release({0});
    ASSERT_EQ(r->sent.size(), 2u);
    EXPECT_EQ(r->sent[0].second, 49152);
    EXPECT_EQ(r->sent[1].second, 49152);
  }
  {
    char dir[] = "/tmp/softrnic-pcap-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    const std::string path = std::string(dir) + "/ports.pcap";
    std::string error;
    auto nd = make_pcap_tap(std::make_unique<RecordingNetdev>(), path, error);
    ASSERT_TRUE(nd) << error;
    EXPECT_EQ(nd->source_port(49152), 49152);
    EXPECT_EQ(nd->source_port(49153), 9);
    const TxFrame own{{0x7f000001, 7}, data, {}, {}, 0};
    nd->tx_burst({&f, 1});
    nd->tx_burst({&own, 1});
    nd.reset();  // flushes and closes the file
    std::ifstream in(path, std::ios::binary);
    std::vector<std::uint8_t> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::remove(path.c_str());
    rmdir(dir);
    // pcap header 24 bytes; per record 16 bytes of header, then Ethernet (14) and IPv4 (20):
    // the UDP source port at 34.
    const std::size_t rec_len = 16 + 14 + 20 + 8 + sizeof data;
    ASSERT_EQ(file.size(), 24 + 2 * rec_len);
    auto sport = [&](std::size_t k) {
      const std::size_t at = 24 + k * rec_len + 16 + 34;
      return static_cast<std::uint16_t>(file[at] << 8 | file[at + 1]);
    };
    EXPECT_EQ(sport(0), 49152) << "the frame's own source port";
    EXPECT_EQ(sport(1), 9) << "the netdev's port";
  }
}

namespace {

// Sockets bound to 127.0.0.1:port (from /proc/net/udp), and how many of them are connected.
std::pair<int, int> udp_sockets_on(std::uint16_t port) {
  std::FILE* f = std::fopen("/proc/net/udp", "r");
  if (!f) return {-1, -1};
  char line[512];
  int bound = 0, connected = 0;
  char want[16];
  std::snprintf(want, sizeof want, "0100007F:%04X", port);
  while (std::fgets(line, sizeof line, f)) {
    char local[64], remote[64];
    if (std::sscanf(line, " %*s %63s %63s", local, remote) != 2 || std::strcmp(local, want) != 0) continue;
    bound++;
    if (std::strcmp(remote, "00000000:0000") != 0) connected++;
  }
  std::fclose(f);
  return {bound, connected};
}

}  // namespace

// While a peer has connections, the udp netdev sends to it on a socket connected to it (same
// address and port), and still hears every peer: the connected one on that socket, the others
// on the main one. The port stays exclusive to the netdev.
TEST(Netdev, UdpPeerHintConnectsASocketAndEveryPeerIsStillHeard) {
  NetdevConfig c;
  c.kind = "udp";
  c.port = 7600;
  std::string e;
  auto a = make_netdev(c, e), b = make_netdev(c, e), d = make_netdev(c, e);
  ASSERT_TRUE(a && b && d) << e;
  const std::uint16_t port = a->local_addr().port;
  ASSERT_EQ(udp_sockets_on(port), std::make_pair(1, 0));

  a->peer_hint(b->local_addr(), true);
  a->peer_hint(b->local_addr(), true);  // a second connection to the same peer
  EXPECT_EQ(udp_sockets_on(port), std::make_pair(2, 1)) << "one socket connected to b";
  NetdevConfig taken = c;
  taken.port = port;
  taken.port_fixed = true;
  EXPECT_FALSE(make_netdev(taken, e)) << "the port is still ours alone";

  // a -> b leaves from a's address; b and d -> a both arrive, each with its sender.
  const std::uint8_t x[] = {7};
  const TxFrame to_b{b->local_addr(), x, {}, {}};
  ASSERT_EQ(a->tx_burst({&to_b, 1}), 1u);
  std::vector<std::vector<std::uint8_t>> got;
  NetAddr from;
  ASSERT_EQ(recv_some(*b, got, from), 1u);
  EXPECT_EQ(from, a->local_addr());
  for (int i = 0; i < 3; ++i) {
    const std::uint8_t mb[] = {static_cast<std::uint8_t>(10 + i)}, md[] = {static_cast<std::uint8_t>(20 + i)};
    const TxFrame fb{a->local_addr(), mb, {}, {}}, fd{a->local_addr(), md, {}, {}};
    ASSERT_EQ(b->tx_burst({&fb, 1}), 1u);
    ASSERT_EQ(d->tx_burst({&fd, 1}), 1u);
  }
  got.clear();
  std::vector<std::pair<NetAddr, int>> heard;
  for (int i = 0; i < 6; ++i) {
    ASSERT_EQ(recv_some(*a, got, from), 1u) << "datagram " << i;
    heard.emplace_back(from, got.back()[0]);
  }
  std::sort(heard.begin(), heard.end(), [](auto& l, auto& r) { return l.second < r.second; });
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(heard[static_cast<std::size_t>(i)], std::make_pair(b->local_addr(), 10 + i));
    EXPECT_EQ(heard[static_cast<std::size_t>(3 + i)], std::make_pair(d->local_addr(), 20 + i));
  }

  a->peer_hint(b->local_addr(), false);
  EXPECT_EQ(udp_sockets_on(port), std::make_pair(2, 1)) << "b still has a connection";
  a->peer_hint(b->local_addr(), false);
  EXPECT_EQ(udp_sockets_on(port), std::make_pair(1, 0)) << "the last connection to b ended";
  a->peer_hint(b->local_addr(), false);  // unbalanced: ignored
  const std::uint8_t late[] = {99};
  const TxFrame fl{a->local_addr(), late, {}, {}};
  ASSERT_EQ(b->tx_burst({&fl, 1}), 1u);
  ASSERT_EQ(recv_some(*a, got, from), 1u);
  EXPECT_EQ(from, b->local_addr());
}

// A datagram too large for its buffer is dropped and counted; the datagrams received in the same
// burst after it are delivered each with its own bytes, length and sender.
TEST(Netdev, UdpTruncatedDatagramDoesNotShiftTheRestOfABurst) {
  NetdevConfig c;
  c.kind = "udp";
  c.port = 7700;
  std::string e;
  auto a = make_netdev(c, e), b = make_netdev(c, e);
  ASSERT_TRUE(a && b) << e;
  // One datagram first: after it the netdev reads in bursts.
  const std::uint8_t first[] = {1};
  const TxFrame f0{b->local_addr(), first, {}, {}};
  ASSERT_EQ(a->tx_burst({&f0, 1}), 1u);
  std::vector<std::vector<std::uint8_t>> got;
  NetAddr from;
  ASSERT_EQ(recv_some(*b, got, from), 1u);

  const std::vector<std::uint8_t> big(600, 0xEE), small1(40, 0x11), small2(50, 0x22);
  for (const auto* d : {&big, &small1, &small2}) {
    const TxFrame f{b->local_addr(), *d, {}, {}};
    ASSERT_EQ(a->tx_burst({&f, 1}), 1u);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // all three queued
  std::array<std::array<std::uint8_t, 300>, 3> bufs{};
  std::array<RxFrame, 3> out;
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = RxFrame{{}, bufs[i].data(), bufs[i].size(), 0};
  ASSERT_EQ(b->rx_burst(out), 2u) << "the 600-byte datagram does not fit 300 bytes";
  EXPECT_EQ(b->stats().rx_truncated, 1u);
  const auto d0 = out[0].bytes(), d1 = out[1].bytes();
  EXPECT_EQ(std::vector<std::uint8_t>(d0.begin(), d0.end()), small1);
  EXPECT_EQ(std::vector<std::uint8_t>(d1.begin(), d1.end()), small2);
  EXPECT_EQ(out[0].from, a->local_addr());
}

// A peer's datagrams are taken in the order it sent them across the moment it gets a socket of
// its own (issue 13: a connection's confirmation waited on the main socket while the reset the
// peer sent after it came through the new socket first, and dtestcm's server saw events out of
// the order its client caused them).
TEST(Netdev, UdpPeerKeepsItsOrderWhenItGetsASocketOfItsOwn) {
  NetdevConfig c;
  c.kind = "udp";
  c.port = 7700;
  std::string e;
  auto a = make_netdev(c, e), b = make_netdev(c, e);
  ASSERT_TRUE(a && b) << e;
  auto send = [&](int from, int to) {
    for (int i = from; i < to; ++i) {
      const std::uint8_t m[] = {static_cast<std::uint8_t>(i)};
      const TxFrame f{a->local_addr(), m, {}, {}};
      ASSERT_EQ(b->tx_burst({&f, 1}), 1u);
    }
  };
  send(0, 20);                          // queued on a's main socket
  a->peer_hint(b->local_addr(), true);  // b gets a socket of its own
  send(20, 40);                         // queued there
  std::vector<std::vector<std::uint8_t>> got;
  NetAddr from;
  std::vector<int> order;
  for (int tries = 0; tries < 200 && order.size() < 40; ++tries) {
    got.clear();
    if (recv_some(*a, got, from) == 0) continue;
    for (const auto& d : got) order.push_back(d[0]);
  }
  ASSERT_EQ(order.size(), 40u);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], i) << "position " << i;
  a->peer_hint(b->local_addr(), false);
}

// What RoCEv2 over kernel UDP counts on (TxFrame::seal): Linux gives the k-th datagram of a GSO
// send from an unconnected DF socket IP ID k, so the k-th frame's last four bytes, computed for
// ID 0, are corrected by seal(size, k) as it leaves (checked here with a stand-in seal; the
// kernel's numbering with tcpdump: docs/verbs.md). The caller's memory is not written; a frame
// sent alone, or without GSO, goes as given; the four bytes may straddle its pieces.
namespace {
// A stand-in for RoCEv2's ICRC correction (TxFrame::seal): some change of the last four bytes
// for every IP ID but 0.
std::uint32_t stand_in_seal(std::size_t size, std::uint16_t id) {
  return id ? static_cast<std::uint32_t>(size) * 0x10001u ^ id * 0x9E3779B9u : 0u;  // (ID 0 changes nothing)
}
}  // namespace

TEST(UdpNetdev, SealedFramesOfAGsoSendAreCorrectedForTheirIpIds) {
  const IpIdSeal seal = stand_in_seal;
  for (const bool gso : {true, false}) {
    NetdevConfig c;
    c.kind = "udp";
    c.port = 7490;
    c.udp_gso = gso;
    c.dont_fragment = true;
    std::unique_ptr<Netdev> a, b;
    ASSERT_NO_FATAL_FAILURE(open_pair(c, a, b));
    constexpr std::size_t kN = 6, kSize = 1000;
    std::vector<std::vector<std::uint8_t>> body(kN, std::vector<std::uint8_t>(kSize - 2));
    const std::array<std::uint8_t, 2> tail{0xAB, 0xCD};  // the four bytes: two of body, two of tail
    const std::array<std::uint8_t, 8> head{9, 9, 9, 9, 9, 9, 9, 9};
    std::vector<TxFrame> frames;
    for (std::size_t i = 0; i < kN; ++i) {
      for (std::size_t k = 0; k < body[i].size(); ++k) body[i][k] = static_cast<std::uint8_t>(i + k);
      frames.push_back(TxFrame{b->local_addr(), head, body[i], tail, 0, seal});
    }
    const auto original = body;
    ASSERT_EQ(a->tx_burst(frames), kN);
    std::vector<std::vector<std::uint8_t>> got;
    NetAddr from;
    for (std::size_t i = 0; i < kN; ++i) ASSERT_EQ(recv_some(*b, got, from), 1u) << i;
    EXPECT_EQ(a->stats().tx_gso_sends, gso ? 1u : 0u);
    for (std::size_t i = 0; i < kN; ++i) {
      std::vector<std::uint8_t> want(head.begin(), head.end());
      want.insert(want.end(), original[i].begin(), original[i].end());
      want.insert(want.end(), tail.begin(), tail.end());
      const std::uint32_t fix = gso ? seal(want.size(), static_cast<std::uint16_t>(i)) : 0;
      for (std::size_t k = 0; k < 4; ++k) want[want.size() - 4 + k] ^= static_cast<std::uint8_t>(fix >> (8 * k));
      EXPECT_EQ(got[i], want) << "datagram " << i << " gso=" << gso;
    }
    EXPECT_EQ(body, original) << "the frames' memory is the caller's";
    const TxFrame lone{b->local_addr(), head, body[0], tail, 0, seal};
    ASSERT_EQ(a->tx_burst({&lone, 1}), 1u);
    got.clear();
    ASSERT_EQ(recv_some(*b, got, from), 1u);
    EXPECT_EQ(got[0].back(), 0xCD) << "alone: ID 0, as given";
  }
}

// A run of equal-sized datagrams to one peer leaves as one UDP GSO send (the last may be
// shorter); each arrives whole and in order. The receiver turns UDP_GRO on once datagrams come
// in bursts: the next run is cut from one coalesced receive. After 64 datagrams that came one at
// a time it is off again (its reads cost more), and a run arrives datagram by datagram. With
// udp_gso=0 runs go by sendmmsg and arrive datagram by datagram.
TEST(UdpNetdev, ARunOfEqualDatagramsIsOneGsoSend) {
  for (const bool gso : {true, false}) {
    NetdevConfig c;
    c.kind = "udp";
    c.port = 7480;
    c.udp_gso = gso;
    std::unique_ptr<Netdev> a, b;
    ASSERT_NO_FATAL_FAILURE(open_pair(c, a, b));
    constexpr std::size_t kN = 12, kSize = 4000;
    std::vector<std::vector<std::uint8_t>> payload(kN + 1);
    std::vector<TxFrame> frames;
    const std::array<std::uint8_t, 8> head{1, 2, 3, 4, 5, 6, 7, 8};
    for (std::size_t i = 0; i <= kN; ++i) {
      payload[i].resize(i == kN ? 100 : kSize - head.size());  // the last one shorter
      for (std::size_t k = 0; k < payload[i].size(); ++k) payload[i][k] = static_cast<std::uint8_t>(i * 31 + k);
      frames.push_back(TxFrame{b->local_addr(), head, payload[i], {}});
    }
    const auto run = [&](const char* what) {
      ASSERT_EQ(a->tx_burst(frames), kN + 1) << what;
      std::vector<std::vector<std::uint8_t>> got;
      NetAddr from;
      for (std::size_t i = 0; i <= kN; ++i) ASSERT_EQ(recv_some(*b, got, from), 1u) << what << " " << i;
      for (std::size_t i = 0; i <= kN; ++i) {
        std::vector<std::uint8_t> want(head.begin(), head.end());
        want.insert(want.end(), payload[i].begin(), payload[i].end());
        EXPECT_EQ(got[i], want) << what << ": datagram " << i << " gso=" << gso;
      }
      EXPECT_EQ(from, a->local_addr());
    };
    run("first run");
    EXPECT_EQ(a->stats().tx_gso_sends, gso ? 1u : 0u) << "the 13 datagrams (52100 bytes) in one send";
    EXPECT_EQ(b->stats().rx_coalesced, 0u) << "the receiver had not seen a burst yet";
    run("second run");
    EXPECT_EQ(a->stats().tx_gso_sends, gso ? 2u : 0u);
    EXPECT_EQ(b->stats().rx_coalesced, gso ? kN + 1 : 0u) << "one receive";
    for (int i = 0; i < 70; ++i) {  // a ping-pong's pattern: nothing there, one datagram, read, the next
      std::vector<std::uint8_t> scratch(70000);
      RxFrame none{{}, scratch.data(), scratch.size(), 0};
      ASSERT_EQ(b->rx_burst({&none, 1}), 0u);
      const TxFrame lone{b->local_addr(), head, {}, {}};
      ASSERT_EQ(a->tx_burst({&lone, 1}), 1u);
      std::vector<std::vector<std::uint8_t>> got;
      NetAddr from;
      ASSERT_EQ(recv_some(*b, got, from), 1u);
    }
    run("run after 70 lone datagrams");
    EXPECT_EQ(b->stats().rx_coalesced, gso ? kN + 1 : 0u) << "GRO was off: the run came datagram by datagram";
  }
}

// A RoCEv2 device's netdev (dont_fragment, udp_gso_pairs): a datagram with a shorter one behind it
// (a reply with the ACK riding behind it) leaves as one GSO send, and the receiver, whose UDP_GRO
// stays on, reads the pair in one receive, both whole and in order, the second with IP ID 1
// (sealed). It stays on after many lone datagrams. udp_gso_pairs=0: the pair goes by sendmmsg and
// arrives datagram by datagram (GRO is on only while datagrams come in bursts).
TEST(UdpNetdev, AReplyAndItsAckGoAsOneGsoSendAndAreReadTogether) {
  const IpIdSeal seal = stand_in_seal;
  for (const bool pairs : {true, false}) {
    NetdevConfig c;
    c.kind = "udp";
    c.port = 7500;
    c.dont_fragment = true;
    c.udp_gso_pairs = pairs;
    std::unique_ptr<Netdev> a, b;
    ASSERT_NO_FATAL_FAILURE(open_pair(c, a, b));
    const std::vector<std::uint8_t> reply(100, 0x11), ack(16, 0x22);
    const std::array<std::uint8_t, 4> tail{1, 2, 3, 4};
    const std::vector<TxFrame> frames{TxFrame{b->local_addr(), reply, {}, tail, 0, seal},
                                      TxFrame{b->local_addr(), ack, {}, tail, 0, seal}};
    const auto send_pair = [&](int round) {
      ASSERT_EQ(a->tx_burst(frames), 2u);
      std::vector<std::vector<std::uint8_t>> got;
      NetAddr from;
      while (got.size() < 2) ASSERT_GE(recv_some(*b, got, from), 1u) << "round " << round;
      ASSERT_EQ(got.size(), 2u);
      std::vector<std::uint8_t> want_reply(reply), want_ack(ack);
      want_reply.insert(want_reply.end(), tail.begin(), tail.end());
      want_ack.insert(want_ack.end(), tail.begin(), tail.end());
      const std::uint32_t fix = pairs ? seal(want_ack.size(), 1) : 0;
      for (std::size_t k = 0; k < 4; ++k)
        want_ack[want_ack.size() - 4 + k] ^= static_cast<std::uint8_t>(fix >> (8 * k));
      EXPECT_EQ(got[0], want_reply) << "round " << round << " pairs=" << pairs;
      EXPECT_EQ(got[1], want_ack) << "round " << round << " pairs=" << pairs;
    };
    send_pair(1);
    EXPECT_EQ(a->stats().tx_gso_sends, pairs ? 1u : 0u);
    EXPECT_EQ(b->stats().rx_coalesced, pairs ? 2u : 0u) << "one receive took both";
    for (int i = 0; i < 70; ++i) {  // lone datagrams, one at a time
      const TxFrame lone{b->local_addr(), reply, {}, {}};
      ASSERT_EQ(a->tx_burst({&lone, 1}), 1u);
      std::vector<std::vector<std::uint8_t>> got;
      NetAddr from;
      ASSERT_EQ(recv_some(*b, got, from), 1u);
    }
    send_pair(2);
    EXPECT_EQ(a->stats().tx_gso_sends, pairs ? 2u : 0u);
    EXPECT_EQ(b->stats().rx_coalesced, pairs ? 4u : 0u) << "GRO stayed on";
  }
}
