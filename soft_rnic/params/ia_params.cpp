#include "softrnic/ia_params.hpp"

#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>

namespace softrnic::params {
namespace {

using netdev::parse_uint;

bool parse_bool(std::string_view v, bool& out) {
  if (v == "1" || v == "true" || v == "yes") return out = true, true;
  if (v == "0" || v == "false" || v == "no") return out = false, true;
  return false;
}

// A key given twice is an error (the last one silently winning hid typos and conflicting lines);
// neigh= alone may repeat (each adds neighbours).
bool first_time(std::set<std::string, std::less<>>& seen, std::string_view key, std::string& error) {
  if (key == "neigh") return true;
  if (!seen.emplace(key).second) {
    error = "'" + netdev::printable(key) + "' is given more than once";
    return false;
  }
  return true;
}

bool parse_ia_params_raw(std::string_view params, DeviceConfig& cfg, std::string& error);
bool apply_env_raw(DeviceConfig& cfg, std::string& error);

}  // namespace

// What a user gave is quoted in the messages: control characters and non-ASCII bytes escaped.
bool parse_ia_params(std::string_view params, DeviceConfig& cfg, std::string& error) {
  if (parse_ia_params_raw(params, cfg, error)) return true;
  error = netdev::printable(error);
  return false;
}

bool apply_env(DeviceConfig& cfg, std::string& error) {
  if (apply_env_raw(cfg, error)) return true;
  error = netdev::printable(error);
  return false;
}

namespace {

using netdev::ItemResult;

// How an item parser ends when its value was judged by `ok` alone.
ItemResult value_result(bool ok, std::string_view key, std::string_view val, std::string& error) {
  if (ok) return ItemResult::ok;
  error = "bad value '" + std::string(val) + "' for " + std::string(key);
  return ItemResult::bad;
}

// Busy polling, post batching, SRQ buffer choice and impairment.
ItemResult parse_engine_item(std::string_view key, std::string_view val, DeviceConfig& cfg, std::string& error) {
  bool ok = true;
  if (key == "busy_poll") {
    ok = parse_bool(val, cfg.busy_poll);
  } else if (key == "wait_spin_us") {
    std::uint32_t us = 0;
    ok = parse_uint<std::uint32_t>(val, 0, 10000, us);
    if (ok) cfg.wait_spin = std::chrono::microseconds(us);
  } else if (key == "batch_posts") {
    ok = parse_bool(val, cfg.batch_posts);
  } else if (key == "srq_alloc") {
    ok = val == "arrival" || val == "gap_fill";
    if (ok) cfg.alloc_policy = val == "arrival" ? AllocPolicy::arrival : AllocPolicy::gap_fill;
  } else if (key == "impair") {
    netdev::ImpairPlan plan;
    if (!netdev::parse_impair(val, ':', plan, error)) return ItemResult::bad;
    cfg.netdev.impair = plan;
  } else {
    return ItemResult::unknown;
  }
  return value_result(ok, key, val, error);
}

// Retransmission, connection and keepalive timers.
ItemResult parse_timer_item(std::string_view key, std::string_view val, DeviceConfig& cfg, std::string& error) {
  bool ok = true;
  std::uint32_t n = 0;
  if (key == "min_rto_us") {
    ok = parse_uint<std::uint32_t>(val, 100, 10000000, n);
    if (ok) cfg.min_rto = std::chrono::microseconds(n);
  } else if (key == "retry_limit") {
    ok = parse_uint<int>(val, 1, 1000, cfg.retry_limit);
  } else if (key == "connect_timeout_ms") {
    ok = parse_uint<std::uint32_t>(val, 1, 3600000, n);
    if (ok) cfg.connect_timeout = std::chrono::milliseconds(n);
  } else if (key == "keepalive_ms") {
    ok = parse_uint<std::uint32_t>(val, 0, 3600000, n);
    if (ok) cfg.keepalive_idle = std::chrono::milliseconds(n);
  } else if (key == "keepalive_interval_ms") {
    ok = parse_uint<std::uint32_t>(val, 10, 600000, n);
    if (ok) cfg.keepalive_interval = std::chrono::milliseconds(n);
  } else if (key == "keepalive_probes") {
    ok = parse_uint<int>(val, 1, 100, cfg.keepalive_probes);
  } else if (key == "connect_no_answer_ms") {
    ok = parse_uint<std::uint32_t>(val, 100, 3600000, n);
    if (ok) cfg.connect_no_answer = std::chrono::milliseconds(n);
  } else {
    return ItemResult::unknown;
  }
  return value_result(ok, key, val, error);
}

// The wire and its RoCEv2 and MPA settings.
ItemResult parse_wire_item(std::string_view key, std::string_view val, DeviceConfig& cfg, std::string& error) {
  bool ok = true;
  if (key == "wire") {
    ok = val == "udp" || val == "tcp" || val == "roce";
    if (ok) cfg.wire = val == "udp" ? Wire::udp : val == "tcp" ? Wire::tcp : Wire::roce;
  } else if (key == "roce_mtu") {
    ok = parse_uint<std::uint32_t>(val, 256, 4096, cfg.roce.mtu) && (cfg.roce.mtu & (cfg.roce.mtu - 1)) == 0;
  } else if (key == "roce_timeout") {
    std::uint8_t t = 0;
    ok = parse_uint<std::uint8_t>(val, 1, 31, t);
    if (ok) cfg.roce.timeout = t;
  } else if (key == "roce_retry_cnt") {
    ok = parse_uint<std::uint8_t>(val, 0, 7, cfg.roce.retry_cnt);
  } else if (key == "roce_rnr_retry") {
    ok = parse_uint<std::uint8_t>(val, 0, 7, cfg.roce.rnr_retry);
  } else if (key == "roce_min_rnr_timer") {
    ok = parse_uint<std::uint8_t>(val, 0, 31, cfg.roce.min_rnr_timer);
  } else if (key == "mpa_rev") {
    ok = parse_uint<std::uint8_t>(val, 1, 2, cfg.mpa.revision);
  } else if (key == "mpa_crc") {
    ok = parse_bool(val, cfg.mpa.crc);
  } else if (key == "mpa_markers") {
    ok = parse_bool(val, cfg.mpa.markers);
  } else if (key == "mpa_p2p") {
    ok = parse_bool(val, cfg.mpa.peer_to_peer);
  } else {
    return ItemResult::unknown;
  }
  return value_result(ok, key, val, error);
}

ItemResult parse_ia_item(std::string_view key, std::string_view val, DeviceConfig& cfg, std::string& error) {
  ItemResult r = netdev::parse_netdev_item(key, val, cfg.netdev, error);
  if (r == ItemResult::unknown) r = parse_engine_item(key, val, cfg, error);
  if (r == ItemResult::unknown) r = parse_timer_item(key, val, cfg, error);
  if (r == ItemResult::unknown) r = parse_wire_item(key, val, cfg, error);
  return r;
}

// The next item of a list separated by blanks and commas, from `i` on (empty at the end).
std::string_view next_item(std::string_view list, std::size_t& i) {
  while (i < list.size() && (list[i] == ' ' || list[i] == '\t' || list[i] == ',')) ++i;
  std::size_t j = i;
  while (j < list.size() && list[j] != ' ' && list[j] != '\t' && list[j] != ',') ++j;
  const std::string_view item = list.substr(i, j - i);
  i = j;
  return item;
}

bool parse_ia_params_raw(std::string_view params, DeviceConfig& cfg, std::string& error) {
  std::set<std::string, std::less<>> seen;
  std::size_t i = 0;
  for (std::string_view item = next_item(params, i); !item.empty(); item = next_item(params, i)) {
    const auto eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      error = "ia_params: '" + std::string(item) + "' is not key=value";
      return false;
    }
    const std::string_view key = item.substr(0, eq), val = item.substr(eq + 1);
    if (!first_time(seen, key, error)) {
      error = "ia_params: " + error;
      return false;
    }
    const ItemResult r = parse_ia_item(key, val, cfg, error);
    if (r == ItemResult::unknown) {
      error = "ia_params: unknown key '" + std::string(key) + "'";
      return false;
    }
    if (r == ItemResult::bad) {
      error = "ia_params: " + error;
      return false;
    }
  }
  // RoCEv2 lives on UDP port 4791 (IANA): the default there, not the iWARP framing's 5041.
  if (cfg.wire == Wire::roce && !seen.count("port")) cfg.netdev.port = 4791;
  return true;
}

}  // namespace

bool apply_impair_env(DeviceConfig& cfg, std::string& error) {
  const char* env = std::getenv("SOFTRNIC_IMPAIR");
  if (!env) return true;
  netdev::ImpairPlan plan;
  if (!netdev::parse_impair(env, ',', plan, error)) {
    error = "SOFTRNIC_IMPAIR: " + error;
    return false;
  }
  cfg.netdev.impair = plan;
  return true;
}

bool parse_netdev_spec(std::string_view spec, netdev::NetdevConfig& nd, std::string& error) {
  std::set<std::string, std::less<>> seen;
  std::size_t i = 0;
  while (i < spec.size()) {
    while (i < spec.size() && (spec[i] == ' ' || spec[i] == '\t' || spec[i] == ',')) ++i;
    if (i >= spec.size()) break;
    std::size_t j = i;
    while (j < spec.size() && spec[j] != ' ' && spec[j] != '\t' && spec[j] != ',') ++j;
    const std::string_view item = spec.substr(i, j - i);
    i = j;
    const auto eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      error = "'" + std::string(item) + "' is not key=value";
      return false;
    }
    const auto key = item.substr(0, eq);
    if (!first_time(seen, key, error)) return false;
    const auto r = netdev::parse_netdev_item(key, item.substr(eq + 1), nd, error);
    if (r == netdev::ItemResult::unknown) {
      error = "'" + std::string(key) + "' is not a netdev key";
      return false;
    }
    if (r == netdev::ItemResult::bad) return false;
  }
  return true;
}

namespace {

bool apply_env_raw(DeviceConfig& cfg, std::string& error) {
  if (const char* env = std::getenv("SOFTRNIC_NETDEV")) {
    // Replaces the netdev choice and all its keys; the impairment plan stays.
    netdev::NetdevConfig nd;
    nd.impair = cfg.netdev.impair;
    if (!parse_netdev_spec(env, nd, error)) {
      error = "SOFTRNIC_NETDEV: " + error;
      return false;
    }
    cfg.netdev = nd;
  }
  if (const char* env = std::getenv("SOFTRNIC_PCAP")) {
    if (!netdev::pcap_path_ok(env, error)) {
      error = "SOFTRNIC_PCAP: " + error;
      return false;
    }
    cfg.netdev.pcap = env;
  }
  if (!apply_impair_env(cfg, error)) return false;
  // The dpdk settings are checked here, before anything reaches DPDK, so a bad one is an invalid
  // parameter of dat_ia_open (not a failure of the device).
  if (cfg.netdev.kind == "dpdk" && !netdev::validate_dpdk_config(cfg.netdev, error)) {
    error = "netdev=dpdk: " + error;
    return false;
  }
  if (cfg.netdev.kind != "dpdk" && cfg.netdev.dpdk != netdev::DpdkConfig{}) {
    error = "dpdk_*, mac, mtu and neigh apply only to netdev=dpdk (this is netdev=" + cfg.netdev.kind + ")";
    return false;
  }
  return true;
}

}  // namespace

}  // namespace softrnic::params
