// The device lock, with a hand-off for work left by threads that did not take it.
//
// A post does not wait for the device lock (device.cpp, "Posting"): it leaves its work request
// on its QP's post ring, marks the work pending, and tries the lock. If the lock is free it takes
// it and the work is taken in at once; if another thread holds it (the progress engine in its
// round, a consumer driving the engine, any verb), the post returns and the holder takes the
// work in when it lets go. So:
// - lock() and try_lock() take pending work in before they return: whoever holds the lock sees
//   every post that happened before it was taken (a verb that counts posted buffers after a post
//   in the same thread, the engine before its round). (A post in another thread that raced the
//   lock is taken in by the holder's unlock() at the latest: below.)
// - unlock() looks for work once the lock is free, and takes the lock again for it if so.
//
// Why no post is left behind: a poster does  pending = true; fence; try_lock  and a holder does
// unlock; fence; read pending.  With both fences seq_cst, either the poster's try_lock finds the
// lock free (and the poster takes the work in itself), or the holder's read finds pending set
// (the store-buffering outcome in which both miss is forbidden). If the poster's try_lock found
// it held by a third thread that took it after the holder let go, that thread's own unlock does
// the same, as does this thread if it took the lock meanwhile (its own fence comes after the
// poster's in the fences' total order, since the poster saw the lock still held). (glibc's mutex lock and unlock are
// locked read-modify-writes on x86, full barriers themselves; the fences make the argument in the C++ model.)
#pragma once

#include <atomic>
#include <mutex>

namespace softrnic::engine {

class DeviceLock {
 public:
  // What the holder runs to take pending work in (under the lock).
  class Drain {
   public:
    virtual ~Drain() = default;
    virtual void take_posts() = 0;
  };

  void set_drain(Drain* d) { drain_ = d; }

  void lock() {
    mu_.lock();
    take();
  }
  bool try_lock() {
    if (!mu_.try_lock()) return false;
    take();
    return true;
  }
  void unlock() {
    for (;;) {
      mu_.unlock();
      std::atomic_thread_fence(std::memory_order_seq_cst);
      if (!pending_.load(std::memory_order_relaxed) || !mu_.try_lock()) return;
      take();
    }
  }

  // A poster left work: it is taken in before this returns, or by the lock's holder.
  void posted() {
    pending_.store(true, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!mu_.try_lock()) return;
    take();
    unlock();
  }
  // Whether work waits (the engine's round must not block on the netdev then).
  bool pending() const { return pending_.load(std::memory_order_relaxed); }

 private:
  void take() {
    if (!pending_.load(std::memory_order_relaxed)) return;
    pending_.store(false, std::memory_order_relaxed);
    // (Under the lock: a poster that sets pending again after this either finds the lock held,
    // and unlock() sees it, or takes the lock after it.)
    if (drain_) drain_->take_posts();
  }

  std::mutex mu_;
  std::atomic<bool> pending_{false};
  Drain* drain_ = nullptr;
};

}  // namespace softrnic::engine
