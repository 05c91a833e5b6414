// softrnic_netdev_pingpong: datagram ping-pong through one netdev, with no RNIC and no DAT above
// it: the floor of a netdev (for the dpdk netdev over memif, raw DPDK burst rx/tx plus our
// Ethernet/IPv4/UDP headers and ARP). tools/bench/bench.py puts it beside the RNIC over the same
// port.
//
//   softrnic_netdev_pingpong server SPEC              echoes datagrams until "quit" (60 s idle ends it)
//   softrnic_netdev_pingpong client SPEC IP:PORT SIZE ITERS
//
// SPEC is a netdev configuration in the SOFTRNIC_NETDEV grammar (e.g. "netdev=udp port=6000", or
// "netdev=dpdk ip=10.78.0.1 dpdk_vdev=net_memif0;role=server;socket=/tmp/m.sock"). The server
// prints "READY <ip>:<port>"; the client busy-polls (as the RNIC bench does) and prints one JSON
// line of round-trip percentiles in microseconds.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "softrnic/ia_params.hpp"
#include "softrnic/netdev/netdev.hpp"

using namespace softrnic;
using Clock = std::chrono::steady_clock;

namespace {

double cpu_us() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

// Spins on rx_burst until a datagram arrives or the deadline passes; 0 then.
std::size_t recv_spin(netdev::Netdev& nd, std::vector<std::uint8_t>& buf, netdev::NetAddr& from,
                      Clock::time_point until) {
  for (std::uint64_t n = 0;; ++n) {
    netdev::RxFrame f{{}, buf.data(), buf.size(), 0};
    if (nd.rx_burst({&f, 1}) == 1) {
      from = f.from;
      if (f.data) std::memcpy(buf.data(), f.data, f.len);  // (a udp netdev's GRO receive lends its memory)
      return f.len;
    }
    if ((n & 255) == 0 && Clock::now() >= until) return 0;
  }
}

double pct(std::vector<double>& v, double p) {
  const auto k = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

int server(netdev::Netdev& nd) {
  std::vector<std::uint8_t> buf(nd.max_datagram());
  std::printf("READY %s\n", netdev::to_string(nd.local_addr()).c_str());
  std::fflush(stdout);
  netdev::NetAddr hinted{};
  for (;;) {
    netdev::NetAddr from;
    const std::size_t n = recv_spin(nd, buf, from, Clock::now() + std::chrono::seconds(60));
    if (n == 0) return 1;
    if (!(from == hinted)) {  // as the RNIC does for a connected peer
      if (hinted.port) nd.peer_hint(hinted, false);
      nd.peer_hint(from, true);
      hinted = from;
    }
    const netdev::TxFrame f{from, {buf.data(), n}, {}, {}};
    nd.tx_burst({&f, 1});
    if (n == 4 && std::memcmp(buf.data(), "quit", 4) == 0) {
      // Answer repeated quits for a moment (the answer may be lost), then go.
      const auto until = Clock::now() + std::chrono::milliseconds(300);
      while (Clock::now() < until)
        if (recv_spin(nd, buf, from, until) == 4) nd.tx_burst({&f, 1});
      return 0;
    }
  }
}

int client(netdev::Netdev& nd, const netdev::NetAddr& peer, std::size_t size, std::size_t iters) {
  if (size < 5 || size > nd.max_datagram()) {
    std::fprintf(stderr, "softrnic_netdev_pingpong: size must be 5..%zu\n", nd.max_datagram());
    return 2;
  }
  std::vector<std::uint8_t> buf(nd.max_datagram()), d(size, 0x42);
  std::vector<double> rtt;
  rtt.reserve(iters);
  const std::size_t warmup = 2000;  // over memif the first few hundred round trips are slow
  double cpu0 = 0;
  nd.peer_hint(peer, true);  // as the RNIC does for a connected peer
  for (std::size_t i = 0; i < iters + warmup; ++i) {
    if (i == warmup) cpu0 = cpu_us();
    std::memcpy(d.data(), &i, sizeof(std::uint32_t));
    const auto t0 = Clock::now();
    const netdev::TxFrame f{peer, d, {}, {}};
    nd.tx_burst({&f, 1});
    netdev::NetAddr from;
    std::size_t n = 0;
    // An echo of an earlier ping (after a loss and a resend) is skipped; a lost one is resent.
    for (int attempt = 0; attempt < 20; ++attempt) {
      n = recv_spin(nd, buf, from, Clock::now() + std::chrono::milliseconds(200));
      if (n == size && std::memcmp(buf.data(), d.data(), sizeof(std::uint32_t)) == 0) break;
      if (n == 0) nd.tx_burst({&f, 1});
    }
    if (n != size) {
      std::fprintf(stderr, "softrnic_netdev_pingpong: no echo of ping %zu\n", i);
      return 1;
    }
    if (i >= warmup) rtt.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  const double cpu = cpu_us() - cpu0;
  const std::uint8_t q[4] = {'q', 'u', 'i', 't'};
  const netdev::TxFrame f{peer, {q, 4}, {}, {}};
  nd.tx_burst({&f, 1});
  const auto [mn, mx] = std::minmax_element(rtt.begin(), rtt.end());
  const double lo = *mn, hi = *mx;
  std::printf(
      "{\"median_us\":%.3f,\"p99_us\":%.3f,\"p999_us\":%.3f,\"min_us\":%.3f,\"max_us\":%.3f,\"iters\":%zu,"
      "\"cpu_us_per_msg\":%.3f}\n",
      pct(rtt, 0.5), pct(rtt, 0.99), pct(rtt, 0.999), lo, hi, rtt.size(), cpu / static_cast<double>(iters));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string role = argc > 1 ? argv[1] : "";
  if (argc < 3 || (role == "client" && argc != 6) || (role != "client" && role != "server")) {
    std::fprintf(stderr, "usage: %s server SPEC | client SPEC IP:PORT SIZE ITERS\n", argv[0]);
    return 2;
  }
  netdev::NetdevConfig cfg;
  std::string e;
  if (!params::parse_netdev_spec(argv[2], cfg, e)) {
    std::fprintf(stderr, "softrnic_netdev_pingpong: %s\n", e.c_str());
    return 2;
  }
  auto nd = netdev::make_netdev(cfg, e);
  if (!nd) {
    std::fprintf(stderr, "softrnic_netdev_pingpong: %s\n", e.c_str());
    return 1;
  }
  if (role == "server") return server(*nd);
  const std::string peer_s = argv[3];
  const auto colon = peer_s.rfind(':');
  netdev::NetAddr peer;
  std::uint64_t size = 0, iters = 0;
  if (colon == std::string::npos || !netdev::parse_ipv4(peer_s.substr(0, colon), peer.ip) ||
      !netdev::parse_uint<std::uint16_t>(peer_s.substr(colon + 1), 1, 65535, peer.port) ||
      !netdev::parse_uint(argv[4], 1, 65507, size) || !netdev::parse_uint(argv[5], 1, 100'000'000, iters)) {
    std::fprintf(stderr, "softrnic_netdev_pingpong: bad IP:PORT, SIZE or ITERS\n");
    return 2;
  }
  return client(*nd, peer, size, iters);
}
