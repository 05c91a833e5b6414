#include "softrnic/info.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

namespace softrnic::info {
namespace {

using nlohmann::json;

std::string wire_name(Wire w) {
  switch (w) {
    case Wire::udp: return "iwarp-udp";
    case Wire::tcp: return "iwarp-mpa-tcp";
    case Wire::roce: return "roce-v2";
  }
  return "?";
}

std::string addr(NetAddr a) {
  return netdev::to_string(a);
}

// A directory only we can plant sockets in: made if missing, refused if someone else owns it or
// it is a symbolic link.
bool make_dir(const std::string& dir, mode_t mode, std::string& error) {
  if (::mkdir(dir.c_str(), mode) != 0 && errno != EEXIST) {
    error = "cannot make " + dir + ": " + std::strerror(errno);
    return false;
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    error = dir + " is not a directory";
    return false;
  }
  if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    error = dir + " belongs to another user";
    return false;
  }
  return true;
}

std::string sanitize(const std::string& name) {
  std::string s;
  for (const char c : name)
    s += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.') ? c : '_';
  return s.empty() ? "softrnic" : s.substr(0, 40);
}

class PublisherImpl final : public Publisher {
 public:
  PublisherImpl(const Device& dev, int fd, std::string path) : dev_(dev), fd_(fd), path_(std::move(path)) {
    if (::pipe2(stop_, O_CLOEXEC) != 0) stop_[0] = stop_[1] = -1;
    thread_ = std::thread([this] { run(); });
  }
  ~PublisherImpl() override {
    if (stop_[1] >= 0) (void)!::write(stop_[1], "x", 1);
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
    ::unlink(path_.c_str());
    for (const int f : stop_)
      if (f >= 0) ::close(f);
  }
  const std::string& path() const override { return path_; }

 private:
  void run() {
    const long pid = static_cast<long>(::getpid());
    for (;;) {
      pollfd p[2] = {{fd_, POLLIN, 0}, {stop_[0], POLLIN, 0}};
      if (::poll(p, stop_[0] >= 0 ? 2 : 1, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (p[1].revents) return;
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      const timeval tv{1, 0};  // a reader that does not read cannot hold this thread
      ::setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      const std::string text = to_json(dev_.info(), pid) + "\n";
      const char* b = text.data();
      std::size_t n = text.size();
      while (n) {
        const ssize_t w = ::send(c, b, n, MSG_NOSIGNAL);
        if (w <= 0) break;
        b += w;
        n -= static_cast<std::size_t>(w);
      }
      ::close(c);
    }
  }

  const Device& dev_;
  int fd_;
  std::string path_;
  int stop_[2] = {-1, -1};
  std::thread thread_;
};

}  // namespace

std::string socket_dir() {
  if (const char* d = std::getenv("SOFTRNIC_INFO_DIR"); d && *d) return d;
  if (::geteuid() == 0) return "/run/softrnic";
  if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x && *x) return std::string(x) + "/softrnic";
  return "/tmp/softrnic-" + std::to_string(::geteuid());
}

bool publishing_enabled() {
  const char* v = std::getenv("SOFTRNIC_INFO");
  return !(v && std::strcmp(v, "0") == 0);
}

std::string to_json(const DeviceInfo& d, long pid) {
  json qps = json::array();
  for (const QpInfo& q : d.qps) {
    json j = {{"qpn", q.qpn},
              {"state", std::string(to_string(q.state))},
              {"local", addr(q.local)},
              {"peer", addr(q.peer)},
              {"msn_expected", q.msn_expected},
              {"recv_queued", q.recv_queued},
              {"placed_not_completed", q.placed_not_completed},
              {"recv_allocated", q.recv.allocated},
              {"recv_span", q.recv.span},
              {"send_queued", q.send_queued},
              {"counters",
               {{"tx_frames", q.ctr.tx_frames},
                {"rx_frames", q.ctr.rx_frames},
                {"retransmits", q.ctr.retransmits},
                {"rx_duplicates", q.ctr.rx_duplicates},
                {"rx_out_of_order", q.ctr.rx_out_of_order},
                {"rx_beyond_window", q.ctr.rx_beyond_window},
                {"rack_retransmits", q.ctr.rack_retransmits},
                {"spurious_retransmits", q.ctr.spurious_retransmits}}}};
    j["srq"] = q.uses_srq ? json{{"available", q.srq.available}, {"outstanding", q.srq.outstanding},
                                 {"allocated", q.srq.allocated}, {"completed", q.srq.completed},
                                 {"max_wr", q.srq.max_wr},       {"low_watermark", q.srq.low_watermark}}
                          : json(nullptr);
    qps.push_back(std::move(j));
  }
  const DeviceCounters& c = d.ctr;
  const json doc = {{"schema", kSchema},
                    {"pid", pid},
                    {"ia", d.name},
                    {"wire", wire_name(d.wire)},
                    {"netdev", d.netdev},
                    {"address", addr(d.address)},
                    {"counters",
                     {{"tx_frames", c.tx_frames},
                      {"rx_frames", c.rx_frames},
                      {"retransmits", c.retransmits},
                      {"rx_duplicates", c.rx_duplicates},
                      {"rx_out_of_order", c.rx_out_of_order},
                      {"rx_bad_frames", c.rx_bad_frames},
                      {"rx_unknown_qp", c.rx_unknown_qp},
                      {"terminates_sent", c.terminates_sent},
                      {"terminates_received", c.terminates_received},
                      {"dead_peers", c.dead_peers},
                      {"memory_faults", c.memory_faults}}},
                    {"qps", qps}};
  return doc.dump();
}

std::unique_ptr<Publisher> Publisher::start(const Device& dev, std::string& error) {
  const std::string dir = socket_dir();
  if (!make_dir(dir, ::geteuid() == 0 ? 0755 : 0700, error)) return nullptr;
  static std::atomic<unsigned> seq{0};
  const std::string path =
      dir + "/" + std::to_string(::getpid()) + "-" + sanitize(dev.info().name) + "-" + std::to_string(seq++) + ".sock";
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path.size() >= sizeof sa.sun_path) {
    error = "socket path too long: " + path;
    return nullptr;
  }
  std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = std::string("socket: ") + std::strerror(errno);
    return nullptr;
  }
  ::unlink(path.c_str());  // a stale one of a process that had our pid
  const mode_t old = ::umask(0177);
  const int rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
  ::umask(old);
  if (rc != 0 || ::listen(fd, 8) != 0) {
    error = "cannot listen on " + path + ": " + std::strerror(errno);
    ::close(fd);
    return nullptr;
  }
  return std::make_unique<PublisherImpl>(dev, fd, path);
}

std::vector<std::string> list_sockets(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n.size() > 5 && n.compare(n.size() - 5, 5, ".sock") == 0) out.push_back(dir + "/" + n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

bool fetch(const std::string& socket_path, std::string& text, std::string& error) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof sa.sun_path) {
    error = "path too long";
    return false;
  }
  std::memcpy(sa.sun_path, socket_path.c_str(), socket_path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = std::strerror(errno);
    return false;
  }
  const timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
    error = errno == ECONNREFUSED ? "stale" : std::strerror(errno);
    ::close(fd);
    return false;
  }
  text.clear();
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0) {
      error = std::string("read: ") + std::strerror(errno);
      ::close(fd);
      return false;
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > (64u << 20)) break;
  }
  ::close(fd);
  if (text.empty()) {
    error = "empty answer";
    return false;
  }
  return true;
}

}  // namespace softrnic::info
