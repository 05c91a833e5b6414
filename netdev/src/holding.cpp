// The holding decorator: scripted arrival orders for the scenario runner and tests.
#include <algorithm>
#include <mutex>

#include "softrnic/netdev/netdev.hpp"

namespace softrnic::netdev {
namespace {

class Holding final : public HoldingNetdev {
 public:
  Holding(std::unique_ptr<Netdev> inner, std::function<bool(std::span<const std::uint8_t>)> hold_if)
      : inner_(std::move(inner)), hold_if_(std::move(hold_if)) {}

  NetAddr local_addr() const override { return inner_->local_addr(); }
  std::size_t max_datagram() const override { return inner_->max_datagram(); }
  std::size_t rx_buffer_bytes() const override { return inner_->rx_buffer_bytes(); }
  NetdevStats stats() const override { return inner_->stats(); }
  std::size_t rx_burst(std::span<RxFrame> out) override { return inner_->rx_burst(out); }
  void wait_rx(std::chrono::microseconds t) override { inner_->wait_rx(t); }
  void wake() override { inner_->wake(); }
  // (Under mu_, as every send of the inner netdev: release() sends from the caller's thread, and
  // these change what a send looks up.)
  void peer_hint(NetAddr peer, bool up) override {
    std::lock_guard lk(mu_);
    inner_->peer_hint(peer, up);
  }
  bool errors_pending() const override { return inner_->errors_pending(); }
  std::size_t unreachable(std::span<Unreachable> out) override { return inner_->unreachable(out); }
  std::uint16_t source_port(std::uint16_t wanted) override {
    std::lock_guard lk(mu_);
    return inner_->source_port(wanted);
  }

  std::size_t tx_burst(std::span<const TxFrame> frames) override {
    std::lock_guard lk(mu_);
    for (const TxFrame& f : frames) {
      std::vector<std::uint8_t> b;
      b.reserve(f.size());
      for (auto part : {f.head, f.body, f.tail}) b.insert(b.end(), part.begin(), part.end());
      if (holding_ && hold_if_(b)) {
        held_.push_back({f.to, std::move(b), f.from_port});
      } else {
        const TxFrame one{f.to, b, {}, {}, f.from_port};
        inner_->tx_burst({&one, 1});
      }
    }
    return frames.size();
  }

  void set_holding(bool on) override {
    std::lock_guard lk(mu_);
    holding_ = on;
  }
  std::vector<Held> held() const override {
    std::lock_guard lk(mu_);
    return held_;
  }
  void release(const std::vector<std::size_t>& idx) override { take(idx, true); }
  void discard(const std::vector<std::size_t>& idx) override { take(idx, false); }

 private:
  void take(const std::vector<std::size_t>& idx, bool send) {
    std::lock_guard lk(mu_);
    for (std::size_t i : idx) {
      if (i >= held_.size() || held_[i].bytes.empty()) continue;
      if (send) {
        const TxFrame one{held_[i].to, held_[i].bytes, {}, {}, held_[i].from_port};
        inner_->tx_burst({&one, 1});
      }
      held_[i].bytes.clear();  // taken; removed below so indexes stay valid during the loop
    }
    std::erase_if(held_, [](const Held& h) { return h.bytes.empty(); });
  }

  std::unique_ptr<Netdev> inner_;
  std::function<bool(std::span<const std::uint8_t>)> hold_if_;
  mutable std::mutex mu_;
  bool holding_ = false;
  std::vector<Held> held_;
};

}  // namespace

std::unique_ptr<HoldingNetdev> make_holding(std::unique_ptr<Netdev> inner,
                                            std::function<bool(std::span<const std::uint8_t>)> hold_if) {
  return std::make_unique<Holding>(std::move(inner), std::move(hold_if));
}

}  // namespace softrnic::netdev
