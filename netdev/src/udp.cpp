// The `udp` backend: kernel UDP sockets through Boost.Asio (socket set-up), with
// sendmmsg/recvmmsg on the native handle for bursts.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <cerrno>
#include <cstring>
#include <vector>

#include "backends.hpp"

namespace softrnic::netdev {
namespace {

namespace asio = boost::asio;
using asio::ip::udp;

constexpr int kMaxPortProbe = 64;
constexpr std::size_t kBurst = 64;

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
    // As root, SO_*BUFFORCE passes net.core.[rw]mem_max; otherwise the kernel caps the request.
    const int want = static_cast<int>(cfg.socket_buffer);
    const int fd = socket_.native_handle();
    if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &want, sizeof want) != 0)
      ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &want, sizeof want);
    if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &want, sizeof want) != 0)
      ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &want, sizeof want);
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
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0) {
      error = std::string("udp netdev: eventfd: ") + std::strerror(errno);
      return false;
    }
    return true;
  }

  NetAddr local_addr() const override { return local_; }
  std::size_t max_datagram() const override { return max_dgram_; }

  std::size_t tx_burst(std::span<const TxFrame> frames) override {
    std::size_t done = 0;
    while (done < frames.size()) {
      const std::size_t n = std::min(kBurst, frames.size() - done);
      // Only the n entries in use are set up (zeroing all kBurst of them cost ~4 KB of memset
      // per datagram on the latency path).
      std::array<mmsghdr, kBurst> msgs;
      std::array<iovec, 3 * kBurst> iov;
      std::array<sockaddr_in, kBurst> to;
      for (std::size_t i = 0; i < n; ++i) {
        const TxFrame& f = frames[done + i];
        std::memset(&msgs[i], 0, sizeof msgs[i]);
        std::memset(&to[i], 0, sizeof to[i]);
        to[i].sin_family = AF_INET;
        to[i].sin_addr.s_addr = htonl(f.to.ip);
        to[i].sin_port = htons(f.to.port);
        std::size_t k = 0;
        for (auto part : {f.head, f.body, f.tail}) {
          if (part.empty()) continue;
          iov[3 * i + k].iov_base = const_cast<std::uint8_t*>(part.data());
          iov[3 * i + k].iov_len = part.size();
          ++k;
        }
        msgs[i].msg_hdr.msg_name = &to[i];
        msgs[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);
        msgs[i].msg_hdr.msg_iov = &iov[3 * i];
        msgs[i].msg_hdr.msg_iovlen = k;
      }
      const int r = ::sendmmsg(socket_.native_handle(), msgs.data(), static_cast<unsigned>(n), 0);
      if (r <= 0) {
        // EAGAIN (buffer full) or an ICMP error from an earlier datagram: count the frame as
        // dropped and go on; the reliability layer above retransmits.
        if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
          stats_.tx_dropped++;
          done++;
          continue;
        }
        break;
      }
      for (int i = 0; i < r; ++i) stats_.tx_bytes += frames[done + static_cast<std::size_t>(i)].size();
      stats_.tx_frames += static_cast<std::uint64_t>(r);
      done += static_cast<std::size_t>(r);
    }
    return done;
  }

  std::size_t rx_burst(std::span<RxFrame> out) override {
    const std::size_t n = std::min(kBurst, out.size());
    if (n == 0) return 0;
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
    const int r = ::recvmmsg(socket_.native_handle(), msgs.data(), static_cast<unsigned>(n), MSG_DONTWAIT, nullptr);
    if (r <= 0) return 0;
    std::size_t got = 0;
    for (int i = 0; i < r; ++i) {
      const auto& m = msgs[static_cast<std::size_t>(i)];
      if (m.msg_hdr.msg_flags & MSG_TRUNC) {
        stats_.rx_truncated++;
        continue;
      }
      RxFrame& f = out[got++];
      f.len = m.msg_len;
      f.from = NetAddr{ntohl(from[static_cast<std::size_t>(i)].sin_addr.s_addr),
                       ntohs(from[static_cast<std::size_t>(i)].sin_port)};
      stats_.rx_frames++;
      stats_.rx_bytes += m.msg_len;
    }
    return got;
  }

  void wait_rx(std::chrono::microseconds timeout) override {
    pollfd fds[2] = {{socket_.native_handle(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    // ppoll: microsecond timeouts (a delayed ack is due within 100 us).
    const auto us = std::max<std::int64_t>(0, timeout.count());
    const timespec ts{static_cast<time_t>(us / 1000000), static_cast<long>((us % 1000000) * 1000)};
    const int r = ::ppoll(fds, 2, &ts, nullptr);
    if (r > 0 && (fds[1].revents & POLLIN)) {
      std::uint64_t v;
      [[maybe_unused]] auto rd = ::read(wake_fd_, &v, sizeof v);
    }
  }

  void wake() override {
    const std::uint64_t one = 1;
    [[maybe_unused]] auto wr = ::write(wake_fd_, &one, sizeof one);
  }

  NetdevStats stats() const override { return stats_.snapshot(); }
  std::size_t rx_buffer_bytes() const override { return rx_buffer_; }

 private:
  std::size_t rx_buffer_ = 0;
  asio::io_context io_;
  udp::socket socket_;
  std::size_t max_dgram_;
  NetAddr local_{};
  int wake_fd_ = -1;
  std::array<mmsghdr, kBurst> rx_msgs_;  // receive headers, wired to rx_iov_ and rx_from_ once
  std::array<iovec, kBurst> rx_iov_;
  std::array<sockaddr_in, kBurst> rx_from_;
  AtomicNetdevStats stats_;
};

}  // namespace

std::unique_ptr<Netdev> make_udp(const NetdevConfig& cfg, std::string& error) {
  auto d = std::make_unique<UdpNetdev>(cfg.max_datagram);
  if (!d->open(cfg, error)) return nullptr;
  return d;
}

}  // namespace softrnic::netdev
