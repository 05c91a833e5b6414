// softrnic_rping: rdma-core's rping exchange, spoken through softrnic's own RNIC API over
// iWARP/MPA/TCP, so that an unmodified `rping` on Linux siw (or an iWARP NIC) can be its peer in
// either role; with --roce over RoCEv2 and IB CM (peer: rping on Linux rxe or a RoCE NIC).
//
// The exchange (rdma-core librdmacm/examples/rping.c), per iteration:
//   client: fills start_buf ("rdma-ping-N: " and a pattern), Sends {start_buf addr, rkey, size}
//   server: RDMA Reads the client's start_buf into its rdma_buf, Sends a "go on" message
//   client: Sends {rdma_buf addr, rkey, size}
//   server: RDMA Writes its rdma_buf (strlen + 1 bytes) into the client's rdma_buf, Sends "done"
//   client: -V compares rdma_buf with start_buf
//   (with -V, softrnic's server also checks that each Read brought rping's ping N, whole)
// Messages are struct rping_rdma_info { __be64 buf; __be32 rkey; __be32 size; } (16 bytes).
// The connection is rdma_cm's: over iWARP the rdma_cm port (rping's 7174) is the TCP port; no
// private data.
//
//   softrnic_rping -s -a 10.99.0.1 [-p 7174] [-C count] [-S size] [-V] [-v]
//   softrnic_rping -c -a 10.99.0.2 --local 10.99.0.1 [-p 7174] [-C count] [-S size] [-V] [-v]
// Exit status 0 when every iteration completed (and validated with -V).
#include <arpa/inet.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "mpa_tool.hpp"
#include "softrnic/rnic.hpp"

using namespace softrnic;
using namespace std::chrono_literals;

namespace {

struct Info {
  std::uint64_t buf_be;
  std::uint32_t rkey_be;
  std::uint32_t size_be;
};
static_assert(sizeof(Info) == 16);

struct Options {
  bool server = false, client = false, validate = false, verbose = false;
  std::string addr, local;
  std::uint16_t port = 7174;
  int count = 0;  // 0: forever (as rping)
  std::uint32_t size = 64;
  int delay_ms = 300;
  bool roce = false;  // RoCEv2 with IB CM (peer: rping on rxe) instead of iWARP/MPA/TCP
  MpaConfig mpa;
};

std::uint64_t be64(std::uint64_t v) {
  return (static_cast<std::uint64_t>(htonl(static_cast<std::uint32_t>(v))) << 32) |
         htonl(static_cast<std::uint32_t>(v >> 32));
}

class Rping {
 public:
  explicit Rping(const Options& o) : o_(o) {}

  int run() {
    std::string e;
    const std::string ip = o_.server ? o_.addr : (o_.local.empty() ? "127.0.0.1" : o_.local);
    dev_ = o_.roce ? tools::open_roce_device(ip, e) : tools::open_mpa_device(o_.mpa, ip, e);
    if (!dev_) return fail("cannot open the RNIC: " + e);
    pd_ = dev_->alloc_pd();
    scq_ = dev_->create_cq(64, nullptr);
    rcq_ = dev_->create_cq(64, nullptr);
    QpInit init;
    init.pd = pd_;
    init.send_cq = scq_;
    init.recv_cq = rcq_;
    init.max_send_wr = 16;
    init.max_recv_wr = 16;
    init.max_sge = 1;
    init.ord = 1;  // as rping: responder_resources = initiator_depth = 1
    init.ird = 1;
    init.on_event = events_.sink();
    if (dev_->create_qp(init, qp_) != Status::ok) return fail("cannot create the QP");
    // Buffers: receive and send messages, and the data buffers (rping's start_buf, rdma_buf).
    mem_.assign(2 * sizeof(Info) + 2 * std::size_t{o_.size}, 0);
    if (dev_->reg_mr(pd_, mem_.data(), mem_.size(), Access::local_write | Access::remote_write | Access::remote_read,
                     mr_) != Status::ok)
      return fail("cannot register memory");
    stag_ = dev_->query_mr(mr_).stag;
    post_recv();
    if (!(o_.server ? accept() : connect())) return 1;
    const bool ok = o_.server ? serve() : ping();
    dev_->disconnect(qp_, true);
    wait_event(2000ms);
    return ok ? 0 : 1;
  }

 private:
  std::uint8_t* recv_buf() { return mem_.data(); }
  std::uint8_t* send_buf() { return mem_.data() + sizeof(Info); }
  std::uint8_t* start_buf() { return mem_.data() + 2 * sizeof(Info); }
  std::uint8_t* rdma_buf() { return start_buf() + o_.size; }
  std::uint64_t addr_of(const void* p) const { return reinterpret_cast<std::uintptr_t>(p); }

  // rping's ping N (rping_test_client): "rdma-ping-N: ", then the characters 'A'..'z' rolling
  // from 'A' + N % 58, the buffer's last byte NUL.
  void fill_pattern(std::uint8_t* buf, int n) const {
    char* s = reinterpret_cast<char*>(buf);
    const int cc = std::snprintf(s, o_.size, "rdma-ping-%d: ", n);
    for (std::uint32_t i = static_cast<std::uint32_t>(cc), c = static_cast<std::uint32_t>(n); i + 1 < o_.size; ++i) {
      s[i] = static_cast<char>('A' + c % 58);
      if (++c % 58 == 0) c = 0;
    }
    s[o_.size - 1] = 0;
  }

  int fail(const std::string& why) {
    std::fprintf(stderr, "softrnic_rping: %s\n", why.c_str());
    return 1;
  }

  bool wait_event(std::chrono::milliseconds t, CmEvent* out = nullptr) { return events_.wait(t, out); }

  void post_recv() {
    const Sge s{stag_, addr_of(recv_buf()), sizeof(Info)};
    dev_->post_recv(qp_, RecvWr{1, {&s, 1}});
  }

  bool post(SendOpcode op, const void* local, std::uint32_t len, std::uint32_t rkey = 0, std::uint64_t raddr = 0) {
    const Sge s{stag_, addr_of(local), len};
    SendWr wr;
    wr.wr_id = static_cast<std::uint64_t>(op);
    wr.opcode = op;
    wr.sgl = {&s, 1};
    wr.rkey = rkey;
    wr.remote_addr = raddr;
    if (dev_->post_send(qp_, wr) != Status::ok) return false;
    Wc wc;
    if (!poll(scq_, wc)) return false;
    if (wc.status != WcStatus::success) {
      fail(std::string("work request failed: ") + std::string(to_string(wc.status)));
      return false;
    }
    return true;
  }

  bool poll(Cq* cq, Wc& wc, std::chrono::milliseconds t = 10000ms) {
    const auto end = std::chrono::steady_clock::now() + t;
    while (std::chrono::steady_clock::now() < end) {
      if (dev_->poll_cq(cq, {&wc, 1}) == 1) return true;
      std::this_thread::sleep_for(20us);
    }
    fail("timed out waiting for a completion");
    return false;
  }

  // The peer's next message (and a receive posted again for the one after).
  // quiet: the peer's close (a flushed receive) is expected, not an error to report
  bool recv(Info& info, bool quiet = false) {
    Wc wc;
    if (!poll(rcq_, wc)) return false;
    if (quiet && wc.status != WcStatus::success) return false;
    if (wc.status != WcStatus::success || wc.byte_len != sizeof(Info)) {
      fail("bad receive: " + std::string(to_string(wc.status)) + ", " + std::to_string(wc.byte_len) + " bytes");
      return false;
    }
    std::memcpy(&info, recv_buf(), sizeof info);
    post_recv();
    return true;
  }

  bool send_info(const void* buf, std::uint32_t size) {
    const Info i{be64(addr_of(buf)), htonl(stag_), htonl(size)};
    std::memcpy(send_buf(), &i, sizeof i);
    return post(SendOpcode::send, send_buf(), sizeof(Info));
  }

  bool accept() {
    const std::uint64_t qual = o_.port;
    ConnRequest* req = nullptr;
    std::mutex m;
    std::condition_variable c;
    if (dev_->listen(qual, [&](ConnRequest* r, const ConnRequestInfo&) {
          std::lock_guard lk(m);
          req = r;
          c.notify_all();
        }) != Status::ok)
      return fail("cannot listen on port " + std::to_string(o_.port)) == 0;
    std::printf("softrnic_rping: listening on %s:%u\n", o_.addr.c_str(), o_.port);
    std::fflush(stdout);
    {
      std::unique_lock lk(m);
      if (!c.wait_for(lk, 120s, [&] { return req != nullptr; })) return fail("no connection request") == 0;
    }
    if (dev_->accept(req, qp_, {}) != Status::ok) return fail("accept failed") == 0;
    CmEvent ev;
    if (!wait_event(10000ms, &ev) || ev.type != CmEventType::established)
      return fail("the connection was not established") == 0;
    return true;
  }

  bool connect() {
    std::uint32_t ip = 0;
    if (!netdev::parse_ipv4(o_.addr, ip)) return fail("bad address " + o_.addr) == 0;
    if (dev_->connect(qp_, NetAddr{ip, 0}, o_.port, {}, 10000ms) != Status::ok) return fail("connect failed") == 0;
    CmEvent ev;
    if (!wait_event(15000ms, &ev) || ev.type != CmEventType::established)
      return fail("not connected: " + std::string(to_string(ev.type)) + " " + ev.reason) == 0;
    // rping's server handles ESTABLISHED in another thread than the one that sees the first
    // receive; a Send right behind the connection can beat it (../shared/tools/rdmavm README).
    std::this_thread::sleep_for(std::chrono::milliseconds(o_.delay_ms));
    return true;
  }

  bool serve() {
    for (int n = 0;; ++n) {
      Info adv;
      if (!recv(adv)) return n > 0 && dev_->qp_state(qp_) != QpState::rts;  // the client went away
      const std::uint32_t len = std::min<std::uint32_t>(ntohl(adv.size_be), o_.size);
      if (!post(SendOpcode::rdma_read, rdma_buf(), len, ntohl(adv.rkey_be), be64(adv.buf_be))) return false;
      if (o_.verbose) std::printf("server ping data: %s\n", reinterpret_cast<const char*>(rdma_buf()));
      if (o_.validate) {
        // The server's check: what the Read brought is rping's ping n, whole.
        std::vector<std::uint8_t> want(o_.size);
        fill_pattern(want.data(), n);
        if (len != o_.size || std::memcmp(want.data(), rdma_buf(), len) != 0) {
          std::fprintf(stderr, "data mismatch in ping %d (%u bytes read)!\n", n, len);
          return false;
        }
      }
      if (!send_info(rdma_buf(), o_.size)) return false;  // go on
      Info sink;
      if (!recv(sink)) return false;
      const auto wlen = static_cast<std::uint32_t>(strnlen(reinterpret_cast<const char*>(rdma_buf()), len) + 1);
      if (!post(SendOpcode::rdma_write, rdma_buf(), std::min(wlen, len), ntohl(sink.rkey_be), be64(sink.buf_be)))
        return false;
      if (!send_info(rdma_buf(), o_.size)) return false;  // done
      if (o_.count && n + 1 >= o_.count) {
        std::printf("softrnic_rping: served %d pings%s\n", o_.count, o_.validate ? ", data validated" : "");
        std::fflush(stdout);
        // As rping's server, leave the disconnect to the client: a server that closes right
        // behind its last Send races rping's client, which reposts its receive after that Send
        // completes; siw flushes the receive queue when the FIN arrives, and a receive posted
        // after that flush never completes, so the client's CQ thread never ends.
        Info extra;
        if (recv(extra, true)) return fail("the client sent more than " + std::to_string(o_.count) + " pings") == 0;
        return true;
      }
    }
  }

  bool ping() {
    for (int n = 0; !o_.count || n < o_.count; ++n) {
      fill_pattern(start_buf(), n);
      std::memset(rdma_buf(), 0, o_.size);
      if (!send_info(start_buf(), o_.size)) return false;
      Info go;
      if (!recv(go)) return false;
      if (!send_info(rdma_buf(), o_.size)) return false;
      Info done;
      if (!recv(done)) return false;
      if (o_.validate && std::memcmp(start_buf(), rdma_buf(), o_.size) != 0) {
        std::fprintf(stderr, "data mismatch!\n");
        return false;
      }
      if (o_.verbose) std::printf("ping data: %s\n", reinterpret_cast<const char*>(rdma_buf()));
    }
    std::printf("softrnic_rping: %d pings%s\n", o_.count, o_.validate ? ", data validated" : "");
    return true;
  }

  const Options& o_;
  std::unique_ptr<Device> dev_;
  Pd* pd_ = nullptr;
  Cq *scq_ = nullptr, *rcq_ = nullptr;
  Qp* qp_ = nullptr;
  Mr* mr_ = nullptr;
  std::uint32_t stag_ = 0;
  std::vector<std::uint8_t> mem_;
  tools::CmEvents events_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"softrnic_rping: rping's exchange over softrnic's iWARP/MPA/TCP (peer: rping on siw)"};
  app.add_flag("-s", o.server, "server");
  app.add_flag("-c", o.client, "client");
  app.add_option("-a", o.addr, "server: the address to listen on; client: the server's address")->required();
  app.add_option("--local", o.local, "client: the local address (default 127.0.0.1)");
  app.add_option("-p", o.port, "port (rdma_cm's, = TCP over iWARP)");
  app.add_option("-C", o.count, "iterations (0: forever)");
  app.add_option("-S", o.size, "buffer size")->check(CLI::Range(16u, 1u << 24));
  app.add_flag("-V", o.validate, "validate the data");
  app.add_flag("-v", o.verbose, "print the data");
  app.add_option("--delay-ms", o.delay_ms, "client: wait after the connection before the first Send");
  app.add_flag("--roce", o.roce, "RoCEv2 (UDP 4791, IB CM on QP1; peer: rping on rxe) instead of iWARP/MPA/TCP");
  tools::MpaOptions mpa;
  mpa.add_to(app);
  CLI11_PARSE(app, argc, argv);
  if (o.server == o.client) {
    std::fprintf(stderr, "softrnic_rping: give -s or -c\n");
    return 2;
  }
  o.mpa = mpa.config();
  return Rping(o).run();
}
