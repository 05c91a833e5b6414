// What softrnic's MPA/TCP tools (softrnic_connect, softrnic_perftest) share: the
// MPA options of their command lines (the ia_params keys mpa_rev, mpa_crc and mpa_p2p as flags),
// the device they open, and a queue of connection events for the thread that waits on them.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "softrnic/rnic.hpp"

namespace softrnic::tools {

class MpaOptions {
 public:
  void add_to(CLI::App& app) {
    app.add_option("--mpa-rev", rev_, "MPA revision")->check(CLI::Range(1, 2));
    app.add_flag("--no-crc", no_crc_, "do not ask for MPA CRC");
    app.add_flag("--no-p2p", no_p2p_, "do not offer the peer-to-peer RTR");
  }
  MpaConfig config() const {
    MpaConfig c;
    c.revision = static_cast<std::uint8_t>(rev_);
    c.crc = !no_crc_;
    c.peer_to_peer = !no_p2p_;
    return c;
  }

 private:
  int rev_ = 2;
  bool no_crc_ = false, no_p2p_ = false;
};

// An RNIC on MPA/TCP (kernel TCP) at `ip`.
inline std::unique_ptr<Device> open_mpa_device(const MpaConfig& mpa, const std::string& ip, std::string& error) {
  DeviceConfig cfg;
  cfg.wire = Wire::tcp;
  cfg.mpa = mpa;
  cfg.netdev.ip = ip;
  return Device::open(cfg, error);
}

// An RNIC on RoCEv2 at `ip` (UDP port 4791; IB CM on QP1 for rdma_cm's connections).
inline std::unique_ptr<Device> open_roce_device(const std::string& ip, std::string& error) {
  DeviceConfig cfg;
  cfg.wire = Wire::roce;
  cfg.netdev.ip = ip;
  cfg.netdev.port = 4791;
  // These tools connect through rdma_cm's IB CM as rping and friends do: their QPs keep Linux
  // rdma_cm's local ACK timeout on RoCE (packet life time 18 + 1: 2.1 s, what our REQ announces,
  // soft_rnic/roce/cm.cpp), not the device's 67 ms default. A peer that stalls for half a second
  // (the referee guest under TCG did) then costs a retry, not the connection.
  cfg.roce.timeout = 19;
  return Device::open(cfg, error);
}

// Connection events, in the order they came (from the device's thread), for a waiting thread.
class CmEvents {
 public:
  // For QpInit::on_event.
  std::function<void(Qp*, const CmEvent&)> sink() {
    return [this](Qp*, const CmEvent& ev) {
      std::lock_guard lk(mu_);
      events_.push_back(ev);
      cv_.notify_all();
    };
  }
  // Takes the next event (into `out`, when given); false when none came within `t`.
  bool wait(std::chrono::milliseconds t, CmEvent* out = nullptr) {
    std::unique_lock lk(mu_);
    if (!cv_.wait_for(lk, t, [&] { return !events_.empty(); })) return false;
    if (out) *out = std::move(events_.front());
    events_.pop_front();
    return true;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<CmEvent> events_;
};

}  // namespace softrnic::tools
