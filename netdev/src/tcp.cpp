// The `tcp` stream backend (StreamNetdev): kernel TCP sockets through Boost.Asio (socket set-up
// on an io_context that never runs), every socket non-blocking, driven through its native handle.
//
// Readiness comes from one level-triggered epoll instance that holds the listening sockets
// (EPOLLIN), the connecting ones (EPOLLOUT until the connect completes: SO_ERROR says how), the
// established ones (EPOLLIN | EPOLLRDHUP, plus EPOLLOUT from want_writable until the writable
// event is queued) and an eventfd for wake(). wait_rx blocks in epoll_pwait2 (microsecond
// timeout) and only drains the eventfd; events() looks again with a zero timeout (level-triggered:
// nothing is lost) and turns what it finds into events, queued, so that what does not fit in the
// caller's span is handed out by the next call. events() leaves the eventfd alone: a wake() that
// comes between events() and wait_rx() still ends that wait_rx at once.
//
// Lifetimes. A connection whose read() or write() returned -1 ("broken") leaves the epoll set
// (its hang-up would be reported forever) and queues one closed event; its socket stays open
// until the caller closes the id or takes the closed event, whichever comes first. The closed
// event promised by the -1 is delivered even when close() came first (it carries the reason;
// the id is unknown by then, and a close() of an unknown id does nothing). Every other event
// still waiting for an id that close() ends is dropped. A connect_failed connection stays until
// its event is taken or the id is closed. An orderly close() shuts the sending side down (FIN
// after what was written) and reads and drops what the peer still sends until its FIN (at most
// kLingerFor): closing a socket with unread bytes would make the kernel send a RST and drop what
// we wrote but it had not sent yet.
//
// With cfg.pcap, every connection is written to the file as a synthesized TCP flow seen from
// this end: the three-way handshake (MSS and window-scale options) when it is connected or
// accepted, one segment per write() (the bytes the socket took) and per read() (the bytes
// received), split at 65000 bytes, with per-direction sequence and acknowledgement numbers,
// correct IPv4 and TCP checksums, a pure ACK from the other side after every MiB that went
// unacknowledged (so tshark never sees a full window), and FIN (or RST) at the end. The initial
// sequence numbers are made up (the kernel's are not visible); MACs are 02:00:<IPv4 address>, as
// the datagram pcap tap writes them.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cerrno>
#include <climits>
#include <cstring>
#include <deque>
#include <fstream>
#include <unordered_map>
#include <vector>

#include "ethernet.hpp"
#include "pcap_tap.hpp"
#include "sockaddr.hpp"
#include "softrnic/netdev/netdev.hpp"

namespace softrnic::netdev {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

// epoll_event.data.u64: what the descriptor is (high 32 bits) and which one (low 32 bits).
enum class Tag : std::uint32_t { wake = 1, listener = 2, conn = 3 };
std::uint64_t epoll_key(Tag t, std::uint32_t v) {
  return static_cast<std::uint64_t>(t) << 32 | v;
}

constexpr std::size_t kMaxIov = 64;                    // pieces per write(): more are left for the next call
constexpr int kPollBatch = 64;                         // readiness reports taken per events()
constexpr std::size_t kSpinConns = 2;                  // spin_round: at most this many connections
constexpr std::uint32_t kEpollEvery = 8;               // spin_round: epoll at every this many events()
constexpr std::uint32_t kSpinHot = 4096;               // spin_round: calls since a read last found bytes
constexpr std::size_t kSpinReadMax = 2048;             // spin_round: ... a few, not a stream's batch
constexpr std::size_t kPcapSegment = 65000;            // largest synthesized segment payload
constexpr std::uint32_t kPcapAckEvery = 1u << 20;      // unacknowledged bytes before a synthesized ACK
constexpr std::uint8_t kPcapWindowShift = 7;           // window 0xFFFF << 7 (8 MiB)
constexpr std::size_t kFallbackMss = 1460;             // mss() when TCP_MAXSEG cannot be read
constexpr auto kLingerFor = std::chrono::seconds(10);  // an orderly-closed socket waits this long for the peer's FIN
constexpr std::uint32_t kConnEvents = EPOLLIN | EPOLLRDHUP;

NetAddr local_of(int fd) {
  sockaddr_in s{};
  socklen_t l = sizeof s;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&s), &l) != 0) return {};
  return from_sockaddr(s);
}

void put16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 8);
  p[1] = static_cast<std::uint8_t>(v);
}
void put32(std::uint8_t* p, std::uint32_t v) {
  put16(p, static_cast<std::uint16_t>(v >> 16));
  put16(p + 2, static_cast<std::uint16_t>(v));
}

std::uint32_t mix32(std::uint64_t x) {  // splitmix64's finalizer: made-up initial sequence numbers
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return static_cast<std::uint32_t>(x ^ (x >> 31));
}

std::size_t mss_of(int fd) {
  int v = 0;
  socklen_t l = sizeof v;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &v, &l) != 0 || v <= 0) return kFallbackMss;
  return static_cast<std::size_t>(v);
}

std::size_t proc_size(const char* path) {
  std::ifstream f(path);
  std::size_t v = 0;
  return f >> v ? v : 0;
}

// What the pcap holds of one connection, seen from this end.
struct Flow {
  bool on = false;    // the handshake was written
  bool done = false;  // a FIN from us or a RST was written: nothing more
  bool peer_fin = false;
  std::uint32_t snd_nxt = 0, rcv_nxt = 0;      // next sequence number of each direction
  std::uint32_t snd_acked = 0, rcv_acked = 0;  // the last acknowledgement each side sent
};

enum class State : std::uint8_t {
  connecting,   // connect() in progress (EPOLLOUT)
  established,  // EPOLLIN (+ EPOLLOUT while a writable event is wanted)
  failed,       // the connect failed: connect_failed queued
  broken,       // read/write returned -1: closed queued, out of the epoll set
  lingering,    // closed by the caller (orderly): its id is gone, it waits for the peer's FIN
};

struct Conn {
  explicit Conn(asio::io_context& io) : sock(io) {}
  tcp::socket sock;
  State state = State::connecting;
  NetAddr peer{}, local{};
  std::uint32_t mask = 0;  // events registered with epoll; 0: not in the set
  bool want_writable = false;
  bool readable_queued = false;
  bool held = false;            // hold_reads: out of epoll's read set (its bytes wait in the socket)
  bool spin = false;            // spin_read: reported readable without epoll between epoll rounds
  bool small_read = false;      // a read found a few bytes (at most kSpinReadMax) ...
  std::uint32_t data_call = 0;  // ... at this many events() calls (spin_calls_)
  std::chrono::steady_clock::time_point linger_until{};
  Flow flow;
  int fd() { return sock.native_handle(); }
};

class TcpNetdev final : public StreamNetdev {
 public:
  TcpNetdev() = default;
  ~TcpNetdev() override {
    conns_.clear();
    listeners_.clear();
    if (wake_fd_ >= 0) ::close(wake_fd_);
    if (epfd_ >= 0) ::close(epfd_);
  }
  TcpNetdev(const TcpNetdev&) = delete;
  TcpNetdev& operator=(const TcpNetdev&) = delete;

  bool open(const NetdevConfig& cfg, std::string& error) {
    if (!parse_ipv4(cfg.ip, ip_)) {
      error = "tcp netdev: bad IPv4 address '" + printable(cfg.ip) + "'";
      return false;
    }
    // The address must be one of ours: a socket bound to it now says so (connects bind to it later).
    {
      boost::system::error_code ec;
      tcp::socket probe(io_);
      probe.open(tcp::v4(), ec);
      if (!ec) probe.bind(tcp::endpoint(asio::ip::address_v4(ip_), 0), ec);
      if (ec) {
        error = "tcp netdev: cannot use address " + cfg.ip + ": " + ec.message();
        return false;
      }
    }
    socket_buffer_ = static_cast<int>(std::min<std::size_t>(cfg.socket_buffer, INT_MAX / 2));
    rmem_max_ = proc_size("/proc/sys/net/core/rmem_max");
    wmem_max_ = proc_size("/proc/sys/net/core/wmem_max");
    epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (epfd_ < 0 || wake_fd_ < 0) {
      error = std::string("tcp netdev: epoll/eventfd: ") + std::strerror(errno);
      return false;
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = epoll_key(Tag::wake, 0);
    if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) {
      error = std::string("tcp netdev: epoll_ctl: ") + std::strerror(errno);
      return false;
    }
    if (!cfg.pcap.empty()) {
      std::string e;
      if (!pcap_path_ok(cfg.pcap, e) || !(pcap_ = PcapWriter::open(cfg.pcap, e))) {
        error = "tcp netdev: " + e;
        return false;
      }
      scratch_.resize(kPcapSegment);
    }
    return true;
  }

  std::uint32_t local_ip() const override { return ip_; }

  std::uint16_t listen(std::uint16_t port, std::string& error) override {
    auto acc = std::make_unique<tcp::acceptor>(io_);
    boost::system::error_code ec;
    acc->open(tcp::v4(), ec);
    if (!ec) acc->set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) {
      set_buffers(acc->native_handle());  // accepted sockets inherit them (and the window scale)
      acc->bind(tcp::endpoint(asio::ip::address_v4(ip_), port), ec);
    }
    if (!ec) acc->listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) acc->non_blocking(true, ec);
    std::uint16_t bound = 0;
    if (!ec) bound = acc->local_endpoint(ec).port();
    if (!ec) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = epoll_key(Tag::listener, bound);
      if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, acc->native_handle(), &ev) != 0)
        ec.assign(errno, boost::system::system_category());
    }
    if (ec) {
      error = "tcp netdev: cannot listen on " + to_string(NetAddr{ip_, port}) + ": " + ec.message();
      return 0;
    }
    listeners_[bound] = std::move(acc);
    return bound;
  }

  void stop_listen(std::uint16_t port) override {
    auto it = listeners_.find(port);
    if (it == listeners_.end()) return;
    ::epoll_ctl(epfd_, EPOLL_CTL_DEL, it->second->native_handle(), nullptr);
    boost::system::error_code ec;
    it->second->close(ec);
    listeners_.erase(it);
  }

  StreamId connect(NetAddr to, std::string& error) override {
    const std::string what = "tcp netdev: cannot connect to " + to_string(to) + ": ";
    if (to.ip == 0 || to.port == 0) {
      error = what + "no such address";
      return 0;
    }
    auto c = std::make_unique<Conn>(io_);
    boost::system::error_code ec;
    c->sock.open(tcp::v4(), ec);
    if (!ec) c->sock.set_option(tcp::no_delay(true), ec);
    if (!ec) {
      // The port is chosen at connect(), per destination: no ephemeral port is held for bind alone.
      const int one = 1;
      ::setsockopt(c->fd(), IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
      set_buffers(c->fd());
      c->sock.bind(tcp::endpoint(asio::ip::address_v4(ip_), 0), ec);
    }
    if (!ec) c->sock.non_blocking(true, ec);
    if (ec) {
      error = what + ec.message();
      return 0;
    }
    c->peer = to;
    const sockaddr_in sa = to_sockaddr(to);
    int r;
    do r = ::connect(c->fd(), reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
    while (r != 0 && errno == EINTR);
    const int err = r == 0 ? 0 : errno;
    const StreamId id = new_id();
    if (r == 0) {
      c->state = State::established;
      if (!set_mask(*c, id, kConnEvents)) {
        error = what + std::strerror(errno);
        return 0;
      }
      established(*c, id, true);
      pending_.push_back({StreamEventKind::connected, id, to, c->local.port, 0});
    } else if (err == EINPROGRESS) {
      c->state = State::connecting;
      if (!set_mask(*c, id, EPOLLOUT)) {
        error = what + std::strerror(errno);
        return 0;
      }
    } else if (err == ECONNREFUSED || err == ENETUNREACH || err == EHOSTUNREACH || err == ETIMEDOUT) {
      // What the network answered: an outcome, reported like one that comes later.
      c->state = State::failed;
      pending_.push_back({StreamEventKind::connect_failed, id, to, 0, err});
    } else {
      error = what + std::strerror(err);
      return 0;
    }
    conns_.emplace(id, std::move(c));
    return id;
  }

  std::ptrdiff_t write(StreamId id, std::span<const std::span<const std::uint8_t>> pieces) override {
    Conn* c = find(id);
    if (!c) return -1;
    if (c->state == State::connecting) return 0;
    if (c->state != State::established) return -1;
    std::array<iovec, kMaxIov> iov;
    std::size_t n = 0;
    for (const auto& p : pieces) {
      if (p.empty()) continue;
      if (n == kMaxIov) break;
      iov[n].iov_base = const_cast<std::uint8_t*>(p.data());
      iov[n].iov_len = p.size();
      ++n;
    }
    if (n == 0) return 0;
    msghdr m{};
    m.msg_iov = iov.data();
    m.msg_iovlen = n;
    ssize_t r;
    do r = ::sendmsg(c->fd(), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (r < 0 && errno == EINTR);
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) return 0;
      broken(*c, id, errno);
      return -1;
    }
    if (r == 0) return 0;
    const auto taken = static_cast<std::size_t>(r);
    stats_.tx_frames.fetch_add(1, std::memory_order_relaxed);
    stats_.tx_bytes.fetch_add(taken, std::memory_order_relaxed);
    if (pcap_) pcap_sent(*c, pieces, taken);
    return r;
  }

  std::ptrdiff_t read(StreamId id, std::span<std::uint8_t> buf) override {
    Conn* c = find(id);
    if (!c) return -1;
    if (c->state == State::connecting) return 0;
    if (c->state != State::established) return -1;
    if (buf.empty()) return 0;  // recv of 0 bytes would look like the end of the stream
    ssize_t r;
    do r = ::recv(c->fd(), buf.data(), buf.size(), MSG_DONTWAIT);
    while (r < 0 && errno == EINTR);
    if (r > 0) {
      const auto got = static_cast<std::size_t>(r);
      if (got <= kSpinReadMax) {
        c->small_read = true;
        c->data_call = spin_calls_;
      }
      stats_.rx_frames.fetch_add(1, std::memory_order_relaxed);
      stats_.rx_bytes.fetch_add(got, std::memory_order_relaxed);
      if (pcap_) pcap_received(*c, buf.first(got));
      return r;
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    broken(*c, id, r == 0 ? 0 : errno);
    return -1;
  }

  void want_writable(StreamId id) override {
    Conn* c = find(id);
    if (!c || c->want_writable) return;
    if (c->state == State::connecting) {
      c->want_writable = true;  // EPOLLOUT joins the mask when the connect completes
    } else if (c->state == State::established) {
      c->want_writable = true;
      set_mask(*c, id, conn_mask(*c));
    }
  }

  void hold_reads(StreamId id, bool hold) override {
    Conn* c = find(id);
    if (!c || c->state != State::established || c->held == hold) return;
    c->held = hold;
    std::erase_if(pending_, [id](const StreamEvent& e) { return e.id == id && e.kind == StreamEventKind::readable; });
    c->readable_queued = false;
    set_mask(*c, id, conn_mask(*c));
  }

  void close(StreamId id, bool abort) override {
    auto it = conns_.find(id);
    if (it == conns_.end() || it->second->state == State::lingering) return;
    Conn& c = *it->second;
    // No event follows a close, but a closed event already promised by a -1 stays.
    std::erase_if(pending_, [id](const StreamEvent& e) { return e.id == id && e.kind != StreamEventKind::closed; });
    if (abort) {
      if ((c.state == State::established || c.state == State::broken) && pcap_) pcap_end(c, true);
      const linger l{1, 0};  // set on the handle: Asio resets a linger it set itself when it closes
      ::setsockopt(c.fd(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
      conns_.erase(it);
      return;
    }
    if (c.state == State::established || c.state == State::broken) {
      if (pcap_) pcap_end(c, false);
      ::shutdown(c.fd(), SHUT_WR);
    }
    if (c.state == State::established && !drain(c)) {
      c.state = State::lingering;
      c.want_writable = false;
      c.linger_until = std::chrono::steady_clock::now() + kLingerFor;
      if (set_mask(c, id, kConnEvents)) {
        lingering_.push_back(id);
        return;
      }
    }
    conns_.erase(it);
  }

  std::size_t events(std::span<StreamEvent> out) override {
    if (!spin_round()) poll();
    if (!lingering_.empty()) reap_lingering();
    std::size_t n = 0;
    while (n < out.size() && !pending_.empty()) {
      const StreamEvent e = pending_.front();
      pending_.pop_front();
      auto it = conns_.find(e.id);
      Conn* c = it == conns_.end() ? nullptr : it->second.get();
      switch (e.kind) {
        case StreamEventKind::readable:
          if (!c) continue;
          c->readable_queued = false;
          if (c->state != State::established) continue;
          break;
        case StreamEventKind::writable:
          if (!c || c->state != State::established) continue;
          break;
        case StreamEventKind::accepted:
        case StreamEventKind::connected:
          if (!c) continue;
          break;
        case StreamEventKind::connect_failed:
          if (!c) continue;
          conns_.erase(it);
          break;
        case StreamEventKind::closed:
          // The id is gone now; its socket too when the caller has not closed it yet.
          if (c && c->state == State::broken) {
            if (pcap_) pcap_end(*c, false);
            ::shutdown(c->fd(), SHUT_WR);
            conns_.erase(it);
          }
          break;
      }
      out[n++] = e;
    }
    return n;
  }

  bool keepalive(StreamId id, std::chrono::milliseconds idle, std::chrono::milliseconds interval, int probes) override {
    auto it = conns_.find(id);
    if (it == conns_.end()) return false;
    const int fd = it->second->fd();
    const int on = idle.count() > 0 ? 1 : 0;
    if (::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on) != 0) return false;
    if (!on) return true;
    // The kernel counts in whole seconds (at least 1) for keepalive, milliseconds for the
    // user timeout that bounds data left unacknowledged.
    const auto secs = [](std::chrono::milliseconds m) {
      return static_cast<int>(std::max<std::int64_t>(1, (m.count() + 999) / 1000));
    };
    const int idle_s = secs(idle), intvl_s = secs(interval), cnt = std::max(1, probes);
    const auto user_ms = static_cast<unsigned>(idle.count() + interval.count() * cnt);
    return ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof idle_s) == 0 &&
           ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl_s, sizeof intvl_s) == 0 &&
           ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt) == 0 &&
           ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_ms, sizeof user_ms) == 0;
  }

  void spin_read(StreamId id) override {
    if (Conn* c = find(id)) c->spin = true;
  }

  std::size_t mss(StreamId id) const override {
    auto it = conns_.find(id);
    return it == conns_.end() ? kFallbackMss : mss_of(it->second->fd());
  }

  NetdevStats stats() const override { return stats_.snapshot(); }

  void wait_rx(std::chrono::microseconds timeout) override {
    std::array<epoll_event, 32> ev;
    const std::int64_t us = std::max<std::int64_t>(0, timeout.count());
    int r = -1;
    if (have_pwait2_.load(std::memory_order_relaxed)) {
      const timespec ts{static_cast<time_t>(us / 1000000), static_cast<long>((us % 1000000) * 1000)};
      r = ::epoll_pwait2(epfd_, ev.data(), static_cast<int>(ev.size()), &ts, nullptr);
      if (r < 0 && errno == ENOSYS) have_pwait2_.store(false, std::memory_order_relaxed);
    }
    if (!have_pwait2_.load(std::memory_order_relaxed)) {
      const auto ms = static_cast<int>(std::min<std::int64_t>((us + 999) / 1000, INT_MAX));  // rounded up
      r = ::epoll_wait(epfd_, ev.data(), static_cast<int>(ev.size()), ms);
    }
    if (r < 0 && errno == EINTR) note_wait_interrupted();
    epoll_next_.store(true, std::memory_order_relaxed);  // what woke the wait is found by the next events()
    for (int i = 0; i < r; ++i) {
      if (ev[static_cast<std::size_t>(i)].data.u64 != epoll_key(Tag::wake, 0)) continue;
      std::uint64_t v;
      [[maybe_unused]] auto rd = ::read(wake_fd_, &v, sizeof v);
    }
  }

  void wake() override {
    const std::uint64_t one = 1;
    [[maybe_unused]] auto wr = ::write(wake_fd_, &one, sizeof one);
  }

 private:
  Conn* find(StreamId id) {
    auto it = conns_.find(id);
    if (it == conns_.end() || it->second->state == State::lingering) return nullptr;
    return it->second.get();
  }

  StreamId new_id() {
    do ++last_id_;
    while (last_id_ == 0 || conns_.count(last_id_));
    return last_id_;
  }

  // As root, SO_*BUFFORCE passes net.core.[rw]mem_max. Without privilege a request above that
  // cap is not made: a fixed buffer at the cap would be smaller than what autotuning reaches.
  // 0: autotuning.
  void set_buffers(int fd) const {
    if (socket_buffer_ <= 0) return;
    const int b = socket_buffer_;
    const auto want = static_cast<std::size_t>(b);
    if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &b, sizeof b) != 0 && want <= rmem_max_)
      ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &b, sizeof b);
    if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &b, sizeof b) != 0 && want <= wmem_max_)
      ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &b, sizeof b);
  }

  // Registers the connection's socket for `mask` (0: removes it). False when epoll refuses.
  static std::uint32_t conn_mask(const Conn& c) {
    return (c.held ? 0u : kConnEvents) | (c.want_writable ? EPOLLOUT : 0u);
  }

  bool set_mask(Conn& c, StreamId id, std::uint32_t mask) {
    if (mask == c.mask) return true;
    int r;
    if (mask == 0) {
      r = ::epoll_ctl(epfd_, EPOLL_CTL_DEL, c.fd(), nullptr);
    } else {
      epoll_event ev{};
      ev.events = mask;
      ev.data.u64 = epoll_key(Tag::conn, id);
      r = ::epoll_ctl(epfd_, c.mask == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, c.fd(), &ev);
    }
    if (r == 0) c.mask = mask;
    return r == 0;
  }

  // The connection ended under a read or write: out of the epoll set, one closed event.
  void broken(Conn& c, StreamId id, int err) {
    c.state = State::broken;
    c.want_writable = false;
    set_mask(c, id, 0);
    if (pcap_) {
      if (err == 0)
        pcap_peer_fin(c);
      else if (err == ECONNRESET)
        pcap_peer_rst(c);
      else
        c.flow.done = true;
    }
    pending_.push_back({StreamEventKind::closed, id, c.peer, 0, err});
  }

  // A connection is up (connected or accepted): its local address, its handshake in the pcap.
  void established(Conn& c, StreamId id, bool active) {
    c.local = local_of(c.fd());
    if (pcap_) pcap_handshake(c, id, active);
  }

  // Reads what waits on an orderly-closed socket and drops it; true when the stream ended (EOF
  // or an error): then the socket can go without a RST.
  bool drain(Conn& c) {
    for (int i = 0; i < 16; ++i) {
      const ssize_t r = ::recv(c.fd(), scratch_rx_.data(), scratch_rx_.size(), MSG_DONTWAIT);
      if (r > 0) continue;
      if (r < 0 && errno == EINTR) continue;
      return !(r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
    }
    return false;
  }

  void reap_lingering() {
    const auto now = std::chrono::steady_clock::now();
    std::erase_if(lingering_, [&](StreamId id) {
      auto it = conns_.find(id);
      if (it == conns_.end()) return true;
      if (now < it->second->linger_until) return false;
      drain(*it->second);  // what came last is dropped here, not answered with a RST
      conns_.erase(it);
      return true;
    });
  }

  // Between epoll rounds, a busy poller's spin_read connections are reported readable without
  // asking the kernel: the caller's read is the one system call of the round (epoll_wait and
  // then a read were two per message received). Only while every connection is such a one, at
  // most kSpinConns of them (beyond, one epoll_wait costs less than their reads), none waits
  // to connect or for writable (their events come from epoll alone). Accepts, and connections
  // not yet spin_read, wait at most kEpollEvery calls; a read finds the end of a stream itself.
  // And only while each receives messages (a read found at most kSpinReadMax bytes in the last
  // kSpinHot calls): a read takes the socket's lock, which a sender's stream of incoming TCP ACKs
  // contends for, where epoll_wait does not; and a stream's receiver, reading as soon as anything
  // came, read smaller batches (a 4 KiB Write stream lost 5-10 % either way).
  bool spin_round() {
    if (epoll_next_.exchange(false, std::memory_order_relaxed) || ++spin_calls_ % kEpollEvery == 0 || conns_.empty() ||
        conns_.size() > kSpinConns)
      return false;
    for (const auto& [id, c] : conns_)
      if (!c->spin || c->state != State::established || c->want_writable || !c->small_read ||
          spin_calls_ - c->data_call > kSpinHot)
        return false;
    for (auto& [id, c] : conns_) {
      if (c->readable_queued) continue;
      c->readable_queued = true;
      pending_.push_back({StreamEventKind::readable, id, {}, 0, 0});
    }
    return true;
  }

  void poll() {
    std::array<epoll_event, kPollBatch> ev;
    const int r = ::epoll_wait(epfd_, ev.data(), kPollBatch, 0);
    for (int i = 0; i < r; ++i) {
      const epoll_event& e = ev[static_cast<std::size_t>(i)];
      const auto tag = static_cast<Tag>(e.data.u64 >> 32);
      const auto v = static_cast<std::uint32_t>(e.data.u64);
      if (tag == Tag::listener) {
        accept_all(static_cast<std::uint16_t>(v));
        continue;
      }
      if (tag != Tag::conn) continue;  // the eventfd: wait_rx drains it
      auto it = conns_.find(v);
      if (it == conns_.end()) continue;
      Conn& c = *it->second;
      switch (c.state) {
        case State::connecting: finish_connect(c, v, e.events); break;
        case State::established:
          if ((e.events & EPOLLOUT) && c.want_writable) {
            c.want_writable = false;
            set_mask(c, v, conn_mask(c));
            pending_.push_back({StreamEventKind::writable, v, {}, 0, 0});
          }
          if ((e.events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) && !c.readable_queued) {
            c.readable_queued = true;
            pending_.push_back({StreamEventKind::readable, v, {}, 0, 0});
          }
          break;
        case State::lingering:
          if (drain(c)) {
            std::erase(lingering_, v);
            conns_.erase(it);
          }
          break;
        case State::failed:
        case State::broken: set_mask(c, v, 0); break;
      }
    }
  }

  void finish_connect(Conn& c, StreamId id, std::uint32_t revents) {
    if (!(revents & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
    int err = 0;
    socklen_t l = sizeof err;
    if (::getsockopt(c.fd(), SOL_SOCKET, SO_ERROR, &err, &l) != 0) err = errno;
    if (err == 0 && !(revents & EPOLLOUT)) err = ECONNREFUSED;  // a hang-up without an error: no connection
    if (err != 0) {
      c.state = State::failed;
      c.want_writable = false;
      set_mask(c, id, 0);
      pending_.push_back({StreamEventKind::connect_failed, id, c.peer, 0, err});
      return;
    }
    c.state = State::established;
    set_mask(c, id, kConnEvents | (c.want_writable ? EPOLLOUT : 0u));
    established(c, id, true);
    pending_.push_back({StreamEventKind::connected, id, c.peer, c.local.port, 0});
    if (revents & EPOLLIN) {
      c.readable_queued = true;
      pending_.push_back({StreamEventKind::readable, id, {}, 0, 0});
    }
  }

  void accept_all(std::uint16_t port) {
    auto lit = listeners_.find(port);
    if (lit == listeners_.end()) return;
    const int lfd = lit->second->native_handle();
    for (;;) {
      sockaddr_in sa{};
      socklen_t sl = sizeof sa;
      const int fd = ::accept4(lfd, reinterpret_cast<sockaddr*>(&sa), &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;  // EAGAIN: all taken (EMFILE and the like: the listener stays readable, tried again)
      }
      auto c = std::make_unique<Conn>(io_);
      boost::system::error_code ec;
      c->sock.assign(tcp::v4(), fd, ec);
      if (ec) {
        ::close(fd);
        continue;
      }
      c->sock.non_blocking(true, ec);
      c->sock.set_option(tcp::no_delay(true), ec);
      c->state = State::established;
      c->peer = from_sockaddr(sa);
      const StreamId id = new_id();
      if (!set_mask(*c, id, kConnEvents)) continue;  // the socket closes with c
      established(*c, id, false);
      pending_.push_back({StreamEventKind::accepted, id, c->peer, port, 0});
      conns_.emplace(id, std::move(c));
    }
  }

  // ---- pcap: the synthesized TCP flow ----

  enum : std::uint8_t { kFin = 0x01, kSyn = 0x02, kRst = 0x04, kPsh = 0x08, kAck = 0x10 };

  // Writes one segment: from this end (`out`) or from the peer.
  void pcap_segment(const Conn& c, bool out, std::uint32_t seq, std::uint32_t ack, std::uint8_t flags,
                    std::span<const std::uint8_t> payload, std::uint16_t syn_mss = 0) {
    const NetAddr src = out ? c.local : c.peer, dst = out ? c.peer : c.local;
    const std::size_t opt = syn_mss ? 8 : 0;  // MSS (4), NOP, window scale (3)
    const std::size_t tcp_len = 20 + opt;
    std::array<std::uint8_t, eth::kEthHdr + eth::kIpv4Hdr + 28> hdr{};
    std::uint8_t* e = hdr.data();
    const eth::Mac dmac = eth::mac_from_ip(dst.ip), smac = eth::mac_from_ip(src.ip);
    std::memcpy(e, dmac.b.data(), 6);
    std::memcpy(e + 6, smac.b.data(), 6);
    put16(e + 12, eth::kEtherIpv4);
    std::uint8_t* ip = e + eth::kEthHdr;
    ip[0] = 0x45;
    put16(ip + 2, static_cast<std::uint16_t>(eth::kIpv4Hdr + tcp_len + payload.size()));
    put16(ip + 4, ip_id_++);
    put16(ip + 6, 0x4000);  // DF
    ip[8] = 64;
    ip[9] = 6;  // TCP
    put32(ip + 12, src.ip);
    put32(ip + 16, dst.ip);
    put16(ip + 10, eth::ipv4_header_checksum({ip, eth::kIpv4Hdr}));
    std::uint8_t* t = ip + eth::kIpv4Hdr;
    put16(t, src.port);
    put16(t + 2, dst.port);
    put32(t + 4, seq);
    put32(t + 8, ack);
    t[12] = static_cast<std::uint8_t>(tcp_len / 4 << 4);
    t[13] = flags;
    put16(t + 14, 0xFFFF);  // unscaled in a SYN; << kPcapWindowShift after
    if (syn_mss) {
      t[20] = 2;  // MSS
      t[21] = 4;
      put16(t + 22, syn_mss);
      t[24] = 1;  // NOP
      t[25] = 3;  // window scale
      t[26] = 3;
      t[27] = kPcapWindowShift;
    }
    eth::Checksum sum;
    sum.add32(src.ip);
    sum.add32(dst.ip);
    sum.add16(6);
    sum.add16(static_cast<std::uint16_t>(tcp_len + payload.size()));
    sum.add({t, tcp_len});
    sum.add(payload);
    put16(t + 16, sum.finish());
    const std::span<const std::uint8_t> h(hdr.data(), eth::kEthHdr + eth::kIpv4Hdr + tcp_len);
    if (payload.empty())
      pcap_->write(h);
    else
      pcap_->write({h, payload});
  }

  void pcap_handshake(Conn& c, StreamId id, bool active) {
    Flow& f = c.flow;
    const std::uint32_t iss_me = mix32(std::uint64_t{id} << 1), iss_peer = mix32(std::uint64_t{id} << 1 | 1);
    const auto m = static_cast<std::uint16_t>(std::min<std::size_t>(mss_of(c.fd()), 0xFFFF));
    if (active) {
      pcap_segment(c, true, iss_me, 0, kSyn, {}, m);
      pcap_segment(c, false, iss_peer, iss_me + 1, kSyn | kAck, {}, m);
      pcap_segment(c, true, iss_me + 1, iss_peer + 1, kAck, {});
    } else {
      pcap_segment(c, false, iss_peer, 0, kSyn, {}, m);
      pcap_segment(c, true, iss_me, iss_peer + 1, kSyn | kAck, {}, m);
      pcap_segment(c, false, iss_peer + 1, iss_me + 1, kAck, {});
    }
    f.snd_nxt = f.snd_acked = iss_me + 1;
    f.rcv_nxt = f.rcv_acked = iss_peer + 1;
    f.on = true;
  }

  // The first `taken` bytes of `pieces`, as segments of at most kPcapSegment bytes.
  void pcap_sent(Conn& c, std::span<const std::span<const std::uint8_t>> pieces, std::size_t taken) {
    Flow& f = c.flow;
    if (!f.on || f.done) return;
    std::size_t piece = 0, at = 0;
    while (taken > 0) {
      const std::size_t seg = std::min(taken, kPcapSegment);
      std::size_t filled = 0;
      while (filled < seg) {
        const auto& p = pieces[piece];
        const std::size_t k = std::min(seg - filled, p.size() - at);
        std::memcpy(scratch_.data() + filled, p.data() + at, k);
        filled += k;
        at += k;
        if (at == p.size()) {
          ++piece;
          at = 0;
        }
      }
      taken -= seg;
      pcap_segment(c, true, f.snd_nxt, f.rcv_nxt, static_cast<std::uint8_t>(kAck | (taken == 0 ? kPsh : 0)),
                   {scratch_.data(), seg});
      f.snd_nxt += static_cast<std::uint32_t>(seg);
      f.rcv_acked = f.rcv_nxt;
    }
    if (f.snd_nxt - f.snd_acked >= kPcapAckEvery) {
      pcap_segment(c, false, f.rcv_nxt, f.snd_nxt, kAck, {});
      f.snd_acked = f.snd_nxt;
    }
  }

  void pcap_received(Conn& c, std::span<const std::uint8_t> bytes) {
    Flow& f = c.flow;
    if (!f.on || f.done) return;
    while (!bytes.empty()) {
      const std::size_t seg = std::min(bytes.size(), kPcapSegment);
      pcap_segment(c, false, f.rcv_nxt, f.snd_nxt, static_cast<std::uint8_t>(kAck | (seg == bytes.size() ? kPsh : 0)),
                   bytes.first(seg));
      f.rcv_nxt += static_cast<std::uint32_t>(seg);
      f.snd_acked = f.snd_nxt;
      bytes = bytes.subspan(seg);
    }
    if (f.rcv_nxt - f.rcv_acked >= kPcapAckEvery) {
      pcap_segment(c, true, f.snd_nxt, f.rcv_nxt, kAck, {});
      f.rcv_acked = f.rcv_nxt;
    }
  }

  void pcap_peer_fin(Conn& c) {
    Flow& f = c.flow;
    if (!f.on || f.done || f.peer_fin) return;
    pcap_segment(c, false, f.rcv_nxt, f.snd_nxt, kFin | kAck, {});
    f.rcv_nxt += 1;
    f.snd_acked = f.snd_nxt;
    pcap_segment(c, true, f.snd_nxt, f.rcv_nxt, kAck, {});
    f.rcv_acked = f.rcv_nxt;
    f.peer_fin = true;
  }

  void pcap_peer_rst(Conn& c) {
    Flow& f = c.flow;
    if (!f.on || f.done) return;
    pcap_segment(c, false, f.rcv_nxt, f.snd_nxt, kRst | kAck, {});
    f.done = true;
  }

  // Our end of the flow: RST (abort) or FIN, acknowledged by the peer when its FIN came before.
  void pcap_end(Conn& c, bool abort) {
    Flow& f = c.flow;
    if (!f.on || f.done) return;
    f.done = true;
    if (abort) {
      pcap_segment(c, true, f.snd_nxt, f.rcv_nxt, kRst | kAck, {});
      return;
    }
    pcap_segment(c, true, f.snd_nxt, f.rcv_nxt, kFin | kAck, {});
    f.snd_nxt += 1;
    if (f.peer_fin) pcap_segment(c, false, f.rcv_nxt, f.snd_nxt, kAck, {});
  }

  asio::io_context io_;  // never run: the sockets are driven through their handles
  std::uint32_t ip_ = 0;
  int socket_buffer_ = 0;
  std::size_t rmem_max_ = 0, wmem_max_ = 0;
  int epfd_ = -1;
  int wake_fd_ = -1;
  std::atomic<bool> have_pwait2_{true};
  std::atomic<bool> epoll_next_{true};  // set by wait_rx (outside the caller's lock), taken by events()
  std::uint32_t spin_calls_ = 0;
  std::unordered_map<std::uint16_t, std::unique_ptr<tcp::acceptor>> listeners_;
  std::unordered_map<StreamId, std::unique_ptr<Conn>> conns_;
  std::vector<StreamId> lingering_;
  std::deque<StreamEvent> pending_;
  StreamId last_id_ = 0;
  AtomicNetdevStats stats_;
  std::unique_ptr<PcapWriter> pcap_;
  std::vector<std::uint8_t> scratch_;           // pcap: one outgoing segment made contiguous
  std::array<std::uint8_t, 65536> scratch_rx_;  // what a closing socket drains
  std::uint16_t ip_id_ = 1;
};

}  // namespace

std::unique_ptr<StreamNetdev> make_tcp_netdev(const NetdevConfig& cfg, std::string& error) {
  auto d = std::make_unique<TcpNetdev>();
  if (!d->open(cfg, error)) return nullptr;
  return d;
}

}  // namespace softrnic::netdev
