// softrnic_info: what softrnic IAs exist and what the live ones are doing, as ibv_devinfo and
// `rdma stat` do for kernel RDMA devices (docs/info.md, softrnic_info(1)).
//
//   softrnic_info [--conf FILE] [--dir DIR] [--json] [--watch SECONDS [--count N]]
//
// First the IAs of the active dat.conf (DAT_OVERRIDE, else /etc/dat.conf): softrnic's with their
// transport, netdev, address and limits (what dat_ia_query reports), other providers' by name.
// Then every live softrnic device of this host (a unix socket per IA in DIR, default as the
// provider publishes: SOFTRNIC_INFO_DIR, /run/softrnic for root, ...): its counters and, per QP,
// state, peer, the MSN expected next, messages placed but not completed, receive buffers
// allocated and their span (dat_ep_recv_query), its SRQ (dat_srq_query), retransmits.
// --json prints one document (schema 2) instead of tables. Exit status 0; 1 when the dat.conf
// cannot be read and no live IA answers; 2 for bad arguments.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "softrnic/ia_params.hpp"
#include "softrnic/info.hpp"

using nlohmann::json;
using namespace softrnic;

namespace {

// One dat.conf line's fields (name api threadsafety default library version "ia_params" "platform").
std::vector<std::string> split_conf_line(const std::string& line) {
  std::vector<std::string> f;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    if (i >= line.size()) break;
    if (line[i] == '"') {
      const std::size_t e = line.find('"', i + 1);
      f.push_back(line.substr(i + 1, e == std::string::npos ? std::string::npos : e - i - 1));
      i = e == std::string::npos ? line.size() : e + 1;
    } else {
      std::size_t e = i;
      while (e < line.size() && !std::isspace(static_cast<unsigned char>(line[e]))) ++e;
      f.push_back(line.substr(i, e - i));
      i = e;
    }
  }
  return f;
}

const char* wire_name(Wire w) {
  return w == Wire::tcp ? "iwarp-mpa-tcp" : w == Wire::roce ? "roce-v2" : "iwarp-udp";
}

std::string str(const json& j) {
  return j.is_string() ? j.get<std::string>() : j.is_null() ? "-" : j.dump();
}

// j[k], or null when j is no object or has no k: a snapshot is another process's text, and a
// key it lacks (an older softrnic) shows as "-" instead of failing.
const json& at(const json& j, const char* k) {
  static const json none;
  if (!j.is_object()) return none;
  const auto i = j.find(k);
  return i == j.end() ? none : *i;
}

json conf_ias(const std::string& path, bool& readable) {
  json ias = json::array();
  std::ifstream in(path);
  readable = static_cast<bool>(in);
  std::string line;
  while (std::getline(in, line)) {
    const auto f = split_conf_line(line);
    if (f.empty() || f[0][0] == '#') continue;
    json ia = {{"name", f[0]}, {"library", f.size() > 4 ? f[4] : ""}};
    const bool ours = f.size() > 4 && f[4].find("libdaplsoftrnic") != std::string::npos;
    ia["softrnic"] = ours;
    if (ours) {
      DeviceConfig cfg;
      std::string err;
      if (params::parse_ia_params(f.size() > 6 ? f[6] : "", cfg, err)) {
        ia["wire"] = wire_name(cfg.wire);
        ia["netdev"] = cfg.wire == Wire::tcp ? "tcp" : cfg.netdev.kind;
        ia["ip"] = cfg.netdev.ip;
        ia["port"] = cfg.wire == Wire::tcp ? 0 : cfg.netdev.port;
      } else {
        ia["error"] = err;
      }
    }
    ias.push_back(ia);
  }
  return ias;
}

json limits_json() {
  const Limits l;
  return {{"max_qp", l.max_qp},
          {"max_qp_wr", l.max_qp_wr},
          {"max_sge", l.max_sge},
          {"max_cqe", l.max_cqe},
          {"max_mr", l.max_mr},
          {"max_mr_size", l.max_mr_size},
          {"max_msg_size", l.max_msg_size},
          {"max_pd", l.max_pd},
          {"max_rdma_read", l.max_rd}};
}

json gather(const std::string& conf, const std::string& dir, bool& conf_ok) {
  json doc = {{"schema", info::kSchema},
              {"dat_conf", conf},
              {"ias", conf_ias(conf, conf_ok)},
              {"limits", limits_json()},
              {"socket_dir", dir}};
  json live = json::array(), stale = json::array();
  for (const std::string& s : info::list_sockets(dir)) {
    std::string text, err;
    if (!info::fetch(s, text, err)) {
      // <pid>-<name>-<n>.sock of a process that is gone (killed before it could remove it): removed
      const std::string base = s.substr(s.rfind('/') + 1);
      const long pid = std::strtol(base.c_str(), nullptr, 10);
      if (err == "stale" && pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH &&
          ::unlink(s.c_str()) == 0)
        err = "stale: process " + std::to_string(pid) + " is gone, socket removed";
      stale.push_back({{"socket", s}, {"error", err}});
      continue;
    }
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || at(j, "schema") != info::kSchema) {
      stale.push_back({{"socket", s}, {"error", "not a softrnic snapshot of schema " + std::to_string(info::kSchema)}});
      continue;
    }
    j["socket"] = s;
    live.push_back(std::move(j));
  }
  doc["live"] = live;
  doc["unanswered"] = stale;
  return doc;
}

void print_tables(const json& d) {
  std::printf("IAs in %s%s\n", d["dat_conf"].get<std::string>().c_str(), d["ias"].empty() ? " (none)" : "");
  std::printf("  %-22s %-14s %-9s %-22s %s\n", "IA", "transport", "netdev", "address", "provider");
  for (const auto& ia : d["ias"]) {
    if (ia["softrnic"].get<bool>()) {
      if (ia.contains("error")) {
        std::printf("  %-22s (bad ia_params: %s)\n", str(ia["name"]).c_str(), str(ia["error"]).c_str());
        continue;
      }
      std::string a = str(ia["ip"]);
      if (ia["port"].get<int>() != 0) a += ":" + std::to_string(ia["port"].get<int>());
      std::printf("  %-22s %-14s %-9s %-22s %s\n", str(ia["name"]).c_str(), str(ia["wire"]).c_str(),
                  str(ia["netdev"]).c_str(), a.c_str(), str(ia["library"]).c_str());
    } else {
      std::printf("  %-22s %-14s %-9s %-22s %s\n", str(ia["name"]).c_str(), "-", "-", "-", str(ia["library"]).c_str());
    }
  }
  const auto& l = d["limits"];
  std::printf(
      "softrnic limits (dat_ia_query): max_qp %s, max_qp_wr %s, max_sge %s, max_cqe %s, max_mr %s, "
      "max_msg_size %s, max_rdma_read %s\n\n",
      str(l["max_qp"]).c_str(), str(l["max_qp_wr"]).c_str(), str(l["max_sge"]).c_str(), str(l["max_cqe"]).c_str(),
      str(l["max_mr"]).c_str(), str(l["max_msg_size"]).c_str(), str(l["max_rdma_read"]).c_str());
  std::printf("Live IAs (%s): %zu\n", str(d["socket_dir"]).c_str(), d["live"].size());
  for (const auto& dev : d["live"]) {
    const json& c = at(dev, "counters");
    std::printf(
        "  %s pid %s: %s on %s %s; tx %s rx %s frames, retransmits %s, out of order %s, duplicates %s, "
        "bad frames %s, Terminates sent %s received %s, fatal NAKs sent %s received %s\n",
        str(at(dev, "ia")).c_str(), str(at(dev, "pid")).c_str(), str(at(dev, "wire")).c_str(),
        str(at(dev, "netdev")).c_str(), str(at(dev, "address")).c_str(), str(at(c, "tx_frames")).c_str(),
        str(at(c, "rx_frames")).c_str(), str(at(c, "retransmits")).c_str(), str(at(c, "rx_out_of_order")).c_str(),
        str(at(c, "rx_duplicates")).c_str(), str(at(c, "rx_bad_frames")).c_str(), str(at(c, "terminates_sent")).c_str(),
        str(at(c, "terminates_received")).c_str(), str(at(c, "fatal_naks_sent")).c_str(),
        str(at(c, "fatal_naks_received")).c_str());
    const json& qps = at(dev, "qps");
    if (!qps.is_array() || qps.empty()) continue;
    std::printf("    %-9s %-9s %-21s %7s %6s %5s %4s %-14s %5s %6s %6s %s\n", "QP", "state", "peer", "MSN exp",
                "placed", "alloc", "span", "SRQ avail/out", "sq", "retx", "ooo", "Term+NAK s/r");
    for (const auto& q : qps) {
      const json& srq = at(q, "srq");
      const json& qc = at(q, "counters");
      const std::string srq_s = srq.is_object() ? str(at(srq, "available")) + "/" + str(at(srq, "outstanding")) : "-";
      const std::string term = str(at(qc, "terminates_sent")) + "+" + str(at(qc, "fatal_naks_sent")) + "/" +
                               str(at(qc, "terminates_received")) + "+" + str(at(qc, "fatal_naks_received"));
      std::printf("    %-9s %-9s %-21s %7s %6s %5s %4s %-14s %5s %6s %6s %s\n", str(at(q, "qpn")).c_str(),
                  str(at(q, "state")).c_str(), str(at(q, "peer")).c_str(), str(at(q, "msn_expected")).c_str(),
                  str(at(q, "placed_not_completed")).c_str(), str(at(q, "recv_allocated")).c_str(),
                  str(at(q, "recv_span")).c_str(), srq_s.c_str(), str(at(q, "send_queued")).c_str(),
                  str(at(qc, "retransmits")).c_str(), str(at(qc, "rx_out_of_order")).c_str(), term.c_str());
    }
  }
  for (const auto& s : d["unanswered"])
    std::printf("  (no answer from %s: %s)\n", str(s["socket"]).c_str(), str(s["error"]).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"softrnic_info: softrnic's IAs in dat.conf, and what the live ones are doing"};
  std::string conf, dir;
  bool as_json = false;
  double watch = 0;
  int count = 0;
  app.add_option("--conf", conf, "the dat.conf to list (default: $DAT_OVERRIDE, else /etc/dat.conf)");
  app.add_option("--dir", dir,
                 "where live IAs publish (default: as the provider: SOFTRNIC_INFO_DIR, /run/softrnic, ...)");
  app.add_flag("--json", as_json, "one JSON document (schema 2) instead of tables");
  app.add_option("--watch", watch, "refresh every SECONDS until interrupted")->check(CLI::Range(0.1, 3600.0));
  app.add_option("--count", count, "with --watch: stop after N refreshes")->check(CLI::Range(1, 1000000));
  CLI11_PARSE(app, argc, argv);
  if (conf.empty()) {
    const char* o = std::getenv("DAT_OVERRIDE");
    conf = o && *o ? o : "/etc/dat.conf";
  }
  if (dir.empty()) dir = info::socket_dir();
  ::signal(SIGPIPE, SIG_IGN);
  for (int n = 1;; ++n) {
    bool conf_ok = false;
    const json d = gather(conf, dir, conf_ok);
    if (watch > 0 && !as_json) std::printf("\033[H\033[2J");
    if (as_json)
      std::printf("%s\n", d.dump(2).c_str());
    else
      print_tables(d);
    std::fflush(stdout);
    if (watch <= 0) return conf_ok || !d["live"].empty() ? 0 : 1;
    if (count && n >= count) return 0;
    std::this_thread::sleep_for(std::chrono::duration<double>(watch));
  }
}
