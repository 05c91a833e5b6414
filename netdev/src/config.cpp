// The netdev configuration grammar (shared by the DAT provider's ia_params and SOFTRNIC_NETDEV)
// and the checks of the dpdk settings that run before anything reaches DPDK: rte_eal_init
// calls rte_exit on some bad arguments, so nothing unknown is handed over.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <array>

#include "ethernet.hpp"
#include "softrnic/netdev/netdev.hpp"

namespace softrnic::netdev {
namespace {

bool parse_bool(std::string_view v, bool& out) {
  if (v == "1" || v == "true" || v == "yes") return out = true, true;
  if (v == "0" || v == "false" || v == "no") return out = false, true;
  return false;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i <= s.size()) {
    const std::size_t j = std::min(s.find(sep, i), s.size());
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

std::string semicolons_to_commas(std::string_view v) {
  std::string s(v);
  std::replace(s.begin(), s.end(), ';', ',');
  return s;
}

bool name_chars_ok(std::string_view v) {
  return !v.empty() && std::all_of(v.begin(), v.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

// PMDs whose virtual devices we accept (Debian 12's DPDK 22.11 ships them all).
constexpr std::array<std::string_view, 9> kKnownVdevPmds = {"net_memif",       "net_af_packet", "net_af_xdp",
                                                            "net_virtio_user", "net_vhost",     "net_tap",
                                                            "net_pcap",        "net_ring",      "net_null"};

std::string known_pmds() {
  std::string s;
  for (auto p : kKnownVdevPmds) s += (s.empty() ? "" : ", ") + std::string(p);
  return s;
}

std::string_view vdev_pmd(std::string_view name) {
  for (auto p : kKnownVdevPmds) {
    if (name.substr(0, p.size()) != p) continue;
    const auto rest = name.substr(p.size());
    if (std::all_of(rest.begin(), rest.end(),
                    [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '_'; }))
      return p;
  }
  return {};
}

// Finds `key=` among the devargs' kvargs; empty view when absent.
std::string_view kvarg(std::string_view devargs, std::string_view key, bool& present) {
  present = false;
  const auto items = split(devargs, ',');
  for (std::size_t i = 1; i < items.size(); ++i) {
    const auto eq = items[i].find('=');
    if (items[i].substr(0, eq) == key) {
      present = true;
      return eq == std::string_view::npos ? std::string_view{} : items[i].substr(eq + 1);
    }
  }
  return {};
}

bool check_vdev(std::string_view devargs, const NetdevConfig& cfg, std::string& error) {
  const auto items = split(devargs, ',');
  if (items.empty() || devargs.front() == ',') {
    error = "dpdk vdev '" + std::string(devargs) + "': no device name";
    return false;
  }
  const auto pmd = vdev_pmd(items[0]);
  if (pmd.empty()) {
    error = "dpdk vdev '" + std::string(items[0]) + "': unknown PMD (known: " + known_pmds() +
            "; a device name is the PMD name plus a suffix, e.g. net_memif0)";
    return false;
  }
  for (std::size_t i = 1; i < items.size(); ++i) {
    const auto eq = items[i].find('=');
    if (eq == 0 || eq == std::string_view::npos || eq + 1 == items[i].size() ||
        items[i].find_first_of(" \t\"'") != std::string_view::npos) {
      error = "dpdk vdev '" + std::string(devargs) + "': '" + std::string(items[i]) + "' is not key=value";
      return false;
    }
  }
  bool has = false;
  if (pmd == "net_memif") {
    const auto sock = kvarg(devargs, "socket", has);
    if (!has || sock.empty() || sock.front() != '/') {
      error = "dpdk vdev '" + std::string(devargs) +
              "': net_memif needs socket=<absolute file path> (unique per memif pair; ';' stands for ',')";
      return false;
    }
    const auto role = kvarg(devargs, "role", has);
    if (has && role != "server" && role != "client") {
      error = "dpdk vdev '" + std::string(devargs) + "': role must be server or client";
      return false;
    }
    const auto bsize = kvarg(devargs, "bsize", has);
    std::uint32_t b = 0;
    if (has && (!parse_uint<std::uint32_t>(bsize, 64, 65535, b) || b < cfg.dpdk.mtu + 14)) {
      error = "dpdk vdev '" + std::string(devargs) +
              "': bsize must be a number >= mtu + 14 (memif loses frames "
              "larger than bsize; the default here is 9216)";
      return false;
    }
  }
  if (pmd == "net_af_packet" || pmd == "net_af_xdp") {
    const auto iface = kvarg(devargs, "iface", has);
    if (!has || iface.empty()) {
      error = "dpdk vdev '" + std::string(devargs) + "': " + std::string(pmd) + " needs iface=<interface>";
      return false;
    }
  }
  if (pmd == "net_af_packet") {
    // af_packet drops larger frames silently (counted as sent): its frame size must hold the
    // MTU plus Ethernet and TPACKET headers.
    const auto framesz = kvarg(devargs, "framesz", has);
    std::uint32_t f = 2048;
    if (has && !parse_uint<std::uint32_t>(framesz, 256, 1u << 20, f)) f = 0;
    if (f < cfg.dpdk.mtu + 128) {
      error = "dpdk vdev '" + std::string(devargs) + "': net_af_packet with mtu " + std::to_string(cfg.dpdk.mtu) +
              " needs framesz >= " + std::to_string(cfg.dpdk.mtu + 128) + " (and blocksz >= framesz), e.g. " +
              "framesz=8192;blocksz=8192 for mtu up to 8064";
      return false;
    }
  }
  return true;
}

bool check_pci(std::string_view devargs, std::string& error) {
  const auto items = split(devargs, ',');
  const std::string_view a = items.empty() ? std::string_view{} : items[0];
  // [DDDD:]BB:DD.F, hex digits
  auto hex = [](std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
      return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    });
  };
  const auto parts = split(a, ':');
  bool ok = (parts.size() == 2 || parts.size() == 3) && a.find("::") == std::string_view::npos;
  if (ok) {
    const std::size_t k = parts.size() - 2;
    if (k == 1) ok = parts[0].size() == 4 && hex(parts[0]);
    const auto df = parts[k + 1];
    const auto dot = df.find('.');
    ok = ok && parts[k].size() == 2 && hex(parts[k]) && dot == 2 && df.size() == 4 && hex(df.substr(0, 2)) &&
         df[3] >= '0' && df[3] <= '7';
  }
  if (!ok) {
    error = "dpdk pci '" + std::string(devargs) + "': want a PCI address like 0000:03:00.0";
    return false;
  }
  return true;
}

struct EalOption {
  std::string_view name;
  bool takes_value;
  std::string_view reserved_for;  // non-empty: set through this key instead
};
constexpr std::array<EalOption, 28> kEalOptions = {{
    {"--log-level", true, ""},
    {"--in-memory", false, ""},
    {"--huge-unlink", false, ""},
    {"--iova-mode", true, ""},
    {"-n", true, ""},
    {"--huge-dir", true, ""},
    {"--no-shconf", false, ""},
    {"--single-file-segments", false, ""},
    {"--legacy-mem", false, ""},
    {"-d", true, ""},
    {"--vdev", true, ""},
    {"--no-telemetry", false, ""},
    {"--socket-mem", true, ""},
    {"--match-allocations", false, ""},
    {"--no-hpet", false, ""},
    {"-l", true, "dpdk_lcore"},
    {"--lcores", true, "dpdk_lcore"},
    {"-c", true, "dpdk_lcore"},
    {"--main-lcore", true, "dpdk_lcore"},
    {"--file-prefix", true, "dpdk_prefix"},
    {"-m", true, "dpdk_mem"},
    {"--no-huge", false, "dpdk_huge=0"},
    {"--no-pci", false, "dpdk_pci"},
    {"-a", true, "dpdk_pci"},
    {"--allow", true, "dpdk_pci"},
    {"-b", true, "dpdk_pci"},
    {"--block", true, "dpdk_pci"},
    {"--proc-type", true, "nothing (softrnic runs EAL as a primary process)"},
}};

bool check_eal(const NetdevConfig& cfg, std::string& error) {
  const auto& args = cfg.dpdk.eal;
  bool in_memory = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    const auto eq = a.find('=');
    const std::string_view name = a.substr(0, eq);
    const EalOption* opt = nullptr;
    for (const auto& o : kEalOptions)
      if (o.name == name) opt = &o;
    if (!opt) {
      std::string known;
      for (const auto& o : kEalOptions)
        if (o.reserved_for.empty()) known += (known.empty() ? "" : " ") + std::string(o.name);
      error = "dpdk_eal: unsupported EAL argument '" + std::string(a) + "' (allowed: " + known + ")";
      return false;
    }
    if (!opt->reserved_for.empty()) {
      error = "dpdk_eal: '" + std::string(name) + "' is set by softrnic; use " + std::string(opt->reserved_for);
      return false;
    }
    std::string_view value;
    if (opt->takes_value) {
      if (eq != std::string_view::npos) {
        value = a.substr(eq + 1);
      } else if (name.size() == 2 && a.size() > 2) {
        value = a.substr(2);  // "-n4"
      } else if (i + 1 < args.size()) {
        value = args[++i];
      }
      if (value.empty()) {
        error = "dpdk_eal: '" + std::string(name) + "' needs a value";
        return false;
      }
    } else if (eq != std::string_view::npos) {
      error = "dpdk_eal: '" + std::string(name) + "' takes no value";
      return false;
    }
    if (name == "--in-memory") in_memory = true;
    if (name == "--socket-mem" && !cfg.dpdk.hugepages) {
      error = "dpdk_eal: --socket-mem needs hugepages (dpdk_huge=1)";
      return false;
    }
    if (name == "--iova-mode" && value != "pa" && value != "va" && value != "dc") {
      error = "dpdk_eal: --iova-mode must be pa, va or dc";
      return false;
    }
    std::uint32_t n = 0;
    if (name == "-n" && !parse_uint<std::uint32_t>(value, 1, 32, n)) {
      error = "dpdk_eal: -n wants a number 1..32";
      return false;
    }
    if (name == "--vdev" && !check_vdev(value, cfg, error)) return false;
    if (name == "--log-level" && !std::all_of(value.begin(), value.end(), [](char c) {
          return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '*' || c == ':' || c == '_';
        })) {
      error = "dpdk_eal: bad --log-level '" + std::string(value) + "'";
      return false;
    }
  }
  if (in_memory && !cfg.dpdk.hugepages) {
    error = "dpdk_eal: --in-memory needs hugepages (dpdk_huge=1): with --no-huge EAL refuses it";
    return false;
  }
  return true;
}

// How an item parser ends when its value was judged by `ok` alone.
ItemResult value_result(bool ok, std::string_view key, std::string_view val, std::string& error) {
  if (ok) return ItemResult::ok;
  error = "bad value '" + printable(val) + "' for " + printable(key);
  return ItemResult::bad;
}

ItemResult parse_ip_item(std::string_view val, NetdevConfig& cfg, std::string& error) {
  std::uint32_t ip = 0;
  std::string v(val);
  // An interface's name ("eth0", as OFA dapl's "eth0 0") stands for its primary IPv4 address;
  // digits and dots alone are an address (or a bad one).
  if (!v.empty() && v.find_first_not_of("0123456789.") != std::string::npos) {
    std::string e;
    if (!interface_ipv4(v, ip, e)) {
      error = "ip=" + printable(val) + ": not an IPv4 address, and " + e;
      return ItemResult::bad;
    }
    v = ipv4_to_string(ip);
  }
  if (parse_ipv4(v, ip) && !is_unicast_ipv4(ip)) {
    error = "ip=" + printable(val) +
            ": not a unicast IPv4 address (0.0.0.0, broadcast, multicast and 240/4 cannot be an RNIC's address)";
    return ItemResult::bad;
  }
  const bool ok = parse_ipv4(v, ip);
  if (ok) cfg.ip = v;
  return value_result(ok, "ip", val, error);
}

// The items every backend reads.
ItemResult parse_common_item(std::string_view key, std::string_view val, NetdevConfig& cfg, std::string& error) {
  bool ok = true;
  if (key == "netdev") {
    ok = val == "udp" || val == "loopback" || val == "dpdk";
    if (ok) cfg.kind = std::string(val);
  } else if (key == "ip") {
    return parse_ip_item(val, cfg, error);
  } else if (key == "port") {
    ok = parse_uint<std::uint16_t>(val, 1, 65535, cfg.port);
  } else if (key == "port_fixed") {
    ok = parse_bool(val, cfg.port_fixed);
  } else if (key == "max_datagram") {
    ok = parse_uint<std::size_t>(val, 256, 65507, cfg.max_datagram);
  } else if (key == "udp_gso") {
    ok = parse_bool(val, cfg.udp_gso);
  } else if (key == "udp_gso_pairs") {
    ok = parse_bool(val, cfg.udp_gso_pairs);
  } else if (key == "pcap") {
    if (!pcap_path_ok(std::string(val), error)) return ItemResult::bad;
    cfg.pcap = std::string(val);
  } else {
    return ItemResult::unknown;
  }
  return value_result(ok, key, val, error);
}

// The dpdk items that choose the device and set up EAL.
ItemResult parse_dpdk_eal_item(std::string_view key, std::string_view val, DpdkConfig& d, std::string& error) {
  bool ok = true;
  if (key == "dpdk_vdev") {
    ok = !val.empty();
    if (ok) d.vdev = semicolons_to_commas(val);
  } else if (key == "dpdk_pci") {
    ok = !val.empty();
    if (ok) d.pci = semicolons_to_commas(val);
  } else if (key == "dpdk_port") {
    ok = parse_uint<int>(val, 0, 1023, d.port);
  } else if (key == "dpdk_eal") {
    for (auto a : split(val, ';')) d.eal.emplace_back(a);
  } else if (key == "dpdk_lcore") {
    ok = parse_uint<int>(val, 0, 1023, d.lcore);
  } else if (key == "dpdk_prefix") {
    ok = name_chars_ok(val) && val.size() <= 64;
    if (ok) d.file_prefix = std::string(val);
  } else if (key == "dpdk_mem") {
    ok = parse_uint<std::uint32_t>(val, 64, 65536, d.mem_mb);
  } else if (key == "dpdk_huge") {
    ok = parse_bool(val, d.hugepages);
  } else {
    return ItemResult::unknown;
  }
  return value_result(ok, key, val, error);
}

// The dpdk items that set up the port and its frames.
ItemResult parse_dpdk_port_item(std::string_view key, std::string_view val, DpdkConfig& d, std::string& error) {
  bool ok = true;
  if (key == "dpdk_rxd") {
    ok = parse_uint<std::uint16_t>(val, 64, 16384, d.rx_desc);
  } else if (key == "dpdk_txd") {
    ok = parse_uint<std::uint16_t>(val, 64, 16384, d.tx_desc);
  } else if (key == "dpdk_link_timeout_ms") {
    ok = parse_uint<std::uint32_t>(val, 100, 600000, d.link_timeout_ms);
  } else if (key == "dpdk_udp_csum") {
    ok = parse_bool(val, d.check_udp_checksum);
  } else if (key == "dpdk_tx_udp_csum") {
    ok = val == "auto" || val == "sw" || val == "0";
    if (!ok) {
      error = "bad value '" + printable(val) + "' for dpdk_tx_udp_csum (want auto, sw or 0)";
      return ItemResult::bad;
    }
    d.tx_udp_csum = val == "auto" ? TxUdpCsum::automatic : val == "sw" ? TxUdpCsum::software : TxUdpCsum::zero;
  } else if (key == "mac") {
    eth::Mac m;
    ok = eth::parse_mac(val, m) && !m.is_multicast() && !m.is_zero();
    if (!ok) {
      error = "bad value '" + std::string(val) + "' for mac (want a unicast MAC like 02:00:00:00:00:01)";
      return ItemResult::bad;
    }
    d.mac = std::string(val);
  } else if (key == "mtu") {
    ok = parse_uint<std::uint32_t>(val, 576, 16110, d.mtu);
  } else if (key == "neigh") {
    for (auto n : split(val, ';')) {
      std::uint32_t ip;
      eth::Mac m;
      if (!eth::parse_neighbour(n, ip, m, error)) return ItemResult::bad;
      d.neigh.emplace_back(n);
    }
  } else {
    return ItemResult::unknown;
  }
  return value_result(ok, key, val, error);
}

}  // namespace

ItemResult parse_netdev_item(std::string_view key, std::string_view val, NetdevConfig& cfg, std::string& error) {
  ItemResult r = parse_common_item(key, val, cfg, error);
  if (r == ItemResult::unknown) r = parse_dpdk_eal_item(key, val, cfg.dpdk, error);
  if (r == ItemResult::unknown) r = parse_dpdk_port_item(key, val, cfg.dpdk, error);
  return r;
}

bool validate_dpdk_config(const NetdevConfig& cfg, std::string& error) {
  const DpdkConfig& d = cfg.dpdk;
  std::uint32_t ip = 0;
  if (!parse_ipv4(cfg.ip, ip) || ip == 0 || (ip >> 28) >= 14 || ip == 0xFFFFFFFF) {
    error = "dpdk netdev: ip '" + cfg.ip + "' is not a unicast IPv4 address";
    return false;
  }
  if (!d.vdev.empty() && !d.pci.empty()) {
    error = "dpdk netdev: give dpdk_vdev or dpdk_pci, not both";
    return false;
  }
  if (!d.vdev.empty() && !check_vdev(d.vdev, cfg, error)) return false;
  if (!d.pci.empty() && !check_pci(d.pci, error)) return false;
  if (!d.mac.empty()) {
    eth::Mac m;
    if (!eth::parse_mac(d.mac, m) || m.is_multicast() || m.is_zero()) {
      error = "dpdk netdev: bad mac '" + d.mac + "' (want a unicast MAC like 02:00:00:00:00:01)";
      return false;
    }
  }
  for (const auto& n : d.neigh) {
    std::uint32_t nip;
    eth::Mac m;
    if (!eth::parse_neighbour(n, nip, m, error)) {
      error = "dpdk netdev: " + error;
      return false;
    }
  }
  if (d.mtu < 576 || d.mtu > 16110) {
    error = "dpdk netdev: mtu " + std::to_string(d.mtu) + " outside 576..16110";
    return false;
  }
  if (cfg.max_datagram != 0 && cfg.max_datagram > d.mtu - 28) {
    error = "dpdk netdev: max_datagram " + std::to_string(cfg.max_datagram) +
            " exceeds mtu - 28 = " + std::to_string(d.mtu - 28) + " (no IPv4 fragmentation)";
    return false;
  }
  if (!d.file_prefix.empty() && !name_chars_ok(d.file_prefix)) {
    error = "dpdk netdev: bad file prefix '" + d.file_prefix + "'";
    return false;
  }
  if (d.lcore >= 0) {
    const long ncpu = ::sysconf(_SC_NPROCESSORS_CONF);
    if (d.lcore >= ncpu) {
      error = "dpdk netdev: dpdk_lcore " + std::to_string(d.lcore) + " but this machine has " + std::to_string(ncpu) +
              " CPUs";
      return false;
    }
  }
  return check_eal(cfg, error);
}

bool dpdk_eal_args(const NetdevConfig& cfg, std::vector<std::string>& args, std::string& error) {
  if (!validate_dpdk_config(cfg, error)) return false;
  const DpdkConfig& d = cfg.dpdk;
  args = {"softrnic"};
  int lcore = d.lcore;
  if (lcore < 0) lcore = std::max(0, ::sched_getcpu());
  args.insert(args.end(), {"-l", std::to_string(lcore)});
  args.push_back("--file-prefix=" + (d.file_prefix.empty() ? "softrnic_" + std::to_string(::getpid()) : d.file_prefix));
  if (!d.hugepages) args.push_back("--no-huge");
  args.insert(args.end(), {"-m", std::to_string(d.mem_mb)});
  if (d.pci.empty())
    args.push_back("--no-pci");
  else
    args.insert(args.end(), {"-a", d.pci});
  bool has_log = false, has_telemetry = false;
  for (const auto& a : d.eal) {
    if (a.rfind("--log-level", 0) == 0) has_log = true;
    if (a == "--no-telemetry") has_telemetry = true;
  }
  if (!has_telemetry) args.push_back("--no-telemetry");
  if (!has_log) args.push_back("--log-level=warning");
  if (!d.vdev.empty()) {
    std::string v = d.vdev;
    if (vdev_pmd(v.substr(0, v.find(','))) == "net_memif") {
      bool has = false;
      kvarg(v, "bsize", has);
      if (!has) v += ",bsize=" + std::to_string(std::max<std::uint32_t>(9216, d.mtu + 14));
      kvarg(v, "socket-abstract", has);
      if (!has) v += ",socket-abstract=no";
    }
    args.push_back("--vdev=" + v);
  }
  args.insert(args.end(), d.eal.begin(), d.eal.end());
  return true;
}

}  // namespace softrnic::netdev
