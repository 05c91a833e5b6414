// softrnic_scalebench: what many connections cost. Two soft RNICs in one process (each with its
// own progress engine and netdev), N connected QPs between them, every QP streaming RDMA Writes at
// once; for each N and message size it prints the aggregate throughput, the per-Write completion
// latency (post to completion: p50, p99) and how evenly the QPs were served, median and spread
// over --runs runs, and each row's throughput as a ratio to N=1 of the same run (the peer: the
// machine is shared, so ratios are what to read).
//
// Offered load is held constant across N: --window Writes outstanding in all, spread over the QPs
// (at least one per QP, so from N = window on there are N outstanding). The consumer drives its
// device as a DAT consumer that busy-polls does (poll the CQ, run the engine when it is empty); the
// target device runs on its progress thread.
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "softrnic/netdev/netdev.hpp"
#include "softrnic/rnic.hpp"
#include "stats.hpp"

using namespace softrnic;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string wire = "udp";
  std::vector<std::size_t> qps{1, 16, 256, 4096};
  std::vector<std::size_t> sizes{64, 4096, 65536};
  std::size_t runs = 3, window = 64;
  double seconds = 1.0;
};

// One connected set of N QPs: A writes into B's memory.
struct Pair {
  std::unique_ptr<Device> a, b;
  Pd *pa = nullptr, *pb = nullptr;
  Cq *scq = nullptr, *rcq = nullptr, *bscq = nullptr, *brcq = nullptr;
  std::vector<Qp*> qa, qb;
  std::vector<std::uint8_t> src, dst;
  Mr *ms = nullptr, *md = nullptr;
  double setup_s = 0;  // creating and connecting the QPs
  // The devices go before the memory: over MPA/TCP a Write completes once TCP has taken it, and
  // the target may still be placing it into dst.
  ~Pair() {
    a.reset();
    b.reset();
  }
};

Wire wire_of(const std::string& w) {
  return w == "tcp" ? Wire::tcp : w == "roce" ? Wire::roce : Wire::udp;
}

DeviceConfig config(const Options& o, int side, std::uint16_t port) {
  DeviceConfig c;
  c.wire = wire_of(o.wire);
  c.netdev.kind = "udp";
  c.netdev.ip = "127.0.0.1";
  c.netdev.port = port;
  if (c.wire == Wire::roce) {  // RoCEv2 receives on 4791: one loopback address per side
    c.netdev.ip = side == 0 ? "127.0.91.1" : "127.0.91.2";
    c.netdev.port = 4791;
  }
  return c;
}

bool fail(std::string& err, const std::string& what) {
  err = what;
  return false;
}

bool open_devices(const Options& o, std::uint16_t port, Pair& p, std::string& err) {
  std::string e;
  p.a = Device::open(config(o, 0, port), e);
  if (!p.a) return fail(err, "open A: " + e);
  p.b = Device::open(config(o, 1, static_cast<std::uint16_t>(port + 1)), e);
  if (!p.b) return fail(err, "open B: " + e);
  return true;
}

bool alloc_pds_cqs_memory(std::size_t n, std::size_t depth, std::size_t max_size, Pair& p, std::string& err) {
  p.pa = p.a->alloc_pd();
  p.pb = p.b->alloc_pd();
  p.scq = p.a->create_cq(static_cast<std::uint32_t>(n * depth + 64), nullptr);
  p.rcq = p.a->create_cq(16, nullptr);
  p.bscq = p.b->create_cq(16, nullptr);
  p.brcq = p.b->create_cq(16, nullptr);
  if (!p.pa || !p.pb || !p.scq || !p.rcq || !p.bscq || !p.brcq) return fail(err, "PD/CQ allocation failed");
  // Every Write of a size reads the same source and lands on the same target: memory stays
  // max_size whatever N is (what is measured is the RNIC's per-connection cost, not the cache).
  p.src.assign(max_size, 0x5A);
  p.dst.assign(max_size, 0);
  if (p.a->reg_mr(p.pa, p.src.data(), p.src.size(), Access::local_read, p.ms) != Status::ok ||
      p.b->reg_mr(p.pb, p.dst.data(), p.dst.size(), Access::remote_write, p.md) != Status::ok)
    return fail(err, "memory registration failed");
  return true;
}

bool create_qps(std::size_t n, std::size_t depth, Pair& p, std::string& err) {
  for (int side = 0; side < 2; ++side) {
    Device& d = side == 0 ? *p.a : *p.b;
    QpInit in;
    in.pd = side == 0 ? p.pa : p.pb;
    in.send_cq = side == 0 ? p.scq : p.bscq;
    in.recv_cq = side == 0 ? p.rcq : p.brcq;
    in.max_send_wr = static_cast<std::uint32_t>(std::max<std::size_t>(depth, 4));
    in.max_recv_wr = 4;
    in.max_sge = 1;
    auto& v = side == 0 ? p.qa : p.qb;
    v.resize(n);
    for (std::size_t i = 0; i < n; ++i)
      if (d.create_qp(in, v[i]) != Status::ok)
        return fail(err, "create QP " + std::to_string(i) + " of " + std::to_string(n) + " failed");
  }
  return true;
}

bool connect_roce(Pair& p, std::string& err) {
  for (std::size_t i = 0; i < p.qa.size(); ++i) {
    RoceEndpoint ea, eb;
    if (p.a->roce_local(p.qa[i], ea) != Status::ok || p.b->roce_local(p.qb[i], eb) != Status::ok ||
        p.a->roce_connect(p.qa[i], eb, 8, 8) != Status::ok || p.b->roce_connect(p.qb[i], ea, 8, 8) != Status::ok)
      return fail(err, "RoCEv2 connect of QP " + std::to_string(i) + " failed");
  }
  return true;
}

// Connects every QP pair through the connection manager (iWARP).
bool connect_cm(Pair& p, std::string& err) {
  const std::size_t n = p.qa.size();
  std::mutex mu;
  std::vector<ConnRequest*> reqs;
  if (p.b->listen(9, [&](ConnRequest* r, const ConnRequestInfo&) {
        std::lock_guard g(mu);
        reqs.push_back(r);
      }) != Status::ok)
    return fail(err, "listen failed");
  // (The callback names this scope's locals: listening ends with it, on every way out.)
  struct StopListen {
    Device& d;
    ~StopListen() { d.stop_listen(9); }
  } stop_listen{*p.b};
  // Connect in batches of at most 64 requests waiting, accepting them as they come.
  std::size_t connected = 0, accepted = 0;
  const auto deadline = Clock::now() + 120s;
  while (accepted < n) {
    while (connected < n && connected - accepted < 64) {
      if (p.a->connect(p.qa[connected], p.b->address(), 9, {}, 20000ms) != Status::ok)
        return fail(err, "connect of QP " + std::to_string(connected) + " failed");
      ++connected;
    }
    std::vector<ConnRequest*> got;
    {
      std::lock_guard g(mu);
      got.swap(reqs);
    }
    for (ConnRequest* r : got)
      if (p.b->accept(r, p.qb[accepted++], {}) != Status::ok)
        return fail(err, "accept " + std::to_string(accepted) + " failed");
    if (got.empty()) std::this_thread::sleep_for(100us);
    if (Clock::now() > deadline) return fail(err, "connecting timed out at " + std::to_string(accepted));
  }
  return true;
}

bool wait_for_rts(Pair& p, std::string& err) {
  const auto deadline = Clock::now() + 120s;
  for (std::size_t i = 0; i < p.qa.size(); ++i)
    while (p.a->qp_state(p.qa[i]) != QpState::rts) {
      if (Clock::now() > deadline) return fail(err, "QP " + std::to_string(i) + " did not reach RTS");
      std::this_thread::sleep_for(100us);
    }
  return true;
}

bool open_pair(const Options& o, std::size_t n, std::size_t depth, std::size_t max_size, std::uint16_t port, Pair& p,
               std::string& err) {
  if (!open_devices(o, port, p, err) || !alloc_pds_cqs_memory(n, depth, max_size, p, err)) return false;
  const auto t0 = Clock::now();
  if (!create_qps(n, depth, p, err)) return false;
  if (!(wire_of(o.wire) == Wire::roce ? connect_roce(p, err) : connect_cm(p, err))) return false;
  if (!wait_for_rts(p, err)) return false;
  p.setup_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::this_thread::sleep_for(20ms);
  return true;
}

struct Result {
  double mbps = 0, msgs = 0;        // aggregate: MB/s, Writes/s
  double lat_p50 = 0, lat_p99 = 0;  // µs, post to completion
  double fairness = 0;              // least-served QP's Writes / the mean
  std::uint64_t retransmits = 0, by_rack = 0,
                spurious = 0;      // the sender's resends: all, decided by RACK, found spurious
  std::uint64_t rcvbuf_drops = 0;  // the host's UDP receive-buffer drops in the meantime (/proc/net/snmp)
};

// The host's count of UDP datagrams dropped for a full socket receive buffer (all sockets).
std::uint64_t udp_rcvbuf_errors() {
  std::FILE* f = std::fopen("/proc/net/snmp", "r");
  if (!f) return 0;
  char line[1024];
  std::vector<std::string> names;
  std::uint64_t v = 0;
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, "Udp: ", 5) != 0) continue;
    std::vector<std::string> fields;
    for (char* t = std::strtok(line + 5, " \n"); t; t = std::strtok(nullptr, " \n")) fields.emplace_back(t);
    if (names.empty()) {
      names = fields;
      continue;
    }
    for (std::size_t i = 0; i < names.size() && i < fields.size(); ++i)
      if (names[i] == "RcvbufErrors") v = std::stoull(fields[i]);
    break;
  }
  std::fclose(f);
  return v;
}

// The resends of a set of QPs so far: {by RACK, found spurious}.
std::pair<std::uint64_t, std::uint64_t> resend_kinds(Device& d, const std::vector<Qp*>& qps) {
  std::uint64_t rack = 0, spur = 0;
  for (Qp* q : qps) {
    const QpCounters c = d.qp_counters(q);
    rack += c.rack_retransmits;
    spur += c.spurious_retransmits;
  }
  return {rack, spur};
}

bool stream(Pair& p, std::size_t size, std::size_t depth, double seconds, Result& res, std::string& err) {
  const std::size_t n = p.qa.size();
  const std::uint32_t stag = p.a->query_mr(p.ms).stag, rkey = p.b->query_mr(p.md).stag;
  const Sge g{stag, reinterpret_cast<std::uintptr_t>(p.src.data()), static_cast<std::uint32_t>(size)};
  std::vector<Clock::time_point> started(n * depth);
  std::vector<std::uint64_t> per_qp(n, 0);
  std::vector<double> lat;
  lat.reserve(1 << 20);
  const auto c0 = p.a->counters();
  const auto k0 = resend_kinds(*p.a, p.qa);
  const std::uint64_t drops0 = udp_rcvbuf_errors();
  const auto post = [&](std::size_t slot) {
    const SendWr wr{slot, SendOpcode::rdma_write, {&g, 1}, rkey, reinterpret_cast<std::uintptr_t>(p.dst.data())};
    started[slot] = Clock::now();
    return p.a->post_send(p.qa[slot / depth], wr) == Status::ok;
  };
  const auto t0 = Clock::now();
  const auto stop = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  const auto deadline = stop + 60s;
  for (std::size_t s = 0; s < n * depth; ++s)
    if (!post(s)) return fail(err, "post failed");
  std::size_t outstanding = n * depth;
  std::uint64_t done = 0;
  Clock::time_point last = t0;
  Wc wc[64];
  while (outstanding > 0) {
    const std::size_t got = p.a->poll_cq(p.scq, wc);
    if (got == 0) {
      p.a->progress();
      if (Clock::now() > deadline) return fail(err, "timed out with " + std::to_string(outstanding) + " outstanding");
      continue;
    }
    const auto now = Clock::now();
    for (std::size_t i = 0; i < got; ++i) {
      if (wc[i].status != WcStatus::success) return fail(err, "completion: " + std::string(to_string(wc[i].status)));
      const auto slot = static_cast<std::size_t>(wc[i].wr_id);
      lat.push_back(std::chrono::duration<double, std::micro>(now - started[slot]).count());
      ++per_qp[slot / depth];
      ++done;
      last = now;
      if (now < stop) {
        if (!post(slot)) return fail(err, "post failed");
      } else {
        --outstanding;
      }
    }
  }
  const double secs = std::chrono::duration<double>(last - t0).count();
  res.msgs = static_cast<double>(done) / secs;
  res.mbps = res.msgs * static_cast<double>(size) / 1e6;
  res.lat_p50 = bench::percentile(lat, 50);
  res.lat_p99 = bench::percentile(lat, 99);
  // (Every QP's first Writes complete, whatever the time: one with none was never served.)
  const std::size_t starved = static_cast<std::size_t>(std::count(per_qp.begin(), per_qp.end(), 0));
  if (starved > 0) return fail(err, std::to_string(starved) + " QPs completed no Write");
  const double mean = static_cast<double>(done) / static_cast<double>(n);
  res.fairness = static_cast<double>(*std::min_element(per_qp.begin(), per_qp.end())) / mean;
  res.retransmits = p.a->counters().retransmits - c0.retransmits;
  const auto k1 = resend_kinds(*p.a, p.qa);
  res.by_rack = k1.first - k0.first;
  res.spurious = k1.second - k0.second;
  res.rcvbuf_drops = udp_rcvbuf_errors() - drops0;
  return true;
}

// The process's resident memory now (VmRSS), MB.
long rss_mb() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  long pages = 0, resident = 0;
  const int got = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return got == 2 ? resident * (sysconf(_SC_PAGESIZE) / 1024) / 1024 : 0;
}

// One row's figures over the runs: per-run values, and the first run's resident memory.
struct Cell {
  std::vector<double> mbps, msgs, p50, p99, fair, setup, resends, rack, spurious, drops;
  long rss = 0;

  void add(const Result& res, double setup_s) {
    mbps.push_back(res.mbps);
    msgs.push_back(res.msgs);
    p50.push_back(res.lat_p50);
    p99.push_back(res.lat_p99);
    fair.push_back(res.fairness);
    setup.push_back(setup_s);
    resends.push_back(static_cast<double>(res.retransmits));
    rack.push_back(static_cast<double>(res.by_rack));
    spurious.push_back(static_cast<double>(res.spurious));
    drops.push_back(static_cast<double>(res.rcvbuf_drops));
  }
};

// Every run of every QP count and size, and what they measured.
struct Sweep {
  const Options& o;
  std::size_t max_size = 0;
  std::uint16_t port = 6400;
  // cells[size index][qps index]
  std::vector<std::vector<Cell>> cells;
  int bad = 0;

  explicit Sweep(const Options& opt)
      : o(opt),
        max_size(*std::max_element(opt.sizes.begin(), opt.sizes.end())),
        cells(opt.sizes.size(), std::vector<Cell>(opt.qps.size())) {}

  // Run r with o.qps[qi] QPs: one pair of devices, every size streamed on it.
  void run(std::size_t r, std::size_t qi) {
    const std::size_t n = o.qps[qi];
    const std::size_t depth = std::max<std::size_t>(1, o.window / n);
    std::fprintf(stderr, "\r  run %zu/%zu: %zu QPs          ", r + 1, o.runs, n);
    Pair p;
    std::string err;
    const bool ok = open_pair(o, n, depth, max_size, port, p, err);
    port = static_cast<std::uint16_t>(port + 2);
    if (!ok) {
      std::printf("%6zu run %zu: %s\n", n, r, err.c_str());
      ++bad;
      return;
    }
    for (std::size_t si = 0; si < o.sizes.size(); ++si) {
      Result res;
      if (!stream(p, o.sizes[si], depth, o.seconds, res, err)) {
        std::printf("%6zu %6zu run %zu: %s\n", n, o.sizes[si], r, err.c_str());
        ++bad;
        continue;
      }
      cells[si][qi].add(res, p.setup_s);
    }
    // (Both devices and their QPs still open. The first run's: what the allocator kept of a
    // larger N stays resident in later runs.)
    if (r == 0) cells[0][qi].rss = rss_mb();
  }

  void print_rows() const {
    for (std::size_t si = 0; si < o.sizes.size(); ++si) {
      const double base = bench::median(cells[si][0].mbps);
      for (std::size_t qi = 0; qi < o.qps.size(); ++qi) {
        const Cell& c = cells[si][qi];
        if (c.mbps.empty()) continue;
        const double m = bench::median(c.mbps);
        std::printf(
            "%6zu %6zu %5zu %10.1f %8.1f %8.1f %8.2fx %10.3f %10.1f %9.1f %8.2f %8.2f %8.0f %8.0f %9.0f %6.0f %7ld\n",
            o.qps[qi], o.sizes[si], std::max<std::size_t>(1, o.window / o.qps[qi]), m,
            *std::min_element(c.mbps.begin(), c.mbps.end()), *std::max_element(c.mbps.begin(), c.mbps.end()),
            base > 0 ? m / base : 0.0, bench::median(c.msgs) / 1e6, bench::median(c.p50), bench::median(c.p99),
            bench::median(c.fair), bench::median(c.setup), bench::median(c.resends), bench::median(c.rack),
            bench::median(c.spurious), bench::median(c.drops), cells[0][qi].rss);
      }
    }
  }
};

// One socket per connection on each side (tcp wire).
void raise_fd_limit() {
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"softrnic_scalebench: aggregate throughput and latency of N QPs streaming RDMA Writes at once"};
  app.add_option("--wire", o.wire, "udp (iWARP over UDP), tcp (iWARP over MPA/TCP) or roce (RoCEv2)")
      ->check(CLI::IsMember({"udp", "tcp", "roce"}));
  app.add_option("--qps", o.qps, "connected QP counts")->check(CLI::Range(1, 4096));
  app.add_option("--sizes", o.sizes, "Write sizes, bytes")->check(CLI::Range(1, 1 << 20));
  app.add_option("--runs", o.runs, "runs per row (each opens its devices anew)")->check(CLI::Range(1, 100));
  app.add_option("--window", o.window, "Writes outstanding in all (at least one per QP)")->check(CLI::Range(1, 65536));
  app.add_option("--seconds", o.seconds, "streaming time per size")->check(CLI::Range(0.05, 60.0));
  CLI11_PARSE(app, argc, argv);

  if (o.wire == "tcp") raise_fd_limit();
  Sweep sweep(o);
  std::printf("softrnic_scalebench: %s wire, %zu Writes outstanding in all (>= 1 per QP), %.2f s per size, %zu runs\n",
              o.wire.c_str(), o.window, o.seconds, o.runs);
  std::printf("%6s %6s %5s %10s %8s %8s %9s %10s %10s %9s %8s %8s %8s %8s %9s %6s %7s\n", "QPs", "size", "depth",
              "MB/s p50", "min", "max", "vs 1 QP", "Mmsg/s", "lat p50us", "lat p99us", "fair", "setup s", "resends",
              "by RACK", "spurious", "drops", "RSS MB");
  for (std::size_t r = 0; r < o.runs; ++r)
    for (std::size_t qi = 0; qi < o.qps.size(); ++qi) sweep.run(r, qi);
  std::fprintf(stderr, "\r%40s\r", "");
  sweep.print_rows();
  std::printf(
      "fair: the least-served QP's Writes / the mean. resends: the sender's (by RACK: decided by a later frame's "
      "delivery, the rest by the RTO; spurious: found needless). drops: the host's UDP receive-buffer drops meanwhile "
      "(all sockets). RSS MB: the process's resident memory with the N QPs of both sides open (the largest of the "
      "runs).\n");
  return sweep.bad == 0 ? 0 : 1;
}
