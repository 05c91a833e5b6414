// Fuzz target: the configuration grammars. The input, as a string, goes to every parser of
// configuration text: the IA's ia_params (params::parse_ia_params), SOFTRNIC_NETDEV
// (params::parse_netdev_spec), impairment plans with both separators (netdev::parse_impair), one
// netdev item split at its first '=' (netdev::parse_netdev_item), the dpdk checks on what parsed
// (netdev::validate_dpdk_config, netdev::dpdk_eal_args), and the small parsers under them (IPv4,
// numbers, MACs, neighbours). None may crash; each failure names what was wrong (a non-empty
// error); what parsed stays inside the documented ranges and parses again to the same value.
#include <string>
#include <string_view>

#include "ethernet.hpp"
#include "fuzz_check.hpp"
#include "softrnic/ia_params.hpp"
#include "softrnic/netdev/netdev.hpp"

namespace nd = softrnic::netdev;

namespace {

void check_netdev_ranges(const nd::NetdevConfig& c) {
  FUZZ_CHECK(c.kind == "udp" || c.kind == "loopback" || c.kind == "dpdk");
  std::uint32_t ip = 0;
  FUZZ_CHECK(nd::parse_ipv4(c.ip, ip));
  FUZZ_CHECK(c.port >= 1);
  FUZZ_CHECK(c.max_datagram == 0 || (c.max_datagram >= 256 && c.max_datagram <= 65507));
  const nd::DpdkConfig& d = c.dpdk;
  FUZZ_CHECK(d.port >= -1 && d.port <= 1023 && d.lcore >= -1 && d.lcore <= 1023);
  FUZZ_CHECK(d.mem_mb >= 64 && d.mem_mb <= 65536);
  FUZZ_CHECK(d.rx_desc >= 64 && d.rx_desc <= 16384 && d.tx_desc >= 64 && d.tx_desc <= 16384);
  FUZZ_CHECK(d.link_timeout_ms >= 100 && d.link_timeout_ms <= 600000);
  FUZZ_CHECK(d.mtu >= 576 && d.mtu <= 16110);
  FUZZ_CHECK(d.file_prefix.size() <= 64);
  for (const auto& n : d.neigh) {
    std::uint32_t nip;
    nd::eth::Mac m;
    std::string e;
    FUZZ_CHECK(nd::eth::parse_neighbour(n, nip, m, e));
  }
  if (!d.mac.empty()) {
    nd::eth::Mac m;
    FUZZ_CHECK(nd::eth::parse_mac(d.mac, m) && !m.is_multicast() && !m.is_zero());
  }
}

void check_impair(const nd::ImpairPlan& p) {
  FUZZ_CHECK(p.drop >= 0 && p.drop <= 1 && p.dup >= 0 && p.dup <= 1 && p.corrupt >= 0 && p.corrupt <= 1);
  FUZZ_CHECK(p.reorder <= 4096 && p.delay_us <= 10'000'000);
  // The integer keys survive a round trip through to_string (the probabilities are printed with
  // six decimals and need not).
  nd::ImpairPlan again;
  std::string e;
  std::string s = nd::to_string(p);
  FUZZ_CHECK_MSG(nd::parse_impair(s, ',', again, e), "%s: %s", s.c_str(), e.c_str());
  FUZZ_CHECK(again.seed == p.seed && again.reorder == p.reorder && again.delay_us == p.delay_us);
}

void dpdk_checks(const nd::NetdevConfig& c) {
  std::string e1, e2;
  const bool ok = nd::validate_dpdk_config(c, e1);
  FUZZ_CHECK(ok || !e1.empty());
  std::vector<std::string> args;
  const bool ok2 = nd::dpdk_eal_args(c, args, e2);
  FUZZ_CHECK(ok == ok2);
  FUZZ_CHECK(ok2 ? (!args.empty() && args[0] == "softrnic") : !e2.empty());
  for (const auto& a : args) FUZZ_CHECK(!a.empty());
}

void small_parsers(std::string_view s) {
  const std::string str(s);
  std::uint32_t ip = 0;
  if (nd::parse_ipv4(str, ip)) {
    // Dotted quad back: parses to the same address (the input may have had leading zeros).
    std::string back = nd::to_string(nd::NetAddr{ip, 0});
    back.resize(back.rfind(':'));
    std::uint32_t ip2 = 0;
    FUZZ_CHECK(nd::parse_ipv4(back, ip2) && ip2 == ip);
  }
  std::uint64_t x = 7;
  if (nd::parse_uint(s, 10, 65535, x)) {
    FUZZ_CHECK(x >= 10 && x <= 65535);
    std::uint64_t y = 0;
    FUZZ_CHECK(nd::parse_uint(std::to_string(x), 0, ~std::uint64_t{0}, y) && y == x);
  } else {
    FUZZ_CHECK(x == 7);  // untouched on failure
  }
  nd::eth::Mac m;
  if (nd::eth::parse_mac(s, m)) {
    nd::eth::Mac m2;
    FUZZ_CHECK(nd::eth::parse_mac(nd::eth::to_string(m), m2) && m2 == m);
  }
  std::uint32_t nip = 0;
  std::string e;
  if (!nd::eth::parse_neighbour(s, nip, m, e)) FUZZ_CHECK(!e.empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view s(reinterpret_cast<const char*>(data), size);

  softrnic::DeviceConfig cfg;
  std::string e;
  if (softrnic::params::parse_ia_params(s, cfg, e)) {
    check_netdev_ranges(cfg.netdev);
    check_impair(cfg.netdev.impair);
    FUZZ_CHECK(cfg.retry_limit >= 1 && cfg.retry_limit <= 1000);
    if (cfg.netdev.kind == "dpdk") dpdk_checks(cfg.netdev);
  } else {
    FUZZ_CHECK(!e.empty());
  }

  nd::NetdevConfig n;
  e.clear();
  if (softrnic::params::parse_netdev_spec(s, n, e)) {
    check_netdev_ranges(n);
    dpdk_checks(n);  // as if netdev=dpdk had been given
  } else {
    FUZZ_CHECK(!e.empty());
  }

  for (const char sep : {':', ','}) {
    nd::ImpairPlan p;
    e.clear();
    if (nd::parse_impair(s, sep, p, e))
      check_impair(p);
    else
      FUZZ_CHECK(!e.empty());
  }

  const auto eq = s.find('=');
  if (eq != std::string_view::npos) {
    nd::NetdevConfig item;
    e.clear();
    const auto r = nd::parse_netdev_item(s.substr(0, eq), s.substr(eq + 1), item, e);
    if (r == nd::ItemResult::bad) FUZZ_CHECK(!e.empty());
    if (r == nd::ItemResult::ok) check_netdev_ranges(item);
  }

  small_parsers(s);
  return 0;
}
