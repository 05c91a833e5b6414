#include "softrnic/netdev/netdev.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "backends.hpp"

namespace softrnic::netdev {

namespace {
thread_local bool t_wait_interrupted = false;
}  // namespace

bool take_wait_interrupted() {
  return std::exchange(t_wait_interrupted, false);
}
void note_wait_interrupted() {
  t_wait_interrupted = true;
}

void block_async_signals() {
  sigset_t set;
  ::sigfillset(&set);
  for (const int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS}) ::sigdelset(&set, s);
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

std::string ipv4_to_string(std::uint32_t ip) {
  return std::to_string(ip >> 24) + "." + std::to_string((ip >> 16) & 0xFF) + "." + std::to_string((ip >> 8) & 0xFF) +
         "." + std::to_string(ip & 0xFF);
}

std::string to_string(const NetAddr& a) {
  return ipv4_to_string(a.ip) + ":" + std::to_string(a.port);
}

bool interface_ipv4(const std::string& name, std::uint32_t& ip, std::string& error) {
  if (name.empty() || name.size() >= IFNAMSIZ || name.find('/') != std::string::npos) {
    error = "'" + printable(name) + "' cannot be a network interface's name";
    return false;
  }
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = std::string("socket: ") + std::strerror(errno);
    return false;
  }
  ifreq r{};
  std::memcpy(r.ifr_name, name.data(), name.size());
  r.ifr_addr.sa_family = AF_INET;
  const int rc = ::ioctl(fd, SIOCGIFADDR, &r);
  const int err = errno;
  ::close(fd);
  if (rc != 0) {
    error = err == ENODEV          ? "no network interface '" + printable(name) + "' (ip -br link lists them)"
            : err == EADDRNOTAVAIL ? "network interface '" + printable(name) + "' has no IPv4 address"
                                   : "network interface '" + printable(name) + "': " + std::strerror(err);
    return false;
  }
  ip = ntohl(reinterpret_cast<const sockaddr_in*>(&r.ifr_addr)->sin_addr.s_addr);
  return true;
}

std::uint32_t interface_mtu(std::uint32_t ip) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return 0;
  std::uint32_t mtu = 0;
  for (const ifaddrs* i = list; i && mtu == 0; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    if (ntohl(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr) != ip) continue;
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) break;
    ifreq r{};
    std::snprintf(r.ifr_name, sizeof r.ifr_name, "%s", i->ifa_name);
    if (::ioctl(fd, SIOCGIFMTU, &r) == 0 && r.ifr_mtu > 0) mtu = static_cast<std::uint32_t>(r.ifr_mtu);
    ::close(fd);
  }
  ::freeifaddrs(list);
  return mtu;
}

bool is_unicast_ipv4(std::uint32_t ip) {
  return ip != 0 && ip != 0xFFFFFFFFu && (ip >> 28) < 14;
}

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7F) {
      out.push_back(ch);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

bool pcap_path_ok(const std::string& path, std::string& error) {
  if (path.empty()) {
    error = "pcap: empty file name";
    return false;
  }
  // The directory it would be created in, resolved (symbolic links, ..).
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  char real[PATH_MAX];
  if (!::realpath(dir.c_str(), real)) {
    error = "pcap '" + printable(path) + "': directory " + printable(dir) + ": " + std::strerror(errno);
    return false;
  }
  const std::string rdir = real;
  for (const char* bad : {"/proc", "/sys", "/dev"}) {
    const std::string b = bad;
    if (rdir == b || rdir.rfind(b + "/", 0) == 0) {
      error = "pcap '" + printable(path) + "': refusing a file in " + b;
      return false;
    }
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    error = "pcap '" + printable(path) + "': exists and is not a regular file";
    return false;
  }
  return true;
}

bool parse_ipv4(const std::string& s, std::uint32_t& ip) {
  std::uint32_t v = 0;
  const char* p = s.data();
  const char* end = s.data() + s.size();
  for (int i = 0; i < 4; ++i) {
    unsigned octet = 0;
    auto [next, ec] = std::from_chars(p, end, octet);
    if (ec != std::errc() || next == p || octet > 255 || next - p > 3) return false;
    v = v << 8 | octet;
    p = next;
    if (i < 3) {
      if (p == end || *p != '.') return false;
      ++p;
    }
  }
  if (p != end) return false;
  ip = v;
  return true;
}

bool parse_uint(std::string_view v, std::uint64_t lo, std::uint64_t hi, std::uint64_t& out) {
  std::uint64_t x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || x < lo || x > hi) return false;
  out = x;
  return true;
}

std::unique_ptr<Netdev> make_netdev(const NetdevConfig& config, std::string& error) {
  NetdevConfig cfg = config;
  if (cfg.kind != "dpdk" && cfg.dpdk != DpdkConfig{}) {
    error = "netdev: dpdk_*, mac, mtu and neigh apply only to netdev=dpdk (this is netdev=" + cfg.kind + ")";
    return nullptr;
  }
  if (cfg.kind == "dpdk") {
    // The dpdk backend sizes its datagrams from the MTU and writes its real frames to the pcap.
    if (!validate_dpdk_config(cfg, error)) {
      error = "dpdk netdev: " + error;
      return nullptr;
    }
    auto nd = make_dpdk(cfg, error);
    if (nd && cfg.impair.active()) nd = make_impaired(std::move(nd), cfg.impair);
    return nd;
  }
  if (cfg.max_datagram == 0) {
    std::uint32_t ip = 0;
    const bool loop = parse_ipv4(cfg.ip, ip) && (ip >> 24) == 127;
    cfg.max_datagram = loop ? 65000 : 1472;
  }
  if (cfg.max_datagram < 256 || cfg.max_datagram > 65507) {
    error = "netdev: max datagram " + std::to_string(cfg.max_datagram) + " outside 256..65507";
    return nullptr;
  }
  std::unique_ptr<Netdev> nd;
  if (cfg.kind == "udp") {
    nd = make_udp(cfg, error);
  } else if (cfg.kind == "loopback") {
    nd = make_loopback(cfg, error);
  } else {
    error = "netdev: unknown kind '" + cfg.kind + "' (known: udp, loopback, dpdk)";
    return nullptr;
  }
  if (nd && !cfg.pcap.empty()) nd = make_pcap_tap(std::move(nd), cfg.pcap, error, cfg.dont_fragment);
  if (nd && cfg.impair.active()) nd = make_impaired(std::move(nd), cfg.impair);
  return nd;
}

}  // namespace softrnic::netdev
