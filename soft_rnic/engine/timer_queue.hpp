// A deadline queue keyed by QP number: each key is armed at its earliest deadline; expire()
// hands out the keys that are due, earliest first, and the owner re-arms each after handling it.
// Arming a key again at a later time than it is armed for changes nothing (the owner computes
// the real next deadline when the key fires), so a transport can arm on every event that may
// bring a deadline closer at the cost of one hash lookup. Not thread-safe (the device lock).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <queue>
#include <unordered_map>
#include <utility>
#include <vector>

namespace softrnic::engine {

class TimerQueue {
 public:
  using Clock = std::chrono::steady_clock;

  void arm(std::uint32_t key, Clock::time_point t) {
    auto [it, fresh] = armed_.try_emplace(key, t);
    if (!fresh) {
      if (it->second <= t) return;
      it->second = t;
    }
    heap_.push({t, key});
  }

  void cancel(std::uint32_t key) { armed_.erase(key); }  // its heap entries go stale

  // Calls fire(key) for every key due at `now`, earliest first. fire may arm keys again.
  template <class F>
  void expire(Clock::time_point now, F&& fire) {
    due_.clear();
    while (!heap_.empty() && heap_.top().first <= now) {
      const auto [t, key] = heap_.top();
      heap_.pop();
      auto it = armed_.find(key);
      if (it == armed_.end() || it->second != t) continue;  // cancelled, or armed earlier since
      armed_.erase(it);
      due_.push_back(key);
    }
    for (const std::uint32_t key : due_) fire(key);
  }

  // The earliest deadline armed.
  std::optional<Clock::time_point> next() {
    while (!heap_.empty()) {
      const auto [t, key] = heap_.top();
      auto it = armed_.find(key);
      if (it != armed_.end() && it->second == t) return t;
      heap_.pop();
    }
    return std::nullopt;
  }

  std::size_t size() const { return armed_.size(); }

 private:
  using Entry = std::pair<Clock::time_point, std::uint32_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap_;
  std::unordered_map<std::uint32_t, Clock::time_point> armed_;
  std::vector<std::uint32_t> due_;
};

}  // namespace softrnic::engine
