// softrnic_connect: one connection set-up through softrnic's own RNIC API, and what came of it:
// iWARP (MPA/TCP), or with --roce RoCEv2 with IB CM on QP1. A connectivity probe for a siw or rxe
// host or an RDMA NIC (as rdma-core's rdma_client or ucmatose are for rdma_cm), and the softrnic
// side of the reject interop tests.
//
//   softrnic_connect -a ADDR -p PORT [--local IP] [--pdata HEX | --pdata-zeros N]
//                    [--expect established|rejected] [--expect-pdata HEX]
//       connects to ADDR:PORT with the given private data and prints the outcome:
//         softrnic_connect: established, private data (N bytes): HEX
//         softrnic_connect: rejected by the peer, private data (N bytes): HEX
//         softrnic_connect: failed: <event> <reason>
//   softrnic_connect --listen -a IP -p PORT --reject HEX [--count N] [--delay S]
//       listens and rejects each of the next N connection requests (default 1) with that private
//       data, printing "softrnic_connect: rejected the request of IP:PORT (private data N bytes: HEX)";
//       --delay: S seconds pass between a request's arrival and its reject (with --roce the peer's
//       CM repeats its REQ meanwhile, and softrnic answers it with an MRA)
// PORT: the TCP port over iWARP; rdma_cm's port (service ID 0x0106 << 48 | PORT) with --roce.
// With --roce the answer's private data is a REJ's or REP's whole field (148 or 196 bytes).
// MPA: --mpa-rev 1|2, --no-crc, --no-p2p (as the ia_params keys mpa_rev, mpa_crc, mpa_p2p).
// Exit status: 0 when the outcome is the one --expect names (and --expect-pdata matches), or when
// every request was rejected; 1 otherwise; 2 for bad arguments.
#include <CLI/CLI.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "mpa_tool.hpp"
#include "softrnic/rnic.hpp"

using namespace softrnic;
using namespace std::chrono_literals;

namespace {

std::optional<std::vector<std::uint8_t>> from_hex(const std::string& s) {
  auto nib = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (s.size() % 2) return std::nullopt;
  std::vector<std::uint8_t> v;
  for (std::size_t i = 0; i < s.size(); i += 2) {
    const int h = nib(s[i]), l = nib(s[i + 1]);
    if (h < 0 || l < 0) return std::nullopt;
    v.push_back(static_cast<std::uint8_t>(h << 4 | l));
  }
  return v;
}

std::string to_hex(const std::vector<std::uint8_t>& v) {
  std::string s;
  char b[3];
  for (const std::uint8_t x : v) {
    std::snprintf(b, sizeof b, "%02x", x);
    s += b;
  }
  return s;
}

struct Options {
  bool listen = false;
  std::string addr, local = "127.0.0.1";
  std::uint16_t port = 0;
  std::vector<std::uint8_t> pdata;
  std::string expect = "established";
  std::optional<std::vector<std::uint8_t>> expect_pdata;
  int count = 1;
  int timeout_s = 20;
  int delay_s = 0;
  bool roce = false;
  MpaConfig mpa;
};

int fail(const std::string& why) {
  std::fprintf(stderr, "softrnic_connect: %s\n", why.c_str());
  return 1;
}

class Session {
 public:
  explicit Session(const Options& o) : o_(o) {}

  int run() {
    std::string e;
    const std::string& ip = o_.listen ? o_.addr : o_.local;
    dev_ = o_.roce ? tools::open_roce_device(ip, e) : tools::open_mpa_device(o_.mpa, ip, e);
    if (!dev_) return fail("cannot open the RNIC: " + e);
    return o_.listen ? serve() : connect();
  }

 private:
  int connect() {
    Pd* pd = dev_->alloc_pd();
    Cq* cq = dev_->create_cq(4, nullptr);
    QpInit init;
    init.pd = pd;
    init.send_cq = cq;
    init.recv_cq = cq;
    init.max_send_wr = init.max_recv_wr = 4;
    init.max_sge = 1;
    init.on_event = events_.sink();
    Qp* qp = nullptr;
    if (dev_->create_qp(init, qp) != Status::ok) return fail("cannot create the QP");
    std::uint32_t ip = 0;
    if (!netdev::parse_ipv4(o_.addr, ip)) return fail("bad address " + o_.addr);
    const auto timeout = std::chrono::seconds(o_.timeout_s);
    if (const Status s = dev_->connect(qp, NetAddr{ip, 0}, o_.port, o_.pdata, timeout); s != Status::ok)
      return fail("connect: " + std::string(to_string(s)));
    CmEvent ev;
    if (!events_.wait(std::chrono::duration_cast<std::chrono::milliseconds>(timeout + 5s), &ev))
      return fail("no answer");
    std::string outcome;
    switch (ev.type) {
      case CmEventType::established:
        std::printf("softrnic_connect: established, private data (%zu bytes): %s\n", ev.private_data.size(),
                    to_hex(ev.private_data).c_str());
        outcome = "established";
        dev_->disconnect(qp, true);
        break;
      case CmEventType::rejected:
        std::printf("softrnic_connect: rejected by the peer, private data (%zu bytes): %s\n", ev.private_data.size(),
                    to_hex(ev.private_data).c_str());
        outcome = "rejected";
        break;
      default:
        std::printf("softrnic_connect: failed: %s %s\n", std::string(to_string(ev.type)).c_str(), ev.reason.c_str());
        outcome = std::string(to_string(ev.type));
        for (char& c : outcome)
          if (c == ' ') c = '_';  // as --expect names it
    }
    std::fflush(stdout);
    if (outcome != o_.expect) return fail("expected " + o_.expect + ", got " + outcome);
    if (o_.expect_pdata && *o_.expect_pdata != ev.private_data)
      return fail("expected private data " + to_hex(*o_.expect_pdata) + ", got " + to_hex(ev.private_data));
    return 0;
  }

  int serve() {
    struct Pending {
      ConnRequest* req;
      ConnRequestInfo info;
      std::chrono::steady_clock::time_point came;
    };
    std::deque<Pending> reqs;
    if (dev_->listen(o_.port, [&](ConnRequest* r, const ConnRequestInfo& info) {
          std::lock_guard lk(mu_);
          reqs.push_back(Pending{r, info, std::chrono::steady_clock::now()});
          cv_.notify_all();
        }) != Status::ok)
      return fail("cannot listen on port " + std::to_string(o_.port));
    std::printf("softrnic_connect: listening on %s:%u\n", o_.addr.c_str(), o_.port);
    std::fflush(stdout);
    for (int n = 0; n < o_.count; ++n) {
      Pending r;
      {
        std::unique_lock lk(mu_);
        if (!cv_.wait_for(lk, std::chrono::seconds(o_.timeout_s), [&] { return !reqs.empty(); }))
          return fail("no connection request");
        r = reqs.front();
        reqs.pop_front();
      }
      std::this_thread::sleep_until(r.came + std::chrono::seconds(o_.delay_s));  // from its arrival
      if (const Status s = dev_->reject(r.req, o_.pdata); s != Status::ok)
        return fail("reject: " + std::string(to_string(s)));
      std::printf("softrnic_connect: rejected the request of %s (its private data %zu bytes: %s; ours %zu bytes: %s)\n",
                  netdev::to_string(r.info.remote).c_str(), r.info.private_data.size(),
                  to_hex(r.info.private_data).c_str(), o_.pdata.size(), to_hex(o_.pdata).c_str());
      std::fflush(stdout);
    }
    std::this_thread::sleep_for(500ms);  // the reject's frame and FIN leave before the device closes
    return 0;
  }

  const Options& o_;
  std::unique_ptr<Device> dev_;
  std::mutex mu_;  // the listener's requests
  std::condition_variable cv_;
  tools::CmEvents events_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "softrnic_connect: one connection set-up through softrnic (iWARP, or RoCEv2 with --roce), and its outcome"};
  std::string pdata_hex, expect_pdata_hex, reject_hex;
  std::size_t zeros = 0;
  tools::MpaOptions mpa;
  app.add_flag("--listen", o.listen, "listen and reject requests instead of connecting");
  app.add_option("-a", o.addr, "connect: the peer's address; --listen: the address to listen on")->required();
  app.add_option("-p", o.port, "rdma_cm's port (a TCP port over iWARP; in the IB CM service ID with --roce)")
      ->required();
  app.add_flag("--roce", o.roce, "RoCEv2 (UDP 4791, IB CM on QP1; peer: rdma_cm on rxe) instead of iWARP/MPA/TCP");
  app.add_option("--local", o.local, "connect: the local address");
  app.add_option("--pdata", pdata_hex, "connect: private data to send (hex)");
  app.add_option("--pdata-zeros", zeros, "connect: send N zero bytes of private data")
      ->check(CLI::Range(0, 508));  // (56 with --roce)
  app.add_option("--expect", o.expect, "connect: the outcome that makes the exit status 0")
      ->check(CLI::IsMember({"established", "rejected", "no_listener", "unreachable", "host_unreachable"}));
  app.add_option("--expect-pdata", expect_pdata_hex, "connect: the private data the answer must carry (hex)");
  app.add_option("--reject", reject_hex, "--listen: reject with this private data (hex)");
  app.add_option("--count", o.count, "--listen: requests to reject")->check(CLI::Range(1, 1000));
  app.add_option("--delay", o.delay_s, "--listen: seconds between a request's arrival and its reject")
      ->check(CLI::Range(0, 600));
  app.add_option("--timeout", o.timeout_s, "seconds to wait for an answer or a request")->check(CLI::Range(1, 3600));
  mpa.add_to(app);
  CLI11_PARSE(app, argc, argv);
  auto hex = [](const std::string& s, const char* what) {
    auto v = from_hex(s);
    if (!v) {
      std::fprintf(stderr, "softrnic_connect: %s is not an even number of hex digits\n", what);
      std::exit(2);
    }
    return *v;
  };
  if (!pdata_hex.empty() && zeros) {
    std::fprintf(stderr, "softrnic_connect: give --pdata or --pdata-zeros, not both\n");
    return 2;
  }
  o.pdata = o.listen ? hex(reject_hex, "--reject") : hex(pdata_hex, "--pdata");
  if (zeros) o.pdata.assign(zeros, 0);
  if (app.count("--expect-pdata")) o.expect_pdata = hex(expect_pdata_hex, "--expect-pdata");
  o.mpa = mpa.config();
  return Session(o).run();
}
