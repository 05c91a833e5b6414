// The `loopback` backend: in-process and deterministic. Every loopback netdev of the process is
// attached to one fabric by its address; a datagram sent to an address no netdev holds is dropped
// and counted.
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

#include "backends.hpp"

namespace softrnic::netdev {
namespace {

constexpr std::size_t kMaxQueued = 65536;

struct Port {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<NetAddr, std::vector<std::uint8_t>>> q;
  bool woken = false;
};

class Fabric {
 public:
  static Fabric& get() {
    static Fabric f;
    return f;
  }
  std::shared_ptr<Port> attach(NetAddr& want, bool fixed) {
    std::lock_guard lk(mu_);
    for (int i = 0; i < (fixed ? 1 : 1024); ++i) {
      NetAddr a{want.ip, static_cast<std::uint16_t>(want.port + i)};
      if (a.port == 0 || ports_.count(a)) continue;
      auto p = std::make_shared<Port>();
      ports_[a] = p;
      want = a;
      return p;
    }
    return nullptr;
  }
  void detach(NetAddr a) {
    std::lock_guard lk(mu_);
    ports_.erase(a);
  }
  std::shared_ptr<Port> find(NetAddr a) {
    std::lock_guard lk(mu_);
    auto it = ports_.find(a);
    return it == ports_.end() ? nullptr : it->second;
  }

 private:
  std::mutex mu_;
  std::map<NetAddr, std::shared_ptr<Port>> ports_;
};

class LoopbackNetdev final : public Netdev {
 public:
  LoopbackNetdev(NetAddr a, std::shared_ptr<Port> p, std::size_t max_dgram)
      : addr_(a), port_(std::move(p)), max_dgram_(max_dgram) {}
  ~LoopbackNetdev() override { Fabric::get().detach(addr_); }

  NetAddr local_addr() const override { return addr_; }
  std::size_t max_datagram() const override { return max_dgram_; }

  std::size_t tx_burst(std::span<const TxFrame> frames) override {
    for (const TxFrame& f : frames) {
      auto dst = Fabric::get().find(f.to);
      if (!dst || f.size() > max_dgram_) {
        stats_.tx_dropped++;
        continue;
      }
      {
        std::lock_guard lk(dst->mu);
        if (dst->q.size() >= kMaxQueued) {
          stats_.tx_dropped++;
          continue;
        }
        std::vector<std::uint8_t> d;
        d.reserve(f.size());
        for (auto part : {f.head, f.body, f.tail}) d.insert(d.end(), part.begin(), part.end());
        dst->q.emplace_back(addr_, std::move(d));
      }
      dst->cv.notify_one();
      stats_.tx_frames++;
      stats_.tx_bytes += f.size();
    }
    return frames.size();
  }

  std::size_t rx_burst(std::span<RxFrame> out) override {
    std::lock_guard lk(port_->mu);
    std::size_t n = 0;
    while (n < out.size() && !port_->q.empty()) {
      auto& [from, data] = port_->q.front();
      if (data.size() > out[n].cap) {
        stats_.rx_truncated++;
      } else {
        // (an empty datagram has no data pointer, and memcpy must not be given a null one)
        if (!data.empty()) std::memcpy(out[n].buf, data.data(), data.size());
        out[n].len = data.size();
        out[n].from = from;
        stats_.rx_frames++;
        stats_.rx_bytes += data.size();
        ++n;
      }
      port_->q.pop_front();
    }
    return n;
  }

  void wait_rx(std::chrono::microseconds timeout) override {
    std::unique_lock lk(port_->mu);
    port_->cv.wait_for(lk, timeout, [&] { return !port_->q.empty() || port_->woken; });
    port_->woken = false;
  }

  void wake() override {
    {
      std::lock_guard lk(port_->mu);
      port_->woken = true;
    }
    port_->cv.notify_all();
  }

  NetdevStats stats() const override { return stats_.snapshot(); }
  std::size_t rx_buffer_bytes() const override { return kMaxQueued * max_dgram_; }

 private:
  NetAddr addr_;
  std::shared_ptr<Port> port_;
  std::size_t max_dgram_;
  AtomicNetdevStats stats_;
};

}  // namespace

std::unique_ptr<Netdev> make_loopback(const NetdevConfig& cfg, std::string& error) {
  NetAddr a{};
  if (!parse_ipv4(cfg.ip, a.ip)) {
    error = "loopback netdev: bad IPv4 address '" + cfg.ip + "'";
    return nullptr;
  }
  a.port = cfg.port;
  auto p = Fabric::get().attach(a, cfg.port_fixed);
  if (!p) {
    error = "loopback netdev: address " + cfg.ip + ":" + std::to_string(cfg.port) + " is taken";
    return nullptr;
  }
  return std::make_unique<LoopbackNetdev>(a, std::move(p), cfg.max_datagram);
}

}  // namespace softrnic::netdev
