// What the raw kernel peers of the benchmark (softrnic_udp_peer, softrnic_tcp_peer;
// docs/performance-peers.md) share: their command line, failure exits, the CPU clock and
// deadlines. Each peer keeps its own wire protocol and socket handling.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace softrnic::bench {

using Clock = std::chrono::steady_clock;

enum class Test : std::uint32_t { kPingpong = 0, kStream = 1 };

struct PeerOptions {
  std::string mode;  // server or client
  int port = -1;
  Test test = Test::kPingpong;
  bool test_set = false;
  std::size_t size = 64;
  std::uint64_t iters = 0, bytes = 0, warmup = 0;
  bool warmup_set = false;
  bool busy = true;
  double timeout_s = 30;
  // udp ping-pong: each message travels with a companion datagram of this many bytes sent behind
  // it in the same sendmmsg, and a side replies once it has both (the pattern of a RoCEv2
  // ping-pong whose Sends ask for their ACK: 20 bytes). 0: none.
  std::size_t companion = 0;
  // ... and the two leave as one UDP GSO send, each side reading with UDP_GRO on, so that they
  // arrive and are read whole (what softrnic's RoCEv2 devices do: udp_gso_pairs).
  bool companion_gso = false;
};

inline const char*& program_name() {
  static const char* name = "peer";
  return name;
}

[[noreturn]] inline void usage(const std::string& why) {
  const char* p = program_name();
  std::fprintf(stderr,
               "%s: %s\n"
               "usage: %s server --port P [--poll busy|block] [--timeout S]\n"
               "       %s client --port P --test pingpong --size N --iters N [--warmup N]\n"
               "                                [--poll busy|block] [--timeout S] [--companion BYTES]\n"
               "                                [--companion-gso 0|1]\n"
               "       %s client --port P --test stream --size N --bytes N [--poll busy|block]\n",
               p, why.c_str(), p, p, p);
  std::exit(2);
}

[[noreturn]] inline void fail(const std::string& why) {
  std::fprintf(stderr, "%s: %s\n", program_name(), why.c_str());
  std::exit(1);
}

[[noreturn]] inline void fail_errno(const char* what) {
  fail(std::string(what) + ": " + std::strerror(errno));
}

inline std::uint64_t parse_u64(std::string_view opt, const char* v) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long x = std::strtoull(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || v[0] == '-') usage(std::string(opt) + ": not a number: " + v);
  return x;
}

// The command line of a peer called `prog`; messages of at most `max_pingpong` bytes in a
// ping-pong, `max_stream` in a stream.
inline PeerOptions parse_peer_options(int argc, char** argv, const char* prog, std::size_t max_pingpong,
                                      std::size_t max_stream) {
  program_name() = prog;
  PeerOptions o;
  if (argc < 2) usage("missing mode (server or client)");
  o.mode = argv[1];
  if (o.mode != "server" && o.mode != "client") usage("mode must be server or client, not " + o.mode);
  for (int i = 2; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (i + 1 >= argc) usage(std::string(a) + " needs a value");
    const char* v = argv[++i];
    if (a == "--port") {
      const auto p = parse_u64(a, v);
      if (p > 65535) usage("--port out of range");
      o.port = static_cast<int>(p);
    } else if (a == "--test") {
      if (std::string_view(v) == "pingpong") {
        o.test = Test::kPingpong;
      } else if (std::string_view(v) == "stream") {
        o.test = Test::kStream;
      } else {
        usage(std::string("--test must be pingpong or stream, not ") + v);
      }
      o.test_set = true;
    } else if (a == "--size") {
      o.size = parse_u64(a, v);
    } else if (a == "--iters") {
      o.iters = parse_u64(a, v);
    } else if (a == "--warmup") {
      o.warmup = parse_u64(a, v);
      o.warmup_set = true;
    } else if (a == "--bytes") {
      o.bytes = parse_u64(a, v);
    } else if (a == "--poll") {
      if (std::string_view(v) == "busy") {
        o.busy = true;
      } else if (std::string_view(v) == "block") {
        o.busy = false;
      } else {
        usage(std::string("--poll must be busy or block, not ") + v);
      }
    } else if (a == "--companion-gso") {
      const auto g = parse_u64(a, v);
      if (g > 1) usage("--companion-gso: 0 or 1");
      o.companion_gso = g == 1;
    } else if (a == "--companion") {
      o.companion = parse_u64(a, v);
      if (o.companion > 1024) usage("--companion: 0..1024 bytes");
    } else if (a == "--timeout") {
      char* end = nullptr;
      o.timeout_s = std::strtod(v, &end);
      if (end == v || *end != '\0' || !(o.timeout_s > 0) || o.timeout_s > 3600) usage("--timeout: 0 < S <= 3600");
    } else {
      usage("unknown option " + std::string(a));
    }
  }
  if (o.port < 0) usage("--port is required");
  if (o.mode == "client") {
    if (o.port == 0) usage("client: --port must be the server's port");
    if (!o.test_set) usage("client: --test is required");
    const std::size_t max = o.test == Test::kPingpong ? max_pingpong : max_stream;
    if (o.size < 1 || o.size > max) usage("--size out of range (1.." + std::to_string(max) + ")");
    if (o.test == Test::kPingpong) {
      if (o.iters < 1 || o.iters > 100'000'000) usage("pingpong: --iters 1..100000000 is required");
      if (!o.warmup_set) o.warmup = std::min<std::uint64_t>(1000, std::max<std::uint64_t>(10, o.iters / 10));
    } else if (o.bytes < 1) {
      usage("stream: --bytes N (N >= 1) is required");
    }
  }
  return o;
}

// CPU time of this process so far (user + system), in microseconds.
inline double cpu_us() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const auto us = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_usec); };
  return us(ru.ru_utime) + us(ru.ru_stime);
}

inline sockaddr_in loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

inline Clock::time_point deadline_in(double s) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace softrnic::bench
