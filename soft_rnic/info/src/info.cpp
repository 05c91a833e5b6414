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
#include <chrono>
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
  if (st.st_uid != ::geteuid()) {
    error = dir + " belongs to another user";
    return false;
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    error = dir + " is writable by others (its sockets could be replaced)";
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
  // `stop` is a pipe (read end, write end) whose write end wakes the thread to leave.
  PublisherImpl(const Device& dev, int fd, std::string path, const int stop[2])
      : dev_(dev), fd_(fd), path_(std::move(path)), stop_{stop[0], stop[1]} {
    thread_ = std::thread([this] {
      netdev::block_async_signals();
      run();
    });
  }
  ~PublisherImpl() override {
    (void)!::write(stop_[1], "x", 1);
    thread_.join();
    ::close(fd_);
    ::unlink(path_.c_str());
    ::close(stop_[0]);
    ::close(stop_[1]);
  }
  const std::string& path() const override { return path_; }

 private:
  // Waits for `fd` to be ready for `events` or the stop pipe, at most `ms` (-1: no limit).
  // 1: ready; 0: timed out; -1: stop (or poll failed).
  int wait(int fd, short events, int ms) const {
    for (;;) {
      pollfd p[2] = {{fd, events, 0}, {stop_[0], POLLIN, 0}};
      const int r = ::poll(p, 2, ms);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 || p[1].revents) return -1;
      return r == 0 ? 0 : 1;
    }
  }

  void run() {
    const long pid = static_cast<long>(::getpid());
    for (;;) {
      if (wait(fd_, POLLIN, -1) < 0) return;
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (c < 0) {
        // out of descriptors or memory: the connection stays queued; do not spin on it
        if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN && wait(stop_[0], POLLIN, 100) != 0) return;
        continue;
      }
      const std::string text = to_json(dev_.info(), pid) + "\n";
      // A reader gets 2 s for the whole snapshot: one that reads slowly or not at all cannot
      // hold this thread (nor the IA's close, which joins it).
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      const char* b = text.data();
      std::size_t n = text.size();
      while (n) {
        const ssize_t w = ::send(c, b, n, MSG_NOSIGNAL);
        if (w > 0) {
          b += w;
          n -= static_cast<std::size_t>(w);
          continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) break;
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) break;
        const int r = wait(c, POLLOUT, static_cast<int>(left));
        if (r < 0) {
          ::close(c);
          return;
        }
        if (r == 0) break;
      }
      ::close(c);
    }
  }

  const Device& dev_;
  int fd_;
  std::string path_;
  int stop_[2];
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
                {"spurious_retransmits", q.ctr.spurious_retransmits},
                {"terminates_sent", q.ctr.terminates_sent},
                {"terminates_received", q.ctr.terminates_received},
                {"fatal_naks_sent", q.ctr.fatal_naks_sent},
                {"fatal_naks_received", q.ctr.fatal_naks_received}}}};
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
                      {"rx_dropped_datagrams", c.rx_dropped_datagrams},
                      {"terminates_sent", c.terminates_sent},
                      {"terminates_received", c.terminates_received},
                      {"fatal_naks_sent", c.fatal_naks_sent},
                      {"fatal_naks_received", c.fatal_naks_received},
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
  // (Connecting needs write permission on the socket: until the chmod, the umask's mode, which
  // leaves others without it unless the umask is 0; the directory is 0700 for non-root anyway.)
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0 || ::chmod(path.c_str(), 0600) != 0 ||
      ::listen(fd, 8) != 0) {
    error = "cannot listen on " + path + ": " + std::strerror(errno);
    ::close(fd);
    ::unlink(path.c_str());
    return nullptr;
  }
  int stop[2];
  if (::pipe2(stop, O_CLOEXEC) != 0) {
    error = std::string("pipe: ") + std::strerror(errno);
    ::close(fd);
    ::unlink(path.c_str());
    return nullptr;
  }
  return std::make_unique<PublisherImpl>(dev, fd, path, stop);
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
  // A process that is stopped (SIGSTOP, a debugger) answers nothing and its listen queue fills:
  // connect waits then, bounded by SO_SNDTIMEO, and the read by SO_RCVTIMEO.
  const timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
    error = errno == ECONNREFUSED                       ? "stale"
            : (errno == EAGAIN || errno == EINPROGRESS) ? "no answer within 2 s (process stopped?)"
                                                        : std::strerror(errno);
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
