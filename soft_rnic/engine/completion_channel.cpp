#include "completion_channel.hpp"

#include <utility>

namespace softrnic::engine {

namespace {
// The longest a waiter that drives the engine blocks in the netdev at once (it is woken sooner by
// frames, due timers and notify()).
constexpr std::chrono::microseconds kMaxDriveChunk{100000};
// The channel this thread waits on while it drives the engine: an event for that very channel
// raised in the thread's own round needs no netdev wake. Any other channel's waiter is woken as
// usual: it may be about to block in the netdev.
thread_local const CompletionChannel* t_driving_for = nullptr;
}  // namespace

bool CompletionChannel::wait_step(std::unique_lock<std::mutex>& lk, std::optional<Clock::time_point> deadline,
                                  bool& another_drives) {
  if (another_drives) {
    another_drives = false;
    if (deadline) {
      cv_.wait_until(lk, *deadline);
    } else {
      cv_.wait(lk);
    }
    return true;
  }
  auto chunk = kMaxDriveChunk;
  if (deadline) {
    const auto left = std::chrono::ceil<std::chrono::microseconds>(*deadline - Clock::now());
    chunk = std::clamp(left, std::chrono::microseconds(0), kMaxDriveChunk);
  }
  driving_++;
  // A wake() after this (its netdev token may go to the progress thread) keeps the driver from
  // blocking.
  const std::uint64_t wakes = e_.wakes();
  lk.unlock();
  const CompletionChannel* const outer = std::exchange(t_driving_for, this);  // (a proxy agent may wait within a round)
  netdev::take_wait_interrupted();  // (what an earlier wait of this thread left)
  const bool drove = e_.wait_progress(chunk, wakes);
  const bool signalled = netdev::take_wait_interrupted();
  t_driving_for = outer;
  lk.lock();
  driving_--;
  another_drives = !drove;
  return !signalled;
}

void CompletionChannel::notify() {
  cv_.notify_all();
  if (t_driving_for == this) {
    // Raised in this thread's own drive, maybe before it blocks (a post taken in under the device
    // lock, or completed by the spin's round, is not a frame the spin would count): rping over
    // MPA/TCP slept 100 ms on the completion of its own RDMA Write, one ping in ten.
    e_.raised_here();
  } else if (driving_.load() > 0) {
    e_.wake();
  }
}

bool CompletionChannel::driven_here() const {
  return t_driving_for == this;
}

void CompletionChannel::interrupt() {
  cv_.notify_all();
  if (driving_.load() > 0) e_.wake();
}

}  // namespace softrnic::engine
