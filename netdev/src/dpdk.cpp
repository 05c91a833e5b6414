// The `dpdk` backend: raw Ethernet frames through one DPDK port (memif, af_packet, af_xdp, a real
// NIC, ...). It builds its own Ethernet/IPv4/UDP headers (ethernet.hpp), answers ARP for its
// address, resolves next hops by ARP (frames wait in a small queue meanwhile) and takes a static
// neighbour table. DPDK is polled: wait_rx polls with back-off so an idle process sleeps.
//
// EAL is initialised once per process (DPDK cannot initialise it again after rte_eal_cleanup):
// one dpdk netdev per process; a second one gets a clear error.
#define ALLOW_EXPERIMENTAL_API 1  // rte_intr_instance_alloc & co. (interrupt handles are opaque since 21.11)
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_interrupts.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backends.hpp"
#include "ethernet.hpp"
#include "pcap_tap.hpp"
#include "softrnic/log.hpp"

namespace softrnic::netdev {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::uint16_t kBurst = 32;
constexpr std::size_t kMaxPendingPerDst = 256;
constexpr std::chrono::milliseconds kArpRetry{200};
constexpr int kArpTries = 10;
constexpr std::chrono::milliseconds kMemifRestart{1000};
// wait_rx polls (yielding) this long before it sleeps: long while traffic flows (a frame came
// within kBusyWindow), short when idle, so an idle process does not keep a core busy.
constexpr std::chrono::microseconds kSpinBusy{200};
constexpr std::chrono::microseconds kSpinIdle{20};
constexpr std::chrono::milliseconds kBusyWindow{2};
constexpr std::chrono::milliseconds kCloseDrain{50};
constexpr int kMaxPollsPerRx = 4;
constexpr std::chrono::microseconds kFirstSleep{8};
constexpr std::chrono::microseconds kMaxSleep{1000};
constexpr std::chrono::seconds kIntrJobTimeout{5};

enum class EalState { unused, active, finished };
std::mutex g_eal_mu;
EalState g_eal = EalState::unused;

std::string devargs_name(const std::string& devargs) {
  return devargs.substr(0, devargs.find(','));
}

std::string kvarg(const std::string& devargs, const std::string& key) {
  std::size_t i = devargs.find(',');
  while (i != std::string::npos) {
    const std::size_t j = devargs.find(',', i + 1);
    const std::string item = devargs.substr(i + 1, j == std::string::npos ? std::string::npos : j - i - 1);
    if (item.rfind(key + "=", 0) == 0) return item.substr(key.size() + 1);
    i = j;
  }
  return {};
}

// Where EAL keeps its runtime files for this prefix (eal_get_runtime_dir's rule).
std::string runtime_dir(const std::string& prefix) {
  if (::getuid() == 0) return "/var/run/dpdk/" + prefix;
  const char* x = std::getenv("XDG_RUNTIME_DIR");
  return std::string(x ? x : "/tmp") + "/dpdk/" + prefix;
}

std::string arg_value(const std::vector<std::string>& args, const std::string& opt) {
  for (const auto& a : args)
    if (a.rfind(opt + "=", 0) == 0) return a.substr(opt.size() + 1);
  return {};
}

// ---- work on EAL's interrupt thread ----
// PMDs run their control paths as callbacks on EAL's interrupt thread, and nothing orders them
// against ethdev calls made on other threads. memif (22.11, memif_socket.c) handles its peer's
// end of the control socket there: on EOF (the peer stopped its port) memif_intr_handler calls
// memif_disconnect, which closes the queues' fds and unmaps and rte_free()s the shared regions
// (memif_free_regions). Stopping our port from another thread at that moment runs a second
// memif_disconnect alongside (both free the same regions), and rte_eal_cleanup() then unmaps
// DPDK's memory under the callback, which faults writing r->fd in memif_free_regions. So the
// port is stopped and closed by a callback on that thread, serialised with memif's callbacks,
// and EAL is cleaned up only once that thread has nothing of the port's left to run.
struct IntrJob {
  std::function<void()> fn;
  int efd = -1;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
};

void intr_job_callback(void* arg) {
  auto* j = static_cast<IntrJob*>(arg);
  std::uint64_t v;
  [[maybe_unused]] auto r = ::read(j->efd, &v, sizeof v);  // EAL reads no EXT fd: drain it, or it fires again
  {
    std::lock_guard lk(j->mu);
    if (j->done) return;
  }
  j->fn();
  std::lock_guard lk(j->mu);
  j->done = true;
  j->cv.notify_all();
}

// Runs fn on EAL's interrupt thread (after whatever callback runs there now) and returns once it
// ran; here instead when no callback can be registered or the thread does not take it within
// kIntrJobTimeout. Each job has its own eventfd, registered afresh: EAL's interrupt thread
// rebuilds its epoll set from every registered source's handle after a register or unregister
// (a byte in its pipe), and a fresh fd is reported only after every pipe byte written before it,
// so when the job runs, the rebuilds that earlier (un)registrations asked for are done.
// With keep_registered the job stays registered (its handle and eventfd are EAL's from then on):
// unregistering would start one more rebuild, which reads other sources' handles, and memif
// leaves its server's listener registered with a handle in DPDK's heap (memif_socket_remove_device
// frees it without unregistering), so a rebuild after rte_eal_cleanup() faults.
void run_on_intr_thread(std::function<void()> fn, bool keep_registered = false) {
  if (rte_thread_is_intr()) {
    fn();
    return;
  }
  auto* j = new IntrJob{};
  j->fn = std::move(fn);
  j->efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  rte_intr_handle* ih = j->efd >= 0 ? rte_intr_instance_alloc(RTE_INTR_INSTANCE_F_PRIVATE) : nullptr;
  if (!ih || rte_intr_fd_set(ih, j->efd) != 0 || rte_intr_type_set(ih, RTE_INTR_HANDLE_EXT) != 0 ||
      rte_intr_callback_register(ih, intr_job_callback, j) != 0) {
    j->fn();
    if (ih) rte_intr_instance_free(ih);
    if (j->efd >= 0) ::close(j->efd);
    delete j;
    return;
  }
  const std::uint64_t one = 1;
  bool ran = false;
  if (::write(j->efd, &one, sizeof one) == static_cast<ssize_t>(sizeof one)) {
    std::unique_lock lk(j->mu);
    ran = j->cv.wait_for(lk, kIntrJobTimeout, [&] { return j->done; });
  }
  if (!ran) {
    // Withdraw it, unless it is running now (then wait for it), and run it here.
    if (rte_intr_callback_unregister(ih, intr_job_callback, j) == -EAGAIN) {
      std::unique_lock lk(j->mu);
      j->cv.wait(lk, [&] { return j->done; });
    } else {
      std::unique_lock lk(j->mu);
      if (!j->done) {
        j->done = true;  // a late event finds it done
        lk.unlock();
        j->fn();
      }
    }
    keep_registered = false;
  }
  if (keep_registered) return;
  rte_intr_callback_unregister_sync(ih, intr_job_callback, j);  // waits while the callback runs
  rte_intr_instance_free(ih);
  ::close(j->efd);
  delete j;
}

struct DpdkCounters {
  std::atomic<std::uint64_t> arp_req_rx{0}, arp_rep_rx{0}, arp_req_tx{0}, arp_rep_tx{0}, arp_failed{0}, arp_queued{0},
      arp_queue_drops{0}, rx_not_ours{0}, rx_invalid{0}, rx_port_unreach{0}, tx_no_mbuf{0}, tx_full{0}, tx_link_down{0};
};

class DpdkNetdev final : public Netdev {
 public:
  DpdkNetdev() = default;
  ~DpdkNetdev() override { shutdown(); }

  bool open(const NetdevConfig& cfg, std::string& error) {
    std::vector<std::string> args;
    if (!dpdk_eal_args(cfg, args, error)) {
      error = "dpdk netdev: " + error;
      return false;
    }
    const DpdkConfig& d = cfg.dpdk;
    take_config(cfg);
    if (!d.vdev.empty() && !check_vdev_host(d.vdev, error)) return false;
    if (!cfg.pcap.empty()) {
      pcap_ = PcapWriter::open(cfg.pcap, error);
      if (!pcap_) return false;
    }

    std::unique_lock glk(g_eal_mu);
    if (!eal_unused(error)) return false;
    prefix_ = arg_value(args, "--file-prefix");
    run_dir_ = runtime_dir(prefix_);
    std::string joined;
    for (const auto& a : args) joined += (joined.empty() ? "" : " ") + a;
    if (!clear_run_dir(error)) return false;
    const std::string pmd = devargs_name(d.vdev);
    if (pmd.rfind("net_vhost", 0) == 0 || pmd.rfind("net_virtio_user", 0) == 0)
      std::signal(SIGPIPE, SIG_IGN);  // a closing vhost peer would kill us with SIGPIPE
    if (!init_eal(args, joined, error)) return false;
    glk.unlock();
    if (!setup_port(cfg, error)) {
      error = "dpdk netdev: " + error + " (EAL arguments: " + joined + ")";
      shutdown();
      return false;
    }
    return true;
  }

  NetAddr local_addr() const override { return {ip_, udp_port_}; }
  std::uint16_t source_port(std::uint16_t wanted) override { return wanted ? wanted : udp_port_; }  // written per frame
  std::size_t max_datagram() const override { return max_dgram_; }
  std::size_t rx_buffer_bytes() const override { return std::size_t{rx_desc_} * max_dgram_; }
  NetdevStats stats() const override { return stats_.snapshot(); }

  std::size_t tx_burst(std::span<const TxFrame> frames) override {
    std::lock_guard lk(io_mu_);
    TxBatch out(*this);
    for (const TxFrame& f : frames) {
      const std::size_t len = f.size();
      if (len > max_dgram_) {
        stats_.tx_dropped++;
        continue;
      }
      const auto it = neigh_.find(f.to.ip);
      if (it == neigh_.end()) {
        queue_unresolved(f);
        continue;
      }
      out.add(build_udp(f.to, it->second.mac, {f.head, f.body, f.tail}, f.from_port));
    }
    out.flush();
    if (!pending_.empty()) service_arp(Clock::now());  // (no clock read per frame otherwise)
    return frames.size();
  }

  std::size_t rx_burst(std::span<RxFrame> out) override {
    std::lock_guard lk(io_mu_);
    release_lent();  // the caller is done with what the last call lent
    std::size_t got = 0;
    // Bounded: frames that are not ours (ARP, other traffic, a flood) are consumed here too, and
    // must not keep the caller in this loop.
    // A poll that returned less than a full burst emptied the ring: the call ends there (one
    // more poll per frame received cost ~30 ns on the latency path).
    int polls = 0;
    bool more = true;
    while (got < out.size()) {
      if (stash_pos_ == stash_n_) {
        if (!more || ++polls > kMaxPollsPerRx || !poll_locked()) break;
        more = stash_n_ == kBurst;
      }
      rte_mbuf* m = stash_[stash_pos_++];
      switch (deliver(m, out[got])) {
        case Delivered::no: rte_pktmbuf_free(m); break;
        case Delivered::copied:
          rte_pktmbuf_free(m);
          ++got;
          break;
        case Delivered::lent:
          lent_.push_back(m);  // freed at the next rx_burst
          ++got;
          break;
      }
    }
    if (!pending_.empty()) service_arp(Clock::now());
    return got;
  }

  void wait_rx(std::chrono::microseconds timeout) override {
    const auto start = Clock::now();
    const auto deadline = start + timeout;
    auto step = kFirstSleep;
    for (;;) {
      if (wake_.exchange(false, std::memory_order_acq_rel)) return;
      {
        std::lock_guard lk(io_mu_);
        if (stash_pos_ < stash_n_ || poll_locked()) return;
        if (!pending_.empty()) service_arp(Clock::now());
      }
      const auto now = Clock::now();
      if (now >= deadline) return;
      const bool busy = within(last_rx_tsc_.load(std::memory_order_relaxed), kBusyWindow);
      if (now - start < (busy ? kSpinBusy : kSpinIdle)) {
        std::this_thread::yield();
        continue;
      }
      const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - now);
      if (intr_fd_ >= 0) {
        sleep_on_interrupt(left);
        return;
      }
      std::unique_lock wl(wait_mu_);
      sleeping_.store(true, std::memory_order_seq_cst);
      wait_cv_.wait_for(wl, std::min(step, left), [&] { return wake_.load(std::memory_order_acquire); });
      sleeping_.store(false, std::memory_order_relaxed);
      step = std::min(step * 2, kMaxSleep);
    }
  }

  void wake() override {
    wake_.store(true, std::memory_order_seq_cst);
    if (sleeping_.load(std::memory_order_seq_cst)) {
      if (wake_fd_ >= 0) {
        const std::uint64_t one = 1;
        [[maybe_unused]] auto w = ::write(wake_fd_, &one, sizeof one);
      }
      std::lock_guard wl(wait_mu_);
      wait_cv_.notify_all();
    }
  }

 private:
  // Ports with receive interrupts (memif): after the spin, sleep in the kernel until the peer
  // signals the queue, wake() is called or the time is up. No polling while idle.
  void sleep_on_interrupt(std::chrono::microseconds left) {
    {
      std::lock_guard lk(io_mu_);
      if (!pending_.empty()) left = std::min<std::chrono::microseconds>(left, kArpRetry / 4);
      rte_eth_dev_rx_intr_enable(port_, 0);
      // a frame that came between the last poll and the enable raises no interrupt
      if (stash_pos_ < stash_n_ || poll_locked()) {
        rte_eth_dev_rx_intr_disable(port_, 0);
        return;
      }
    }
    sleeping_.store(true, std::memory_order_seq_cst);
    if (!wake_.load(std::memory_order_seq_cst)) {
      pollfd fds[2] = {{intr_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
      const timespec ts{static_cast<time_t>(left.count() / 1000000), static_cast<long>(left.count() % 1000000) * 1000};
      const int ready = ::ppoll(fds, 2, &ts, nullptr);
      if (ready < 0 && errno == EINTR) note_wait_interrupted();
      if (ready > 0) {
        std::uint64_t v;
        if (fds[0].revents & POLLIN) [[maybe_unused]]
          auto r = ::read(intr_fd_, &v, sizeof v);
        if (fds[1].revents & POLLIN) [[maybe_unused]]
          auto r = ::read(wake_fd_, &v, sizeof v);
      }
    }
    sleeping_.store(false, std::memory_order_relaxed);
    std::lock_guard lk(io_mu_);
    rte_eth_dev_rx_intr_disable(port_, 0);
  }

  struct Neigh {
    eth::Mac mac;
    bool is_static = false;
  };
  struct Pending {
    std::deque<std::tuple<NetAddr, std::vector<std::uint8_t>, std::uint16_t>> frames;  // to, bytes, from port
    int tries = 0;
    Clock::time_point next{};
  };

  // Host-side checks that need no DPDK: the interface of af_packet/af_xdp exists; a memif
  // server's socket path is usable (a stale socket file of a dead server is removed).
  bool check_vdev_host(const std::string& devargs, std::string& error) {
    const std::string name = devargs_name(devargs);
    if (name.rfind("net_af_packet", 0) == 0 || name.rfind("net_af_xdp", 0) == 0) {
      const std::string iface = kvarg(devargs, "iface");
      if (::if_nametoindex(iface.c_str()) == 0) {
        error = "dpdk netdev: interface '" + iface + "' of " + name + " not found (in this network namespace)";
        return false;
      }
    }
    if (name.rfind("net_memif", 0) == 0) {
      memif_socket_ = kvarg(devargs, "socket");
      memif_client_ = kvarg(devargs, "role") == "client";
      const auto dir = std::filesystem::path(memif_socket_).parent_path();
      std::error_code ec;
      if (!std::filesystem::is_directory(dir, ec)) {
        error = "dpdk netdev: memif socket directory '" + dir.string() + "' does not exist";
        return false;
      }
      struct stat st {};
      if (!memif_client_ && ::lstat(memif_socket_.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
          error = "dpdk netdev: memif socket path '" + memif_socket_ + "' exists and is not a socket";
          return false;
        }
        if (!socket_alive(memif_socket_)) {
          ::unlink(memif_socket_.c_str());  // left behind by a server that died
        } else {
          error = "dpdk netdev: memif socket '" + memif_socket_ + "' is in use by another server";
          return false;
        }
      }
    }
    return true;
  }

  // True when a live EAL primary holds the lock on its runtime config file.
  static bool config_locked(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    struct flock lk {};
    lk.l_type = F_WRLCK;
    lk.l_whence = SEEK_SET;
    const bool locked = ::fcntl(fd, F_GETLK, &lk) == 0 && lk.l_type != F_UNLCK;
    ::close(fd);
    return locked;
  }

  static bool socket_alive(const std::string& path) {
    const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    const bool alive = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return alive;
  }

  void take_config(const NetdevConfig& cfg) {
    const DpdkConfig& d = cfg.dpdk;
    parse_ipv4(cfg.ip, ip_);
    udp_port_ = cfg.port;
    id_zero_ = cfg.dont_fragment;
    mtu_ = d.mtu;
    max_dgram_ = cfg.max_datagram ? cfg.max_datagram : d.mtu - 28;
    check_udp_ = d.check_udp_checksum;
    link_timeout_ = std::chrono::milliseconds(d.link_timeout_ms);
    for (const auto& n : d.neigh) {
      std::uint32_t nip;
      eth::Mac m;
      std::string e;
      if (eth::parse_neighbour(n, nip, m, e)) neigh_[nip] = Neigh{m, true};
    }
  }

  // Whether this process may still initialise EAL (the caller holds g_eal_mu).
  static bool eal_unused(std::string& error) {
    if (g_eal == EalState::unused) return true;
    error = g_eal == EalState::active
                ? "dpdk netdev: DPDK's EAL is already in use by another IA in this process (one dpdk IA per "
                  "process: EAL is initialised once per process)"
                : "dpdk netdev: DPDK's EAL was already initialised and cleaned up in this process; DPDK cannot "
                  "initialise it again (one dpdk IA per process)";
    return false;
  }

  // Removes the runtime directory a dead process left behind with our prefix.
  bool clear_run_dir(std::string& error) {
    if (!std::filesystem::exists(run_dir_)) return true;
    if (config_locked(run_dir_ + "/config")) {
      // A live primary with this prefix: EAL would fail, and its directory is not ours to remove.
      error = "dpdk netdev: another DPDK process is running with file prefix '" + prefix_ + "' (" + run_dir_ +
              "); choose another dpdk_prefix";
      return false;
    }
    std::error_code ec;
    std::filesystem::remove_all(run_dir_, ec);  // left behind by a process that died
    return true;
  }

  // The caller holds g_eal_mu.
  bool init_eal(const std::vector<std::string>& args, const std::string& joined, std::string& error) {
    // EAL pins the calling thread to its main lcore; the consumer's thread (and the threads it
    // starts later) keep the affinity they had.
    cpu_set_t saved;
    CPU_ZERO(&saved);
    const bool have_aff = pthread_getaffinity_np(pthread_self(), sizeof saved, &saved) == 0;
    argv_store_ = args;
    std::vector<char*> argv;
    for (auto& a : argv_store_) argv.push_back(a.data());
    argv.push_back(nullptr);
    g_eal = EalState::finished;  // whatever happens now, EAL cannot be initialised again
    rte_errno = 0;
    const int r = rte_eal_init(static_cast<int>(argv.size() - 1), argv.data());
    const int eal_errno = rte_errno;
    if (have_aff) pthread_setaffinity_np(pthread_self(), sizeof saved, &saved);
    if (r < 0) {
      error = "dpdk netdev: EAL initialisation failed (" +
              std::string(eal_errno ? rte_strerror(eal_errno) : "no reason given; see EAL's messages above") +
              "); arguments: " + joined;
      std::error_code ec;
      std::filesystem::remove_all(run_dir_, ec);
      return false;
    }
    g_eal = EalState::active;
    eal_up_ = true;
    tsc_per_ms_ = std::max<std::uint64_t>(1, rte_get_tsc_hz() / 1000);
    return true;
  }

  // What setup_port's steps learn about the port and hand on to the next ones.
  struct PortSetup {
    rte_eth_dev_info info{};
    unsigned mbuf_room = 0;  // data room of one mbuf, headroom included
    bool rx_intr = false;    // the port was configured with receive interrupts
  };

  bool setup_port(const NetdevConfig& cfg, std::string& error) {
    const DpdkConfig& d = cfg.dpdk;
    PortSetup s;
    if (!find_port(d, error) || !check_port_mtu(s, error) || !size_mbufs(d, s, error) || !configure_port(d, s, error) ||
        !setup_queues(d, s, error))
      return false;
    set_mac(d);

    // Start (memif: fails with EPERM while the peer's socket is not listening yet) and wait for
    // the link; a memif client whose link stays down is restarted (its first connect can race
    // the server's start-up and is never retried).
    const auto deadline = Clock::now() + link_timeout_;
    if (!start_port(deadline, error)) return false;
    if (s.rx_intr) open_rx_interrupt();
    // A memif server's link comes up when its client connects, which may be much later (the
    // client is often started after the server is ready): do not wait for it. Frames sent
    // before then are dropped and counted; the RNIC's reliability layer resends.
    if (!memif_socket_.empty() && !memif_client_) return true;
    return wait_for_link(deadline, error);
  }

  // Picks the port (by number, by the device's name, or the only one there is): port_, port_name_.
  bool find_port(const DpdkConfig& d, std::string& error) {
    std::uint16_t pid = 0;
    if (d.port >= 0) {
      pid = static_cast<std::uint16_t>(d.port);
      if (!rte_eth_dev_is_valid_port(pid)) {
        error = "port " + std::to_string(d.port) + " does not exist (" + std::to_string(rte_eth_dev_count_avail()) +
                " ports)";
        return false;
      }
    } else if (!d.vdev.empty() || !d.pci.empty()) {
      const std::string name = devargs_name(d.vdev.empty() ? d.pci : d.vdev);
      if (rte_eth_dev_get_port_by_name(name.c_str(), &pid) != 0 && !find_port_named_like(name, pid)) {
        error = "no port for device '" + name + "' (the PMD did not create it: see EAL's messages above" +
                (d.pci.empty() ? std::string(")") : "; is the device bound to vfio-pci?)");
        return false;
      }
    } else if (rte_eth_dev_count_avail() == 0) {
      error = "no DPDK port (give dpdk_vdev or dpdk_pci)";
      return false;
    }
    port_ = pid;
    char pname[RTE_ETH_NAME_MAX_LEN] = "?";
    rte_eth_dev_get_name_by_port(port_, pname);
    port_name_ = pname;
    return true;
  }

  // The first port whose name contains `name`.
  static bool find_port_named_like(const std::string& name, std::uint16_t& pid) {
    for (std::uint16_t p = 0; p < RTE_MAX_ETHPORTS; ++p) {
      if (!rte_eth_dev_is_valid_port(p)) continue;
      char n[RTE_ETH_NAME_MAX_LEN];
      if (rte_eth_dev_get_name_by_port(p, n) == 0 && std::string(n).find(name) != std::string::npos) {
        pid = p;
        return true;
      }
    }
    return false;
  }

  // Reads the port's info into s.info; the MTU asked for must lie in the port's range.
  bool check_port_mtu(PortSetup& s, std::string& error) {
    const rte_eth_dev_info& info = s.info;
    if (int r = rte_eth_dev_info_get(port_, &s.info); r != 0) {
      error = "rte_eth_dev_info_get(port " + std::to_string(port_) + "): " + std::strerror(-r);
      return false;
    }
    if (mtu_ < info.min_mtu || (mtu_ > info.max_mtu && port_name_.rfind("net_af_packet", 0) != 0)) {
      error = "port " + port_name_ + " supports MTU " + std::to_string(info.min_mtu) + ".." +
              std::to_string(info.max_mtu) + ", not mtu=" + std::to_string(mtu_);
      return false;
    }
    return true;
  }

  bool size_mbufs(const DpdkConfig& d, PortSetup& s, std::string& error) {
    unsigned frame = mtu_ + eth::kEthHdr + 4;
    // af_packet wants an mbuf that holds a whole TPACKET frame
    if (const std::string fs = kvarg(d.vdev, "framesz"); !fs.empty() && port_name_.rfind("net_af_packet", 0) == 0)
      frame = std::max<unsigned>(frame, static_cast<unsigned>(std::atoi(fs.c_str())));
    s.mbuf_room = std::max<unsigned>(RTE_MBUF_DEFAULT_DATAROOM, frame) + RTE_PKTMBUF_HEADROOM;
    if (s.mbuf_room > 65535) {
      error = "mtu " + std::to_string(mtu_) + " too large for one mbuf";
      return false;
    }
    return true;
  }

  bool configure_port(const DpdkConfig& d, PortSetup& s, std::string& error) {
    const rte_eth_dev_info& info = s.info;
    rte_eth_conf conf{};
    conf.rxmode.mtu = mtu_;
    // Receive interrupts where the PMD has them (tap, virtio-user, NICs through vfio); the
    // others (memif, af_packet, af_xdp, ...) poll with back-off. Asking a PMD without them only
    // prints a warning, so ask those that may have them.
    conf.intr_conf.rxq =
        (!d.pci.empty() || port_name_.rfind("net_tap", 0) == 0 || port_name_.rfind("net_virtio_user", 0) == 0) ? 1 : 0;
    // memif reports a 1518-byte max frame but carries frames up to its bsize (checked against
    // the mtu in the config checks): configure it with the default MTU.
    // af_packet likewise carries frames up to its framesz (checked against the mtu too).
    const bool soft_mtu = !memif_socket_.empty() || port_name_.rfind("net_af_packet", 0) == 0;
    if (soft_mtu && mtu_ + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN > info.max_rx_pktlen) conf.rxmode.mtu = 0;
    // The UDP checksum: the port's offload where it has one (and "auto" or nothing else was asked).
    const bool offload = (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_UDP_CKSUM) != 0;
    switch (d.tx_udp_csum) {
      case TxUdpCsum::automatic: udp_csum_ = offload ? eth::UdpCsum::partial : eth::UdpCsum::zero; break;
      case TxUdpCsum::software: udp_csum_ = eth::UdpCsum::full; break;
      case TxUdpCsum::zero: udp_csum_ = eth::UdpCsum::zero; break;
    }
    if (udp_csum_ == eth::UdpCsum::partial) conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
    if (conf.intr_conf.rxq && rte_eth_dev_configure(port_, 1, 1, &conf) != 0) conf.intr_conf.rxq = 0;
    if (int r = conf.intr_conf.rxq ? 0 : rte_eth_dev_configure(port_, 1, 1, &conf); r != 0) {
      error = "rte_eth_dev_configure(port " + port_name_ + ", mtu " + std::to_string(mtu_) + "): " + std::strerror(-r) +
              " (the port takes frames up to " + std::to_string(info.max_rx_pktlen) + " bytes" +
              (port_name_.rfind("net_af_packet", 0) == 0 ? "; af_packet: larger frames need framesz=;blocksz=" : "") +
              ")";
      return false;
    }
    s.rx_intr = conf.intr_conf.rxq != 0;
    return true;
  }

  bool setup_queues(const DpdkConfig& d, const PortSetup& s, std::string& error) {
    std::uint16_t rxd = d.rx_desc, txd = d.tx_desc;
    rte_eth_dev_adjust_nb_rx_tx_desc(port_, &rxd, &txd);
    rx_desc_ = rxd;
    const unsigned nmbufs = std::max(8191u, (2u * (rxd + txd) + 1023u) | 1023u);
    const int socket = std::max(0, rte_eth_dev_socket_id(port_));
    pool_ = rte_pktmbuf_pool_create(("softrnic_mb_" + std::to_string(::getpid())).c_str(), nmbufs, 256, 0,
                                    static_cast<std::uint16_t>(s.mbuf_room), socket);
    if (!pool_) {
      error = "mbuf pool of " + std::to_string(nmbufs) + " x " + std::to_string(s.mbuf_room) +
              " bytes: " + rte_strerror(rte_errno) + " (raise dpdk_mem)";
      return false;
    }
    fault_in_pool();
    if (int r = rte_eth_rx_queue_setup(port_, 0, rxd, static_cast<unsigned>(socket), nullptr, pool_); r != 0) {
      error = "rx queue setup (port " + port_name_ + "): " + std::strerror(-r);
      return false;
    }
    if (int r = rte_eth_tx_queue_setup(port_, 0, txd, static_cast<unsigned>(socket), nullptr); r != 0) {
      error = "tx queue setup (port " + port_name_ + "): " + std::strerror(-r);
      return false;
    }
    port_configured_ = true;
    return true;
  }

  // Fault the pool's pages in now: without hugepages its memory is faulted page by page on
  // first touch, and without a per-lcore cache the pool hands out every mbuf once before it
  // reuses one, so the first few thousand frames each paid for page faults (60-90 us ping
  // round trips on memif instead of 5 us).
  void fault_in_pool() {
    rte_mempool_mem_iter(
        pool_,
        [](rte_mempool*, void*, rte_mempool_memhdr* m, unsigned) {
          auto* p = static_cast<volatile std::uint8_t*>(m->addr);
          for (std::size_t off = 0; off < m->len; off += 4096) p[off] = p[off];
        },
        nullptr);
  }

  // mac_: the configured address, else the port's; one derived from the IP address when neither is usable.
  void set_mac(const DpdkConfig& d) {
    rte_ether_addr hw{};
    rte_eth_macaddr_get(port_, &hw);
    std::memcpy(mac_.b.data(), hw.addr_bytes, 6);
    if (!d.mac.empty()) {
      eth::parse_mac(d.mac, mac_);
      rte_ether_addr want{};
      std::memcpy(want.addr_bytes, mac_.b.data(), 6);
      if (rte_eth_dev_default_mac_addr_set(port_, &want) != 0) {
        // The port keeps its own address: receive everything and filter on ours.
        rte_eth_promiscuous_enable(port_);
      }
    }
    if (mac_.is_zero() || mac_.is_multicast()) {
      mac_ = eth::mac_from_ip(ip_);
      rte_eth_promiscuous_enable(port_);
    }
  }

  bool start_port(Clock::time_point deadline, std::string& error) {
    int r = 0;
    while ((r = rte_eth_dev_start(port_)) != 0 && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (r != 0) {
      error = "rte_eth_dev_start(port " + port_name_ + ") failed: " + std::strerror(-r) +
              (memif_client_ ? " (memif client: no server listening on " + memif_socket_ + " within " +
                                   std::to_string(link_timeout_.count()) + " ms)"
                             : std::string());
      return false;
    }
    started_ = true;
    return true;
  }

  void open_rx_interrupt() {
    intr_fd_ = rte_eth_dev_rx_intr_ctl_q_get_fd(port_, 0);
    if (intr_fd_ >= 0) wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0) intr_fd_ = -1;
  }

  bool wait_for_link(Clock::time_point deadline, std::string& error) {
    auto last_start = Clock::now();
    for (;;) {
      rte_eth_link link{};
      rte_eth_link_get_nowait(port_, &link);
      if (link.link_status == RTE_ETH_LINK_UP) break;
      const auto now = Clock::now();
      if (now >= deadline) {
        error = "link of port " + port_name_ + " did not come up within " + std::to_string(link_timeout_.count()) +
                " ms" +
                (memif_socket_.empty() ? std::string(" (is the interface up, the cable in?)")
                                       : " (is the memif peer running on " + memif_socket_ + "?)");
        return false;
      }
      if (memif_client_ && now - last_start > kMemifRestart) {
        run_on_intr_thread([this] { rte_eth_dev_stop(port_); });  // (not beside memif's callbacks)
        while (rte_eth_dev_start(port_) != 0 && Clock::now() < deadline)
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        last_start = Clock::now();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  }

  void shutdown() {
    std::lock_guard lk(io_mu_);
    if (!eal_up_) return;
    if (log::stats_wanted() && started_) print_stats();
    while (stash_pos_ < stash_n_) rte_pktmbuf_free(stash_[stash_pos_++]);
    release_lent();
    // Frames just handed to the port may still sit in its ring (memif: in memory the peer reads
    // later, gone when the port closes): give the peer a moment after recent traffic.
    if (started_ && last_tx_tsc_ && within(last_tx_tsc_, kCloseDrain)) std::this_thread::sleep_for(kCloseDrain);
    // Stop and close on EAL's interrupt thread, never beside a memif callback there (the peer's
    // close runs memif_disconnect on that thread); see run_on_intr_thread.
    if (port_configured_) {
      run_on_intr_thread([this] {
        if (started_) rte_eth_dev_stop(port_);
        rte_eth_dev_close(port_);
      });
    }
    if (pool_) rte_mempool_free(pool_);
    pool_ = nullptr;
    // Once this runs, the interrupt thread has finished every callback of the port and rebuilt
    // its epoll set without them: nothing there touches DPDK's memory when EAL unmaps it.
    run_on_intr_thread([] {}, /*keep_registered=*/true);
    rte_eal_cleanup();
    eal_up_ = false;
    intr_fd_ = -1;
    if (wake_fd_ >= 0) ::close(wake_fd_);
    wake_fd_ = -1;
    std::error_code ec;
    std::filesystem::remove_all(run_dir_, ec);
    if (!memif_socket_.empty() && !memif_client_) {
      struct stat st {};
      if (::lstat(memif_socket_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) ::unlink(memif_socket_.c_str());
    }
    std::lock_guard glk(g_eal_mu);
    g_eal = EalState::finished;
  }

  void print_stats() const {
    const NetdevStats s = stats_.snapshot();
    auto n = [](std::uint64_t v) { return std::to_string(v); };
    auto a = [](const std::atomic<std::uint64_t>& v) { return std::to_string(v.load()); };
    log::line_always(
        "dpdk " + port_name_,
        eth::to_string(mac_) + " ip " + to_string(NetAddr{ip_, udp_port_}) + ": tx " + n(s.tx_frames) + " frames " +
            n(s.tx_bytes) + " bytes, " + n(s.tx_dropped) + " dropped (no mbuf " + a(c_.tx_no_mbuf) + ", ring full " +
            a(c_.tx_full) + ", link down " + a(c_.tx_link_down) + "); rx " + n(s.rx_frames) + " frames " +
            n(s.rx_bytes) + " bytes, " + n(s.rx_truncated) + " truncated, " + a(c_.rx_not_ours) + " not ours, " +
            a(c_.rx_invalid) + " invalid, " + a(c_.rx_port_unreach) + " to closed ports; arp: " + a(c_.arp_req_tx) +
            " requests sent, " + a(c_.arp_rep_tx) + " replies sent, " + a(c_.arp_req_rx) + " requests received, " +
            a(c_.arp_rep_rx) + " replies received, " + a(c_.arp_queued) + " frames queued, " + a(c_.arp_queue_drops) +
            " queue drops, " + a(c_.arp_failed) + " resolutions failed; rx interrupts " +
            (intr_fd_ >= 0 ? "on" : "off (polling with back-off)") + "; udp checksum sent " +
            (udp_csum_ == eth::UdpCsum::partial ? "by the port's offload"
             : udp_csum_ == eth::UdpCsum::full  ? "computed in software"
                                                : "as 0"));
  }

  // Whether the TSC reading `then` is less than `d` ago (the TSC, not the clock: readings are taken
  // for every burst, and a clock read costs ~35 ns here).
  bool within(std::uint64_t then, std::chrono::milliseconds d) const {
    return rte_get_tsc_cycles() - then < tsc_per_ms_ * static_cast<std::uint64_t>(d.count());
  }

  // ---- datapath (io_mu_ held) ----
  bool poll_locked() {
    stash_pos_ = 0;
    stash_n_ = rte_eth_rx_burst(port_, 0, stash_, kBurst);
    if (stash_n_ == 0) return false;
    last_rx_tsc_.store(rte_get_tsc_cycles(), std::memory_order_relaxed);
    return true;
  }

  rte_mbuf* build_udp(NetAddr to, const eth::Mac& dst_mac, std::initializer_list<std::span<const std::uint8_t>> parts,
                      std::uint16_t from_port = 0) {
    std::size_t len = 0;
    for (auto p : parts) len += p.size();
    rte_mbuf* m = rte_pktmbuf_alloc(pool_);
    if (!m) {
      c_.tx_no_mbuf++;
      stats_.tx_dropped++;
      return nullptr;
    }
    const std::size_t flen = std::max(eth::kUdpHeaders + len, eth::kMinFrame);
    auto* p = reinterpret_cast<std::uint8_t*>(rte_pktmbuf_append(m, static_cast<std::uint16_t>(flen)));
    if (!p) {
      rte_pktmbuf_free(m);
      stats_.tx_dropped++;
      return nullptr;
    }
    std::uint8_t* q = p + eth::kUdpHeaders;
    for (auto part : parts) {
      if (part.empty()) continue;
      std::memcpy(q, part.data(), part.size());
      q += part.size();
    }
    if (flen > eth::kUdpHeaders + len) std::memset(q, 0, flen - eth::kUdpHeaders - len);
    const eth::UdpFrameAddrs a{mac_, dst_mac, {ip_, from_port ? from_port : udp_port_}, to};
    // (RoCEv2: IP ID 0, as a kernel socket sends DF datagrams: the ICRC covers it.)
    eth::write_udp_headers(p, a, id_zero_ ? 0 : ip_id_++, {std::span<const std::uint8_t>(p + eth::kUdpHeaders, len)},
                           udp_csum_);
    if (udp_csum_ == eth::UdpCsum::partial) {
      m->ol_flags |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_UDP_CKSUM;  // (the IPv4 header's is ours)
      m->l2_len = eth::kEthHdr;
      m->l3_len = eth::kIpv4Hdr;
    }
    m->hash.usr = static_cast<std::uint32_t>(len);
    if (pcap_) pcap_->write(std::span<const std::uint8_t>(p, flen));
    return m;
  }

  bool link_up() {
    rte_eth_link link{};
    return rte_eth_link_get_nowait(port_, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
  }

  // Built frames, sent kBurst at a time (a frame that could not be built, nullptr, is skipped).
  struct TxBatch {
    explicit TxBatch(DpdkNetdev& n) : nd(n) {}
    DpdkNetdev& nd;
    rte_mbuf* m[kBurst];
    std::uint16_t k = 0;
    void add(rte_mbuf* f) {
      if (!f) return;
      m[k++] = f;
      if (k == kBurst) flush();
    }
    void flush() {
      if (k) nd.send_mbufs(m, k);
      k = 0;
    }
  };

  void send_mbufs(rte_mbuf** m, std::uint16_t n) {
    // The datagrams' lengths are read before the burst: a sent mbuf is the PMD's (memif copies
    // and frees it inside rte_eth_tx_burst).
    std::array<std::uint32_t, kBurst> len;
    for (std::uint16_t i = 0; i < n; ++i) len[i] = m[i]->hash.usr;  // the datagram's length, set by build_udp
    std::uint16_t sent = 0;
    bool down = false;
    for (int tries = 0; sent < n && tries < 64; ++tries) {
      sent =
          static_cast<std::uint16_t>(sent + rte_eth_tx_burst(port_, 0, m + sent, static_cast<std::uint16_t>(n - sent)));
      if (sent == n) break;
      if (tries == 0 && !link_up()) {
        down = true;  // no point in waiting for ring space
        break;
      }
      std::this_thread::yield();
    }
    if (sent) {
      last_tx_tsc_ = rte_get_tsc_cycles();
      std::uint64_t bytes = 0;
      for (std::uint16_t i = 0; i < sent; ++i) bytes += len[i];
      stats_.tx_frames.fetch_add(sent, std::memory_order_relaxed);
      stats_.tx_bytes.fetch_add(bytes, std::memory_order_relaxed);
    }
    for (std::uint16_t i = sent; i < n; ++i) {
      rte_pktmbuf_free(m[i]);
      (down ? c_.tx_link_down : c_.tx_full)++;
      stats_.tx_dropped++;
    }
  }

  void send_arp(const eth::Mac& eth_dst, const eth::Arp& arp) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool_);
    if (!m) {
      c_.tx_no_mbuf++;
      return;
    }
    auto* p = reinterpret_cast<std::uint8_t*>(rte_pktmbuf_append(m, eth::kMinFrame));
    if (!p) {
      rte_pktmbuf_free(m);
      return;
    }
    eth::write_arp_frame(p, eth_dst, arp);
    if (pcap_) pcap_->write(std::span<const std::uint8_t>(p, eth::kMinFrame));
    if (rte_eth_tx_burst(port_, 0, &m, 1) != 1) {
      rte_pktmbuf_free(m);
      c_.tx_full++;
      return;
    }
    (arp.op == eth::ArpOp::request ? c_.arp_req_tx : c_.arp_rep_tx)++;
  }

  void queue_unresolved(const TxFrame& f) {
    Pending& pd = pending_[f.to.ip];
    if (pd.frames.size() >= kMaxPendingPerDst) {
      c_.arp_queue_drops++;
      stats_.tx_dropped++;
      return;
    }
    std::vector<std::uint8_t> bytes;
    bytes.reserve(f.size());
    for (auto part : {f.head, f.body, f.tail}) bytes.insert(bytes.end(), part.begin(), part.end());
    pd.frames.emplace_back(f.to, std::move(bytes), f.from_port);
    c_.arp_queued++;
    if (pd.tries == 0) {
      pd.next = Clock::now();  // the first request goes out now
      service_arp(pd.next);
    }
  }

  void service_arp(Clock::time_point now) {
    if (pending_.empty()) return;
    for (auto it = pending_.begin(); it != pending_.end();) {
      Pending& pd = it->second;
      if (now < pd.next) {
        ++it;
        continue;
      }
      if (pd.tries >= kArpTries) {
        c_.arp_failed++;
        c_.arp_queue_drops += pd.frames.size();
        stats_.tx_dropped += pd.frames.size();
        it = pending_.erase(it);
        continue;
      }
      pd.tries++;
      pd.next = now + kArpRetry;
      send_arp(eth::kBroadcast, eth::Arp{eth::ArpOp::request, mac_, eth::Mac{}, ip_, it->first});
      ++it;
    }
  }

  void learn(std::uint32_t ip, const eth::Mac& mac, bool create) {
    if (ip == 0 || mac.is_multicast() || mac.is_zero()) return;
    auto it = neigh_.find(ip);
    if (it != neigh_.end()) {
      if (!it->second.is_static) it->second.mac = mac;
    } else if (create) {
      neigh_[ip] = Neigh{mac, false};
    }
    auto pit = pending_.find(ip);
    if (pit == pending_.end()) return;
    const eth::Mac dst = neigh_[ip].mac;
    auto frames = std::move(pit->second.frames);
    pending_.erase(pit);
    TxBatch out(*this);
    for (auto& [to, bytes, from] : frames) out.add(build_udp(to, dst, {std::span<const std::uint8_t>(bytes)}, from));
    out.flush();
  }

  void handle_arp(const eth::Arp& a) {
    const bool for_me = a.tpa == ip_;
    if (a.op == eth::ArpOp::request) {
      if (for_me) c_.arp_req_rx++;
      learn(a.spa, a.sha, for_me);  // RFC 826: merge, and add the requester when it asks for us
      if (for_me) send_arp(a.sha, eth::Arp{eth::ArpOp::reply, mac_, a.sha, ip_, a.spa});
    } else {
      if (for_me) c_.arp_rep_rx++;
      learn(a.spa, a.sha, for_me);
    }
  }

  void release_lent() {
    for (rte_mbuf* m : lent_) rte_pktmbuf_free(m);
    lent_.clear();
  }

  enum class Delivered : std::uint8_t { no, copied, lent };
  // A datagram in one segment is lent to the caller where the PMD put it (RxFrame::data: the
  // mbuf stays ours until the next rx_burst), so the engine places it straight from the mbuf
  // into registered memory; one in several segments is copied into the caller's buffer.
  Delivered deliver(rte_mbuf* m, RxFrame& f) {
    const std::size_t len = rte_pktmbuf_pkt_len(m);
    const std::uint8_t* p;
    if (m->nb_segs == 1) {
      p = rte_pktmbuf_mtod(m, const std::uint8_t*);
    } else {
      if (scratch_.size() < len) scratch_.resize(len);
      p = static_cast<const std::uint8_t*>(rte_pktmbuf_read(m, 0, static_cast<std::uint32_t>(len), scratch_.data()));
    }
    const std::span<const std::uint8_t> frame(p, len);
    if (pcap_) pcap_->write(frame);
    const eth::ParsedFrame pf = eth::parse_frame(frame, check_udp_);
    if (pf.kind == eth::FrameKind::arp) {
      handle_arp(pf.arp);
      return Delivered::no;
    }
    if (pf.kind != eth::FrameKind::udp) {
      if (pf.kind == eth::FrameKind::not_ipv4 || pf.kind == eth::FrameKind::not_udp)
        c_.rx_not_ours++;
      else
        c_.rx_invalid++;
      return Delivered::no;
    }
    if ((pf.dst_mac != mac_ && !pf.dst_mac.is_broadcast()) || pf.dst.ip != ip_) {
      c_.rx_not_ours++;
      return Delivered::no;
    }
    if (pf.dst.port != udp_port_) {
      c_.rx_port_unreach++;
      return Delivered::no;
    }
    if (pf.payload_len > f.cap) {
      stats_.rx_truncated++;
      return Delivered::no;
    }
    Delivered how = Delivered::copied;
    if (m->nb_segs == 1) {
      f.data = p + pf.payload_off;
      how = Delivered::lent;
    } else {
      std::memcpy(f.buf, p + pf.payload_off, pf.payload_len);
    }
    f.len = pf.payload_len;
    f.from = pf.src;
    stats_.rx_frames++;
    stats_.rx_bytes += pf.payload_len;
    return how;
  }

  // configuration
  std::uint32_t ip_ = 0;
  std::uint16_t udp_port_ = 0;
  std::uint32_t mtu_ = 1500;
  std::size_t max_dgram_ = 1472;
  bool check_udp_ = false;
  std::chrono::milliseconds link_timeout_{5000};
  std::vector<std::string> argv_store_;
  std::string prefix_, run_dir_, port_name_, memif_socket_;
  bool memif_client_ = false;
  // DPDK state
  bool eal_up_ = false, port_configured_ = false, started_ = false;
  std::uint16_t port_ = 0;
  std::uint16_t rx_desc_ = 1024;
  rte_mempool* pool_ = nullptr;
  eth::Mac mac_;
  // datapath, under io_mu_
  std::mutex io_mu_;
  rte_mbuf* stash_[kBurst] = {};
  std::uint16_t stash_n_ = 0, stash_pos_ = 0;
  std::uint16_t ip_id_ = 1;
  bool id_zero_ = false;                        // NetdevConfig::dont_fragment: every datagram with IP ID 0
  eth::UdpCsum udp_csum_ = eth::UdpCsum::zero;  // what build_udp writes (dpdk_tx_udp_csum, the port's offload)
  std::unordered_map<std::uint32_t, Neigh> neigh_;
  std::unordered_map<std::uint32_t, Pending> pending_;
  std::vector<std::uint8_t> scratch_;
  std::vector<rte_mbuf*> lent_;  // mbufs whose datagrams the last rx_burst lent (RxFrame::data)
  std::unique_ptr<PcapWriter> pcap_;
  // waiting
  std::atomic<bool> wake_{false}, sleeping_{false};
  int intr_fd_ = -1, wake_fd_ = -1;            // receive interrupt (owned by DPDK), our eventfd for wake()
  std::atomic<std::uint64_t> last_rx_tsc_{0};  // TSC of the last burst received
  std::uint64_t last_tx_tsc_ = 0;              // TSC of the last frame sent (io_mu_)
  std::uint64_t tsc_per_ms_ = 0;               // set once EAL is up
  std::mutex wait_mu_;
  std::condition_variable wait_cv_;
  AtomicNetdevStats stats_;
  DpdkCounters c_;
};

}  // namespace

bool dpdk_available() {
  return true;
}

std::unique_ptr<Netdev> make_dpdk(const NetdevConfig& cfg, std::string& error) {
  auto d = std::make_unique<DpdkNetdev>();
  if (!d->open(cfg, error)) return nullptr;
  return d;
}

}  // namespace softrnic::netdev
