// A netdev-level ping between two processes (no RNIC, no DAT), for the dpdk backend's tests.
//
//   netdev_ping server SPEC                      echoes every datagram until "quit"
//   netdev_ping client SPEC PEER_IP:PORT [N [B]] N pings (default 200) of sizes 1..max_datagram,
//                                                checked byte by byte, then a one-way burst of B
//                                                max-size datagrams (default 20000)
//
// SPEC is a netdev configuration in the SOFTRNIC_NETDEV grammar ("env": SOFTRNIC_NETDEV's value). Prints "netdev_ping:
// ready" (server) and "netdev_ping: PASSED" (client, and the server after "quit").
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "softrnic/ia_params.hpp"
#include "softrnic/netdev/netdev.hpp"

using namespace softrnic;
using Clock = std::chrono::steady_clock;

namespace {

std::size_t recv_one(netdev::Netdev& nd, std::vector<std::uint8_t>& buf, netdev::NetAddr& from,
                     std::chrono::milliseconds timeout) {
  const auto until = Clock::now() + timeout;
  for (;;) {
    netdev::RxFrame f{{}, buf.data(), buf.size(), 0};
    if (nd.rx_burst({&f, 1}) == 1) {
      from = f.from;
      if (f.data) std::memcpy(buf.data(), f.data, f.len);  // (a udp netdev's GRO receive lends its memory)
      return f.len;
    }
    const auto now = Clock::now();
    if (now >= until) return 0;
    nd.wait_rx(std::chrono::duration_cast<std::chrono::microseconds>(until - now));
  }
}

void fill(std::vector<std::uint8_t>& d, std::uint32_t seq, std::size_t len) {
  d.resize(len);
  for (std::size_t i = 0; i < len; ++i) d[i] = static_cast<std::uint8_t>(seq * 131 + i * 7);
  if (len >= 4) std::memcpy(d.data(), &seq, 4);
}

int server(netdev::Netdev& nd) {
  std::vector<std::uint8_t> buf(nd.max_datagram());
  std::printf("netdev_ping: ready at %s, max datagram %zu\n", netdev::to_string(nd.local_addr()).c_str(),
              nd.max_datagram());
  std::fflush(stdout);
  std::uint64_t echoed = 0, burst = 0;
  for (;;) {
    netdev::NetAddr from;
    const std::size_t n = recv_one(nd, buf, from, std::chrono::seconds(60));
    if (n == 0) {
      std::printf("netdev_ping: FAILED: server idle for 60 s\n");
      return 1;
    }
    if (n == 4 && std::memcmp(buf.data(), "quit", 4) == 0) {
      const std::string r = "done " + std::to_string(burst);
      const netdev::TxFrame f{from, {reinterpret_cast<const std::uint8_t*>(r.data()), r.size()}, {}, {}};
      nd.tx_burst({&f, 1});
      // The answer may be lost (or, on memif, torn down with the port if we exit at once): answer
      // repeated quits for a while.
      const auto until = Clock::now() + std::chrono::milliseconds(1500);
      while (Clock::now() < until) {
        netdev::NetAddr q;
        const std::size_t m = recv_one(nd, buf, q, std::chrono::milliseconds(100));
        if (m == 4 && std::memcmp(buf.data(), "quit", 4) == 0) nd.tx_burst({&f, 1});
      }
      std::printf("netdev_ping: server echoed %llu, counted %llu burst datagrams\nnetdev_ping: PASSED\n",
                  static_cast<unsigned long long>(echoed), static_cast<unsigned long long>(burst));
      return 0;
    }
    if (n >= 1 && buf[0] == 'B' && n == nd.max_datagram()) {
      ++burst;
      continue;
    }
    const netdev::TxFrame f{from, {buf.data(), n}, {}, {}};
    nd.tx_burst({&f, 1});
    ++echoed;
  }
}

int client(netdev::Netdev& nd, const netdev::NetAddr& peer, int count, int burst_count) {
  const std::size_t max = nd.max_datagram();
  std::vector<std::uint8_t> buf(max), d;
  std::vector<double> rtt;
  for (int i = 0; i < count; ++i) {
    const auto seq = static_cast<std::uint32_t>(i);
    // sizes: 1..max, including the edges
    std::size_t len = i == 0 ? max : i == 1 ? 1 : 4 + (static_cast<std::size_t>(i) * 997) % (max - 4);
    if (len == 4) len = 5;  // 4-byte "quit" is the end marker
    fill(d, seq, len);
    bool ok = false;
    for (int attempt = 0; attempt < 10 && !ok; ++attempt) {
      const auto t0 = Clock::now();
      const netdev::TxFrame f{peer, d, {}, {}};
      nd.tx_burst({&f, 1});
      netdev::NetAddr from;
      for (;;) {
        const std::size_t n = recv_one(nd, buf, from, std::chrono::milliseconds(1000));
        if (n == 0) break;
        if (n == len && std::equal(d.begin(), d.end(), buf.begin())) {
          rtt.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
          ok = from == peer;
          if (!ok)
            std::printf("netdev_ping: echo from %s, expected %s\n", netdev::to_string(from).c_str(),
                        netdev::to_string(peer).c_str());
          break;
        }
      }
    }
    if (!ok) {
      std::printf("netdev_ping: FAILED: no correct echo of ping %d (%zu bytes)\n", i, len);
      return 1;
    }
  }
  std::sort(rtt.begin(), rtt.end());
  // one-way burst of max-size datagrams
  const int kBurst = burst_count;
  fill(d, 0, max);
  d[0] = 'B';
  const auto t0 = Clock::now();
  for (int i = 0; i < kBurst; i += 32) {
    netdev::TxFrame f[32];
    for (auto& x : f) x = {peer, d, {}, {}};
    nd.tx_burst({f, static_cast<std::size_t>(std::min(32, kBurst - i))});
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const std::string quit = "quit";
  std::string done;
  for (int attempt = 0; attempt < 10 && done.empty(); ++attempt) {
    const netdev::TxFrame f{peer, {reinterpret_cast<const std::uint8_t*>(quit.data()), 4}, {}, {}};
    nd.tx_burst({&f, 1});
    netdev::NetAddr from;
    const std::size_t n = recv_one(nd, buf, from, std::chrono::milliseconds(500));
    if (n > 5 && std::memcmp(buf.data(), "done ", 5) == 0) done.assign(reinterpret_cast<char*>(buf.data()) + 5, n - 5);
  }
  const auto st = nd.stats();
  std::printf("netdev_ping: %d pings of 1..%zu bytes echoed intact, rtt p50 %.1f us p99 %.1f us\n", count, max,
              rtt[rtt.size() / 2], rtt[rtt.size() * 99 / 100]);
  std::printf("netdev_ping: burst %d x %zu bytes sent in %.3f s (%.0f datagrams/s offered), server counted %s\n",
              kBurst, max, secs, secs > 0 ? kBurst / secs : 0.0, done.empty() ? "?" : done.c_str());
  std::printf("netdev_ping: client tx %llu frames, %llu dropped; rx %llu frames\n",
              static_cast<unsigned long long>(st.tx_frames), static_cast<unsigned long long>(st.tx_dropped),
              static_cast<unsigned long long>(st.rx_frames));
  if (done.empty()) {
    std::printf("netdev_ping: FAILED: server did not answer quit\n");
    return 1;
  }
  std::printf("netdev_ping: PASSED\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || (std::string(argv[1]) != "server" && std::string(argv[1]) != "client") ||
      (std::string(argv[1]) == "client" && argc < 4)) {
    std::fprintf(stderr, "usage: netdev_ping server SPEC | client SPEC PEER_IP:PORT [N [B]]\n");
    return 2;
  }
  netdev::NetdevConfig cfg;
  std::string err;
  const char* spec = std::string(argv[2]) == "env" ? std::getenv("SOFTRNIC_NETDEV") : argv[2];
  if (!spec) {
    std::printf("netdev_ping: SPEC 'env' but SOFTRNIC_NETDEV is not set\n");
    return 2;
  }
  if (!params::parse_netdev_spec(spec, cfg, err)) {
    std::printf("netdev_ping: bad spec: %s\n", err.c_str());
    return 2;
  }
  auto nd = netdev::make_netdev(cfg, err);
  if (!nd) {
    std::printf("netdev_ping: FAILED to open: %s\n", err.c_str());
    return 1;
  }
  if (std::string(argv[1]) == "server") return server(*nd);
  const std::string peer = argv[3];
  const auto colon = peer.find(':');
  netdev::NetAddr pa;
  if (colon == std::string::npos || !netdev::parse_ipv4(peer.substr(0, colon), pa.ip) ||
      !netdev::parse_uint<std::uint16_t>(peer.substr(colon + 1), 1, 65535, pa.port)) {
    std::printf("netdev_ping: bad peer '%s'\n", peer.c_str());
    return 2;
  }
  return client(*nd, pa, argc > 4 ? std::max(1, std::atoi(argv[4])) : 200,
                argc > 5 ? std::max(0, std::atoi(argv[5])) : 20000);
}
