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

Result run_once(const std::string& netdev, const netdev::ImpairPlan& plan, std::size_t total_mb, std::uint16_t port,
                std::size_t max_datagram, std::chrono::microseconds min_rto) {
  Result res;
  std::string e;
  const auto cfg = [&](std::uint16_t p, std::uint64_t seed) {
    DeviceConfig c;
    c.netdev.kind = netdev;
    c.netdev.port = p;
    c.netdev.max_datagram = max_datagram;
    c.netdev.impair = plan;
    c.netdev.impair.seed = seed;
    c.min_rto = min_rto;
    return c;
  };
  auto a = Device::open(cfg(port, plan.seed), e);
  if (!a) return res.error = e, res;
  auto b = Device::open(cfg(static_cast<std::uint16_t>(port + 1), plan.seed + 1000), e);
  if (!b) return res.error = e, res;
  Pd* pa = a->alloc_pd();
  Pd* pb = b->alloc_pd();
  Cq* scq = a->create_cq(4096, nullptr);
  Cq* rcq = a->create_cq(16, nullptr);
  Cq* bscq = b->create_cq(16, nullptr);
  Cq* brcq = b->create_cq(16, nullptr);
  constexpr std::uint32_t kMsg = 65536, kDepth = 32;
  std::vector<std::uint8_t> src(std::size_t{kMsg} * kDepth, 0x5A), dst(std::size_t{kMsg} * kDepth);
  Mr *ms = nullptr, *md = nullptr;
  if (!pa || !pb || !scq || !rcq || !bscq || !brcq) return res.error = "PD/CQ allocation failed", res;
  if (a->reg_mr(pa, src.data(), src.size(), Access::local_read, ms) != Status::ok ||
      b->reg_mr(pb, dst.data(), dst.size(), Access::remote_write, md) != Status::ok)
    return res.error = "memory registration failed", res;
  Qp *qa = nullptr, *qb = nullptr;
  QpInit ia;
  ia.pd = pa;
  ia.send_cq = scq;
  ia.recv_cq = rcq;
  ia.max_send_wr = 256;
  ia.max_sge = 1;
  if (a->create_qp(ia, qa) != Status::ok) return res.error = "create QP A failed", res;
  QpInit ib = ia;
  ib.pd = pb;
  ib.send_cq = bscq;
  ib.recv_cq = brcq;
  if (b->create_qp(ib, qb) != Status::ok) return res.error = "create QP B failed", res;
  std::atomic<ConnRequest*> req{nullptr};
  if (b->listen(9, [&](ConnRequest* r, const ConnRequestInfo&) { req = r; }) != Status::ok)
    return res.error = "listen failed", res;
  if (a->connect(qa, b->address(), 9, {}, 5000ms) != Status::ok) return res.error = "connect failed", res;
  for (int i = 0; i < 5000 && !req; ++i) std::this_thread::sleep_for(1ms);
  if (!req || b->accept(req, qb, {}) != Status::ok) return res.error = "no connection", res;
  for (int i = 0; i < 5000 && a->qp_state(qa) != QpState::rts; ++i) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(20ms);
  const auto c0 = a->counters(), d0 = b->counters();
  const auto q0 = a->qp_counters(qa);

  const std::uint64_t total = std::uint64_t{total_mb} << 20;
  const std::uint32_t stag = a->query_mr(ms).stag, rkey = b->query_mr(md).stag;
  std::uint64_t posted = 0, done = 0, id = 0;
  std::deque<Clock::time_point> started;
  const auto t0 = Clock::now();
  const auto deadline = t0 + 120s;
  while (done < total) {
    while (posted < total && posted - done < std::uint64_t{kDepth} * kMsg) {
      const std::uint32_t slot = static_cast<std::uint32_t>(id % kDepth);
      const Sge g{stag, reinterpret_cast<std::uintptr_t>(src.data()) + std::uint64_t{slot} * kMsg, kMsg};
      SendWr wr{id++,
                SendOpcode::rdma_write,
                {&g, 1},
                rkey,
                reinterpret_cast<std::uintptr_t>(dst.data()) + std::uint64_t{slot} * kMsg};
      if (a->post_send(qa, wr) != Status::ok) return res.error = "post failed", res;
      started.push_back(Clock::now());
      posted += kMsg;
    }
    Wc wc[32];
    const std::size_t n = a->poll_cq(scq, wc);
    for (std::size_t i = 0; i < n; ++i) {
      if (wc[i].status != WcStatus::success) return res.error = std::string(to_string(wc[i].status)), res;
      res.lat_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - started.front()).count());
      started.pop_front();
      done += kMsg;
    }
    if (n == 0) std::this_thread::sleep_for(20us);
    if (Clock::now() > deadline) return res.error = "timed out", res;
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const auto c1 = a->counters(), d1 = b->counters();
  const auto q1 = a->qp_counters(qa);
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

}  // namespace

int main(int argc, char** argv) {
  std::string netdev = "udp";
  std::size_t mb = 64, runs = 5, dgram = 1472, min_rto_us = 5000;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--netdev" && i + 1 < argc)
      netdev = argv[++i];
    else if (a == "--mb" && i + 1 < argc)
      mb = std::stoul(argv[++i]);
    else if (a == "--runs" && i + 1 < argc)
      runs = std::stoul(argv[++i]);
    else if (a == "--max-datagram" && i + 1 < argc)
      dgram = std::stoul(argv[++i]);
    else if (a == "--min-rto-us" && i + 1 < argc)
      min_rto_us = std::stoul(argv[++i]);
    else {
      std::printf(
          "usage: softrnic_lossbench [--netdev udp|loopback] [--mb N] [--runs N] [--max-datagram N] "
          "[--min-rto-us N (default 5000, the device's)]\n");
      return a == "-h" || a == "--help" ? 0 : 2;
    }
  }
  struct Plan {
    const char* name;
    netdev::ImpairPlan plan;
  };
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

  std::printf(
      "softrnic_lossbench: %zu MiB of 64 KiB RDMA Writes (32 outstanding) per run, %zu runs per plan, "
      "%s netdev, %zu-byte datagrams\n",
      mb, runs, netdev.c_str(), dgram);
  std::printf("%-12s %10s %10s %10s %9s %10s %10s %12s %8s %8s %9s %12s %12s\n", "plan", "MB/s p50", "min", "max",
              "vs none", "lat p50us", "lat p99us", "retransmits", "by RACK", "by RTO", "spurious", "duplicates",
              "out-of-order");
  double base = 0;
  int bad = 0;
  std::uint16_t port = 6200;
  for (auto& p : plans) {
    std::vector<double> mbps, lat;
    std::vector<double> rtx, dup, ooo, rack, rto, spur;
    for (std::size_t r = 0; r < runs; ++r) {
      std::fprintf(stderr, "\r  %s: run %zu/%zu ", p.name, r + 1, runs);
      p.plan.seed = 1 + r;
      const Result res = run_once(netdev, p.plan, mb, port, dgram, std::chrono::microseconds(min_rto_us));
      port = static_cast<std::uint16_t>(port + 2);
      if (!res.ok) {
        std::printf("%-12s run %zu failed: %s\n", p.name, r, res.error.c_str());
        ++bad;
        continue;
      }
      mbps.push_back(res.mbps);
      lat.insert(lat.end(), res.lat_us.begin(), res.lat_us.end());
      rtx.push_back(static_cast<double>(res.retransmits));
      rack.push_back(static_cast<double>(res.rack));
      rto.push_back(static_cast<double>(res.rto));
      spur.push_back(static_cast<double>(res.spurious));
      dup.push_back(static_cast<double>(res.duplicates));
      ooo.push_back(static_cast<double>(res.out_of_order));
    }
    std::fprintf(stderr, "\r%60s\r", "");
    if (mbps.empty()) continue;
    const double med = bench::percentile(mbps, 50);
    if (std::string(p.name) == "none") base = med;
    std::printf("%-12s %10.0f %10.0f %10.0f %8.2fx %10.0f %10.0f %12.0f %8.0f %8.0f %9.0f %12.0f %12.0f\n", p.name, med,
                *std::min_element(mbps.begin(), mbps.end()), *std::max_element(mbps.begin(), mbps.end()),
                base > 0 ? med / base : 0.0, bench::percentile(lat, 50), bench::percentile(lat, 99),
                bench::percentile(rtx, 50), bench::percentile(rack, 50), bench::percentile(rto, 50),
                bench::percentile(spur, 50), bench::percentile(dup, 50), bench::percentile(ooo, 50));
  }
  std::printf(
      "(retransmits (by RACK: a later frame's delivery; by RTO: the timer), spurious (found so afterwards), "
      "duplicates, out-of-order: medians per run of the sender's and receiver's counters; with reorder=W alone "
      "every retransmission is spurious)\n");
  return bad ? 1 : 0;
}
