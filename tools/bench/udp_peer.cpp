// softrnic_udp_peer: the raw kernel UDP floor beside our `udp` netdev (docs/performance-peers.md).
// Plain POSIX sockets on 127.0.0.1, one server and one client process:
//   softrnic_udp_peer server --port P [--poll busy|block] [--timeout S]
//   softrnic_udp_peer client --port P --test pingpong|stream --size N (--iters N [--warmup N] | --bytes N)
//                            [--poll busy|block] [--timeout S]
// The server prints "READY <port>" once bound (--port 0: the kernel picks the port), serves one test,
// prints {"cpu_us":..,"msgs":..} and exits. The client prints exactly one JSON line.
// Ping-pong: size-byte datagrams echoed, round trip per iteration (steady_clock) after a warm-up.
// --companion B: each message goes with a B-byte datagram behind it in one sendmmsg, and each side
// answers once it has both (a RoCEv2 ping-pong whose Sends ask for their ACKs: B = 20).
// --companion-gso 1: the two leave as one UDP GSO send (B below the message's size), and both
// sides read with UDP_GRO on, which takes the pair in one receive (udp_gso_pairs in softrnic).
// Stream: datagrams of min(size, 65000) bytes sent with sendmmsg under a credit window the server grants
// (sized to its receive buffer, at most 4 MiB), so the kernel does not drop; the server acks as it counts
// and sends a final ack once all bytes arrived. MB/s = bytes / (first send .. final ack), MB = 10^6 bytes.
// Every wait is bounded by --timeout (default 30 s); exit 1 on a failure, 2 on bad arguments.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>  // UDP_SEGMENT, UDP_GRO
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "peer_common.hpp"

namespace {

using namespace softrnic::bench;
using Options = PeerOptions;

constexpr std::uint32_t kMagic = 0x50555253;  // "SRUP"
constexpr std::size_t kMaxDatagram = 65507;   // IPv4 UDP payload limit
constexpr std::size_t kStreamChunk = 65000;
constexpr std::size_t kMaxWindowBytes = 4u << 20;
constexpr unsigned kBatch = 64;

enum class Type : std::uint32_t { kHello = 1, kHelloAck = 2, kAck = 3, kFinal = 4 };

// Control datagrams; data datagrams are all zero bytes, so they never carry the magic.
struct Ctl {
  std::uint32_t magic = kMagic;
  Type type = Type::kHello;
  Test test = Test::kPingpong;
  std::uint32_t pad = 0;     // hello (ping-pong): 1 when the companion goes by GSO
  std::uint64_t size = 0;    // hello: datagram size
  std::uint64_t count = 0;   // hello: echoes (pingpong) or bytes (stream); ack: bytes received
  std::uint64_t msgs = 0;    // ack: datagrams received; hello-ack: ack every this many datagrams;
                             // hello (ping-pong): the companion's size
  std::uint64_t window = 0;  // hello-ack: at most this many datagrams unacknowledged
};

bool as_ctl(const void* p, ssize_t n, Ctl& c) {
  if (n != static_cast<ssize_t>(sizeof(Ctl))) return false;
  std::memcpy(&c, p, sizeof c);
  return c.magic == kMagic;
}

// A UDP socket with large buffers (SO_*BUFFORCE as root, else up to the sysctl limit) and SO_RCVTIMEO as a
// bound for blocking receives.
int make_socket(int port, double timeout_s) {
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) fail_errno("socket");
  const int buf = 16 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf) != 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf) != 0)
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout_s);
  tv.tv_usec = static_cast<suseconds_t>((timeout_s - std::floor(timeout_s)) * 1e6);
  if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0) fail_errno("SO_RCVTIMEO");
  const sockaddr_in a = loopback(port);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) fail_errno("bind 127.0.0.1");
  return fd;
}

int rcvbuf_of(int fd) {
  int v = 0;
  socklen_t l = sizeof v;
  getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, &l);
  return v;
}

// Receives one datagram before `deadline`: busy spins on MSG_DONTWAIT, block sleeps in recv (each sleep bounded
// by SO_RCVTIMEO). Returns the length, or -1 once the deadline has passed.
ssize_t recv_until(int fd, void* buf, std::size_t len, bool busy, Clock::time_point deadline,
                   sockaddr_in* from = nullptr) {
  socklen_t fl = sizeof(sockaddr_in);
  for (unsigned spin = 0;; ++spin) {
    const ssize_t n = recvfrom(fd, buf, len, busy ? MSG_DONTWAIT : 0, reinterpret_cast<sockaddr*>(from),
                               from != nullptr ? &fl : nullptr);
    if (n >= 0) return n;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) fail_errno("recv");
    if ((!busy || spin % 256 == 0) && Clock::now() >= deadline) return -1;
  }
}

// A ping-pong message, and its companion (if any) behind it in the same system call: by
// sendmmsg, or as one GSO send of segments of the message's size (the companion is shorter).
void send_message(int fd, const void* msg, std::size_t n, std::size_t companion, bool gso) {
  static const std::vector<unsigned char> tag(1024, 0xC0);
  if (companion == 0) {
    if (send(fd, msg, n, 0) != static_cast<ssize_t>(n)) fail_errno("send");
    return;
  }
  iovec iov[2] = {{const_cast<void*>(msg), n}, {const_cast<unsigned char*>(tag.data()), companion}};
  if (gso) {
    alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(std::uint16_t))] = {};
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = 2;
    m.msg_control = ctrl;
    m.msg_controllen = sizeof ctrl;
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_UDP;
    c->cmsg_type = UDP_SEGMENT;
    c->cmsg_len = CMSG_LEN(sizeof(std::uint16_t));
    const auto seg = static_cast<std::uint16_t>(n);
    std::memcpy(CMSG_DATA(c), &seg, sizeof seg);
    if (sendmsg(fd, &m, 0) != static_cast<ssize_t>(n + companion)) fail_errno("sendmsg (UDP_SEGMENT)");
    return;
  }
  mmsghdr m[2]{};
  for (int i = 0; i < 2; ++i) {
    m[i].msg_hdr.msg_iov = &iov[i];
    m[i].msg_hdr.msg_iovlen = 1;
  }
  if (sendmmsg(fd, m, 2, 0) != 2) fail_errno("sendmmsg");
}

void send_ctl(int fd, const Ctl& c) {
  if (send(fd, &c, sizeof c, 0) != static_cast<ssize_t>(sizeof c)) fail_errno("send control");
}

// Waits for the client's hello (the first control datagram starts the test) and connects the socket to the client.
Ctl await_hello(int fd, const Options& o, std::vector<unsigned char>& buf) {
  sockaddr_in peer{};
  Ctl hello;
  for (;;) {
    const ssize_t n = recv_until(fd, buf.data(), buf.size(), o.busy, deadline_in(o.timeout_s), &peer);
    if (n < 0) fail("server: no client within the timeout");
    if (as_ctl(buf.data(), n, hello) && hello.type == Type::kHello) break;
  }
  if (connect(fd, reinterpret_cast<const sockaddr*>(&peer), sizeof peer) != 0) fail_errno("connect to client");
  return hello;
}

// How many datagrams a read of `n` bytes took: 2 for a message and its companion coalesced
// (UDP_GRO), else 1.
int pair_read(std::size_t size, std::size_t companion, ssize_t n) {
  return companion && n == static_cast<ssize_t>(size + companion) ? 2 : 1;
}

// UDP_GRO on `fd`: a GSO send from the other side is read whole.
void read_coalesced(int fd) {
  const int one = 1;
  if (setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof one) != 0) fail_errno("setsockopt UDP_GRO");
}

// Echoes datagrams until the client's count is reached; returns the count.
std::uint64_t serve_pingpong(int fd, const Options& o, const Ctl& hello, const Ctl& ack,
                             std::vector<unsigned char>& buf) {
  std::uint64_t msgs = 0;
  int parts = 0;
  send_ctl(fd, ack);
  while (msgs < hello.count) {
    const ssize_t n = recv_until(fd, buf.data(), buf.size(), o.busy, deadline_in(o.timeout_s));
    if (n < 0) fail("server: ping-pong stalled (no datagram within the timeout)");
    Ctl c;
    if (as_ctl(buf.data(), n, c)) {  // a retransmitted hello
      if (c.type == Type::kHello) send_ctl(fd, ack);
      continue;
    }
    // (the message and its companion: both, then the echo; read as one when coalesced)
    parts += pair_read(hello.size, hello.msgs, n);
    if (hello.msgs && parts < 2) continue;
    parts = 0;
    send_message(fd, buf.data(), hello.msgs ? hello.size : static_cast<std::size_t>(n), hello.msgs, hello.pad == 1);
    ++msgs;
  }
  return msgs;
}

// The hello-ack of a stream test, with its credit window and how often the server acks.
Ctl stream_hello_ack(int fd, Ctl ack, std::size_t chunk) {
  // Credit window in datagrams: half the receive buffer at an estimated kernel cost of the datagram plus
  // ~1.3 KiB of skb overhead each, at most 4 MiB of payload; acks at a quarter of the window.
  const std::size_t by_buf = static_cast<std::size_t>(rcvbuf_of(fd)) / 2 / (chunk + 1344);
  const std::size_t window = std::max<std::size_t>(1, std::min({by_buf, kMaxWindowBytes / chunk, std::size_t{8192}}));
  ack.window = window;
  ack.msgs = std::max<std::size_t>(1, window / 4);
  return ack;
}

// Buffers for one recvmmsg batch of stream datagrams.
struct RecvBatch {
  std::vector<std::vector<unsigned char>> bufs;
  std::vector<iovec> iov;
  std::vector<mmsghdr> hdr;

  explicit RecvBatch(std::size_t chunk)
      : bufs(kBatch, std::vector<unsigned char>(chunk + 1)), iov(kBatch), hdr(kBatch) {}

  int receive(int fd, bool busy) {
    for (unsigned i = 0; i < kBatch; ++i) {
      iov[i] = {bufs[i].data(), bufs[i].size()};
      hdr[i] = {};
      hdr[i].msg_hdr.msg_iov = &iov[i];
      hdr[i].msg_hdr.msg_iovlen = 1;
    }
    // block: MSG_WAITFORONE sleeps for the first datagram only (bounded by SO_RCVTIMEO).
    return recvmmsg(fd, hdr.data(), kBatch, busy ? MSG_DONTWAIT : MSG_WAITFORONE, nullptr);
  }
};

// What the server has counted of a stream.
struct StreamCount {
  std::uint64_t bytes = 0, msgs = 0, since_ack = 0;
};

// Counts the data datagrams of a batch of `r`, answering retransmitted hellos with `ack`.
void count_batch(int fd, const RecvBatch& batch, int r, const Ctl& ack, StreamCount& got) {
  for (int i = 0; i < r; ++i) {
    Ctl c;
    if (as_ctl(batch.bufs[static_cast<std::size_t>(i)].data(), batch.hdr[static_cast<std::size_t>(i)].msg_len, c)) {
      if (c.type == Type::kHello) send_ctl(fd, ack);
      continue;
    }
    got.bytes += batch.hdr[static_cast<std::size_t>(i)].msg_len;
    ++got.msgs;
    ++got.since_ack;
  }
}

void send_count(int fd, Type type, const StreamCount& got) {
  Ctl a{};
  a.type = type;
  a.count = got.bytes;
  a.msgs = got.msgs;
  send_ctl(fd, a);
}

// Takes in the client's stream under the credit window; returns the datagrams counted.
std::uint64_t serve_stream(int fd, const Options& o, const Ctl& hello, const Ctl& hello_ack) {
  const std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(hello.size, kStreamChunk));
  const Ctl ack = stream_hello_ack(fd, hello_ack, chunk);
  send_ctl(fd, ack);
  const std::uint64_t ack_every = ack.msgs;
  StreamCount got;
  RecvBatch batch(chunk);
  auto deadline = deadline_in(o.timeout_s);
  while (got.bytes < hello.count) {
    const int r = batch.receive(fd, o.busy);
    if (r <= 0) {
      if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) fail_errno("recvmmsg");
      if (Clock::now() >= deadline) fail("server: stream stalled (datagrams lost or client gone)");
      continue;
    }
    deadline = deadline_in(o.timeout_s);
    count_batch(fd, batch, r, ack, got);
    if (got.since_ack >= ack_every && got.bytes < hello.count) {
      send_count(fd, Type::kAck, got);
      got.since_ack = 0;
    }
  }
  send_count(fd, Type::kFinal, got);
  return got.msgs;
}

int run_server(const Options& o) {
  const int fd = make_socket(o.port, o.timeout_s);
  sockaddr_in self{};
  socklen_t sl = sizeof self;
  getsockname(fd, reinterpret_cast<sockaddr*>(&self), &sl);
  std::printf("READY %u\n", static_cast<unsigned>(ntohs(self.sin_port)));
  std::fflush(stdout);

  std::vector<unsigned char> buf(kMaxDatagram + 1);
  const Ctl hello = await_hello(fd, o, buf);
  if (hello.test == Test::kPingpong && hello.pad == 1) read_coalesced(fd);
  const double cpu0 = cpu_us();
  Ctl ack = hello;
  ack.type = Type::kHelloAck;
  const std::uint64_t msgs =
      hello.test == Test::kPingpong ? serve_pingpong(fd, o, hello, ack, buf) : serve_stream(fd, o, hello, ack);
  std::printf("{\"cpu_us\":%.1f,\"msgs\":%llu}\n", cpu_us() - cpu0, static_cast<unsigned long long>(msgs));
  std::fflush(stdout);
  close(fd);
  return 0;
}

// Sends hello until the server answers (a retransmission every 200 ms, up to the timeout).
Ctl handshake(int fd, const Options& o, std::uint64_t count, std::vector<unsigned char>& buf) {
  Ctl hello;
  hello.test = o.test;
  hello.size = o.size;
  hello.count = count;
  hello.msgs = o.companion;
  hello.pad = o.companion_gso ? 1 : 0;
  const auto deadline = deadline_in(o.timeout_s);
  while (Clock::now() < deadline) {
    send_ctl(fd, hello);
    const auto retry = std::min(deadline, deadline_in(0.2));
    while (Clock::now() < retry) {
      const ssize_t n = recv_until(fd, buf.data(), buf.size(), true, retry);
      Ctl c;
      if (n >= 0 && as_ctl(buf.data(), n, c) && c.type == Type::kHelloAck) return c;
    }
  }
  fail("client: the server did not answer within the timeout");
}

double pct(const std::vector<double>& sorted, double p) {
  const auto n = sorted.size();
  auto k = static_cast<std::size_t>(std::ceil(p * static_cast<double>(n)));
  k = std::clamp<std::size_t>(k, 1, n);
  return sorted[k - 1];
}

int run_pingpong(int fd, const Options& o) {
  std::vector<unsigned char> buf(kMaxDatagram + 1);
  if (o.companion_gso) read_coalesced(fd);
  handshake(fd, o, o.warmup + o.iters, buf);
  std::vector<unsigned char> msg(o.size, 0);
  std::vector<double> rtt;
  rtt.reserve(o.iters);
  double cpu0 = 0;
  for (std::uint64_t i = 0; i < o.warmup + o.iters; ++i) {
    if (i == o.warmup) cpu0 = cpu_us();
    const auto t0 = Clock::now();
    send_message(fd, msg.data(), msg.size(), o.companion, o.companion_gso);
    for (int parts = 0; parts < (o.companion ? 2 : 1);) {
      const ssize_t n = recv_until(fd, buf.data(), buf.size(), o.busy, deadline_in(o.timeout_s));
      if (n < 0) fail("client: no echo within the timeout (datagram lost?)");
      Ctl c;
      if (!as_ctl(buf.data(), n, c)) parts += pair_read(o.size, o.companion, n);  // (a late hello-ack is skipped)
    }
    const auto t1 = Clock::now();
    if (i >= o.warmup) rtt.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  const double cpu = cpu_us() - cpu0;
  std::sort(rtt.begin(), rtt.end());
  std::printf(
      "{\"median_us\":%.3f,\"p99_us\":%.3f,\"p999_us\":%.3f,\"min_us\":%.3f,\"max_us\":%.3f,\"iters\":%llu,"
      "\"cpu_us_per_msg\":%.3f}\n",
      pct(rtt, 0.5), pct(rtt, 0.99), pct(rtt, 0.999), rtt.front(), rtt.back(), static_cast<unsigned long long>(o.iters),
      cpu / static_cast<double>(o.iters));
  return 0;
}

int run_stream(int fd, const Options& o) {
  std::vector<unsigned char> buf(kMaxDatagram + 1);
  const Ctl grant = handshake(fd, o, o.bytes, buf);
  const std::size_t chunk = std::min(o.size, kStreamChunk);
  const std::uint64_t total_msgs = (o.bytes + chunk - 1) / chunk;
  const std::uint64_t window = std::max<std::uint64_t>(1, grant.window);
  std::vector<unsigned char> data(chunk, 0);
  std::vector<iovec> iov(kBatch);
  std::vector<mmsghdr> hdr(kBatch);
  std::uint64_t sent = 0, acked = 0, sent_bytes = 0;
  bool done = false;
  const double cpu0 = cpu_us();
  const auto t0 = Clock::now();
  auto stall = deadline_in(o.timeout_s);
  // Applies one control datagram from the server; returns false for anything else.
  const auto take = [&](const void* p, ssize_t n) {
    Ctl c;
    if (!as_ctl(p, n, c)) return false;
    if (c.type == Type::kAck || c.type == Type::kFinal) {
      if (c.msgs > acked) {
        acked = c.msgs;
        stall = deadline_in(o.timeout_s);
      }
      if (c.type == Type::kFinal) done = true;
    }
    return true;
  };
  while (!done) {
    // Drain acks without waiting.
    for (;;) {
      const ssize_t n = recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
      if (n < 0) break;
      take(buf.data(), n);
    }
    if (done) break;
    const std::uint64_t room =
        sent < total_msgs ? std::min(total_msgs - sent, window - std::min(window, sent - acked)) : 0;
    if (room > 0) {
      const unsigned k = static_cast<unsigned>(std::min<std::uint64_t>(room, kBatch));
      for (unsigned i = 0; i < k; ++i) {
        const std::uint64_t left = o.bytes - sent_bytes - std::uint64_t{i} * chunk;
        iov[i] = {data.data(), static_cast<std::size_t>(std::min<std::uint64_t>(left, chunk))};
        hdr[i] = {};
        hdr[i].msg_hdr.msg_iov = &iov[i];
        hdr[i].msg_hdr.msg_iovlen = 1;
      }
      const int r = sendmmsg(fd, hdr.data(), k, 0);
      if (r < 0) {
        if (errno != EAGAIN && errno != ENOBUFS && errno != EINTR) fail_errno("sendmmsg");
      } else {
        for (int i = 0; i < r; ++i) sent_bytes += iov[static_cast<std::size_t>(i)].iov_len;
        sent += static_cast<std::uint64_t>(r);
      }
    } else {
      // Window full (or all sent): wait for an ack.
      const ssize_t n = recv_until(fd, buf.data(), buf.size(), o.busy, stall);
      if (n >= 0) take(buf.data(), n);
    }
    if (Clock::now() >= stall)
      fail("client: stream stalled (no ack within the timeout: datagrams dropped by the kernel?)");
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu = cpu_us() - cpu0;
  std::printf(
      "{\"mbps\":%.3f,\"msgs_per_s\":%.1f,\"cpu_us_per_msg\":%.3f,\"msgs\":%llu,\"bytes\":%llu,\"secs\":%.6f}\n",
      static_cast<double>(o.bytes) / secs / 1e6, static_cast<double>(sent) / secs, cpu / static_cast<double>(sent),
      static_cast<unsigned long long>(sent), static_cast<unsigned long long>(sent_bytes), secs);
  return 0;
}

int run_client(const Options& o) {
  const int fd = make_socket(0, o.timeout_s);
  const sockaddr_in srv = loopback(o.port);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&srv), sizeof srv) != 0) fail_errno("connect 127.0.0.1");
  const int rc = o.test == Test::kPingpong ? run_pingpong(fd, o) : run_stream(fd, o);
  std::fflush(stdout);
  close(fd);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_peer_options(argc, argv, "softrnic_udp_peer", kMaxDatagram, std::size_t{1} << 30);
  if (o.companion_gso && (o.companion == 0 || o.companion >= o.size))
    usage("--companion-gso 1 needs a --companion shorter than --size (the GSO segment is the message)");
  return o.mode == "server" ? run_server(o) : run_client(o);
}
