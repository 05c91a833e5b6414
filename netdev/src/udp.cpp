// The `udp` backend: kernel UDP sockets through Boost.Asio (socket set-up), with
// sendmmsg/recvmmsg on the native handle for bursts.
//
// One socket is bound to the netdev's address and serves every peer. While a peer has
// connections (peer_hint), up to kMaxConnectedPeers of them also get a socket of their own,
// bound to the same address (SO_REUSEPORT) and connected to the peer: the kernel then sends
// to it without a route lookup per datagram, and delivers the peer's datagrams to it. The main
// socket is bound before it allows port sharing, so a second netdev asking for a taken port
// still gets "address in use" (and probes on).
#include <time.h>  // before linux/errqueue.h, which uses timespec
// clang-format off
#include <linux/errqueue.h>
// clang-format on
#include <netinet/in.h>
#include <netinet/udp.h>  // UDP_SEGMENT
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "backends.hpp"
#include "sockaddr.hpp"

namespace softrnic::netdev {
namespace {

namespace asio = boost::asio;
using asio::ip::udp;

constexpr int kMaxPortProbe = 64;
constexpr std::size_t kBurst = 64;
constexpr std::size_t kMaxConnectedPeers = 4;
// UDP GSO: at most 64 segments per send (UDP_MAX_SEGMENTS on Linux 6.1), in one IP datagram.
constexpr std::size_t kMaxGsoSegments = 64;
constexpr std::size_t kMaxGsoBytes = 65507;
// While peers have sockets of their own, a consumer that polls reads one socket per call: the
// peers' in turn, and the main socket (new peers, connection requests) every kMainEvery calls.
constexpr std::uint32_t kMainEvery = 8;

// As root, SO_*BUFFORCE passes net.core.[rw]mem_max; otherwise the kernel caps the request.
void set_buffers(int fd, int bytes) {
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes) != 0)
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
  if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof bytes) != 0)
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
}

// The non-empty pieces of a frame as iovecs (at most 3); how many.
std::size_t frame_iov(const TxFrame& f, iovec* iov) {
  std::size_t k = 0;
  for (auto part : {f.head, f.body, f.tail}) {
    if (part.empty()) continue;
    iov[k].iov_base = const_cast<std::uint8_t*>(part.data());
    iov[k].iov_len = part.size();
    ++k;
  }
  return k;
}

// As frame_iov (at most kMaxFrameIov), for a frame that leaves with IP ID `id`: a sealed frame's
// last four bytes come from `patch` instead, corrected for the ID (TxFrame::seal).
constexpr std::size_t kMaxFrameIov = 4;
std::size_t frame_iov(const TxFrame& f, iovec* iov, std::uint16_t id, std::array<std::uint8_t, 4>& patch) {
  std::size_t k = frame_iov(f, iov);
  if (id == 0 || !f.seal || f.size() < patch.size()) return k;
  // The last four bytes, which may straddle pieces, cut off the end of the list.
  for (std::size_t cut = patch.size(); cut > 0;) {
    iovec& last = iov[k - 1];
    const std::size_t n = std::min(cut, last.iov_len);
    std::memcpy(patch.data() + cut - n, static_cast<std::uint8_t*>(last.iov_base) + last.iov_len - n, n);
    last.iov_len -= n;
    cut -= n;
    if (last.iov_len == 0) --k;
  }
  const std::uint32_t fix = f.seal(f.size(), id);
  for (std::size_t i = 0; i < patch.size(); ++i) patch[i] ^= static_cast<std::uint8_t>(fix >> (8 * i));
  iov[k++] = {patch.data(), patch.size()};
  return k;
}

class UdpNetdev final : public Netdev {
 public:
  UdpNetdev(std::size_t max_dgram) : socket_(io_), max_dgram_(max_dgram) {
    for (std::size_t i = 0; i < kBurst; ++i) {
      std::memset(&rx_msgs_[i], 0, sizeof rx_msgs_[i]);
      rx_msgs_[i].msg_hdr.msg_name = &rx_from_[i];
      rx_msgs_[i].msg_hdr.msg_iov = &rx_iov_[i];
      rx_msgs_[i].msg_hdr.msg_iovlen = 1;
    }
  }
  ~UdpNetdev() override {
    if (fd_ >= 0 && !socket_.is_open()) ::close(fd_);  // (else open() failed, and Asio still owns it)
    for (std::size_t i = 0; i < npeers_; ++i) ::close(peers_[i].fd);
    for (const auto& [port, fd] : src_socks_) ::close(fd);
    if (wake_fd_ >= 0) ::close(wake_fd_);
  }

  bool open(const NetdevConfig& cfg, std::string& error) {
    std::uint32_t ip = 0;
    if (!parse_ipv4(cfg.ip, ip)) {
      error = "udp netdev: bad IPv4 address '" + cfg.ip + "'";
      return false;
    }
    boost::system::error_code ec;
    const int tries = cfg.port_fixed || cfg.port == 0 ? 1 : kMaxPortProbe;
    for (int i = 0; i < tries; ++i) {
      const auto port = static_cast<std::uint16_t>(cfg.port + i);
      if (cfg.port != 0 && port < cfg.port) break;  // wrapped
      socket_.close(ec);
      socket_.open(udp::v4(), ec);
      if (ec) break;
      socket_.bind(udp::endpoint(asio::ip::address_v4(ip), port), ec);
      if (!ec) break;
      if (ec != asio::error::address_in_use) break;
    }
    if (ec) {
      error = "udp netdev: cannot bind " + cfg.ip + ":" + std::to_string(cfg.port) +
              (tries > 1 ? " (or the next " + std::to_string(tries - 1) + " ports)" : "") + ": " + ec.message();
      return false;
    }
    socket_.non_blocking(true, ec);
    const int want = static_cast<int>(cfg.socket_buffer);
    const int fd = fd_ = socket_.native_handle();
    set_buffers(fd, want);
    int got = 0;
    socklen_t gl = sizeof got;
    ::getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &got, &gl);
    rx_buffer_ = static_cast<std::size_t>(got);
    const auto ep = socket_.local_endpoint(ec);
    if (ec) {
      error = "udp netdev: local_endpoint: " + ec.message();
      return false;
    }
    local_ = NetAddr{ep.address().to_v4().to_uint(), ep.port()};
    // Only now (the port is ours) may per-peer sockets share it.
    const int one = 1;
    // (Not with DF: no per-peer sockets then, and another process must not share the port.)
    share_port_ = !cfg.dont_fragment && ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) == 0;
    // ICMP errors for datagrams sent from the unconnected socket too (a connection request to a
    // port where nothing listens, a host that is gone): read from its error queue.
    ::setsockopt(fd, IPPROTO_IP, IP_RECVERR, &one, sizeof one);
    dont_fragment_ = cfg.dont_fragment;
    gso_ = cfg.udp_gso;  // (with dont_fragment: checksums on, below)
    // A GSO run from a peer crosses loopback as one packet: with UDP_GRO one receive takes it
    // whole (else the kernel cuts it up on arrival, one datagram per skb again). Turned on while
    // datagrams come in bursts (set_gro).
    gro_ = gso_;
    gso_pairs_ = gso_ && cfg.udp_gso_pairs && cfg.dont_fragment;
    if (gro_) {
      gro_buf_.resize(kGroBufs * kGroBufSize);
      for (std::size_t i = 0; i < kGroBufs; ++i) {
        std::memset(&gro_msgs_[i], 0, sizeof gro_msgs_[i]);
        gro_iov_[i] = {gro_buf_.data() + i * kGroBufSize, kGroBufSize};
        gro_msgs_[i].msg_hdr.msg_name = &rx_from_[i];
        gro_msgs_[i].msg_hdr.msg_iov = &gro_iov_[i];
        gro_msgs_[i].msg_hdr.msg_iovlen = 1;
        gro_msgs_[i].msg_hdr.msg_control = gro_ctrl_[i].data();
      }
      segs_.reserve(kGroBufs * kMaxGsoSegments);
    }
    if (cfg.dont_fragment) {
      const int pmtu = IP_PMTUDISC_DO;
      if (::setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu) != 0) {
        error = std::string("udp netdev: IP_MTU_DISCOVER: ") + std::strerror(errno);
        return false;
      }
      // RoCEv2 sends UDP checksum 0 over IPv4 (its ICRC covers the packet), as rxe and RoCE NICs
      // do; but Linux refuses GSO on such a socket, and a GSO send carries a 64 KiB Write's 16
      // packets in one trip through the kernel instead of 16 (udp_gso=0 for checksum 0).
      if (!gso_) ::setsockopt(fd, SOL_SOCKET, SO_NO_CHECK, &one, sizeof one);
    }
    if (gso_pairs_) {
      set_gro(true);  // (for good: pairs arrive coalesced)
      gso_pairs_ = gro_on_;
    }
    socket_buffer_ = want;
    poll_fds_.assign({fd});
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0) {
      error = std::string("udp netdev: eventfd: ") + std::strerror(errno);
      return false;
    }
    // The socket leaves Asio (which made and bound it): Asio's reactor had it in an epoll set
    // that nothing waits on, and each datagram that came ran that set's callback.
    socket_.release(ec);
    if (ec) {
      error = "udp netdev: cannot take the socket from Asio: " + ec.message();
      return false;
    }
    return true;
  }

  NetAddr local_addr() const override { return local_; }
  std::size_t max_datagram() const override { return max_dgram_; }

  std::uint16_t source_port(std::uint16_t wanted) override {
    // A send-only socket bound to that port (DF and checksums as the main socket), made once.
    // Never connected, though a connected socket would skip the route lookup of each send
    // (~0.1 us): Linux numbers the DF datagrams of a connected socket from a counter of its own
    // (inet_id) instead of 0, and the ICRC, computed for ID 0 (IpIdSeal), would be wrong for rxe.
    if (!dont_fragment_ || wanted == 0 || wanted == local_.port) return local_.port;
    if (src_socks_.count(wanted)) return wanted;
    if (src_socks_.size() >= kMaxSourcePorts) return local_.port;
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return local_.port;
    const sockaddr_in me = to_sockaddr(NetAddr{local_.ip, wanted});
    const int pmtu = IP_PMTUDISC_DO, one = 1;
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&me), sizeof me) != 0 ||
        ::setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu) != 0) {
      ::close(fd);
      return local_.port;  // taken (another process's QP hashed to it): our own port serves
    }
    if (!gso_) ::setsockopt(fd, SOL_SOCKET, SO_NO_CHECK, &one, sizeof one);
    set_buffers(fd, socket_buffer_);
    src_socks_[wanted] = fd;
    return wanted;
  }

  std::size_t tx_burst(std::span<const TxFrame> frames) override {
    std::size_t done = 0;
    while (done < frames.size()) {
      const Run r = plan(frames.subspan(done));
      if (r.gso) {
        const int s = send_gso(frames.subspan(done, r.gso), r.peer, r.fd);
        if (s == 0) break;  // the socket is full
        if (s > 0) {
          done += r.gso;
          continue;
        }
        // (the kernel refused GSO: sendmmsg from now on, this run included)
      }
      if (r.n == 1) {
        // A lone frame (the latency path): one plain send of one buffer; sendmmsg with three
        // iovecs costs ~0.2 us more per datagram on this path.
        if (!send_one(frames[done], r.peer, r.fd)) break;
        done++;
        continue;
      }
      const std::size_t k = send_mmsg(frames.subspan(done, r.n), r.peer, r.fd);
      if (k == 0) break;
      done += k;
    }
    return done;
  }

  std::size_t rx_burst(std::span<RxFrame> out) override {
    const std::size_t n = std::min(kBurst, out.size());
    if (n == 0) return 0;
    if (seg_at_ < segs_.size()) return hand_out(out.first(n));  // the rest of a coalesced receive
    const int fd = next_rx_fd();
    bool& ancillary = ancillary_of(fd);
    const std::size_t got = ancillary ? receive_gro(fd, out.first(n), ancillary) : receive(fd, out.first(n));
    if (drain_main_ && got == 0 && fd == fd_) drain_main_ = false;
    return got;
  }

  void wait_rx(std::chrono::microseconds timeout) override {
    // Datagrams of a coalesced receive not handed out yet: they are ready now (the sockets may
    // be empty, and a poll of them would sleep on what is here).
    if (lent_pending_.load(std::memory_order_acquire)) return;
    std::array<pollfd, kMaxConnectedPeers + 2> fds;
    std::size_t nfds = 0;
    {
      std::lock_guard lk(poll_mu_);
      for (const int fd : poll_fds_) fds[nfds++] = {fd, POLLIN, 0};
    }
    fds[nfds++] = {wake_fd_, POLLIN, 0};
    // ppoll: microsecond timeouts (a delayed ack is due within 100 us).
    const auto us = std::max<std::int64_t>(0, timeout.count());
    const timespec ts{static_cast<time_t>(us / 1000000), static_cast<long>((us % 1000000) * 1000)};
    const int r = ::ppoll(fds.data(), nfds, &ts, nullptr);
    if (r < 0 && errno == EINTR) note_wait_interrupted();
    if (r <= 0) return;
    // The sockets found readable are read first (a hint: rx_burst checks again).
    std::uint32_t ready = 0;
    for (std::size_t i = 0; i + 1 < nfds; ++i)
      if (fds[i].revents & (POLLIN | POLLERR)) ready |= 1u << i;
    if (ready) ready_.fetch_or(ready, std::memory_order_relaxed);
    if (fds[nfds - 1].revents & POLLIN) {
      std::uint64_t v;
      [[maybe_unused]] auto rd = ::read(wake_fd_, &v, sizeof v);
    }
  }

  void wake() override {
    const std::uint64_t one = 1;
    [[maybe_unused]] auto wr = ::write(wake_fd_, &one, sizeof one);
  }

  void peer_hint(NetAddr peer, bool up) override {
    std::size_t i = 0;
    while (i < npeers_ && !(peers_[i].addr == peer)) ++i;
    if (up) {
      if (i < npeers_) {
        peers_[i].users++;
        return;
      }
      if (npeers_ == kMaxConnectedPeers || !share_port_) return;  // the main socket serves it
      const int fd = connected_socket(peer);
      if (fd < 0) return;
      peers_[npeers_++] = Peer{peer, fd, 1, gro_on_};
      // What the peer sent before this socket existed waits on the main socket; what it sends
      // from now on comes here. The main socket is read until empty first, so the peer's
      // datagrams are taken in the order it sent them (a reset behind a connection's
      // confirmation must not overtake it, or dtestcm counts a DISCONNECTED as its ESTABLISHED).
      drain_main_ = true;
    } else {
      if (i == npeers_ || --peers_[i].users > 0) return;
      // Datagrams still queued on it are lost; the connection is over (a reliable protocol
      // above retransmits what another connection to the peer still needs).
      ::close(peers_[i].fd);
      peers_[i] = peers_[--npeers_];
    }
    std::lock_guard lk(poll_mu_);
    poll_fds_.assign({fd_});
    for (std::size_t k = 0; k < npeers_; ++k) poll_fds_.push_back(peers_[k].fd);
    ready_.store(0, std::memory_order_relaxed);
    wake();  // a wait_rx in progress polls the new set
  }

  bool errors_pending() const override { return errors_n_.load(std::memory_order_relaxed) != 0; }
  std::size_t unreachable(std::span<Unreachable> out) override {
    std::lock_guard lk(errors_mu_);
    const std::size_t n = std::min(out.size(), errors_.size());
    std::copy_n(errors_.begin(), n, out.begin());
    errors_.erase(errors_.begin(), errors_.begin() + static_cast<std::ptrdiff_t>(n));
    errors_n_.store(errors_.size(), std::memory_order_relaxed);
    return n;
  }

  NetdevStats stats() const override { return stats_.snapshot(); }
  std::size_t rx_buffer_bytes() const override { return rx_buffer_; }

 private:
  struct Peer {
    NetAddr addr;
    int fd = -1;
    std::uint32_t users = 0;  // connections to it (peer_hint up minus down)
    bool ancillary = false;   // reads go through receive_gro (see main_ancillary_)
  };

  // Whether reads of `fd` must take the ancillary data (UDP_GRO's segment size): while GRO is
  // on, and after it is turned off until the socket is seen empty (what was queued before may
  // be coalesced still).
  bool& ancillary_of(int fd) {
    for (std::size_t i = 0; i < npeers_; ++i)
      if (peers_[i].fd == fd) return peers_[i].ancillary;
    return main_ancillary_;
  }

  // Datagrams read back to back, with no empty read between them: kGroOnBurst turn GRO on.
  void note_run(std::uint32_t n) {
    burst_run_ += n;
    if (burst_run_ >= kGroOnBurst) set_gro(true);
  }

  // UDP_GRO on every socket, or off. On while datagrams come in bursts (a stream, whose runs
  // then arrive whole); off while they come one at a time (a ping-pong: a read with ancillary
  // data costs ~0.15 us more than recvfrom).
  void set_gro(bool on) {
    if (!gro_ || gro_on_ == on || (!on && gso_pairs_)) return;
    const int v = on ? 1 : 0;
    if (::setsockopt(fd_, IPPROTO_UDP, UDP_GRO, &v, sizeof v) != 0) {
      if (on) gro_ = false;  // the kernel has no UDP_GRO: receive() as before (nothing was coalesced)
      return;                // (turning it off failed: it stays on, reads keep the ancillary data)
    }
    for (std::size_t i = 0; i < npeers_; ++i) ::setsockopt(peers_[i].fd, IPPROTO_UDP, UDP_GRO, &v, sizeof v);
    gro_on_ = on;
    single_streak_ = 0;
    if (on) {
      main_ancillary_ = true;
      for (std::size_t i = 0; i < npeers_; ++i) peers_[i].ancillary = true;
    }
  }

  const Peer* find_peer(const NetAddr& a) const {
    for (std::size_t i = 0; i < npeers_; ++i)
      if (peers_[i].addr == a) return &peers_[i];
    return nullptr;
  }

  // A socket bound to our address and connected to `peer`; -1 (and the main socket serves the
  // peer) when the kernel refuses one.
  int connected_socket(const NetAddr& peer) {
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    const int one = 1;
    const sockaddr_in me = to_sockaddr(local_), to = to_sockaddr(peer);
    if (::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0 ||
        ::bind(fd, reinterpret_cast<const sockaddr*>(&me), sizeof me) != 0 ||
        ::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) {
      ::close(fd);
      return -1;
    }
    set_buffers(fd, socket_buffer_);
    ::setsockopt(fd, IPPROTO_IP, IP_RECVERR, &one, sizeof one);
    if (gro_on_) ::setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof one);
    return fd;
  }

  // How the frames at the front of `f` leave in one system call: from which socket (a source
  // port's own (source_port), else the peer's when it has one, else the device's), how many (a
  // run to one destination on that socket), and whether as one GSO send.
  struct Run {
    const Peer* peer = nullptr;
    int fd = -1;          // a source port's socket; -1: the peer's or the device's
    std::size_t n = 1;    // frames in the run
    std::size_t gso = 0;  // when >= 2: the first gso frames leave as one UDP GSO send
  };
  Run plan(std::span<const TxFrame> f) const {
    Run r;
    const TxFrame& first = f[0];
    r.fd = source_fd(first);
    if (r.fd < 0) r.peer = find_peer(first.to);
    while (r.n < kBurst && r.n < f.size() && f[r.n].to == first.to && source_fd(f[r.n]) == r.fd) ++r.n;
    if (r.n < 2 || !gso_) return r;
    // Equal-sized frames (the last may be shorter) as one UDP GSO send: the kernel's stack is
    // walked once for the run, and on loopback it arrives as one packet. Else sendmmsg up to
    // where such a run begins (it goes as GSO next time round).
    r.gso = gso_run(f.first(r.n), gso_pairs_);
    if (r.gso == 0) {
      std::size_t j = 1;
      while (j + 1 < r.n && f[j].size() != f[j + 1].size()) ++j;
      if (j + 1 < r.n) r.n = j;  // (else no such run begins: all of them by sendmmsg)
    }
    return r;
  }

  // The socket of the frame's own source port (source_port), or -1: the peer's or the device's.
  int source_fd(const TxFrame& f) const {
    if (!f.from_port || f.from_port == local_.port) return -1;
    const auto it = src_socks_.find(f.from_port);
    return it == src_socks_.end() ? -1 : it->second;
  }

  // How many of `f` (at least 2, else 0) one GSO send can carry: equal sizes, the last may be
  // shorter, at most kMaxGsoSegments and kMaxGsoBytes in all.
  static std::size_t gso_run(std::span<const TxFrame> f, bool pairs) {
    if (f.size() < 2) return 0;
    const std::size_t seg = f[0].size();
    std::size_t k = 0, total = 0;
    while (k < f.size() && k < kMaxGsoSegments && total + f[k].size() <= kMaxGsoBytes) {
      const std::size_t sz = f[k].size();
      if (sz > seg || sz == 0) break;
      total += sz;
      ++k;
      if (sz < seg) break;  // a shorter one ends the run
    }
    // Two full segments at least, unless pairs go as one too (udp_gso_pairs: the receiver reads
    // them whole). Else a datagram and a shorter one behind it (a reply and its ACK) go faster by
    // sendmmsg: the receiver's kernel need not cut them apart.
    return k >= 2 && (f[1].size() == seg || pairs) ? k : 0;
  }

  // One sendmsg with a UDP_SEGMENT of the first frame's size, on `fd` if given, else the peer's
  // socket or the device's: 1 when sent (or lost to an ICMP error from before, counted as
  // dropped), 0 when the socket is full, -1 when the kernel refuses GSO (turned off for this
  // netdev).
  int send_gso(std::span<const TxFrame> f, const Peer* peer, int fd) {
    if (fd < 0) fd = peer ? peer->fd : fd_;
    std::array<iovec, kMaxFrameIov * kMaxGsoSegments> iov;
    std::size_t niov = 0, bytes = 0;
    // Linux gives the k-th datagram of the send IP ID k (DF, unconnected socket: dont_fragment).
    for (std::size_t k = 0; k < f.size(); ++k) {
      niov += frame_iov(f[k], &iov[niov], static_cast<std::uint16_t>(k), gso_patch_[k]);
      bytes += f[k].size();
    }
    // A small run (a reply and the ACK riding with it) leaves from one buffer: each piece costs
    // the kernel an iovec to import and a copy to append, ~0.1 us for the six of such a pair.
    if (bytes <= tx_gather_.size()) niov = gather(iov.data(), niov);
    sockaddr_in dst = to_sockaddr(f[0].to);
    alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(std::uint16_t))] = {};
    msghdr m{};
    if (!peer) {
      m.msg_name = &dst;
      m.msg_namelen = sizeof dst;
    }
    m.msg_iov = iov.data();
    m.msg_iovlen = niov;
    m.msg_control = ctrl;
    m.msg_controllen = sizeof ctrl;
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_UDP;
    c->cmsg_type = UDP_SEGMENT;
    c->cmsg_len = CMSG_LEN(sizeof(std::uint16_t));
    const auto seg = static_cast<std::uint16_t>(f[0].size());
    std::memcpy(CMSG_DATA(c), &seg, sizeof seg);
    for (int attempt = 0;; ++attempt) {
      if (::sendmsg(fd, &m, 0) >= 0) break;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      if (errno == EINVAL || errno == EIO || errno == EMSGSIZE || errno == ENOPROTOOPT || errno == EOPNOTSUPP) {
        gso_ = false;
        return -1;
      }
      // An ICMP error from an earlier datagram (IP_RECVERR) failed this send and nothing left:
      // taken, the run goes again once; a second failure drops it (the layer above resends).
      drain_errors(fd);
      if (attempt == 1) {
        stats_.tx_dropped += f.size();
        return 1;
      }
    }
    stats_.tx_frames += f.size();
    stats_.tx_bytes += bytes;
    stats_.tx_gso_sends++;
    return 1;
  }

  // Sends one frame: small ones gathered into one buffer for send/sendto, larger ones with
  // sendmsg. False when the socket is full (the caller stops there).
  // Frames to one destination in one sendmmsg (on `fd` if given, else the peer's socket or the
  // device's): how many went, 0 when the socket is full. A frame the kernel refuses for another
  // reason (an ICMP error from an earlier datagram) counts as dropped and as gone: the
  // reliability layer above retransmits.
  std::size_t send_mmsg(std::span<const TxFrame> fs, const Peer* peer, int fd) {
    if (fd < 0) fd = peer ? peer->fd : fd_;
    const std::size_t n = std::min(fs.size(), kBurst);
    // Only the n entries in use are set up (zeroing all kBurst of them cost ~4 KB of memset
    // per datagram on the latency path).
    std::array<mmsghdr, kBurst> msgs;
    std::array<iovec, 3 * kBurst> iov;
    sockaddr_in dst = to_sockaddr(fs[0].to);
    for (std::size_t i = 0; i < n; ++i) {
      std::memset(&msgs[i], 0, sizeof msgs[i]);
      if (!peer) {
        msgs[i].msg_hdr.msg_name = &dst;
        msgs[i].msg_hdr.msg_namelen = sizeof dst;
      }
      msgs[i].msg_hdr.msg_iov = &iov[3 * i];
      msgs[i].msg_hdr.msg_iovlen = frame_iov(fs[i], &iov[3 * i]);
    }
    const int r = ::sendmmsg(fd, msgs.data(), static_cast<unsigned>(n), 0);
    if (r <= 0) {
      if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
        stats_.tx_dropped++;
        drain_errors(fd);
        return 1;
      }
      return 0;
    }
    for (int i = 0; i < r; ++i) stats_.tx_bytes += fs[static_cast<std::size_t>(i)].size();
    stats_.tx_frames += static_cast<std::uint64_t>(r);
    return static_cast<std::size_t>(r);
  }

  // Copies the pieces of `iov` (at most tx_gather_'s size in all) into tx_gather_, which iov[0]
  // then names alone; returns 1.
  std::size_t gather(iovec* iov, std::size_t n) {
    std::size_t at = 0;
    for (std::size_t i = 0; i < n; ++i) {
      std::memcpy(tx_gather_.data() + at, iov[i].iov_base, iov[i].iov_len);
      at += iov[i].iov_len;
    }
    iov[0] = {tx_gather_.data(), at};
    return 1;
  }

  bool send_one(const TxFrame& f, const Peer* peer, int fd_override = -1) {
    const int fd = fd_override >= 0 ? fd_override : peer ? peer->fd : fd_;
    const sockaddr_in dst = to_sockaddr(f.to);
    const auto* name = peer ? nullptr : reinterpret_cast<const sockaddr*>(&dst);
    const socklen_t namelen = peer ? 0 : sizeof dst;
    const std::size_t size = f.size();
    ssize_t r;
    std::array<iovec, 3> iov;
    const std::size_t k = frame_iov(f, iov.data());
    if (size <= tx_gather_.size()) {
      gather(iov.data(), k);
      r = ::sendto(fd, tx_gather_.data(), size, 0, name, namelen);
    } else {
      msghdr m{};
      m.msg_name = const_cast<sockaddr*>(name);
      m.msg_namelen = namelen;
      m.msg_iov = iov.data();
      m.msg_iovlen = k;
      r = ::sendmsg(fd, &m, 0);
    }
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
      stats_.tx_dropped++;  // an ICMP error from an earlier datagram: the layer above retransmits
      drain_errors(fd);
      return true;
    }
    stats_.tx_frames++;
    stats_.tx_bytes += size;
    return true;
  }

  // Reads the ICMP errors queued on `fd` (IP_RECVERR): destination unreachable reports name the
  // original destination. Kept for the engine (unreachable()), at most kMaxErrors waiting.
  void drain_errors(int fd) {
    for (int i = 0; i < 16; ++i) {
      sockaddr_in dst{};
      char ctrl[512];
      char data[64];
      iovec iov{data, sizeof data};
      msghdr m{};
      m.msg_name = &dst;
      m.msg_namelen = sizeof dst;
      m.msg_iov = &iov;
      m.msg_iovlen = 1;
      m.msg_control = ctrl;
      m.msg_controllen = sizeof ctrl;
      if (::recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) return;
      for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != IPPROTO_IP || c->cmsg_type != IP_RECVERR) continue;
        sock_extended_err ee;
        std::memcpy(&ee, CMSG_DATA(c), sizeof ee);
        if (ee.ee_origin != SO_EE_ORIGIN_ICMP || ee.ee_type != 3) continue;  // destination unreachable
        // code 3: port unreachable; 0, 1 (net, host) and the rest: no way there
        const Unreachable u{from_sockaddr(dst), ee.ee_code == 3};
        std::lock_guard lk(errors_mu_);
        if (errors_.size() >= kMaxErrors) continue;
        if (std::find(errors_.begin(), errors_.end(), u) == errors_.end()) errors_.push_back(u);
        errors_n_.store(errors_.size(), std::memory_order_relaxed);
      }
    }
  }

  // The socket rx_burst reads: one wait_rx found readable, else the next in turn.
  int next_rx_fd() {
    if (npeers_ == 0 || drain_main_) return fd_;
    if (std::uint32_t ready = ready_.load(std::memory_order_relaxed)) {
      const int i = __builtin_ctz(ready);
      ready_.fetch_and(~(1u << i), std::memory_order_relaxed);
      if (i == 0) return fd_;
      if (static_cast<std::size_t>(i) <= npeers_) return peers_[static_cast<std::size_t>(i) - 1].fd;
    }
    const std::uint32_t turn = rx_turn_++;
    if (turn % kMainEvery == 0) return fd_;
    return peers_[turn % npeers_].fd;
  }

  std::size_t receive(int fd, std::span<RxFrame> out) {
    // A consumer that spins mostly finds nothing, then one datagram: recvfrom costs ~0.1 us less
    // than recvmmsg for that. After a datagram, more may follow: the next call takes a burst, and
    // a burst of at most one goes back to single reads. But while datagrams come in pairs (a
    // RoCEv2 reply with the ACK the peer sent behind it in one system call), a single read takes
    // the first and leaves the second to another call, on the path of a consumer that waits for
    // that ACK (a verbs ping-pong, each Send signaled): then a burst reads both at once.
    if (rx_single_ && !pairs_) {
      sockaddr_in src{};
      socklen_t sl = sizeof src;
      const ssize_t r =
          ::recvfrom(fd, out[0].buf, out[0].cap, MSG_DONTWAIT | MSG_TRUNC, reinterpret_cast<sockaddr*>(&src), &sl);
      if (r < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK) drain_errors(fd);
        burst_run_ = 0;
        return 0;
      }
      rx_single_ = false;
      after_single_ = true;
      note_run(1);
      return deliver(out[0], static_cast<std::size_t>(r), static_cast<std::size_t>(r) > out[0].cap, from_sockaddr(src))
                 ? 1
                 : 0;
    }
    const std::size_t n = out.size();
    // The headers live in the netdev, wired once (rx_burst is called from one thread at a time,
    // most often on an empty socket by a consumer that spins): per call only the buffers and the
    // in/out name lengths are set.
    auto& msgs = rx_msgs_;
    auto& iov = rx_iov_;
    auto& from = rx_from_;
    for (std::size_t i = 0; i < n; ++i) {
      iov[i].iov_base = out[i].buf;
      iov[i].iov_len = out[i].cap;
      msgs[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);
      msgs[i].msg_hdr.msg_flags = 0;
    }
    const int r = ::recvmmsg(fd, msgs.data(), static_cast<unsigned>(n), MSG_DONTWAIT, nullptr);
    rx_single_ = r <= 1;
    if (std::exchange(after_single_, false))
      pairs_ = r >= 1;  // the datagram a single read took had company, or came alone
    else if (r == 1)
      pairs_ = false;
    // (fewer than asked: the queue was seen empty, which ends a run of back-to-back datagrams)
    if (r > 0) note_run(static_cast<std::uint32_t>(r));
    if (r < static_cast<int>(n)) burst_run_ = 0;
    if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK) drain_errors(fd);
    if (r <= 0) return 0;
    std::size_t got = 0;
    for (int i = 0; i < r; ++i) {
      const auto& m = msgs[static_cast<std::size_t>(i)];
      const auto idx = static_cast<std::size_t>(i);
      // Datagram i is in out[i]'s buffer; after a dropped one, it moves up to out[got], buffer
      // and all (the caller's buffers are interchangeable).
      if (got != idx) {
        std::swap(out[got].buf, out[idx].buf);
        std::swap(out[got].cap, out[idx].cap);
      }
      if (deliver(out[got], m.msg_len, m.msg_hdr.msg_flags & MSG_TRUNC, from_sockaddr(from[idx]))) ++got;
    }
    return got;
  }

  // With UDP_GRO: one receive (recvmmsg once datagrams flow) into the netdev's buffers, each
  // message cut at the segment size the kernel reports; the pieces are lent to the caller
  // (RxFrame::data), what does not fit `out` on the next calls.
  std::size_t receive_gro(int fd, std::span<RxFrame> out, bool& ancillary) {
    segs_.clear();
    seg_at_ = 0;
    const unsigned want = rx_single_ ? 1u : static_cast<unsigned>(kGroBufs);
    for (unsigned i = 0; i < want; ++i) {
      gro_msgs_[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);
      gro_msgs_[i].msg_hdr.msg_controllen = gro_ctrl_[i].size();
      gro_msgs_[i].msg_hdr.msg_flags = 0;
    }
    int r;
    if (want == 1) {
      const ssize_t len = ::recvmsg(fd, &gro_msgs_[0].msg_hdr, MSG_DONTWAIT);
      r = len < 0 ? -1 : 1;
      if (len >= 0) gro_msgs_[0].msg_len = static_cast<unsigned>(len);
    } else {
      r = ::recvmmsg(fd, gro_msgs_.data(), want, MSG_DONTWAIT, nullptr);
    }
    const bool empty = r == 0 || (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
    if (r < 0 && !empty) drain_errors(fd);
    // (as receive(): after a datagram more may follow, so a burst; a burst of one, single reads)
    rx_single_ = want == 1 ? r <= 0 : r <= 1;
    // GRO is off and the queue was seen empty since (an error, or fewer than asked for): what
    // comes now was cut up on arrival, plain reads from now on.
    if (!gro_on_ && (empty || (want > 1 && r < static_cast<int>(want)))) ancillary = false;
    if (r <= 0) {
      burst_run_ = 0;
      return 0;
    }
    for (int i = 0; i < r; ++i) {
      const msghdr& m = gro_msgs_[static_cast<std::size_t>(i)].msg_hdr;
      const std::size_t len = gro_msgs_[static_cast<std::size_t>(i)].msg_len;
      // (MSG_CTRUNC: the segment size may be lost, and a coalesced message would pass as one)
      if (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
        stats_.rx_truncated++;
        continue;
      }
      int seg = 0;
      for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(const_cast<msghdr*>(&m), c))
        if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) std::memcpy(&seg, CMSG_DATA(c), sizeof seg);
      const std::size_t step = seg > 0 ? static_cast<std::size_t>(seg) : std::max<std::size_t>(len, 1);
      const auto* base = static_cast<const std::uint8_t*>(m.msg_iov->iov_base);
      const NetAddr from = from_sockaddr(rx_from_[static_cast<std::size_t>(i)]);
      const std::size_t before = segs_.size();
      std::size_t off = 0;
      do {  // (an empty datagram is one piece too)
        segs_.push_back(Seg{base + off, std::min(step, len - off), from});
        off += step;
      } while (off < len);
      if (segs_.size() - before > 1) stats_.rx_coalesced += segs_.size() - before;
    }
    if (segs_.size() > 1) rx_single_ = false;  // more follow: take a burst next time
    note_run(static_cast<std::uint32_t>(segs_.size()));
    if (want > 1 && r < static_cast<int>(want)) burst_run_ = 0;
    // Datagrams one at a time for a while (kGroOffStreak reads that found one): GRO off.
    single_streak_ = r == 1 && segs_.size() == 1 ? single_streak_ + 1 : 0;
    if (single_streak_ >= kGroOffStreak) set_gro(false);
    return hand_out(out);
  }

  // Lends the pieces of the last coalesced receive to `out`, as many as fit.
  std::size_t hand_out(std::span<RxFrame> out) {
    std::size_t n = 0;
    while (n < out.size() && seg_at_ < segs_.size()) {
      const Seg& s = segs_[seg_at_++];
      if (deliver(out[n], s.len, s.len > out[n].cap, s.from)) out[n++].data = s.data;
    }
    lent_pending_.store(seg_at_ < segs_.size(), std::memory_order_release);
    return n;
  }

  // Fills `f` with a datagram of `len` bytes from `from` (in its buffer, or lent: f.data) (false,
  // and counted, when it did not fit).
  bool deliver(RxFrame& f, std::size_t len, bool truncated, NetAddr from) {
    if (truncated) {
      stats_.rx_truncated++;
      return false;
    }
    f.len = len;
    f.from = from;
    stats_.rx_frames++;
    stats_.rx_bytes += len;
    return true;
  }

  std::size_t rx_buffer_ = 0;
  asio::io_context io_;
  udp::socket socket_;  // makes and binds the main socket (open), then lets go of it: fd_
  int fd_ = -1;
  std::size_t max_dgram_;
  NetAddr local_{};
  int wake_fd_ = -1;
  std::array<mmsghdr, kBurst> rx_msgs_;  // receive headers, wired to rx_iov_ and rx_from_ once
  std::array<iovec, kBurst> rx_iov_;
  std::array<sockaddr_in, kBurst> rx_from_;
  AtomicNetdevStats stats_;
  std::array<std::uint8_t, 2048> tx_gather_;  // a lone small frame or a small GSO run, made contiguous
  bool rx_single_ = true;                     // the next receive reads one datagram (see receive)
  bool after_single_ = false;                 // the last receive was a single read that got one
  bool pairs_ = false;                        // datagrams come two or more at once (see receive)
  bool drain_main_ = false;                   // a peer got its own socket: read the main one until empty first
  bool share_port_ = false;
  bool gso_ = false;  // runs of equal-sized frames go as one UDP GSO send
  std::array<std::array<std::uint8_t, 4>, kMaxGsoSegments> gso_patch_{};  // sealed frames' corrected ends (send_gso)
  bool gro_ = false;                                                      // UDP_GRO may be used (set_gro)
  bool gro_on_ = false;                                                   // it is set on the sockets now
  bool gso_pairs_ = false;           // a datagram and a shorter one go as one GSO send, GRO stays on (udp_gso_pairs)
  bool main_ancillary_ = false;      // reads of the main socket go through receive_gro
  std::uint32_t single_streak_ = 0;  // lone datagrams in a row (receive_gro)
  std::uint32_t burst_run_ = 0;      // datagrams back to back (receive)
  static constexpr std::uint32_t kGroOnBurst = 4;     // this many back to back turn GRO on
  static constexpr std::uint32_t kGroOffStreak = 64;  // this many lone datagrams in a row turn it off
  static constexpr std::size_t kGroBufs = 8, kGroBufSize = 65536;
  std::vector<std::uint8_t> gro_buf_;
  std::array<mmsghdr, kGroBufs> gro_msgs_;
  std::array<iovec, kGroBufs> gro_iov_;
  struct alignas(cmsghdr) GroCtrl : std::array<char, CMSG_SPACE(sizeof(int))> {};
  std::array<GroCtrl, kGroBufs> gro_ctrl_;
  struct Seg {
    const std::uint8_t* data;
    std::size_t len;
    NetAddr from;
  };
  std::vector<Seg> segs_;  // the datagrams of the last GRO receive; the first seg_at_ handed out
  std::size_t seg_at_ = 0;
  std::atomic<bool> lent_pending_{false};  // seg_at_ < segs_.size(): wait_rx (another thread) must not sleep
  bool dont_fragment_ = false;             // DF datagrams (RoCEv2): source_port() may open sockets
  static constexpr std::size_t kMaxSourcePorts = 256;  // send sockets of source_port()
  std::map<std::uint16_t, int>
      src_socks_;  // their fds by port                   // the main socket lets per-peer sockets bind its address
  int socket_buffer_ = 0;
  std::array<Peer, kMaxConnectedPeers> peers_{};
  std::size_t npeers_ = 0;
  std::uint32_t rx_turn_ = 0;
  std::atomic<std::uint32_t> ready_{0};  // wait_rx: bit 0 the main socket, bit i peers_[i-1]
  std::mutex poll_mu_;                   // poll_fds_: read by wait_rx, which runs beside the rest
  std::vector<int> poll_fds_;
  static constexpr std::size_t kMaxErrors = 64;
  // ICMP reports for the engine. Under errors_mu_: a send may read them in (drain_errors) beside a
  // receive, as the impairment decorator sends held frames from the thread in its wait_rx.
  std::vector<Unreachable> errors_;
  std::mutex errors_mu_;
  std::atomic<std::size_t> errors_n_{0};  // errors_.size(), read without the lock
};

}  // namespace

std::unique_ptr<Netdev> make_udp(const NetdevConfig& cfg, std::string& error) {
  auto d = std::make_unique<UdpNetdev>(cfg.max_datagram);
  if (!d->open(cfg, error)) return nullptr;
  return d;
}

}  // namespace softrnic::netdev
