// softrnic_lossbench: goodput of iWARP over UDP under impairment plans, beside the same transfer
// with no impairment in the same run (the ratio is what to read; the machine is shared).
// Streams RDMA Writes between two soft RNICs in one process over the udp netdev on 127.0.0.1
// (or the loopback netdev) with Ethernet-sized datagrams, several runs per plan, and prints
// goodput (median, min-max), per-Write completion latency (p50, p99) and the retransmissions —
// with reordering alone, every retransmission is a spurious one (target: zero).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
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

struct Result {
  double mbps = 0;
  std::vector<double> lat_us;
  std::uint64_t retransmits = 0, duplicates = 0, out_of_order = 0;
  std::uint64_t rack = 0, rto = 0, spurious = 0;  // the sender's retransmissions by trigger, and those found spurious
  bool ok = false;
  std::string error;
};

constexpr std::uint32_t kMsg = 65536, kDepth = 32;

// Options, and what one run needs of them.
struct Options {
  std::string netdev = "udp";
  std::size_t mb = 64, runs = 5, dgram = 1472, min_rto_us = 5000;
};

// Two devices with one connected QP pair: A writes into B's memory. (The devices are declared first
// and so go last.)
struct Rig {
  std::unique_ptr<Device> a, b;
  Pd *pa = nullptr, *pb = nullptr;
  Cq *scq = nullptr, *rcq = nullptr, *bscq = nullptr, *brcq = nullptr;
  std::vector<std::uint8_t> src, dst;
  Mr *ms = nullptr, *md = nullptr;
  Qp *qa = nullptr, *qb = nullptr;
  std::atomic<ConnRequest*> req{nullptr};
};

bool open_devices(const Options& o, const netdev::ImpairPlan& plan, std::uint16_t port, Rig& r, std::string& err) {
  const auto cfg = [&](std::uint16_t p, std::uint64_t seed) {
    DeviceConfig c;
    c.netdev.kind = o.netdev;
    c.netdev.port = p;
    c.netdev.max_datagram = o.dgram;
    c.netdev.impair = plan;
    c.netdev.impair.seed = seed;
    c.min_rto = std::chrono::microseconds(o.min_rto_us);
    return c;
  };
  r.a = Device::open(cfg(port, plan.seed), err);
  if (!r.a) return false;
  r.b = Device::open(cfg(static_cast<std::uint16_t>(port + 1), plan.seed + 1000), err);
  return r.b != nullptr;
}

bool create_qps(Rig& r, std::string& err) {
  r.pa = r.a->alloc_pd();
  r.pb = r.b->alloc_pd();
  r.scq = r.a->create_cq(4096, nullptr);
  r.rcq = r.a->create_cq(16, nullptr);
  r.bscq = r.b->create_cq(16, nullptr);
  r.brcq = r.b->create_cq(16, nullptr);
  r.src.assign(std::size_t{kMsg} * kDepth, 0x5A);
  r.dst.assign(std::size_t{kMsg} * kDepth, 0);
  if (!r.pa || !r.pb || !r.scq || !r.rcq || !r.bscq || !r.brcq) return err = "PD/CQ allocation failed", false;
  if (r.a->reg_mr(r.pa, r.src.data(), r.src.size(), Access::local_read, r.ms) != Status::ok ||
      r.b->reg_mr(r.pb, r.dst.data(), r.dst.size(), Access::remote_write, r.md) != Status::ok)
    return err = "memory registration failed", false;
  QpInit ia;
  ia.pd = r.pa;
  ia.send_cq = r.scq;
  ia.recv_cq = r.rcq;
  ia.max_send_wr = 256;
  ia.max_sge = 1;
  if (r.a->create_qp(ia, r.qa) != Status::ok) return err = "create QP A failed", false;
  QpInit ib = ia;
  ib.pd = r.pb;
  ib.send_cq = r.bscq;
  ib.recv_cq = r.brcq;
  if (r.b->create_qp(ib, r.qb) != Status::ok) return err = "create QP B failed", false;
  return true;
}

bool connect_qps(Rig& r, std::string& err) {
  if (r.b->listen(9, [&](ConnRequest* cr, const ConnRequestInfo&) { r.req = cr; }) != Status::ok)
    return err = "listen failed", false;
  if (r.a->connect(r.qa, r.b->address(), 9, {}, 5000ms) != Status::ok) return err = "connect failed", false;
  for (int i = 0; i < 5000 && !r.req; ++i) std::this_thread::sleep_for(1ms);
  if (!r.req || r.b->accept(r.req, r.qb, {}) != Status::ok) return err = "no connection", false;
  for (int i = 0; i < 5000 && r.a->qp_state(r.qa) != QpState::rts; ++i) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(20ms);
  return true;
}

// Streams `total` bytes of Writes, kDepth outstanding: the latency of each goes to res.lat_us, the
// time they took to `secs`.
bool stream_writes(Rig& r, std::uint64_t total, Result& res, double& secs) {
  const std::uint32_t stag = r.a->query_mr(r.ms).stag, rkey = r.b->query_mr(r.md).stag;
  std::uint64_t posted = 0, done = 0, id = 0;
  std::deque<Clock::time_point> started;
  const auto t0 = Clock::now();
  const auto deadline = t0 + 120s;
  while (done < total) {
    while (posted < total && posted - done < std::uint64_t{kDepth} * kMsg) {
      const std::uint32_t slot = static_cast<std::uint32_t>(id % kDepth);
      const Sge g{stag, reinterpret_cast<std::uintptr_t>(r.src.data()) + std::uint64_t{slot} * kMsg, kMsg};
      SendWr wr{id++,
                SendOpcode::rdma_write,
                {&g, 1},
                rkey,
                reinterpret_cast<std::uintptr_t>(r.dst.data()) + std::uint64_t{slot} * kMsg};
      if (r.a->post_send(r.qa, wr) != Status::ok) return res.error = "post failed", false;
      started.push_back(Clock::now());
      posted += kMsg;
    }
    Wc wc[32];
    const std::size_t n = r.a->poll_cq(r.scq, wc);
    for (std::size_t i = 0; i < n; ++i) {
      if (wc[i].status != WcStatus::success) return res.error = std::string(to_string(wc[i].status)), false;
      res.lat_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - started.front()).count());
      started.pop_front();
      done += kMsg;
    }
    if (n == 0) std::this_thread::sleep_for(20us);
    if (Clock::now() > deadline) return res.error = "timed out", false;
  }
  secs = std::chrono::duration<double>(Clock::now() - t0).count();
  return true;
}

Result run_once(const Options& o, const netdev::ImpairPlan& plan, std::uint16_t port) {
  Result res;
  Rig r;
  if (!open_devices(o, plan, port, r, res.error) || !create_qps(r, res.error) || !connect_qps(r, res.error)) return res;
  const auto c0 = r.a->counters(), d0 = r.b->counters();
  const auto q0 = r.a->qp_counters(r.qa);

  const std::uint64_t total = std::uint64_t{o.mb} << 20;
  double secs = 0;
  if (!stream_writes(r, total, res, secs)) return res;
  const auto c1 = r.a->counters(), d1 = r.b->counters();
  const auto q1 = r.a->qp_counters(r.qa);
  res.rack = q1.rack_retransmits - q0.rack_retransmits;
  res.rto = (q1.retransmits - q0.retransmits) - res.rack;
  res.spurious = q1.spurious_retransmits - q0.spurious_retransmits;
  res.mbps = static_cast<double>(total) / secs / 1e6;
  res.retransmits = c1.retransmits - c0.retransmits;
  res.duplicates = d1.rx_duplicates - d0.rx_duplicates;
  res.out_of_order = d1.rx_out_of_order - d0.rx_out_of_order;
  res.ok = true;
  return res;
}

// False (with the exit code) when the arguments say not to run.
bool parse_args(int argc, char** argv, Options& o, int& exit_code) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--netdev" && i + 1 < argc)
      o.netdev = argv[++i];
    else if (a == "--mb" && i + 1 < argc)
      o.mb = std::stoul(argv[++i]);
    else if (a == "--runs" && i + 1 < argc)
      o.runs = std::stoul(argv[++i]);
    else if (a == "--max-datagram" && i + 1 < argc)
      o.dgram = std::stoul(argv[++i]);
    else if (a == "--min-rto-us" && i + 1 < argc)
      o.min_rto_us = std::stoul(argv[++i]);
    else {
      std::printf(
          "usage: softrnic_lossbench [--netdev udp|loopback] [--mb N] [--runs N] [--max-datagram N] "
          "[--min-rto-us N (default 5000, the device's)]\n");
      exit_code = a == "-h" || a == "--help" ? 0 : 2;
      return false;
    }
  }
  return true;
}

struct Plan {
  const char* name;
  netdev::ImpairPlan plan;
};

std::vector<Plan> plans() {
  std::vector<Plan> plans;
  plans.push_back({"none", {}});
  netdev::ImpairPlan loss;
  loss.drop = 0.01;
  plans.push_back({"drop=0.01", loss});
  netdev::ImpairPlan reorder;
  reorder.reorder = 16;
  plans.push_back({"reorder=16", reorder});
  netdev::ImpairPlan reorder64;
  reorder64.reorder = 64;
  plans.push_back({"reorder=64", reorder64});
  return plans;
}

// A plan's figures over its runs.
struct PlanStats {
  std::vector<double> mbps, lat;
  std::vector<double> rtx, dup, ooo, rack, rto, spur;

  void add(const Result& res) {
    mbps.push_back(res.mbps);
    lat.insert(lat.end(), res.lat_us.begin(), res.lat_us.end());
    rtx.push_back(static_cast<double>(res.retransmits));
    rack.push_back(static_cast<double>(res.rack));
    rto.push_back(static_cast<double>(res.rto));
    spur.push_back(static_cast<double>(res.spurious));
    dup.push_back(static_cast<double>(res.duplicates));
    ooo.push_back(static_cast<double>(res.out_of_order));
  }

  void print(const char* name, double base) const {
    const double med = bench::percentile(mbps, 50);
    std::printf("%-12s %10.0f %10.0f %10.0f %8.2fx %10.0f %10.0f %12.0f %8.0f %8.0f %9.0f %12.0f %12.0f\n", name, med,
                *std::min_element(mbps.begin(), mbps.end()), *std::max_element(mbps.begin(), mbps.end()),
                base > 0 ? med / base : 0.0, bench::percentile(lat, 50), bench::percentile(lat, 99),
                bench::percentile(rtx, 50), bench::percentile(rack, 50), bench::percentile(rto, 50),
                bench::percentile(spur, 50), bench::percentile(dup, 50), bench::percentile(ooo, 50));
  }
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (int code = 0; !parse_args(argc, argv, o, code)) return code;
  std::vector<Plan> all = plans();

  std::printf(
      "softrnic_lossbench: %zu MiB of 64 KiB RDMA Writes (32 outstanding) per run, %zu runs per plan, "
      "%s netdev, %zu-byte datagrams\n",
      o.mb, o.runs, o.netdev.c_str(), o.dgram);
  std::printf("%-12s %10s %10s %10s %9s %10s %10s %12s %8s %8s %9s %12s %12s\n", "plan", "MB/s p50", "min", "max",
              "vs none", "lat p50us", "lat p99us", "retransmits", "by RACK", "by RTO", "spurious", "duplicates",
              "out-of-order");
  double base = 0;
  int bad = 0;
  std::uint16_t port = 6200;
  for (auto& p : all) {
    PlanStats st;
    for (std::size_t r = 0; r < o.runs; ++r) {
      std::fprintf(stderr, "\r  %s: run %zu/%zu ", p.name, r + 1, o.runs);
      p.plan.seed = 1 + r;
      const Result res = run_once(o, p.plan, port);
      port = static_cast<std::uint16_t>(port + 2);
      if (!res.ok) {
        std::printf("%-12s run %zu failed: %s\n", p.name, r, res.error.c_str());
        ++bad;
        continue;
      }
      st.add(res);
    }
    std::fprintf(stderr, "\r%60s\r", "");
    if (st.mbps.empty()) continue;
    if (std::string(p.name) == "none") base = bench::percentile(st.mbps, 50);
    st.print(p.name, base);
  }
  std::printf(
      "(retransmits (by RACK: a later frame's delivery; by RTO: the timer), spurious (found so afterwards), "
      "duplicates, out-of-order: medians per run of the sender's and receiver's counters; with reorder=W alone "
      "every retransmission is spurious)\n");
  return bad ? 1 : 0;
}
