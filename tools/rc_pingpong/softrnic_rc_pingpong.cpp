// softrnic_rc_pingpong: rdma-core's ibv_rc_pingpong (libibverbs/examples/rc_pingpong.c), spoken
// through softrnic's own RNIC API over RoCEv2, so that an unmodified ibv_rc_pingpong on Linux rxe
// (or a RoCE NIC) is its peer in either role.
//
// The exchange: TCP port 18515; the client writes "LID:QPN:PSN:GID" ("%04x:%06x:%06x:%s", the GID
// as 32 hex digits in byte order, 52 bytes with the NUL), the server connects its QP, answers
// with its own, the client connects and writes "done". No rdma_cm: the QP moves to RTS with what
// the other side wrote (Device::roce_connect). Then ping-pong: the client Sends first; each side
// Sends again once its last Send completed and a message arrived, until both counted `iters`.
// The data: ibv_rc_pingpong receives into and sends from one buffer (the server echoes what it
// received); its client with -c checks at the end that each page's first byte is 0 (it sent
// them 0). As server, softrnic echoes the same way and checks every message is the client's
// (0x7b, each page's first byte 0 with -c); as client, it sends a pattern that changes with
// every iteration (each page's first byte 0) and checks every echo is that iteration's pattern.
//
//   softrnic_rc_pingpong --local 10.99.1.1 [-p 18515] [-s 4096] [-n 1000] [-r 500] [-m 1024] [-c]
//   softrnic_rc_pingpong --local 10.99.1.1 [options] SERVER
// Exit status 0 when every iteration completed and every message checked out.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "softrnic/rnic.hpp"

using namespace softrnic;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t kRecvWrid = 1, kSendWrid = 2;
constexpr std::size_t kMsgLen = sizeof "0000:000000:000000:00000000000000000000000000000000";
constexpr std::size_t kPage = 4096;

struct Options {
  std::string server, local;
  std::uint16_t port = 18515;
  std::uint32_t size = 4096, mtu = 1024, rx_depth = 500;
  int iters = 1000;
  bool chk = false;
  int gid_idx = -1;
  std::string dev;
  std::string impair;         // an impairment plan on what softrnic sends ("drop=0.02,reorder=8,seed=1")
  std::uint8_t timeout = 14;  // local ACK timeout, 4.096 us * 2^timeout (ibv_rc_pingpong's 14: 67 ms)
  unsigned keepalive_ms = 0;  // keepalive_idle and _interval (0: the device's defaults)
  unsigned idle_ms = 0;       // the client waits this long, connected, before its first Send
};

std::string gid_hex(std::uint32_t ip) {
  char b[33];
  std::snprintf(b, sizeof b, "00000000000000000000ffff%08x", ip);
  return b;
}

std::string gid_text(std::uint32_t ip) {
  return "::ffff:" + netdev::ipv4_to_string(ip);
}

bool read_all(int fd, void* p, std::size_t n) {
  auto* c = static_cast<char*>(p);
  while (n) {
    const ssize_t r = ::read(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

bool write_all(int fd, const void* p, std::size_t n) {
  return ::write(fd, p, n) == static_cast<ssize_t>(n);
}

// "%04x:%06x:%06x:%s" -> endpoint (the GID must be an IPv4-mapped one: RoCEv2 over IPv4).
bool parse_dest(const char* msg, RoceEndpoint& out, std::string& error) {
  unsigned lid = 0, qpn = 0, psn = 0;
  char gid[33] = {};
  if (std::sscanf(msg, "%x:%x:%x:%32s", &lid, &qpn, &psn, gid) != 4 || std::strlen(gid) != 32) {
    error = std::string("bad address message '") + msg + "'";
    return false;
  }
  if (std::strncmp(gid, "00000000000000000000ffff", 24) != 0) {
    error =
        std::string("GID ") + gid + " is not an IPv4-mapped GID (give ibv_rc_pingpong -g with the IPv4 GID's index)";
    return false;
  }
  out.addr = NetAddr{static_cast<std::uint32_t>(std::stoul(std::string(gid + 24), nullptr, 16)), 0};
  out.qpn = qpn;
  out.psn = psn;
  return true;
}

class PingPong {
 public:
  explicit PingPong(Options o) : o_(std::move(o)) {}

  int run() {
    std::uint32_t ip = 0;
    if (!netdev::parse_ipv4(o_.local, ip)) return fail("bad --local address '" + o_.local + "'");
    DeviceConfig cfg;
    cfg.wire = Wire::roce;
    cfg.netdev.ip = o_.local;
    cfg.netdev.port = 4791;
    cfg.roce.mtu = o_.mtu;
    cfg.roce.timeout = o_.timeout;
    if (o_.keepalive_ms) cfg.keepalive_idle = cfg.keepalive_interval = std::chrono::milliseconds(o_.keepalive_ms);
    std::string e;
    if (!o_.impair.empty() && !netdev::parse_impair(o_.impair, ',', cfg.netdev.impair, e))
      return fail("--impair: " + e);
    dev_ = Device::open(cfg, e);
    if (!dev_) return fail("cannot open the RNIC: " + e);
    pd_ = dev_->alloc_pd();
    cq_ = dev_->create_cq(o_.rx_depth + 2, nullptr);
    QpInit init;
    init.pd = pd_;
    init.send_cq = init.recv_cq = cq_;
    init.max_send_wr = 1;
    init.max_recv_wr = o_.rx_depth;
    init.max_sge = 1;
    init.ord = init.ird = 1;
    if (dev_->create_qp(init, qp_) != Status::ok) return fail("create_qp failed");
    buf_.assign(o_.size, 0x7b);
    if (dev_->reg_mr(pd_, buf_.data(), std::max<std::size_t>(buf_.size(), 1), Access::local_write, mr_) != Status::ok)
      return fail("reg_mr failed");
    for (std::uint32_t i = 0; i < o_.rx_depth; ++i)
      if (!post_recv()) return fail("cannot post receive " + std::to_string(i));
    RoceEndpoint me;
    dev_->roce_local(qp_, me);
    std::printf("  local address:  LID 0x0000, QPN 0x%06x, PSN 0x%06x, GID %s\n", me.qpn, me.psn,
                gid_text(me.addr.ip).c_str());
    RoceEndpoint peer;
    if (!exchange(me, peer)) return 1;
    std::printf("  remote address: LID 0x0000, QPN 0x%06x, PSN 0x%06x, GID %s\n", peer.qpn, peer.psn,
                gid_text(peer.addr.ip).c_str());
    std::fflush(stdout);
    return pingpong();
  }

 private:
  int fail(const std::string& m) {
    std::fprintf(stderr, "softrnic_rc_pingpong: %s\n", m.c_str());
    return 1;
  }

  bool post_recv() {
    const Sge g{dev_->query_mr(mr_).stag, reinterpret_cast<std::uintptr_t>(buf_.data()), o_.size};
    return dev_->post_recv(qp_, RecvWr{kRecvWrid, {&g, 1}}) == Status::ok;
  }
  bool post_send() {
    const Sge g{dev_->query_mr(mr_).stag, reinterpret_cast<std::uintptr_t>(buf_.data()), o_.size};
    SendWr wr;
    wr.wr_id = kSendWrid;
    wr.opcode = SendOpcode::send;
    wr.sgl = {&g, 1};
    return dev_->post_send(qp_, wr) == Status::ok;
  }

  bool connect_qp(const RoceEndpoint& peer) {
    RoceEndpoint r = peer;
    r.mtu = o_.mtu;
    const Status s = dev_->roce_connect(qp_, r, 1, 1);
    if (s != Status::ok) {
      fail("cannot connect the QP: " + std::string(to_string(s)));
      return false;
    }
    return true;
  }

  bool exchange(const RoceEndpoint& me, RoceEndpoint& peer) {
    char msg[kMsgLen] = {};
    std::snprintf(msg, sizeof msg, "%04x:%06x:%06x:%s", 0u, me.qpn, me.psn, gid_hex(me.addr.ip).c_str());
    std::string e;
    if (!o_.server.empty()) {
      std::uint32_t sip = 0;
      if (!netdev::parse_ipv4(o_.server, sip)) return fail("bad server address " + o_.server) == 0;
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_port = htons(o_.port);
      sa.sin_addr.s_addr = htonl(sip);
      bool up = false;
      for (int i = 0; i < 300 && !up; ++i) {  // the server may not listen yet
        up = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
        if (!up) std::this_thread::sleep_for(100ms);
      }
      if (!up) return fail("Couldn't connect to " + o_.server + ":" + std::to_string(o_.port)) == 0;
      char rmsg[kMsgLen] = {};
      if (!write_all(fd, msg, sizeof msg) || !read_all(fd, rmsg, sizeof rmsg)) {
        ::close(fd);
        return fail("Couldn't read/write remote address") == 0;
      }
      if (!parse_dest(rmsg, peer, e) || !connect_qp(peer)) {
        ::close(fd);
        return fail(e) == 0;
      }
      write_all(fd, "done", sizeof "done");
      ::close(fd);
      return true;
    }
    const int ls = ::socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    ::setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(o_.port);
    if (::bind(ls, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(ls, 1) != 0)
      return fail("Couldn't listen to port " + std::to_string(o_.port)) == 0;
    std::printf("softrnic_rc_pingpong: waiting on TCP port %u\n", o_.port);
    std::fflush(stdout);
    const int fd = ::accept(ls, nullptr, nullptr);
    ::close(ls);
    if (fd < 0) return fail("accept() failed") == 0;
    char rmsg[kMsgLen] = {};
    bool ok = read_all(fd, rmsg, sizeof rmsg) && parse_dest(rmsg, peer, e);
    if (ok) ok = connect_qp(peer);
    char done[sizeof "done"] = {};
    if (ok) ok = write_all(fd, msg, sizeof msg) && read_all(fd, done, sizeof done);
    ::close(fd);
    if (!ok) return fail(e.empty() ? "Couldn't send/recv local address" : e) == 0;
    return true;
  }

  // What the client sends in iteration `k` (softrnic as client): changes with k; each page's
  // first byte 0, as ibv_rc_pingpong -c writes it.
  void client_pattern(int k, std::vector<std::uint8_t>& out) const {
    out.resize(o_.size);
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] =
          i % kPage == 0 ? 0 : static_cast<std::uint8_t>((i * 7 + static_cast<std::size_t>(k) * 13 + (i >> 8)) | 1);
  }
  // What ibv_rc_pingpong's client sends (softrnic as server).
  void linux_client_pattern(std::vector<std::uint8_t>& out) const {
    out.assign(o_.size, 0x7b);
    if (o_.chk)
      for (std::size_t i = 0; i < out.size(); i += kPage) out[i] = 0;
  }

  int pingpong() {
    const bool client = !o_.server.empty();
    std::vector<std::uint8_t> want;
    int pending = static_cast<int>(kRecvWrid);
    int routs = static_cast<int>(o_.rx_depth), scnt = 0, rcnt = 0, bad = 0;
    if (client) {  // idle, connected: keepalive probes go (and must be answered, or the QP breaks)
      for (const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(o_.idle_ms);
           std::chrono::steady_clock::now() < until;)
        dev_->progress();
    }
    const auto start = std::chrono::steady_clock::now();
    if (client) {
      client_pattern(0, want);
      std::memcpy(buf_.data(), want.data(), want.size());
      if (!post_send()) return fail("Couldn't post send");
      pending |= static_cast<int>(kSendWrid);
    } else {
      linux_client_pattern(want);
    }
    auto last = std::chrono::steady_clock::now();
    while (rcnt < o_.iters || scnt < o_.iters) {
      Wc wc;
      if (dev_->poll_cq(cq_, {&wc, 1}) == 0) {
        // A busy-polling consumer drives the engine itself (as ibv_rc_pingpong spins on its CQ
        // while the kernel's rxe runs in softirq): no thread hand-off per message.
        dev_->progress();
        if (std::chrono::steady_clock::now() - last > 30s) return fail("no completion for 30 s");
        continue;
      }
      last = std::chrono::steady_clock::now();
      if (wc.status != WcStatus::success)
        return fail("Failed status " + std::string(to_string(wc.status)) + " for wr_id " + std::to_string(wc.wr_id));
      if (wc.wr_id == kSendWrid) {
        ++scnt;
      } else {
        if (wc.byte_len != o_.size || std::memcmp(buf_.data(), want.data(), o_.size) != 0) {
          if (bad++ < 5)
            std::fprintf(stderr, "softrnic_rc_pingpong: message %d differs from what was sent (%u bytes)\n", rcnt,
                         wc.byte_len);
        }
        if (--routs <= 1) {
          while (routs < static_cast<int>(o_.rx_depth) && post_recv()) ++routs;
        }
        ++rcnt;
      }
      pending &= ~static_cast<int>(wc.wr_id);
      if (scnt < o_.iters && !pending) {
        if (client) {  // the next iteration's pattern; the echo must be it
          client_pattern(scnt, want);
          std::memcpy(buf_.data(), want.data(), want.size());
        }
        if (!post_send()) return fail("Couldn't post send");
        pending = static_cast<int>(kRecvWrid | kSendWrid);
      }
    }
    const double usec = static_cast<double>(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count());
    // Stay a moment: an ACK of ours that was lost (the peer's last Send) is sent again when the
    // peer retransmits, instead of leaving the peer to its retry limit.
    for (const auto until = std::chrono::steady_clock::now() + 500ms; std::chrono::steady_clock::now() < until;)
      dev_->progress();
    const long long bytes = static_cast<long long>(o_.size) * o_.iters * 2;
    std::printf("%lld bytes in %.2f seconds = %.2f Mbit/sec\n", bytes, usec / 1e6,
                static_cast<double>(bytes) * 8. / usec);
    std::printf("%d iters in %.2f seconds = %.2f usec/iter\n", o_.iters, usec / 1e6, usec / o_.iters);
    const DeviceCounters c = dev_->counters();
    if (bad) {
      std::printf("softrnic_rc_pingpong: %d of %d messages differ\n", bad, rcnt);
      return 1;
    }
    std::printf(
        "softrnic_rc_pingpong: %d iters of %u bytes, data verified (%s; retransmits %llu, bad frames %llu, keepalive "
        "probes %llu)\n",
        o_.iters, o_.size, client ? "every echo was its iteration's pattern" : "every message was the client's",
        static_cast<unsigned long long>(c.retransmits), static_cast<unsigned long long>(c.rx_bad_frames),
        static_cast<unsigned long long>(c.keepalive_probes));
    return 0;
  }

  Options o_;
  std::unique_ptr<Device> dev_;
  Pd* pd_ = nullptr;
  Cq* cq_ = nullptr;
  Qp* qp_ = nullptr;
  Mr* mr_ = nullptr;
  std::vector<std::uint8_t> buf_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "softrnic_rc_pingpong: ibv_rc_pingpong's exchange over softrnic's RoCEv2 (peer: ibv_rc_pingpong on rxe)"};
  app.add_option("server", o.server, "the server's address (client role); none: serve");
  app.add_option("--local", o.local, "our IPv4 address (its GID ::ffff:a.b.c.d), UDP port 4791")->required();
  app.add_option("-p,--port", o.port, "TCP port of the address exchange");
  app.add_option("-s,--size", o.size, "message size")->check(CLI::Range(1u, 1u << 24));
  app.add_option("-m,--mtu", o.mtu, "path MTU")->check(CLI::IsMember({256u, 512u, 1024u, 2048u, 4096u}));
  app.add_option("-r,--rx-depth", o.rx_depth, "receives posted")->check(CLI::Range(2u, 16384u));
  app.add_option("-n,--iters", o.iters, "iterations")->check(CLI::Range(1, 100000000));
  app.add_flag("-c,--chk", o.chk, "the client sends each page's first byte 0 (ibv_rc_pingpong -c)");
  app.add_option("-g,--gid-idx", o.gid_idx, "accepted for ibv_rc_pingpong's command line (softrnic has one GID)");
  app.add_option("-d,--ib-dev", o.dev, "accepted for ibv_rc_pingpong's command line");
  app.add_option("--impair", o.impair, "impairment plan on what softrnic sends (drop=P,dup=P,reorder=N,seed=S)");
  app.add_option("-t,--timeout", o.timeout,
                 "local ACK timeout, 4.096 us * 2^N (default 14: 67 ms, ibv_rc_pingpong's; 7 retries follow)")
      ->check(CLI::Range(1, 31));
  app.add_option("--keepalive", o.keepalive_ms, "keepalive idle time and probe interval in ms (default: 5000, 1000)")
      ->check(CLI::Range(1u, 3600000u));
  app.add_option("--idle", o.idle_ms, "client: wait this long in ms, connected, before the first Send")
      ->check(CLI::Range(0u, 3600000u));
  CLI11_PARSE(app, argc, argv);
  return PingPong(o).run();
}
