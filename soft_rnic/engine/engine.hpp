// The progress engine: one thread per device by default, which stands back while a consumer
// drives the engine itself (it spins on dat_evd_dequeue, or waits in dat_evd_wait), so the two
// do not wake for the same datagrams and fight over the lock and the cores. What it drives is a
// Pollable (a transport): a receive round and the timers, under the device lock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>

#include "device_lock.hpp"
#include "softrnic/netdev/netdev.hpp"

namespace softrnic::engine {

using Clock = std::chrono::steady_clock;

class Pollable {
 public:
  virtual ~Pollable() = default;
  // One round (under the device lock): what arrived, then the timers when `now` is known.
  // Returns how many frames arrived.
  virtual std::size_t poll(std::optional<Clock::time_point> now) = 0;
  // How long the engine may block waiting for frames (under the device lock).
  virtual std::chrono::microseconds next_wait() = 0;
};

class Engine {
 public:
  Engine(netdev::Waitable& nd, DeviceLock& mu, bool busy_poll, std::chrono::microseconds wait_spin)
      : nd_(nd), mu_(mu), busy_poll_(busy_poll), wait_spin_(wait_spin) {}
  ~Engine() { stop(); }
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void start(Pollable& p);
  void stop();

  // Device's consumer-driven progress (rnic.hpp says what each does).
  bool wait_progress(std::chrono::microseconds max, std::uint64_t wakes_seen);
  void wake() {
    wakes_.fetch_add(1);
    nd_.wake();
  }
  std::uint64_t wakes() const { return wakes_.load(); }
  // What the driver waits for was raised in its own thread, before the wait it is about to
  // block in (a post it took in under the device lock completed at once, as an MPA/TCP request
  // does): it must not block. Counted as a wake, without the netdev's.
  void raised_here() { wakes_.fetch_add(1); }
  bool progress(std::chrono::microseconds drive_for);
  bool consumer_polling() const;
  // A consumer that took completions and left some in its CQ: it polls again within
  // kConsumerPollGrace, as one that drives does (defers_posts).
  void consumer_returns();
  // Whether a post may wait for the next round: a consumer drives the engine (it polls, or is
  // back from a wait) and none is blocked in wait_progress, whose wait would hold the post up.
  // Call under the device lock: a wait_progress that begins later sees the post (next_wait).
  // A consumer that announced a long drive (progress(drive_for) with a large drive_for) does not
  // defer posts: only one back within kConsumerPollGrace, whose next poll is that close.
  bool defers_posts() const;

 private:
  void run();
  std::chrono::microseconds next_wait();
  void wake_if_due();  // under the device lock, after a consumer's round
  bool spin_before_wait(Clock::time_point start, std::chrono::microseconds max, std::uint64_t wakes_seen);
  static std::int64_t ns_of(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  }
  void raise_consumer_until(Clock::time_point t) {
    const std::int64_t until = ns_of(t);
    if (consumer_until_ns_.load(std::memory_order_relaxed) < until)
      consumer_until_ns_.store(until, std::memory_order_relaxed);
  }

  netdev::Waitable& nd_;
  DeviceLock& mu_;
  const bool busy_poll_;
  const std::chrono::microseconds wait_spin_;  // wait_progress polls this long before it blocks
  Pollable* p_ = nullptr;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::atomic<std::uint64_t> wakes_{0};                  // wake() calls: a driver sees one whose netdev token it missed
  std::atomic<bool> thread_waits_{false};                // the progress thread is in wait_rx (or about to be)
  std::atomic<bool> driver_{false};                      // a consumer drives the engine in wait_progress
  std::atomic<std::int64_t> consumer_until_ns_{0};       // a consumer drives the engine until then (steady clock, ns)
  std::atomic<std::uint32_t> progress_calls_{0};         // progress(): the clock is read every kClockEvery calls
  Clock::duration step_ = std::chrono::milliseconds(2);  // the progress thread's: stand_back
  bool stand_back(Clock::duration left);
  bool consumer_quiet();
};

}  // namespace softrnic::engine
