#include "engine.hpp"

#include <pthread.h>

#include <algorithm>
#include <csignal>

namespace softrnic::engine {

namespace {
// The longest the progress thread sleeps at once while a consumer drives the engine (busy polling
// or blocked in dat_evd_wait), and so the latest it takes over once the consumer stops: under the
// RTO floor, so a peer does not retransmit for it. Shorter, its wake-ups preempt the consumers
// that spin on two cores.
constexpr std::chrono::microseconds kConsumerPollGrace{2000};
// A consumer that spins calls progress() every microsecond or two: it reads the clock (for the
// timers, and to tell the progress thread to stand back) one call in this many.
constexpr std::uint32_t kClockEvery = 8;
// A consumer that made no progress() call for this long has gone quiet (consumer_quiet); the
// progress thread stands back at least this long at once (stand_back).
constexpr std::chrono::microseconds kQuiet{10};
constexpr std::chrono::microseconds kMinStep{20};
}  // namespace

void Engine::start(Pollable& p) {
  p_ = &p;
  thread_ = std::thread([this] {
    netdev::block_async_signals();  // (the application's signals are for its own threads)
    run();
  });
}

void Engine::stop() {
  if (!thread_.joinable()) return;
  stop_ = true;
  nd_.wake();
  thread_.join();
}

std::chrono::microseconds Engine::next_wait() {
  std::lock_guard lk(mu_);
  return p_->next_wait();
}

// Stands back for a consumer that announced a drive (`left` of it remains), for a step; true
// while the consumer still drives then. A consumer that polls its CQ and then spins on its own
// memory (perftest's ib_write_lat waits in its buffer for the peer's Write) announces a drive
// too, but drives nothing while it waits: standing back all of kConsumerPollGrace held each of
// its round trips ~2 ms. So the step shrinks (to kMinStep) each time the thread finds the
// consumer gone quiet, which it then serves, and grows back (to kConsumerPollGrace) while it
// finds it driving: each wake-up of this thread preempts a consumer that spins on two cores.
bool Engine::stand_back(Clock::duration left) {
  std::this_thread::sleep_for(std::min(left, step_));
  if (driver_.load(std::memory_order_relaxed) || !consumer_quiet()) {
    step_ = std::min<Clock::duration>(step_ * 2, kConsumerPollGrace);
    return true;
  }
  step_ = std::max<Clock::duration>(step_ / 2, kMinStep);
  return false;
}

// Whether the consumer made no progress() call in the next kQuiet (and does not block in
// wait_progress). Counting calls costs the consumer nothing; reading the clock on each would.
bool Engine::consumer_quiet() {
  const std::uint32_t calls = progress_calls_.load(std::memory_order_relaxed);
  std::this_thread::sleep_for(kQuiet);
  return progress_calls_.load(std::memory_order_relaxed) == calls && !driver_.load(std::memory_order_relaxed);
}

void Engine::run() {
  while (!stop_) {
    if (!busy_poll_) {
      const auto until =
          Clock::time_point(std::chrono::nanoseconds(consumer_until_ns_.load(std::memory_order_relaxed)));
      const auto now = Clock::now();
      // (Work due now, as an ACK held for a round, is done first: a consumer that spins on its
      // own memory runs no round that would send it.)
      if (now < until && next_wait().count() > 0 && stand_back(until - now)) continue;
      // The netdev holds one wake token, taken by whichever thread returns from wait_rx first.
      // A consumer may have become the driver while this thread was already blocked here: what
      // woke this thread may have been a wake() meant for that consumer (its event came from
      // another thread, its CNO or EVD is being freed), so it is passed on, or the consumer
      // would sleep until a frame or its timeout. (A wake() before the consumer blocked is seen
      // by wait_progress through wakes_seen.)
      thread_waits_.store(true);  // (before next_wait looks: wake_if_due)
      nd_.wait_rx(next_wait());
      thread_waits_.store(false, std::memory_order_relaxed);
      if (driver_.load()) nd_.wake();
    }
    std::lock_guard lk(mu_);
    p_->poll(Clock::now());
  }
}

bool Engine::wait_progress(std::chrono::microseconds max, std::uint64_t wakes_seen) {
  bool expected = false;
  if (!driver_.compare_exchange_strong(expected, true)) return false;  // seq_cst, as wakes_
  auto now = Clock::now();
  raise_consumer_until(now + max);  // the progress thread stands back meanwhile
  // A wake() after the caller looked: its token may be gone to the progress thread (which passes
  // on only what wakes it after this thread became the driver). Run the round without blocking.
  if (wakes_.load() == wakes_seen && !spin_before_wait(now, max, wakes_seen)) {
    // (next_wait takes the device lock, and with it posts whose completions may be what this
    // thread waits for: raised_here)
    const auto wait = std::min(max, next_wait());
    if (wakes_.load() == wakes_seen) nd_.wait_rx(wait);
  }
  {
    std::lock_guard lk(mu_);
    now = Clock::now();
    p_->poll(now);
    wake_if_due();
  }
  // Back to the progress thread unless the consumer comes back soon (as after a busy poll). It
  // counts as a call (consumer_quiet): a consumer that waits again at once (qperf's rc_lat, in
  // ibv_get_cq_event) is not gone quiet, and a thread blocked in the netdev beside it would take
  // its frames and hand the event over through the pipe.
  progress_calls_.fetch_add(1, std::memory_order_relaxed);
  consumer_until_ns_.store(ns_of(now + kConsumerPollGrace), std::memory_order_relaxed);
  driver_.store(false, std::memory_order_release);
  return true;
}

// A thread that sleeps in the kernel pays its wake-up when the frame comes: 20-40 us when its
// core went idle on a virtual machine (qperf's tcp_lat takes ~85 us a round trip on such a host,
// where the same ping-pong spinning takes ~8). So the waiter first runs rounds itself for up to
// wait_spin_, and sleeps only when nothing came: a reply within that pays no wake-up, a long
// wait costs wait_spin_ of CPU once. True when it need not sleep: frames arrived (and were
// handled), a wake() came, or a signal is pending. Signals are held off meanwhile and looked
// for after: a consumer may count on a blocking wait's EINTR (qperf ends a test with SIGALRM),
// and one handled during the spin would interrupt nothing.
bool Engine::spin_before_wait(Clock::time_point start, std::chrono::microseconds max, std::uint64_t wakes_seen) {
  const auto spin = std::min(max, wait_spin_);
  if (spin.count() <= 0 || next_wait().count() == 0) return false;
  sigset_t all, old;
  ::sigfillset(&all);
  for (const int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS}) ::sigdelset(&all, s);  // (a fault's own)
  ::pthread_sigmask(SIG_BLOCK, &all, &old);
  const auto until = start + spin;
  bool done = false;
  for (auto now = start; !done && now < until; now = Clock::now()) {
    std::unique_lock lk(mu_, std::try_to_lock);
    if (lk.owns_lock()) done = p_->poll(now) > 0;
    done = done || wakes_.load(std::memory_order_relaxed) != wakes_seen;
  }
  sigset_t pending;
  ::sigpending(&pending);
  bool signalled = false;
  for (int s = 1; s < NSIG && !signalled; ++s)
    signalled = ::sigismember(&pending, s) == 1 && ::sigismember(&old, s) == 0;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);  // (a pending signal is handled here)
  if (signalled) netdev::note_wait_interrupted();
  return done || signalled;
}

// `now` is read only every kClockEvery calls, since each read costs on the path that detects an
// arriving frame (two reads per empty poll were 5 % of a spinning ping-pong's time). A receive
// round reads it once when something arrived; timers run when the time is known.
bool Engine::progress(std::chrono::microseconds drive_for) {
  std::optional<Clock::time_point> now;
  if (progress_calls_.fetch_add(1, std::memory_order_relaxed) % kClockEvery == 0) {
    now = Clock::now();
    raise_consumer_until(*now + drive_for);
  }
  std::unique_lock lk(mu_, std::try_to_lock);
  if (!lk.owns_lock()) return true;
  const bool got = p_->poll(now) > 0;
  wake_if_due();
  return got;
}

// A consumer's round can leave work due at once (an ACK held for the consumer's reply) while
// the progress thread sleeps in the netdev with a timeout it chose before: if the consumer then
// stops polling, nothing else would run the next round until a frame came (a peer that waits
// for that ACK sends none until its ACK timeout). Under the device lock: the thread's next_wait
// takes it after raising thread_waits_, so one of the two sees the other.
void Engine::wake_if_due() {
  if (thread_waits_.load() && p_->next_wait().count() == 0) nd_.wake();
}

bool Engine::defers_posts() const {
  if (busy_poll_ || driver_.load()) return false;
  const std::int64_t now = ns_of(Clock::now()), until = consumer_until_ns_.load(std::memory_order_relaxed);
  return now < until && until - now <= std::chrono::nanoseconds(kConsumerPollGrace).count();
}

void Engine::consumer_returns() {
  raise_consumer_until(Clock::now() + kConsumerPollGrace);
}

bool Engine::consumer_polling() const {
  return ns_of(Clock::now()) < consumer_until_ns_.load(std::memory_order_relaxed);
}

}  // namespace softrnic::engine
