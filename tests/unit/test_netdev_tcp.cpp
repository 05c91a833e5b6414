// The tcp stream netdev (make_tcp_netdev): real kernel TCP connections on 127.0.0.1 with
// ephemeral ports: connection set-up and its events, bytes both ways, short writes and writable
// events, level-triggered readable, orderly and abortive ends, refused connects, wake(), clear
// errors, socket options (read back from the kernel through the process's own descriptors) and
// the pcap the backend synthesizes, decoded by tshark as MPA (skipped without tshark).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "softrnic/netdev/netdev.hpp"

using namespace softrnic::netdev;
using namespace std::chrono_literals;

namespace {

using Bytes = std::vector<std::uint8_t>;
using Clock = std::chrono::steady_clock;
constexpr std::uint32_t kLo = 0x7F000001;

std::unique_ptr<StreamNetdev> make(const std::string& pcap = "", std::size_t socket_buffer = 8 << 20) {
  NetdevConfig c;
  c.ip = "127.0.0.1";
  c.pcap = pcap;
  c.socket_buffer = socket_buffer;
  std::string e;
  auto d = make_tcp_netdev(c, e);
  EXPECT_TRUE(d) << e;
  return d;
}

std::string kind_name(StreamEventKind k) {
  switch (k) {
    case StreamEventKind::accepted: return "accepted";
    case StreamEventKind::connected: return "connected";
    case StreamEventKind::connect_failed: return "connect_failed";
    case StreamEventKind::readable: return "readable";
    case StreamEventKind::writable: return "writable";
    case StreamEventKind::closed: return "closed";
  }
  return "?";
}

// Drives one or more netdevs from this thread and logs their events (a readable already logged
// and not yet taken is not logged twice).
class Loop {
 public:
  explicit Loop(std::vector<StreamNetdev*> nds) : nds_(std::move(nds)) {}

  void step() {
    bool fresh = false;
    for (std::size_t i = 0; i < nds_.size(); ++i) {
      std::array<StreamEvent, 16> ev;
      const std::size_t n = nds_[i]->events(ev);
      for (std::size_t k = 0; k < n; ++k) {
        const StreamEvent& e = ev[k];
        if (e.kind == StreamEventKind::readable && std::any_of(log.begin(), log.end(), [&](const auto& l) {
              return l.first == i && l.second.kind == e.kind && l.second.id == e.id;
            }))
          continue;
        log.emplace_back(i, e);
        fresh = true;
      }
    }
    if (!fresh) nds_[turn_++ % nds_.size()]->wait_rx(nds_.size() == 1 ? 20ms : 1ms);
  }

  // The first event of netdev `i` that `pred` accepts, taken from the log; nullopt after `timeout`.
  std::optional<StreamEvent> wait(std::size_t i, const std::function<bool(const StreamEvent&)>& pred,
                                  std::chrono::milliseconds timeout = 5000ms) {
    const auto end = Clock::now() + timeout;
    for (;;) {
      for (auto it = log.begin(); it != log.end(); ++it) {
        if (it->first != i || !pred(it->second)) continue;
        const StreamEvent e = it->second;
        log.erase(it);
        return e;
      }
      if (Clock::now() > end) return std::nullopt;
      step();
    }
  }
  std::optional<StreamEvent> wait(std::size_t i, StreamEventKind k, StreamId id = 0,
                                  std::chrono::milliseconds timeout = 5000ms) {
    return wait(
        i, [&](const StreamEvent& e) { return e.kind == k && (id == 0 || e.id == id); }, timeout);
  }
  // Runs for `d` and says whether netdev `i` reported an event `pred` accepts meanwhile.
  bool seen_within(std::size_t i, const std::function<bool(const StreamEvent&)>& pred, std::chrono::milliseconds d) {
    return wait(i, pred, d).has_value();
  }

  std::vector<std::pair<std::size_t, StreamEvent>> log;

 private:
  std::vector<StreamNetdev*> nds_;
  std::size_t turn_ = 0;
};

struct Pair {
  StreamId client = 0, server = 0;
  std::uint16_t port = 0;
  NetAddr client_addr{};  // as the accepted event names it
};

// Netdev `ci` of the loop connects to a port netdev `si` listens on (both may be the same).
Pair open_pair(Loop& loop, StreamNetdev& c, std::size_t ci, StreamNetdev& s, std::size_t si) {
  Pair p;
  std::string e;
  p.port = s.listen(0, e);
  EXPECT_NE(p.port, 0) << e;
  p.client = c.connect({kLo, p.port}, e);
  EXPECT_NE(p.client, 0u) << e;
  const auto con = loop.wait(ci, StreamEventKind::connected, p.client);
  const auto acc = loop.wait(si, StreamEventKind::accepted);
  EXPECT_TRUE(con && acc);
  if (!con || !acc) return p;
  p.server = acc->id;
  p.client_addr = acc->peer;
  return p;
}

std::string errno_name(int e) {
  return std::to_string(e) + " (" + std::strerror(e) + ")";
}

// Reads what `id` has now; -1 when it ended.
std::ptrdiff_t read_all(StreamNetdev& d, StreamId id, Bytes& into) {
  std::array<std::uint8_t, 65536> buf;
  std::ptrdiff_t total = 0;
  for (;;) {
    const std::ptrdiff_t r = d.read(id, buf);
    if (r < 0) return -1;
    if (r == 0) return total;
    into.insert(into.end(), buf.begin(), buf.begin() + r);
    total += r;
  }
}

// Writes all of `data` through the loop (want_writable after a short write).
bool write_all(Loop& loop, std::size_t i, StreamNetdev& d, StreamId id, std::span<const std::uint8_t> data) {
  std::size_t at = 0;
  while (at < data.size()) {
    const std::span<const std::uint8_t> piece[] = {data.subspan(at)};
    const std::ptrdiff_t r = d.write(id, piece);
    if (r < 0) return false;
    at += static_cast<std::size_t>(r);
    if (at == data.size()) break;
    d.want_writable(id);
    if (!loop.wait(i, StreamEventKind::writable, id)) return false;
  }
  return true;
}

// The process's TCP/IPv4 socket with this local port and peer port (0: a listening socket); -1.
int find_socket(std::uint16_t local_port, std::uint16_t peer_port) {
  for (const auto& ent : std::filesystem::directory_iterator("/proc/self/fd")) {
    int fd = -1;
    try {
      fd = std::stoi(ent.path().filename().string());
    } catch (...) {
      continue;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    int v = 0;
    socklen_t l = sizeof v;
    if (::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &l) != 0 || v != AF_INET) continue;
    l = sizeof v;
    if (::getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v, &l) != 0 || v != IPPROTO_TCP) continue;
    sockaddr_in a{};
    socklen_t al = sizeof a;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &al) != 0 || ntohs(a.sin_port) != local_port) continue;
    if (peer_port == 0) {
      l = sizeof v;
      if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &l) == 0 && v == 1) return fd;
      continue;
    }
    al = sizeof a;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &al) == 0 && ntohs(a.sin_port) == peer_port) return fd;
  }
  return -1;
}

int int_opt(int fd, int level, int name) {
  int v = -1;
  socklen_t l = sizeof v;
  if (::getsockopt(fd, level, name, &v, &l) != 0) return -1;
  return v;
}

std::string tmp_path(const std::string& name) {
  return "/tmp/softrnic_test_tcp_" + std::to_string(::getpid()) + "_" + name;
}

}  // namespace

TEST(TcpNetdev, ListenConnectAcceptReportBothEnds) {
  auto d = make();
  ASSERT_TRUE(d);
  EXPECT_EQ(d->local_ip(), kLo);
  Loop loop({d.get()});
  std::string e;
  const std::uint16_t port = d->listen(0, e);
  ASSERT_NE(port, 0) << e;
  const StreamId cid = d->connect({kLo, port}, e);
  ASSERT_NE(cid, 0u) << e;
  const auto con = loop.wait(0, StreamEventKind::connected, cid);
  ASSERT_TRUE(con);
  EXPECT_EQ(con->peer, (NetAddr{kLo, port}));
  const auto acc = loop.wait(0, StreamEventKind::accepted);
  ASSERT_TRUE(acc);
  EXPECT_NE(acc->id, 0u);
  EXPECT_NE(acc->id, cid);
  EXPECT_EQ(acc->local_port, port);
  EXPECT_EQ(acc->peer.ip, kLo);
  EXPECT_NE(acc->peer.port, 0);
  EXPECT_NE(acc->peer.port, port);
  // The accepted peer is the connecting socket: bound to 127.0.0.1, connected to the port.
  const int cfd = find_socket(acc->peer.port, port);
  ASSERT_GE(cfd, 0) << "no socket of ours goes from port " << acc->peer.port << " to " << port;
  EXPECT_GE(d->mss(cid), 536u);
  EXPECT_LE(d->mss(cid), 65535u);
  EXPECT_EQ(d->mss(cid), static_cast<std::size_t>(int_opt(cfd, IPPROTO_TCP, TCP_MAXSEG)));
  EXPECT_EQ(d->mss(123456), 1460u) << "unknown id: the fallback";

  // A second listening port: its connections name it.
  const std::uint16_t port2 = d->listen(0, e);
  ASSERT_NE(port2, 0) << e;
  ASSERT_NE(port2, port);
  const StreamId cid2 = d->connect({kLo, port2}, e);
  ASSERT_NE(cid2, 0u) << e;
  const auto acc2 = loop.wait(0, StreamEventKind::accepted);
  ASSERT_TRUE(acc2);
  EXPECT_EQ(acc2->local_port, port2);
  EXPECT_TRUE(loop.wait(0, StreamEventKind::connected, cid2));
  const std::set<StreamId> ids{cid, acc->id, cid2, acc2->id};
  EXPECT_EQ(ids.size(), 4u) << "ids are never reused";
  // Nothing else happened: no readable, no closed.
  for (int i = 0; i < 5; ++i) loop.step();
  for (const auto& l : loop.log) ADD_FAILURE() << "unexpected " << kind_name(l.second.kind) << " on " << l.second.id;
}

TEST(TcpNetdev, NoDelayOnBothEndsAndReuseAddressOnListeners) {
  auto d = make();
  ASSERT_TRUE(d);
  Loop loop({d.get()});
  const Pair p = open_pair(loop, *d, 0, *d, 0);
  ASSERT_NE(p.server, 0u);
  const int cfd = find_socket(p.client_addr.port, p.port);
  const int sfd = find_socket(p.port, p.client_addr.port);
  const int lfd = find_socket(p.port, 0);
  ASSERT_GE(cfd, 0);
  ASSERT_GE(sfd, 0);
  ASSERT_GE(lfd, 0);
  EXPECT_EQ(int_opt(cfd, IPPROTO_TCP, TCP_NODELAY), 1) << "connected socket";
  EXPECT_EQ(int_opt(sfd, IPPROTO_TCP, TCP_NODELAY), 1) << "accepted socket";
  EXPECT_EQ(int_opt(lfd, SOL_SOCKET, SO_REUSEADDR), 1) << "listening socket";
  // Every descriptor is non-blocking.
  for (const int fd : {cfd, sfd, lfd}) EXPECT_NE(::fcntl(fd, F_GETFL) & O_NONBLOCK, 0) << fd;
}

// Keepalive as the MPA wire asks for it: SO_KEEPALIVE with idle/interval/count in seconds
// (rounded up), and a user timeout bounding unacknowledged data; idle 0 turns it off.
TEST(TcpNetdev, KeepaliveSetsTheSocketOptions) {
  auto d = make();
  ASSERT_TRUE(d);
  Loop loop({d.get()});
  const Pair p = open_pair(loop, *d, 0, *d, 0);
  ASSERT_NE(p.server, 0u);
  const int cfd = find_socket(p.client_addr.port, p.port);
  ASSERT_GE(cfd, 0);
  EXPECT_EQ(int_opt(cfd, SOL_SOCKET, SO_KEEPALIVE), 0);
  ASSERT_TRUE(d->keepalive(p.client, 5000ms, 1500ms, 5));
  EXPECT_EQ(int_opt(cfd, SOL_SOCKET, SO_KEEPALIVE), 1);
  EXPECT_EQ(int_opt(cfd, IPPROTO_TCP, TCP_KEEPIDLE), 5);
  EXPECT_EQ(int_opt(cfd, IPPROTO_TCP, TCP_KEEPINTVL), 2);
  EXPECT_EQ(int_opt(cfd, IPPROTO_TCP, TCP_KEEPCNT), 5);
  EXPECT_EQ(int_opt(cfd, IPPROTO_TCP, TCP_USER_TIMEOUT), 5000 + 1500 * 5);
  ASSERT_TRUE(d->keepalive(p.client, 0ms, 1000ms, 5));
  EXPECT_EQ(int_opt(cfd, SOL_SOCKET, SO_KEEPALIVE), 0);
  EXPECT_FALSE(d->keepalive(987654, 1000ms, 1000ms, 1)) << "unknown id";
}

TEST(TcpNetdev, BytesFlowBothWaysInOrder) {
  auto d = make();
  ASSERT_TRUE(d);
  Loop loop({d.get()});
  const Pair p = open_pair(loop, *d, 0, *d, 0);
  ASSERT_NE(p.server, 0u);
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  constexpr std::size_t kBytes = 3 << 20;
  struct Dir {
    StreamId from, to;
    Bytes src, got;
    std::size_t sent = 0;
    bool waiting = false;  // for a writable event
  };
  Dir dirs[2] = {{p.client, p.server, {}, {}, 0, false}, {p.server, p.client, {}, {}, 0, false}};
  for (auto& dir : dirs) {
    dir.src.resize(kBytes);
    for (auto& b : dir.src) b = static_cast<std::uint8_t>(rng());
  }
  std::uint64_t writes = 0, reads = 0, zero_reads = 0;
  Bytes buf(70000);
  const auto end = Clock::now() + 30s;
  while ((dirs[0].got.size() < kBytes || dirs[1].got.size() < kBytes) && Clock::now() < end) {
    for (auto& dir : dirs) {
      if (dir.waiting || dir.sent == kBytes) continue;
      // 1 to 4 pieces of 0 to 20000 bytes, consecutive slices of the source.
      std::vector<std::span<const std::uint8_t>> pieces;
      std::size_t at = dir.sent;
      const int k = 1 + static_cast<int>(rng() % 4);
      for (int i = 0; i < k && at < kBytes; ++i) {
        const std::size_t n = std::min<std::size_t>(rng() % 20001, kBytes - at);
        pieces.emplace_back(dir.src.data() + at, n);
        at += n;
      }
      const std::ptrdiff_t r = d->write(dir.from, pieces);
      ASSERT_GE(r, 0);
      if (r > 0) ++writes;
      dir.sent += static_cast<std::size_t>(r);
      if (dir.sent < at) {
        d->want_writable(dir.from);
        dir.waiting = true;
      }
    }
    loop.step();
    for (auto it = loop.log.begin(); it != loop.log.end();) {
      const StreamEvent e = it->second;
      it = loop.log.erase(it);
      Dir* dir = nullptr;
      for (auto& x : dirs)
        if ((e.kind == StreamEventKind::readable ? x.to : x.from) == e.id) dir = &x;
      ASSERT_TRUE(dir) << kind_name(e.kind) << " for unknown id " << e.id;
      if (e.kind == StreamEventKind::writable) {
        EXPECT_TRUE(dir->waiting) << "a writable event nobody asked for";
        dir->waiting = false;
      } else {
        ASSERT_EQ(e.kind, StreamEventKind::readable);
        for (;;) {
          const std::size_t want = 1 + rng() % buf.size();
          const std::ptrdiff_t r = d->read(e.id, std::span(buf).first(want));
          ASSERT_GE(r, 0);
          if (r == 0) {
            ++zero_reads;
            break;
          }
          ++reads;
          dir->got.insert(dir->got.end(), buf.begin(), buf.begin() + r);
        }
      }
    }
  }
  ASSERT_EQ(dirs[0].got.size(), kBytes);
  ASSERT_EQ(dirs[1].got.size(), kBytes);
  EXPECT_TRUE(dirs[0].got == dirs[0].src) << "client to server: bytes differ";
  EXPECT_TRUE(dirs[1].got == dirs[1].src) << "server to client: bytes differ";
  EXPECT_GT(zero_reads, 0u);
  const NetdevStats s = d->stats();
  EXPECT_EQ(s.tx_bytes, 2 * kBytes);
  EXPECT_EQ(s.rx_bytes, 2 * kBytes);
  EXPECT_EQ(s.tx_frames, writes) << "write() calls that moved bytes";
  EXPECT_EQ(s.rx_frames, reads) << "read() calls that moved bytes";
}

TEST(TcpNetdev, LargeTransferGoesThroughShortWritesAndWritableEvents) {
  // Small socket buffers (forced when root), so the 8 MiB cannot be taken at once.
  auto d = make("", 128 << 10);
  ASSERT_TRUE(d);
  Loop loop({d.get()});
  const Pair p = open_pair(loop, *d, 0, *d, 0);
  ASSERT_NE(p.server, 0u);
  constexpr std::size_t kBytes = 8 << 20;
  Bytes src(kBytes);
  std::mt19937 rng(7);
  for (auto& b : src) b = static_cast<std::uint8_t>(rng());
  Bytes got;
  got.reserve(kBytes);
  std::size_t sent = 0, short_writes = 0, wants = 0, writables = 0;
  bool waiting = false;
  const std::uint8_t hdr[4] = {0xDE, 0xAD, 0xBE, 0xEF};
  Bytes expect;  // what the stream carries: each write's header, then its slice
  expect.reserve(kBytes + kBytes / 1000);
  std::size_t next_hdr = 0;  // bytes of the current header still to send
  const auto end = Clock::now() + 60s;
  while (Clock::now() < end) {
    if (!waiting && sent < kBytes) {
      // A 4-byte header (whatever of it is left) and up to 256 KiB of the source: a gathered write.
      const std::size_t body = std::min<std::size_t>(256 << 10, kBytes - sent);
      if (next_hdr == 0) next_hdr = 4;
      const std::span<const std::uint8_t> pieces[] = {std::span(hdr).last(next_hdr),
                                                      std::span(src).subspan(sent, body)};
      const std::ptrdiff_t r = d->write(p.client, pieces);
      ASSERT_GE(r, 0);
      auto taken = static_cast<std::size_t>(r);
      const std::size_t h = std::min(taken, next_hdr);
      expect.insert(expect.end(), hdr + (4 - next_hdr), hdr + (4 - next_hdr) + h);
      next_hdr -= h;
      taken -= h;
      expect.insert(expect.end(), src.begin() + static_cast<std::ptrdiff_t>(sent),
                    src.begin() + static_cast<std::ptrdiff_t>(sent + taken));
      sent += taken;
      if (static_cast<std::size_t>(r) < 4 + body) {
        ++short_writes;
        ++wants;
        d->want_writable(p.client);
        d->want_writable(p.client);  // asking twice before the event still gives one event
        waiting = true;
      }
    }
    loop.step();
    for (auto it = loop.log.begin(); it != loop.log.end();) {
      const StreamEvent e = it->second;
      it = loop.log.erase(it);
      if (e.kind == StreamEventKind::writable) {
        ASSERT_EQ(e.id, p.client);
        EXPECT_TRUE(waiting) << "a second writable event for one want_writable";
        ++writables;
        waiting = false;
      } else {
        ASSERT_EQ(e.kind, StreamEventKind::readable);
        ASSERT_EQ(e.id, p.server);
        ASSERT_GE(read_all(*d, p.server, got), 0);
      }
    }
    if (sent == kBytes && got.size() == expect.size()) break;
  }
  ASSERT_EQ(sent, kBytes);
  ASSERT_EQ(got.size(), expect.size());
  EXPECT_TRUE(got == expect) << "the stream differs from what write() took";
  EXPECT_GT(short_writes, 0u) << "the socket took 8 MiB at once: the test proves nothing";
  EXPECT_EQ(writables, wants);
  // No writable event comes without a want_writable.
  EXPECT_FALSE(loop.seen_within(
      0, [](const StreamEvent& e) { return e.kind == StreamEventKind::writable; }, 100ms));
}

TEST(TcpNetdev, ReadableIsLevelTriggered) {
  auto d = make();
  ASSERT_TRUE(d);
  Loop loop({d.get()});
  const Pair p = open_pair(loop, *d, 0, *d, 0);
  ASSERT_NE(p.server, 0u);
  const Bytes data(100, 0x5A);
  const std::span<const std::uint8_t> piece[] = {data};
  ASSERT_EQ(d->write(p.server, piece), 100);
  ASSERT_TRUE(loop.wait(0, StreamEventKind::readable, p.client));
  // Then at every call while the bytes wait.
  for (int i = 0; i < 5; ++i) {
    std::array<StreamEvent, 8> ev;
    const std::size_t n = d->events(ev);
    ASSERT_EQ(n, 1u) << "call " << i;
    EXPECT_EQ(ev[0].kind, StreamEventKind::readable);
    EXPECT_EQ(ev[0].id, p.client);
    // And a wait returns at once.
    const auto t0 = Clock::now();
    d->wait_rx(5s);
    EXPECT_LT(Clock::now() - t0, 1s);
  }
  std::array<std::uint8_t, 40> small;
  EXPECT_EQ(d->read(p.client, small), 40);
  EXPECT_TRUE(loop.wait(0, StreamEventKind::readable, p.client, 1000ms)) << "60 bytes still wait";
  Bytes rest;
  EXPECT_EQ(read_all(*d, p.client, rest), 60);
  EXPECT_EQ(d->read(p.client, small), 0) << "nothing there: 0";
  loop.log.clear();
  EXPECT_FALSE(loop.seen_within(
      0, [](const StreamEvent&) { return true; }, 200ms))
      << "all read: quiet";
}

// A connection the caller marks spin_read is reported readable without asking the kernel while it
// receives messages (a read found a few bytes lately), so a spinning receiver makes one system
// call per round: its read. Every kEpollEvery-th call, and the first after a wait_rx, still asks
// epoll; a connection that receives nothing, or only a stream's large batches, is not read
// speculatively; nothing is lost, and the end of the stream is still found.
TEST(TcpNetdev, SpinReadStreamsAreReadableWithoutEpollWhileTheyReceive) {
  auto a = make();
  auto b = make();
  ASSERT_TRUE(a && b);
  Loop loop({a.get(), b.get()});
  const Pair p = open_pair(loop, *a, 0, *b, 1);
  ASSERT_NE(p.server, 0u);
  auto readable_calls = [&](int calls) {
    int n = 0;
    for (int i = 0; i < calls; ++i) {
      std::array<StreamEvent, 8> ev;
      const std::size_t k = a->events(ev);
      for (std::size_t j = 0; j < k; ++j) n += ev[j].kind == StreamEventKind::readable && ev[j].id == p.client;
    }
    return n;
  };
  a->spin_read(p.client);
  EXPECT_EQ(readable_calls(64), 0) << "nothing received yet: epoll alone";

  const Bytes small(64, 0x21);
  const std::span<const std::uint8_t> piece[] = {small};
  ASSERT_EQ(b->write(p.server, piece), 64);
  ASSERT_TRUE(loop.wait(0, StreamEventKind::readable, p.client));
  Bytes got;
  ASSERT_EQ(read_all(*a, p.client, got), 64);
  EXPECT_EQ(got, small);

  // Now reported at 7 of every 8 calls though nothing is there; each read then finds nothing.
  const int r = readable_calls(64);
  EXPECT_GE(r, 48);
  EXPECT_LE(r, 57);
  std::array<std::uint8_t, 16> buf;
  EXPECT_EQ(a->read(p.client, buf), 0);
  a->wait_rx(1ms);
  {
    std::array<StreamEvent, 8> ev;
    EXPECT_EQ(a->events(ev), 0u) << "after a wait, epoll first";
  }

  // Bytes written meanwhile are all there; a 20000-byte batch does not keep it spinning.
  const Bytes big(20000, 0x42);
  const std::span<const std::uint8_t> bp[] = {big};
  ASSERT_EQ(b->write(p.server, bp), 20000);
  got.clear();
  const auto end = Clock::now() + 5s;
  while (got.size() < big.size() && Clock::now() < end) {
    loop.step();
    ASSERT_GE(read_all(*a, p.client, got), 0);
  }
  EXPECT_EQ(got, big);
  readable_calls(5000);
  EXPECT_EQ(readable_calls(64), 0) << "no small read for 5000 calls: epoll alone again";

  // Hot again, then the peer closes: a read finds the end, and the closed event follows.
  ASSERT_EQ(b->write(p.server, piece), 64);
  got.clear();
  while (got.size() < 64 && Clock::now() < end) {
    loop.step();
    ASSERT_GE(read_all(*a, p.client, got), 0);
  }
  EXPECT_EQ(got, small);
  b->close(p.server, false);
  std::ptrdiff_t rr = 0;
  while ((rr = read_all(*a, p.client, got)) >= 0 && Clock::now() < end) loop.step();
  EXPECT_EQ(rr, -1);
  EXPECT_TRUE(loop.wait(0, StreamEventKind::closed, p.client));
}

TEST(TcpNetdev, OrderlyCloseGivesMinusOneThenClosedWithErrorZero) {
  auto d = make();
  ASSERT_TRUE(d);
  Loop loop({d.get()});
  const Pair p = open_pair(loop, *d, 0, *d, 0);
  ASSERT_NE(p.server, 0u);
  const Bytes data(1000, 0x11);
  const std::span<const std::uint8_t> piece[] = {data};
  ASSERT_EQ(d->write(p.client, piece), 1000);
  d->close(p.client, false);
  EXPECT_EQ(d->write(p.client, piece), -1) << "a closed id is unknown";
  Bytes got;
  std::ptrdiff_t r = 0;
  const auto end = Clock::now() + 5s;
  while ((r = read_all(*d, p.server, got)) >= 0 && Clock::now() < end) loop.step();
  ASSERT_EQ(r, -1) << "no end of stream";
  EXPECT_EQ(got, data);
  const auto closed = loop.wait(0, StreamEventKind::closed);
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->id, p.server);
  EXPECT_EQ(closed->error, 0) << errno_name(closed->error);
  // The id is gone: -1 again without another event; closing it or an id never used does nothing.
  std::array<std::uint8_t, 16> buf;
  EXPECT_EQ(d->read(p.server, buf), -1);
  EXPECT_EQ(d->write(p.server, piece), -1);
  d->close(p.server, false);
  d->close(p.server, true);
  d->close(987654, true);
  d->want_writable(p.server);
  loop.log.clear();
  EXPECT_FALSE(loop.seen_within(
      0, [](const StreamEvent&) { return true; }, 200ms));
  // The server end closed when its closed event was taken: both sockets are gone.
  EXPECT_EQ(find_socket(p.port, p.client_addr.port), -1) << "the server's socket is still open";
}

TEST(TcpNetdev, CloseAfterMinusOneStillDeliversTheClosedEvent) {
  auto d = make();
  ASSERT_TRUE(d);
  Loop loop({d.get()});
  const Pair p = open_pair(loop, *d, 0, *d, 0);
  ASSERT_NE(p.server, 0u);
  d->close(p.client, true);
  std::array<std::uint8_t, 16> buf;
  std::ptrdiff_t r = 0;
  const auto end = Clock::now() + 5s;
  while ((r = d->read(p.server, buf)) == 0 && Clock::now() < end) d->wait_rx(10ms);
  ASSERT_EQ(r, -1);
  d->close(p.server, false);  // before the closed event was taken
  const auto closed = loop.wait(0, StreamEventKind::closed);
  ASSERT_TRUE(closed) << "the closed event promised by the -1";
  EXPECT_EQ(closed->id, p.server);
  EXPECT_EQ(closed->error, ECONNRESET) << errno_name(closed->error);
  EXPECT_FALSE(loop.seen_within(
      0, [](const StreamEvent&) { return true; }, 100ms))
      << "only one";
}

TEST(TcpNetdev, OrderlyCloseWithUnreadBytesStillDeliversEverything) {
  // Closing a socket with unread bytes makes the kernel send a RST, which drops what it has not
  // sent yet: the netdev reads and drops them instead, until the peer's FIN. Small buffers, so
  // that much of what the client writes is still in its socket when it closes.
  auto d = make("", 64 << 10);
  ASSERT_TRUE(d);
  Loop loop({d.get()});
  const Pair p = open_pair(loop, *d, 0, *d, 0);
  ASSERT_NE(p.server, 0u);
  const Bytes to_client(20000, 0x22);
  ASSERT_TRUE(write_all(loop, 0, *d, p.server, to_client));
  // The client writes until its socket takes no more (the server reads nothing meanwhile).
  Bytes data(16 << 20);
  std::mt19937 rng(3);
  for (auto& b : data) b = static_cast<std::uint8_t>(rng());
  std::size_t taken = 0;
  for (int zeros = 0; zeros < 20 && taken < data.size();) {
    const std::span<const std::uint8_t> piece[] = {std::span(data).subspan(taken)};
    const std::ptrdiff_t r = d->write(p.client, piece);
    ASSERT_GE(r, 0);
    taken += static_cast<std::size_t>(r);
    if (r == 0) {
      ++zeros;
      std::this_thread::sleep_for(5ms);
    }
  }
  ASSERT_LT(taken, data.size()) << "the socket took everything: the test proves nothing";
  d->close(p.client, false);  // 20000 bytes unread, much of `taken` not sent yet
  Bytes got;
  std::ptrdiff_t r = 0;
  const auto end = Clock::now() + 10s;
  while ((r = read_all(*d, p.server, got)) >= 0 && Clock::now() < end) loop.step();
  ASSERT_EQ(r, -1);
  ASSERT_EQ(got.size(), taken);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), data.begin()));
  const auto closed = loop.wait(0, StreamEventKind::closed, p.server);
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->error, 0) << errno_name(closed->error) << ": the closing end sent a RST";
  // The server end closed with its event; the client's socket goes when the server's FIN comes.
  const auto gone = Clock::now() + 5s;
  while (find_socket(p.client_addr.port, p.port) >= 0 && Clock::now() < gone) loop.step();
  EXPECT_EQ(find_socket(p.client_addr.port, p.port), -1) << "the closed client socket lingers on";
}

TEST(TcpNetdev, AbortGivesThePeerEconnreset) {
  auto d = make();
  ASSERT_TRUE(d);
  Loop loop({d.get()});
  const Pair p = open_pair(loop, *d, 0, *d, 0);
  ASSERT_NE(p.server, 0u);
  d->close(p.client, true);
  ASSERT_TRUE(loop.wait(0, StreamEventKind::readable, p.server)) << "a reset connection is readable";
  std::array<std::uint8_t, 16> buf;
  EXPECT_EQ(d->read(p.server, buf), -1);
  const auto closed = loop.wait(0, StreamEventKind::closed);
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->id, p.server);
  EXPECT_EQ(closed->error, ECONNRESET) << errno_name(closed->error);

  // A write to a reset connection: -1 and a closed event.
  const Pair q = open_pair(loop, *d, 0, *d, 0);
  ASSERT_NE(q.server, 0u);
  d->close(q.server, true);
  const Bytes data(10, 1);
  const std::span<const std::uint8_t> piece[] = {data};
  std::ptrdiff_t r = 0;
  const auto end = Clock::now() + 5s;
  while ((r = d->write(q.client, piece)) >= 0 && Clock::now() < end) d->wait_rx(10ms);
  EXPECT_EQ(r, -1);
  const auto closed2 = loop.wait(0, StreamEventKind::closed);
  ASSERT_TRUE(closed2);
  EXPECT_EQ(closed2->id, q.client);
  EXPECT_TRUE(closed2->error == ECONNRESET || closed2->error == EPIPE) << errno_name(closed2->error);
}

TEST(TcpNetdev, ConnectToAPortNobodyListensOnFails) {
  auto d = make();
  ASSERT_TRUE(d);
  Loop loop({d.get()});
  std::string e;
  const std::uint16_t port = d->listen(0, e);
  ASSERT_NE(port, 0) << e;
  d->stop_listen(port);
  d->stop_listen(port);  // twice: nothing
  const StreamId id = d->connect({kLo, port}, e);
  ASSERT_NE(id, 0u) << e;
  const auto failed = loop.wait(0, [](const StreamEvent& ev) { return ev.kind != StreamEventKind::readable; });
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->kind, StreamEventKind::connect_failed) << kind_name(failed->kind);
  EXPECT_EQ(failed->id, id);
  EXPECT_EQ(failed->peer, (NetAddr{kLo, port}));
  EXPECT_EQ(failed->error, ECONNREFUSED) << errno_name(failed->error);
  std::array<std::uint8_t, 4> buf;
  EXPECT_EQ(d->read(id, buf), -1);
  d->close(id, false);
  EXPECT_FALSE(loop.seen_within(
      0, [](const StreamEvent&) { return true; }, 100ms));
  // Nonsense addresses do not even start.
  EXPECT_EQ(d->connect({kLo, 0}, e), 0u);
  EXPECT_NE(e.find("tcp netdev: cannot connect to 127.0.0.1:0"), std::string::npos) << e;
}

TEST(TcpNetdev, WakeEndsAWait) {
  auto d = make();
  ASSERT_TRUE(d);
  std::string e;
  ASSERT_NE(d->listen(0, e), 0) << e;  // something in the epoll set besides the eventfd
  // From another thread, during the wait.
  std::thread t([&] {
    std::this_thread::sleep_for(150ms);
    d->wake();
  });
  auto t0 = Clock::now();
  d->wait_rx(10s);
  auto took = Clock::now() - t0;
  t.join();
  EXPECT_GE(took, 100ms);
  EXPECT_LT(took, 5s) << "wake() did not end the wait";
  // Before the wait: it returns at once, once.
  d->wake();
  t0 = Clock::now();
  d->wait_rx(10s);
  EXPECT_LT(Clock::now() - t0, 1s);
  t0 = Clock::now();
  d->wait_rx(100ms);
  EXPECT_GE(Clock::now() - t0, 90ms) << "the wake was not used up";
  // events() between wake() and wait_rx() does not use the wake up.
  d->wake();
  std::array<StreamEvent, 4> ev;
  EXPECT_EQ(d->events(ev), 0u);
  t0 = Clock::now();
  d->wait_rx(10s);
  EXPECT_LT(Clock::now() - t0, 1s);
  // A timeout below a millisecond is not a busy return, and the timeout is kept.
  t0 = Clock::now();
  d->wait_rx(1500us);
  EXPECT_GE(Clock::now() - t0, 1500us);
}

TEST(TcpNetdev, BadAddressesAndTakenPortsAreClearErrors) {
  auto a = make();
  auto b = make();
  ASSERT_TRUE(a && b);
  std::string e;
  const std::uint16_t port = a->listen(0, e);
  ASSERT_NE(port, 0) << e;
  const std::string want =
      "tcp netdev: cannot listen on 127.0.0.1:" + std::to_string(port) + ": Address already in use";
  e.clear();
  EXPECT_EQ(b->listen(port, e), 0);
  EXPECT_EQ(e, want);
  e.clear();
  EXPECT_EQ(a->listen(port, e), 0);
  EXPECT_EQ(e, want);
  // After stop_listen the port can be had again.
  a->stop_listen(port);
  e.clear();
  EXPECT_EQ(b->listen(port, e), port) << e;

  NetdevConfig c;
  c.ip = "300.1.1.1";
  EXPECT_FALSE(make_tcp_netdev(c, e));
  EXPECT_EQ(e, "tcp netdev: bad IPv4 address '300.1.1.1'");
  c.ip = "192.0.2.1";  // TEST-NET-1: not an address of this host
  EXPECT_FALSE(make_tcp_netdev(c, e));
  EXPECT_EQ(e, "tcp netdev: cannot use address 192.0.2.1: Cannot assign requested address");
  c.ip = "127.0.0.1";
  c.pcap = "/proc/self/softrnic.pcap";
  EXPECT_FALSE(make_tcp_netdev(c, e));
  EXPECT_NE(e.find("tcp netdev: pcap"), std::string::npos) << e;
  EXPECT_NE(e.find("refusing"), std::string::npos) << e;
}

TEST(TcpNetdev, EventsThatDoNotFitWaitForTheNextCall) {
  auto d = make();
  ASSERT_TRUE(d);
  std::string e;
  const std::uint16_t port = d->listen(0, e);
  ASSERT_NE(port, 0) << e;
  constexpr int kConns = 12;
  std::set<StreamId> clients;
  for (int i = 0; i < kConns; ++i) {
    const StreamId id = d->connect({kLo, port}, e);
    ASSERT_NE(id, 0u) << e;
    clients.insert(id);
  }
  // Let every connection complete before taking anything, then take one event per call.
  std::this_thread::sleep_for(200ms);
  std::set<StreamId> connected, accepted;
  const auto end = Clock::now() + 10s;
  while ((connected.size() < kConns || accepted.size() < kConns) && Clock::now() < end) {
    std::array<StreamEvent, 1> ev;
    if (d->events(ev) == 0) {
      d->wait_rx(10ms);
      continue;
    }
    if (ev[0].kind == StreamEventKind::connected) {
      EXPECT_TRUE(clients.count(ev[0].id));
      EXPECT_TRUE(connected.insert(ev[0].id).second) << "connected twice: " << ev[0].id;
    } else if (ev[0].kind == StreamEventKind::accepted) {
      EXPECT_FALSE(clients.count(ev[0].id));
      EXPECT_TRUE(accepted.insert(ev[0].id).second) << "accepted twice: " << ev[0].id;
    } else {
      ADD_FAILURE() << "unexpected " << kind_name(ev[0].kind);
    }
  }
  EXPECT_EQ(connected.size(), static_cast<std::size_t>(kConns));
  EXPECT_EQ(accepted.size(), static_cast<std::size_t>(kConns));
}

namespace {

// CRC-32C, bit by bit (independent of the project's own).
std::uint32_t crc32c(std::span<const std::uint8_t> d) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (const std::uint8_t b : d) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
  }
  return ~c;
}

// An MPA request or reply: key, bits (C, enhanced, revision 2), private data length, 4 bytes of
// private data (the RFC 6581 IRD/ORD words).
Bytes mpa_frame(bool reply) {
  const std::string key = reply ? "MPA ID Rep Frame" : "MPA ID Req Frame";
  Bytes f(key.begin(), key.end());
  f.insert(f.end(), {0x50, 0x02, 0x00, 0x04, 0x00, 0x08, 0x00, 0x08});
  return f;
}

// An FPDU holding an untagged DDP Send (RDMAP opcode 3, queue 0, MSN `msn`) of `payload`, with
// its pad and CRC.
Bytes fpdu(std::uint32_t msn, const Bytes& payload) {
  Bytes f;
  const std::size_t ulpdu = 18 + payload.size();
  f.push_back(static_cast<std::uint8_t>(ulpdu >> 8));
  f.push_back(static_cast<std::uint8_t>(ulpdu));
  f.insert(f.end(), {0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0});  // DDP L, DV; RDMAP Send; QN 0
  for (int s = 24; s >= 0; s -= 8) f.push_back(static_cast<std::uint8_t>(msn >> s));
  for (int i = 0; i < 4; ++i) f.push_back(0);  // MO
  f.insert(f.end(), payload.begin(), payload.end());
  while (f.size() % 4) f.push_back(0);
  const std::uint32_t crc = crc32c(f);
  for (int s = 0; s < 32; s += 8) f.push_back(static_cast<std::uint8_t>(crc >> s));  // little-endian image
  return f;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (const char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs a shell command; its standard output, and its exit status in `status`.
std::string run(const std::string& cmd, int& status) {
  std::string out;
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) {
    status = -1;
    return out;
  }
  std::array<char, 4096> buf;
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) out.append(buf.data(), n);
  const int st = ::pclose(f);
  status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

// tshark on `cap` with the shared wirecheck options (tshark_opts.sh: RDMA heuristics, iwarp_mpa
// first on TCP, checksums verified), two passes, then `args`.
std::string tshark(const std::string& cap, const std::string& args, int& status) {
  const std::string opts = std::string(SOFTRNIC_SHARED_DIR) + "/tools/wirecheck/tshark_opts.sh";
  const std::string cmd = "bash -c " +
                          shell_quote(
                              "source \"$1\" || exit 3; shift; "
                              "exec tshark -r \"$1\" \"${TSHARK_RDMA_OPTS[@]}\" -2 \"${@:2}\"") +
                          " _ " + shell_quote(opts) + " " + shell_quote(cap) + " " + args + " 2>/dev/null";
  return run(cmd, status);
}

// "a1,a2\tb1,b2" lines as "a1:b1 a2:b2 ...".
std::string zip_fields(const std::string& out) {
  std::string z;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    const auto tab = line.find('\t');
    if (tab == std::string::npos) continue;
    std::istringstream a(line.substr(0, tab)), b(line.substr(tab + 1));
    std::string x, y;
    while (std::getline(a, x, ',') && std::getline(b, y, ',')) z += (z.empty() ? "" : " ") + x + ":" + y;
  }
  return z;
}

int count_lines(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

}  // namespace

TEST(TcpNetdev, PcapHoldsATcpFlowTsharkDecodesAsMpa) {
  int st = 0;
  run("command -v tshark", st);
  if (st != 0) GTEST_SKIP() << "tshark is not installed (apt-get install tshark): the capture is not checked";
  const std::string opts = std::string(SOFTRNIC_SHARED_DIR) + "/tools/wirecheck/tshark_opts.sh";
  if (!std::filesystem::exists(opts)) GTEST_SKIP() << opts << " is missing: the shared wirecheck tools are not there";
  const std::string cap_a = tmp_path("client.pcap"), cap_b = tmp_path("server.pcap");
  {
    // Two netdevs, one capture each: every connection is written once per file.
    auto a = make(cap_a);
    auto b = make(cap_b);
    ASSERT_TRUE(a && b);
    Loop loop({a.get(), b.get()});
    const Pair p = open_pair(loop, *a, 0, *b, 1);
    ASSERT_NE(p.server, 0u);
    const Bytes req = mpa_frame(false), rep = mpa_frame(true);
    const std::span<const std::uint8_t> req_p[] = {std::span(req).first(16), std::span(req).subspan(16)};
    ASSERT_EQ(a->write(p.client, req_p), static_cast<std::ptrdiff_t>(req.size()));
    Bytes got;
    for (auto end = Clock::now() + 5s; got.size() < req.size() && Clock::now() < end; loop.step())
      ASSERT_GE(read_all(*b, p.server, got), 0);
    ASSERT_EQ(got, req);
    ASSERT_TRUE(write_all(loop, 1, *b, p.server, rep));
    got.clear();
    for (auto end = Clock::now() + 5s; got.size() < rep.size() && Clock::now() < end; loop.step())
      ASSERT_GE(read_all(*a, p.client, got), 0);
    ASSERT_EQ(got, rep);
    // FPDUs: a small Send, then two of ~60 KB in one write, which the capture splits at 65000.
    const Bytes hello{'H', 'e', 'l', 'l', 'o', ' ', 'i', 'W', 'A', 'R', 'P', ' ', 'S', 'E', 'N', 'D'};
    Bytes big1(60000), big2(59999);
    std::mt19937 rng(5);
    for (auto& x : big1) x = static_cast<std::uint8_t>(rng());
    for (auto& x : big2) x = static_cast<std::uint8_t>(rng());
    const Bytes f1 = fpdu(1, hello), f2 = fpdu(2, big1), f3 = fpdu(3, big2);
    ASSERT_TRUE(write_all(loop, 0, *a, p.client, f1));
    Bytes two = f2;
    two.insert(two.end(), f3.begin(), f3.end());
    ASSERT_TRUE(write_all(loop, 0, *a, p.client, two));
    const std::size_t want = f1.size() + two.size();
    got.clear();
    for (auto end = Clock::now() + 5s; got.size() < want && Clock::now() < end; loop.step())
      ASSERT_GE(read_all(*b, p.server, got), 0);
    ASSERT_EQ(got.size(), want);
    // And one back.
    const Bytes f4 = fpdu(1, Bytes(100, 0x33));
    ASSERT_TRUE(write_all(loop, 1, *b, p.server, f4));
    got.clear();
    for (auto end = Clock::now() + 5s; got.size() < f4.size() && Clock::now() < end; loop.step())
      ASSERT_GE(read_all(*a, p.client, got), 0);
    ASSERT_EQ(got, f4);
    // The client closes; the server sees the end and its end closes when the event is taken.
    a->close(p.client, false);
    std::ptrdiff_t r = 0;
    for (auto end = Clock::now() + 5s; (r = read_all(*b, p.server, got)) >= 0 && Clock::now() < end;) loop.step();
    ASSERT_EQ(r, -1);
    const auto closed = loop.wait(1, StreamEventKind::closed, p.server);
    ASSERT_TRUE(closed);
    EXPECT_EQ(closed->error, 0);
  }
  for (const std::string& cap : {cap_a, cap_b}) {
    SCOPED_TRACE(cap);
    const bool client = cap == cap_a;
    const std::string frames = tshark(cap, "-T fields -e frame.number", st);
    ASSERT_EQ(st, 0) << "tshark cannot read the capture";
    const int nframes = count_lines(frames);
    // The client's reads are one segment each; the server's read of the big FPDUs may take
    // several calls. 3 handshake, req, rep, f1, f2+f3 (2 segments), f4, then FINs.
    if (client) {
      EXPECT_EQ(nframes, 10) << frames;
    }
    const std::string syn = tshark(cap, "-Y tcp.flags.syn==1 -T fields -e tcp.flags.ack", st);
    EXPECT_EQ(syn, client ? "0\n1\n" : "0\n1\n") << "SYN, SYN-ACK";
    const std::string fin = tshark(cap, "-Y tcp.flags.fin==1 -T fields -e ip.src -e tcp.srcport", st);
    EXPECT_EQ(count_lines(fin), client ? 1 : 2) << fin;
    const std::string req = tshark(cap, "-Y iwarp_mpa.req -T fields -e iwarp_mpa.pdlength", st);
    EXPECT_EQ(req, "4\n") << "the MPA request";
    const std::string rep = tshark(cap, "-Y iwarp_mpa.rep -T fields -e iwarp_mpa.pdlength", st);
    EXPECT_EQ(rep, "4\n") << "the MPA reply";
    // The FPDUs after them: four RDMAP Sends (MSN:ULPDU length), in order, the big ones
    // reassembled across segments.
    const std::string sends = tshark(cap,
                                     "-Y iwarp_rdma.opcode==3 -T fields -E occurrence=a -E aggregator=, "
                                     "-e iwarp_ddp.msn -e iwarp_mpa.ulpdulength",
                                     st);
    EXPECT_EQ(zip_fields(sends), "1:34 2:60018 3:60017 1:118") << sends;
    // Correct checksums everywhere, and nothing TCP analysis would flag (lost or unseen segments,
    // retransmissions, a full window, duplicate ACKs).
    const std::string bad = tshark(cap,
                                   "-Y " +
                                       shell_quote("ip.checksum.status != 1 || tcp.checksum.status != 1 || "
                                                   "tcp.analysis.flags || _ws.malformed") +
                                       " -T fields -e frame.number -e _ws.col.Info",
                                   st);
    EXPECT_EQ(st, 0);
    EXPECT_EQ(bad, "") << "frames with bad checksums or TCP analysis flags";
    const std::string good = tshark(
        cap, "-Y " + shell_quote("ip.checksum.status == 1 && tcp.checksum.status == 1") + " -T fields -e frame.number",
        st);
    EXPECT_EQ(count_lines(good), nframes) << "checksums verified good on every frame";
    // The project's own validator: no malformed frame, no expert info of Warning or above, every
    // TCP payload in the MPA stream decoded (MPA v2's revision warnings accepted).
    const std::string validate = std::string(SOFTRNIC_SHARED_DIR) + "/tools/wirecheck/validate.py";
    if (std::filesystem::exists(validate) && std::filesystem::exists("/usr/bin/python3")) {
      const std::string out = run(
          "/usr/bin/python3 " + shell_quote(validate) + " " + shell_quote(cap) + " --iwarp --allow-mpa-v2 2>&1", st);
      EXPECT_EQ(st, 0) << out;
    }
  }
  if (const char* keep = std::getenv("SOFTRNIC_KEEP_CAPTURE"); keep && std::string(keep) == "1") {
    std::printf("kept %s and %s\n", cap_a.c_str(), cap_b.c_str());
  } else {
    std::filesystem::remove(cap_a);
    std::filesystem::remove(cap_b);
  }
}
