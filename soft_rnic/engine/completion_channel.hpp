// A completion channel: where consumer threads wait for one object's completions and events (a
// DAT EVD or CNO; ibv_comp_channel's place in verbs), as engine scheduling: a waiter drives the
// engine itself, blocked in the netdev, instead of sleeping while the progress thread does, so
// the frame that brings its event wakes it directly and not the progress thread that would then
// wake it. The consumer's object keeps what is waited for under its own mutex (the `lk` of
// wait_step); the channel knows who waits where and how to reach them.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>

#include "engine.hpp"

namespace softrnic::engine {

class CompletionChannel {
 public:
  explicit CompletionChannel(Engine& e) : e_(e) {}
  CompletionChannel(const CompletionChannel&) = delete;
  CompletionChannel& operator=(const CompletionChannel&) = delete;

  // One step of a waiter that looked under `lk` (the object's mutex) and found nothing yet; `lk`
  // is held again on return, and the caller looks again (an event may have come while it was
  // released). The waiter drives the engine (blocked in the netdev until a frame, a due timer or
  // notify(), and at most until `deadline` or 100 ms) when no other thread did at its last step;
  // when another does, it sleeps on the channel until notified or `deadline`. `another_drives`
  // is the waiter's own state across its steps (false at the first). False when a signal ended
  // the wait in the netdev (a caller whose API has EINTR returns it); the sleep on the channel
  // does not end on signals.
  bool wait_step(std::unique_lock<std::mutex>& lk, std::optional<Clock::time_point> deadline, bool& another_drives);

  // What a waiter looks for happened (any thread, after the object's lock was released): wakes
  // the waiters on the channel and, when one drives the engine, the netdev. An event raised in
  // the drive of this very thread for this channel needs no netdev wake (an eventfd write and
  // read per message over udp): the driver is told not to block (Engine::raised_here), and its
  // waiter looks when the drive returns.
  void notify();
  // Whether this thread drives the engine as a waiter on this channel (within wait_step).
  bool driven_here() const;
  // Ends every wait (the object is freed or can no longer be waited on): as notify(), and the
  // netdev is woken even for a waiter that drives in this thread (a proxy agent's round).
  void interrupt();
  // For waits on the object's other state (its waiters leaving), under the object's mutex.
  std::condition_variable& cv() { return cv_; }

 private:
  Engine& e_;
  std::condition_variable cv_;
  std::atomic<int> driving_{0};  // waiters about to drive or driving the engine (changed under the object's mutex)
};

}  // namespace softrnic::engine
