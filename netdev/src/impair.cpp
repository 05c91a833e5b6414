// The impairment decorator: drop, duplicate, corrupt, delay and reorder what a netdev sends,
// from one seeded generator.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <vector>

#include "backends.hpp"

namespace softrnic::netdev {
namespace {

using Clock = std::chrono::steady_clock;
// A reordered datagram waits at most this long for the window to fill.
constexpr std::chrono::microseconds kMaxHold{1000};

bool parse_prob(std::string_view v, double& out) {
  double x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || !(x >= 0 && x <= 1)) return false;
  out = x;
  return true;
}

class ImpairedNetdev final : public Netdev {
 public:
  ImpairedNetdev(std::unique_ptr<Netdev> inner, const ImpairPlan& plan)
      : inner_(std::move(inner)), plan_(plan), rng_(plan.seed) {}

  NetAddr local_addr() const override { return inner_->local_addr(); }
  std::size_t max_datagram() const override { return inner_->max_datagram(); }
  std::size_t rx_buffer_bytes() const override { return inner_->rx_buffer_bytes(); }
  NetdevStats stats() const override { return inner_->stats(); }
  ImpairStats impair_stats() const override {
    std::lock_guard lk(mu_);
    return st_;
  }

  std::size_t tx_burst(std::span<const TxFrame> frames) override {
    std::lock_guard lk(mu_);
    const auto now = Clock::now();
    // Nothing to hold (no reordering, no delay): what survives goes on at once, in one burst, as
    // the frames themselves (only a corrupted one is copied), so the plan costs no more than its
    // decisions: goodput under loss measures the recovery, not the decorator.
    const bool pass = plan_.reorder <= 1 && plan_.delay_us == 0;
    for (const TxFrame& f : frames) {
      st_.sent++;
      if (chance(plan_.drop)) {
        st_.dropped++;
        continue;
      }
      const int copies = chance(plan_.dup) ? 2 : 1;
      if (copies == 2) st_.duplicated++;
      for (int c = 0; c < copies; ++c) {
        const bool corrupt = f.size() > 0 && chance(plan_.corrupt);
        if (pass && !corrupt) {
          out_.push_back(f);
          continue;
        }
        Held h{f.to, {}, now + std::chrono::microseconds(plan_.delay_us), now, f.from_port, f.seal};
        h.bytes.reserve(f.size());
        for (auto part : {f.head, f.body, f.tail}) h.bytes.insert(h.bytes.end(), part.begin(), part.end());
        if (corrupt) {
          st_.corrupted++;
          std::uniform_int_distribution<std::size_t> pos(0, h.bytes.size() - 1);
          std::uniform_int_distribution<int> bit(0, 7);
          h.bytes[pos(rng_)] ^= static_cast<std::uint8_t>(1u << bit(rng_));
        }
        if (pass) {
          sending_.push_back(std::move(h));
          out_.push_back(TxFrame{
              sending_.back().to, sending_.back().bytes, {}, {}, sending_.back().from_port, sending_.back().seal});
        } else {
          held_.push_back(std::move(h));
        }
      }
    }
    if (pass)
      flush_locked();
    else
      release_locked(now);
    return frames.size();
  }

  std::size_t rx_burst(std::span<RxFrame> out) override {
    {
      std::lock_guard lk(mu_);
      release_locked(Clock::now());
    }
    return inner_->rx_burst(out);
  }

  void wait_rx(std::chrono::microseconds timeout) override {
    {
      std::lock_guard lk(mu_);
      if (!held_.empty()) timeout = std::min(timeout, std::chrono::microseconds(200));
    }
    inner_->wait_rx(timeout);
    std::lock_guard lk(mu_);
    release_locked(Clock::now());
  }

  void wake() override { inner_->wake(); }
  // (Under mu_, as every send of the inner netdev: the thread in wait_rx sends held frames beside
  // the engine, and these change what a send looks up: its peers' and source ports' sockets.)
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

 private:
  struct Held {
    NetAddr to;
    std::vector<std::uint8_t> bytes;
    Clock::time_point due;     // delay passed
    Clock::time_point queued;  // for the hold limit
    std::uint16_t from_port = 0;
    IpIdSeal seal = nullptr;
  };

  bool chance(double p) {
    if (p <= 0) return false;
    return std::uniform_real_distribution<double>(0, 1)(rng_) < p;
  }

  // Queues a held datagram for this call's burst (it lives in sending_ until the burst left).
  void send(Held& h) {
    sending_.push_back(std::move(h));
    out_.push_back(
        TxFrame{sending_.back().to, sending_.back().bytes, {}, {}, sending_.back().from_port, sending_.back().seal});
  }

  // Sends the burst. A frame the inner netdev refuses (a full socket) is lost, as on a network,
  // and the rest go on past it.
  void flush_locked() {
    std::size_t i = 0;
    while (i < out_.size()) {
      const std::size_t k = inner_->tx_burst(std::span<const TxFrame>(out_).subspan(i));
      i += k + 1;  // (k frames went; the one after them, if any, was refused)
    }
    out_.clear();
    sending_.clear();
  }

  // Sends what the plan lets go: with a reorder window, a random eligible datagram each time
  // more than the window is held, and everything held past kMaxHold; otherwise whatever is due.
  void release_locked(Clock::time_point now) {
    const auto eligible = [&](const Held& h) { return h.due <= now; };
    if (plan_.reorder > 1) {
      while (held_.size() >= plan_.reorder) {
        std::vector<std::size_t> cand;
        for (std::size_t i = 0; i < held_.size(); ++i)
          if (eligible(held_[i])) cand.push_back(i);
        if (cand.empty()) break;
        const std::size_t pick = cand[std::uniform_int_distribution<std::size_t>(0, cand.size() - 1)(rng_)];
        if (pick != 0) st_.reordered++;
        send(held_[pick]);
        held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(pick));
      }
      while (!held_.empty() && eligible(held_.front()) &&
             now - held_.front().queued >= kMaxHold + std::chrono::microseconds(plan_.delay_us)) {
        send(held_.front());
        held_.pop_front();
      }
      flush_locked();
      return;
    }
    while (!held_.empty() && eligible(held_.front())) {
      send(held_.front());
      held_.pop_front();
    }
    flush_locked();
  }

  std::unique_ptr<Netdev> inner_;
  ImpairPlan plan_;
  mutable std::mutex mu_;
  std::mt19937_64 rng_;
  std::deque<Held> held_;
  std::deque<Held> sending_;  // held datagrams in this call's burst (a deque: out_ points into them)
  std::vector<TxFrame> out_;  // this call's burst
  ImpairStats st_{};
};

}  // namespace

bool parse_impair(std::string_view spec, char sep, ImpairPlan& plan, std::string& error) {
  std::size_t i = 0;
  while (i <= spec.size()) {
    std::size_t j = spec.find(sep, i);
    if (j == std::string_view::npos) j = spec.size();
    const std::string_view item = spec.substr(i, j - i);
    i = j + 1;
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string_view::npos) {
      error = "impairment: '" + std::string(item) + "' is not key=value";
      return false;
    }
    const auto key = item.substr(0, eq), val = item.substr(eq + 1);
    bool ok;
    if (key == "seed") {
      ok = parse_uint<std::uint64_t>(val, 0, ~std::uint64_t{0}, plan.seed);
    } else if (key == "drop") {
      ok = parse_prob(val, plan.drop);
    } else if (key == "dup") {
      ok = parse_prob(val, plan.dup);
    } else if (key == "corrupt") {
      ok = parse_prob(val, plan.corrupt);
    } else if (key == "reorder") {
      ok = parse_uint<std::uint32_t>(val, 0, 4096, plan.reorder);
    } else if (key == "delay") {
      ok = parse_uint<std::uint32_t>(val, 0, 10'000'000, plan.delay_us);
    } else {
      error = "impairment: unknown key '" + std::string(key) + "' (known: seed, drop, dup, reorder, delay, corrupt)";
      return false;
    }
    if (!ok) {
      error = "impairment: bad value '" + std::string(val) + "' for " + std::string(key);
      return false;
    }
  }
  return true;
}

std::string to_string(const ImpairPlan& p) {
  return "seed=" + std::to_string(p.seed) + ",drop=" + std::to_string(p.drop) + ",dup=" + std::to_string(p.dup) +
         ",reorder=" + std::to_string(p.reorder) + ",delay=" + std::to_string(p.delay_us) +
         ",corrupt=" + std::to_string(p.corrupt);
}

std::unique_ptr<Netdev> make_impaired(std::unique_ptr<Netdev> inner, const ImpairPlan& plan) {
  return std::make_unique<ImpairedNetdev>(std::move(inner), plan);
}

}  // namespace softrnic::netdev
