// Shared by the component tests: collecting a device's callbacks, and bounded waits.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "softrnic/rnic.hpp"

namespace softrnic::testing {

using namespace std::chrono_literals;

// Collects events and completions from callbacks; waits with a bound.
struct Sink {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<CmEvent> events;
  std::deque<std::pair<ConnRequest*, ConnRequestInfo>> requests;

  void on_event(const CmEvent& e) {
    std::lock_guard lk(mu);
    events.push_back(e);
    cv.notify_all();
  }
  void on_request(ConnRequest* r, const ConnRequestInfo& i) {
    std::lock_guard lk(mu);
    requests.emplace_back(r, i);
    cv.notify_all();
  }
  bool wait_event(CmEvent& out, std::chrono::milliseconds t = 5000ms) {
    std::unique_lock lk(mu);
    if (!cv.wait_for(lk, t, [&] { return !events.empty(); })) return false;
    out = events.front();
    events.pop_front();
    return true;
  }
  bool wait_request(ConnRequest*& r, ConnRequestInfo& i, std::chrono::milliseconds t = 5000ms) {
    std::unique_lock lk(mu);
    if (!cv.wait_for(lk, t, [&] { return !requests.empty(); })) return false;
    std::tie(r, i) = requests.front();
    requests.pop_front();
    return true;
  }
};

// A netdev that hands everything to `inner`: a test overrides what it watches or changes.
class ForwardingNetdev : public netdev::Netdev {
 public:
  explicit ForwardingNetdev(std::unique_ptr<netdev::Netdev> inner) : inner_(std::move(inner)) {}
  netdev::NetAddr local_addr() const override { return inner_->local_addr(); }
  std::size_t max_datagram() const override { return inner_->max_datagram(); }
  std::size_t rx_buffer_bytes() const override { return inner_->rx_buffer_bytes(); }
  netdev::NetdevStats stats() const override { return inner_->stats(); }
  std::size_t rx_burst(std::span<netdev::RxFrame> out) override { return inner_->rx_burst(out); }
  void wait_rx(std::chrono::microseconds t) override { inner_->wait_rx(t); }
  void wake() override { inner_->wake(); }
  std::size_t tx_burst(std::span<const netdev::TxFrame> frames) override { return inner_->tx_burst(frames); }

 protected:
  std::unique_ptr<netdev::Netdev> inner_;
};

// The same for a byte-stream netdev (MPA/TCP).
class ForwardingStreamNetdev : public netdev::StreamNetdev {
 public:
  explicit ForwardingStreamNetdev(std::unique_ptr<netdev::StreamNetdev> inner) : inner_(std::move(inner)) {}
  void wait_rx(std::chrono::microseconds t) override { inner_->wait_rx(t); }
  void wake() override { inner_->wake(); }
  std::uint32_t local_ip() const override { return inner_->local_ip(); }
  std::uint16_t listen(std::uint16_t port, std::string& error) override { return inner_->listen(port, error); }
  void stop_listen(std::uint16_t port) override { inner_->stop_listen(port); }
  netdev::StreamId connect(netdev::NetAddr to, std::string& error) override { return inner_->connect(to, error); }
  std::ptrdiff_t write(netdev::StreamId id, std::span<const std::span<const std::uint8_t>> pieces) override {
    return inner_->write(id, pieces);
  }
  std::ptrdiff_t read(netdev::StreamId id, std::span<std::uint8_t> buf) override { return inner_->read(id, buf); }
  void want_writable(netdev::StreamId id) override { inner_->want_writable(id); }
  void hold_reads(netdev::StreamId id, bool hold) override { inner_->hold_reads(id, hold); }
  void close(netdev::StreamId id, bool abort) override { inner_->close(id, abort); }
  std::size_t events(std::span<netdev::StreamEvent> out) override { return inner_->events(out); }
  std::size_t mss(netdev::StreamId id) const override { return inner_->mss(id); }
  void spin_read(netdev::StreamId id) override { inner_->spin_read(id); }
  bool keepalive(netdev::StreamId id, std::chrono::milliseconds idle, std::chrono::milliseconds interval,
                 int probes) override {
    return inner_->keepalive(id, idle, interval, probes);
  }
  netdev::NetdevStats stats() const override { return inner_->stats(); }

 protected:
  std::unique_ptr<netdev::StreamNetdev> inner_;
};

// A device whose netdev (made from cfg.netdev) can hold what it sends: `hold` is set to it.
inline std::unique_ptr<Device> open_holding(const DeviceConfig& cfg, netdev::HoldingNetdev*& hold, std::string& e) {
  auto inner = netdev::make_netdev(cfg.netdev, e);
  if (!inner) return nullptr;
  auto h = netdev::make_holding(std::move(inner), [](std::span<const std::uint8_t>) { return true; });
  hold = h.get();
  return Device::open(cfg, std::move(h));
}

inline bool poll_one(Device& d, Cq* cq, Wc& wc, std::chrono::milliseconds t = 5000ms) {
  const auto end = std::chrono::steady_clock::now() + t;
  while (std::chrono::steady_clock::now() < end) {
    if (d.poll_cq(cq, {&wc, 1}) == 1) return true;
    std::this_thread::sleep_for(100us);
  }
  return false;
}

// n QPs on a (sends on acq), each connected to one on b (b accepts on `qual`), all in RTS.
inline void connect_qps(Device& a, Device& b, Pd* pa, Pd* pb, Cq* acq, Cq* bcq, std::size_t n,
                        std::uint32_t max_send_wr, std::uint64_t qual, std::vector<Qp*>& qa, std::vector<Qp*>& qb) {
  std::mutex mu;
  std::vector<ConnRequest*> reqs;
  ASSERT_EQ(b.listen(qual,
                     [&](ConnRequest* r, const ConnRequestInfo&) {
                       std::lock_guard g(mu);
                       reqs.push_back(r);
                     }),
            Status::ok);
  // (The callback names this function's locals: listening ends with it, on every way out.)
  struct StopListen {
    Device& d;
    std::uint64_t qual;
    ~StopListen() { d.stop_listen(qual); }
  } stop_listen{b, qual};
  qa.resize(n);
  qb.resize(n);
  for (std::size_t q = 0; q < n; ++q) {
    QpInit in;
    in.pd = pa;
    in.send_cq = in.recv_cq = acq;
    in.max_send_wr = max_send_wr;
    ASSERT_EQ(a.create_qp(in, qa[q]), Status::ok);
    in.pd = pb;
    in.send_cq = in.recv_cq = bcq;
    ASSERT_EQ(b.create_qp(in, qb[q]), Status::ok);
    ASSERT_EQ(a.connect(qa[q], b.address(), qual, {}, 5000ms), Status::ok);
    ConnRequest* r = nullptr;
    for (int i = 0; i < 5000 && !r; ++i) {
      {
        std::lock_guard g(mu);
        if (!reqs.empty()) r = reqs.back(), reqs.clear();
      }
      if (!r) std::this_thread::sleep_for(1ms);
    }
    ASSERT_TRUE(r);
    ASSERT_EQ(b.accept(r, qb[q], {}), Status::ok);
    for (int i = 0; i < 5000 && a.qp_state(qa[q]) != QpState::rts; ++i) std::this_thread::sleep_for(1ms);
    ASSERT_EQ(a.qp_state(qa[q]), QpState::rts);
  }
  std::this_thread::sleep_for(20ms);  // the last handshake's acks have gone
}

}  // namespace softrnic::testing
