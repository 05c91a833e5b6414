// The device lock, with a hand-off for work left by threads that did not take it.
//
// A post does not wait for the device lock (device.cpp, "Posting"): when another thread holds it,
// the post leaves its work request on its QP's post ring, puts the QP on the device's list of QPs
// with posts (the Drain's, non-empty while any wait), and tries the lock once (posted()). If that
// finds it free the post takes the work in itself; if not, the holder does when it lets go. So:
// - lock() and try_lock() take waiting work in before they return: whoever holds the lock sees
//   the posts that happened before it was taken (the engine before its round); a post in another
//   thread that raced the lock is taken in by the holder's unlock() at the latest (below). (A post
//   to a QP that another thread is putting on the list at that moment rides on that thread's
//   push: it may be taken in just after. So a verb about one QP takes that QP's posts in itself.)
// - unlock() looks for work once the lock is free, and takes the lock again for it if so.
//
// Why no post is left behind: a poster does  (read-modify-write of the list); fence; try_lock
// and a holder does  unlock; fence; read the list.  With both fences seq_cst, either the
// poster's try_lock finds the lock free (and the poster takes the work in itself), or the
// holder's read finds the list non-empty (the store-buffering outcome in which both miss is
// forbidden). If the poster's try_lock found the lock held by a third thread that took it after
// the holder let go, that thread's own unlock does the same. The list is the only flag: its
// read-modify-writes are totally ordered, so a holder that empties it (exchange) either takes a
// post's QP or precedes the post's push, and then its unlock() sees the push.
// Assumptions, true of glibc's mutex: try_lock does not fail spuriously while the lock is free
// (the standard allows it to), and the mutex's own atomics take part in the fences' order
// (its lock and unlock are locked read-modify-writes on x86, full barriers themselves).
#pragma once

#include <atomic>
#include <mutex>

namespace softrnic::engine {

class DeviceLock {
 public:
  // The waiting work: whether any waits (any thread, lock-free), and taking it in (under the
  // lock).
  class Drain {
   public:
    virtual ~Drain() = default;
    virtual bool has_posts() const = 0;
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
      fence();
      if (!pending() || !mu_.try_lock()) return;
      take();
    }
  }

  // A poster has put work on the list (its read-modify-write of it done): it is taken in before
  // this returns, or by the lock's holder.
  void posted() {
    fence();
    if (!mu_.try_lock()) return;
    take();
    unlock();
  }
  // Whether work waits (the engine's round must not block on the netdev then).
  bool pending() const { return drain_ && drain_->has_posts(); }

 private:
  // A seq_cst fence. (ThreadSanitizer does not model fences, and GCC says so with -Wtsan: what
  // they order here is whether a hand-off is seen, a matter of progress TSan does not judge; the
  // requests handed over are published by the rings' and the list's release/acquire, which it
  // checks.)
  static void fence() {
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtsan"
#endif
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  }

  void take() {
    if (pending()) drain_->take_posts();
  }

  std::mutex mu_;
  Drain* drain_ = nullptr;
};

}  // namespace softrnic::engine
