// What all the QPs of a device together may have in flight to their peers (bytes, or packets:
// the owner's unit). The peers' receive buffers are shared by every connection to them: many
// connections each within its own window can still overflow one together, and a burst that
// overflows a buffer is lost whole. A QP whose next unit does not fit waits, first come first
// served (a QP that does not wait yet queues behind those that do); the owner serves the
// waiters when acknowledgements free the budget. Something always moves: a QP may send when
// nothing at all is in flight. Not thread-safe (the device lock).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>

namespace softrnic::engine {

class TxBudget {
 public:
  void set_limit(std::size_t limit) { limit_ = limit; }
  std::size_t limit() const { return limit_; }
  std::size_t in_flight() const { return total_; }

  // Whether `qpn` may send `amount` more now (a unit larger than the whole budget counts as the
  // whole budget: it goes when nothing else is in flight).
  bool allows(std::uint32_t qpn, std::size_t amount) const { return total_ == 0 || fits(qpn, amount); }
  // Whether `amount` more fits beside what is in flight, for `qpn` (no waiter ahead of it).
  bool fits(std::uint32_t qpn, std::size_t amount) const {
    if (total_ + std::min(amount, limit_) > limit_) return false;
    return waiters_.empty() || serving_ == qpn;
  }
  void charge(std::size_t amount) { total_ += amount; }
  void release(std::size_t amount) { total_ -= std::min(amount, total_); }
  // A QP has `now` in flight: what it was counted for (`charged`) becomes that.
  template <class N>
  void track(N& charged, std::size_t now) {
    if (now > charged)
      charge(now - static_cast<std::size_t>(charged));
    else
      release(static_cast<std::size_t>(charged) - now);
    charged = static_cast<N>(now);
  }

  // `qpn` waits for room; `waiting` is its flag (set while it is in the queue).
  void wait(std::uint32_t qpn, bool& waiting) {
    if (waiting) return;
    waiting = true;
    waiters_.push_back(qpn);
  }
  // `qpn` waits no more.
  void leave(std::uint32_t qpn, bool& waiting) {
    if (!waiting) return;
    waiting = false;
    std::erase(waiters_, qpn);
  }
  // `qpn` leaves (its QP was flushed or destroyed): what it had in flight (`charged`, zeroed)
  // counts no more, and it waits no more. True when that lets a waiter be served (the caller
  // wakes whoever serves them).
  template <class N>
  bool leave(std::uint32_t qpn, bool& waiting, N& charged) {
    release(static_cast<std::size_t>(charged));
    charged = 0;
    leave(qpn, waiting);
    return room();
  }
  // Whether a waiter may be served now.
  bool room() const { return !waiters_.empty() && total_ < limit_; }

  // Serves the waiters in order while there is room. flag(qpn): the waiter's `waiting` flag, or
  // nullptr when its QP is gone; next(qpn): the size of its next unit; pump(qpn): sends what it
  // may (and waits again, at the end of the queue, when it still has more).
  template <class Flag, class Next, class Pump>
  void serve(Flag&& flag, Next&& next, Pump&& pump) {
    for (std::size_t n = waiters_.size(); n > 0 && room(); --n) {
      const std::uint32_t qpn = waiters_.front();
      bool* waiting = flag(qpn);
      if (!waiting || !*waiting) {  // gone, or left without being erased
        waiters_.pop_front();
        continue;
      }
      if (total_ != 0 && total_ + std::min<std::size_t>(next(qpn), limit_) > limit_) break;  // not yet: the order holds
      waiters_.pop_front();
      *waiting = false;
      serving_ = qpn;
      pump(qpn);
      serving_ = 0;
    }
  }

 private:
  std::size_t limit_ = ~std::size_t{0};
  std::size_t total_ = 0;
  std::deque<std::uint32_t> waiters_;
  std::uint32_t serving_ = 0;  // the waiter serve() is pumping (0: none; QP numbers start at 1)
};

}  // namespace softrnic::engine
