// softrnic_tcp_peer: the raw kernel TCP floor beside softrnic over MPA/TCP (docs/performance-peers.md).
// Plain POSIX TCP sockets on 127.0.0.1, one server and one client process, one connection, TCP_NODELAY:
//   softrnic_tcp_peer server --port P [--poll busy|block] [--timeout S]
//   softrnic_tcp_peer client --port P --test pingpong|stream --size N (--iters N [--warmup N] | --bytes N)
//                            [--poll busy|block] [--timeout S]
// The server prints "READY <port>" once it listens (--port 0: the kernel picks the port), serves one
// connection and one test, prints {"cpu_us":..,"msgs":..} and exits. The client prints exactly one JSON line.
// Messages are framed by length as MPA frames its FPDUs: a 4-byte big-endian payload length, then the
// payload (zero bytes); every frame's length is checked.
// Ping-pong: size-byte messages echoed, round trip per iteration (steady_clock) after a warm-up.
// Stream: messages of size bytes (the last one shorter if bytes is no multiple of size) sent back to back,
// several frames per send() when they are small; TCP's own flow control paces the sender. The server counts
// the payload and sends a final ack once all bytes arrived. MB/s = payload bytes / (first send .. final ack),
// MB = 10^6 bytes.
// --poll busy: every receive (and send) is MSG_DONTWAIT in a spin; block: sleeps in the kernel.
// Every wait is bounded by --timeout (default 30 s); exit 1 on a failure, 2 on bad arguments.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
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

constexpr std::uint32_t kMagic = 0x50545253;            // "SRTP"
constexpr std::size_t kHeader = 4;                      // frame header: payload length, big-endian
constexpr std::size_t kMaxSize = std::size_t{1} << 26;  // 64 MiB per message
constexpr std::size_t kBatchBytes = 256 * 1024;         // stream: frames gathered into one send() up to this
constexpr std::size_t kRecvBytes = 1 << 20;             // stream: server receive buffer

enum class Type : std::uint32_t { kHello = 1, kHelloAck = 2, kFinal = 3 };

// Control messages, sent unframed outside the data phase (hello, hello-ack before it, final after it).
struct Ctl {
  std::uint32_t magic = kMagic;
  Type type = Type::kHello;
  Test test = Test::kPingpong;
  std::uint32_t pad = 0;
  std::uint64_t size = 0;   // hello: message size
  std::uint64_t count = 0;  // hello: echoes (pingpong) or bytes (stream); final: bytes received
  std::uint64_t msgs = 0;   // final: messages received
};

// A connected socket's options: TCP_NODELAY (every message leaves at once, as MPA's FPDUs do) and
// SO_RCVTIMEO/SO_SNDTIMEO as the bound of a blocking receive or send. The buffers stay the kernel's
// (autotuned); setting SO_RCVBUF would switch the autotuning off.
void tune(int fd, double timeout_s) {
  const int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) fail_errno("TCP_NODELAY");
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout_s);
  tv.tv_usec = static_cast<suseconds_t>((timeout_s - std::floor(timeout_s)) * 1e6);
  if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0) fail_errno("SO_RCVTIMEO");
  if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0) fail_errno("SO_SNDTIMEO");
}

bool again(int e) {
  return e == EAGAIN || e == EWOULDBLOCK || e == EINTR;
}

// Receives 1..len bytes before `deadline`: busy spins on MSG_DONTWAIT, block sleeps in recv (each sleep
// bounded by SO_RCVTIMEO). Returns the length, or 0 once the deadline has passed; fails if the peer closed.
std::size_t recv_some(int fd, void* buf, std::size_t len, bool busy, Clock::time_point deadline) {
  for (unsigned spin = 0;; ++spin) {
    const ssize_t n = recv(fd, buf, len, busy ? MSG_DONTWAIT : 0);
    if (n > 0) return static_cast<std::size_t>(n);
    if (n == 0) fail("the peer closed the connection");
    if (!again(errno)) fail_errno("recv");
    if ((!busy || spin % 256 == 0) && Clock::now() >= deadline) return 0;
  }
}

// Receives exactly len bytes before `deadline`; false once it has passed.
bool recv_all(int fd, void* buf, std::size_t len, bool busy, Clock::time_point deadline) {
  auto* p = static_cast<unsigned char*>(buf);
  while (len > 0) {
    const std::size_t n = recv_some(fd, p, len, busy, deadline);
    if (n == 0) return false;
    p += n;
    len -= n;
  }
  return true;
}

// Sends all len bytes before `deadline` (busy: MSG_DONTWAIT in a spin while the send buffer is full).
bool send_all(int fd, const void* buf, std::size_t len, bool busy, Clock::time_point deadline) {
  const auto* p = static_cast<const unsigned char*>(buf);
  for (unsigned spin = 0; len > 0; ++spin) {
    const ssize_t n = send(fd, p, len, MSG_NOSIGNAL | (busy ? MSG_DONTWAIT : 0));
    if (n > 0) {
      p += n;
      len -= static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && !again(errno)) fail_errno("send");
    if ((!busy || spin % 256 == 0) && Clock::now() >= deadline) return false;
  }
  return true;
}

void put_header(unsigned char* p, std::size_t len) {
  const std::uint32_t be = htonl(static_cast<std::uint32_t>(len));
  std::memcpy(p, &be, sizeof be);
}

std::size_t get_header(const unsigned char* p) {
  std::uint32_t be = 0;
  std::memcpy(&be, p, sizeof be);
  return ntohl(be);
}

// One frame of `size` payload bytes into buf (at least kHeader + size bytes): the whole frame, checked.
// Only one frame is ever in flight in a ping-pong, so asking for a full frame never reads past it.
void recv_frame(int fd, unsigned char* buf, std::size_t size, bool busy, double timeout_s, const char* who) {
  if (!recv_all(fd, buf, kHeader + size, busy, deadline_in(timeout_s)))
    fail(std::string(who) + ": no message within the timeout");
  const std::size_t len = get_header(buf);
  if (len != size)
    fail(std::string(who) + ": frame of " + std::to_string(len) + " bytes, expected " + std::to_string(size));
}

void send_ctl(int fd, const Ctl& c, double timeout_s) {
  if (!send_all(fd, &c, sizeof c, false, deadline_in(timeout_s))) fail("send control: timed out");
}

Ctl recv_ctl(int fd, Type want, double timeout_s, const char* who) {
  Ctl c;
  if (!recv_all(fd, &c, sizeof c, false, deadline_in(timeout_s)))
    fail(std::string(who) + ": no control message within the timeout");
  if (c.magic != kMagic || c.type != want) fail(std::string(who) + ": unexpected control message");
  return c;
}

// Listens on the port (printing READY), accepts one client within the timeout and returns its socket.
int accept_client(const Options& o) {
  const int lfd = socket(AF_INET, SOCK_STREAM, 0);
  if (lfd < 0) fail_errno("socket");
  const int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const sockaddr_in a = loopback(o.port);
  if (bind(lfd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) fail_errno("bind 127.0.0.1");
  if (listen(lfd, 1) != 0) fail_errno("listen");
  sockaddr_in self{};
  socklen_t sl = sizeof self;
  getsockname(lfd, reinterpret_cast<sockaddr*>(&self), &sl);
  std::printf("READY %u\n", static_cast<unsigned>(ntohs(self.sin_port)));
  std::fflush(stdout);

  pollfd pfd{lfd, POLLIN, 0};
  const int pr = poll(&pfd, 1, static_cast<int>(o.timeout_s * 1000));
  if (pr < 0) fail_errno("poll");
  if (pr == 0) fail("server: no client within the timeout");
  const int fd = accept(lfd, nullptr, nullptr);
  if (fd < 0) fail_errno("accept");
  close(lfd);
  tune(fd, o.timeout_s);
  return fd;
}

// Echoes frames of `size` until the client's count is reached; returns the count.
std::uint64_t serve_pingpong(int fd, const Options& o, const Ctl& hello, const Ctl& ack, std::size_t size) {
  std::uint64_t msgs = 0;
  send_ctl(fd, ack, o.timeout_s);
  std::vector<unsigned char> buf(kHeader + size);
  while (msgs < hello.count) {
    recv_frame(fd, buf.data(), size, o.busy, o.timeout_s, "server");
    if (!send_all(fd, buf.data(), buf.size(), o.busy, deadline_in(o.timeout_s))) fail("server: echo timed out");
    ++msgs;
  }
  return msgs;
}

// Counts frames in a byte stream that cuts them anywhere: a header (possibly in pieces), then its payload.
struct FrameCounter {
  std::size_t max_payload = 0;
  unsigned char hdr[kHeader] = {};
  std::size_t hdr_have = 0, payload_left = 0;
  std::uint64_t bytes = 0, msgs = 0;

  void take(const unsigned char* p, std::size_t n) {
    for (std::size_t at = 0; at < n;) {
      if (payload_left > 0) {
        const std::size_t step = std::min(payload_left, n - at);
        payload_left -= step;
        bytes += step;
        at += step;
        if (payload_left == 0) ++msgs;
        continue;
      }
      const std::size_t step = std::min(kHeader - hdr_have, n - at);
      std::memcpy(hdr + hdr_have, p + at, step);
      hdr_have += step;
      at += step;
      if (hdr_have == kHeader) {
        payload_left = get_header(hdr);
        hdr_have = 0;
        if (payload_left < 1 || payload_left > max_payload)
          fail("server: bad frame length " + std::to_string(payload_left));
      }
    }
  }
};

// Takes in the client's stream of frames of up to `size`; returns the frames counted.
std::uint64_t serve_stream(int fd, const Options& o, const Ctl& hello, const Ctl& ack, std::size_t size) {
  send_ctl(fd, ack, o.timeout_s);
  std::vector<unsigned char> buf(kRecvBytes);
  FrameCounter got{.max_payload = size};
  while (got.bytes < hello.count) {
    const std::size_t n = recv_some(fd, buf.data(), buf.size(), o.busy, deadline_in(o.timeout_s));
    if (n == 0) fail("server: stream stalled (no data within the timeout)");
    got.take(buf.data(), n);
  }
  if (got.bytes != hello.count || got.payload_left != 0 || got.hdr_have != 0) fail("server: more data than announced");
  Ctl fin{};
  fin.type = Type::kFinal;
  fin.count = got.bytes;
  fin.msgs = got.msgs;
  send_ctl(fd, fin, o.timeout_s);
  return got.msgs;
}

int run_server(const Options& o) {
  const int fd = accept_client(o);
  const Ctl hello = recv_ctl(fd, Type::kHello, o.timeout_s, "server");
  if (hello.size < 1 || hello.size > kMaxSize) fail("server: message size out of range");
  const auto size = static_cast<std::size_t>(hello.size);
  Ctl ack = hello;
  ack.type = Type::kHelloAck;
  const double cpu0 = cpu_us();
  const std::uint64_t msgs =
      hello.test == Test::kPingpong ? serve_pingpong(fd, o, hello, ack, size) : serve_stream(fd, o, hello, ack, size);
  std::printf("{\"cpu_us\":%.1f,\"msgs\":%llu}\n", cpu_us() - cpu0, static_cast<unsigned long long>(msgs));
  std::fflush(stdout);
  // Wait for the client's close, so the final ack is read before the connection goes.
  unsigned char b;
  recv(fd, &b, 1, 0);
  close(fd);
  return 0;
}

double pct(const std::vector<double>& sorted, double p) {
  const auto n = sorted.size();
  auto k = static_cast<std::size_t>(std::ceil(p * static_cast<double>(n)));
  k = std::clamp<std::size_t>(k, 1, n);
  return sorted[k - 1];
}

int run_pingpong(int fd, const Options& o) {
  std::vector<unsigned char> msg(kHeader + o.size, 0), buf(kHeader + o.size);
  put_header(msg.data(), o.size);
  std::vector<double> rtt;
  rtt.reserve(o.iters);
  double cpu0 = 0;
  for (std::uint64_t i = 0; i < o.warmup + o.iters; ++i) {
    if (i == o.warmup) cpu0 = cpu_us();
    const auto t0 = Clock::now();
    if (!send_all(fd, msg.data(), msg.size(), o.busy, deadline_in(o.timeout_s))) fail("client: send timed out");
    recv_frame(fd, buf.data(), o.size, o.busy, o.timeout_s, "client");
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
  // Small frames are gathered: a batch of whole frames, prebuilt, sent with one send() (the kernel
  // segments it); a large frame is a batch of one. A last, shorter frame is sent on its own.
  const std::size_t frame = kHeader + o.size;
  const std::size_t per_batch = std::max<std::size_t>(1, kBatchBytes / frame);
  std::vector<unsigned char> batch(per_batch * frame, 0);
  for (std::size_t i = 0; i < per_batch; ++i) put_header(batch.data() + i * frame, o.size);
  const std::uint64_t full = o.bytes / o.size;
  const std::size_t tail = static_cast<std::size_t>(o.bytes % o.size);
  const double cpu0 = cpu_us();
  const auto t0 = Clock::now();
  std::uint64_t sent = 0;
  while (sent < full) {
    const auto k = static_cast<std::size_t>(std::min<std::uint64_t>(per_batch, full - sent));
    if (!send_all(fd, batch.data(), k * frame, o.busy, deadline_in(o.timeout_s)))
      fail("client: stream stalled (the server stopped reading)");
    sent += k;
  }
  if (tail > 0) {
    std::vector<unsigned char> last(kHeader + tail, 0);
    put_header(last.data(), tail);
    if (!send_all(fd, last.data(), last.size(), o.busy, deadline_in(o.timeout_s))) fail("client: send timed out");
    ++sent;
  }
  // The final ack, waited for as the data was sent (busy: spinning).
  Ctl fin;
  if (!recv_all(fd, &fin, sizeof fin, o.busy, deadline_in(o.timeout_s)))
    fail("client: no final ack within the timeout");
  if (fin.magic != kMagic || fin.type != Type::kFinal) fail("client: unexpected control message");
  if (fin.count != o.bytes || fin.msgs != sent) fail("client: the server counted other bytes or messages");
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu = cpu_us() - cpu0;
  std::printf(
      "{\"mbps\":%.3f,\"msgs_per_s\":%.1f,\"cpu_us_per_msg\":%.3f,\"msgs\":%llu,\"bytes\":%llu,\"secs\":%.6f}\n",
      static_cast<double>(o.bytes) / secs / 1e6, static_cast<double>(sent) / secs, cpu / static_cast<double>(sent),
      static_cast<unsigned long long>(sent), static_cast<unsigned long long>(o.bytes), secs);
  return 0;
}

int run_client(const Options& o) {
  const sockaddr_in srv = loopback(o.port);
  int fd = -1;
  const auto deadline = deadline_in(o.timeout_s);
  for (;;) {  // the server listens before it prints READY; retry a refusal anyway, up to the timeout
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) fail_errno("socket");
    if (connect(fd, reinterpret_cast<const sockaddr*>(&srv), sizeof srv) == 0) break;
    if (errno != ECONNREFUSED && errno != EINTR) fail_errno("connect 127.0.0.1");
    close(fd);
    if (Clock::now() >= deadline) fail("client: the server did not accept within the timeout");
    usleep(10000);
  }
  tune(fd, o.timeout_s);
  Ctl hello;
  hello.test = o.test;
  hello.size = o.size;
  hello.count = o.test == Test::kPingpong ? o.warmup + o.iters : o.bytes;
  send_ctl(fd, hello, o.timeout_s);
  recv_ctl(fd, Type::kHelloAck, o.timeout_s, "client");
  const int rc = o.test == Test::kPingpong ? run_pingpong(fd, o) : run_stream(fd, o);
  std::fflush(stdout);
  close(fd);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_peer_options(argc, argv, "softrnic_tcp_peer", kMaxSize, kMaxSize);
  if (o.companion || o.companion_gso) usage("--companion and --companion-gso are udp ping-pong options");
  return o.mode == "server" ? run_server(o) : run_client(o);
}
