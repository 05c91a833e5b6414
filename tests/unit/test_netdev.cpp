// netdev backends: address parsing, loopback delivery, udp port probing and bursts.
#include <gtest/gtest.h>

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

namespace {

std::size_t recv_some(Netdev& d, std::vector<std::vector<std::uint8_t>>& got, NetAddr& from, int max_wait_ms = 2000) {
  std::vector<std::uint8_t> buf(70000);
  RxFrame f{{}, buf.data(), buf.size(), 0};
  for (int i = 0; i < max_wait_ms; ++i) {
    if (d.rx_burst({&f, 1}) == 1) {
      got.emplace_back(buf.begin(), buf.begin() + static_cast<long>(f.len));
      from = f.from;
      return 1;
    }
    d.wait_rx(std::chrono::milliseconds(1));
  }
  return 0;
}

void exchange(const char* kind, std::uint16_t port) {
  NetdevConfig c;
  c.kind = kind;
  c.port = port;
  std::string e;
  auto a = make_netdev(c, e);
  ASSERT_TRUE(a) << e;
  auto b = make_netdev(c, e);
  ASSERT_TRUE(b) << e;
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
