// A single-producer single-consumer ring of fixed capacity (a power of two), the shape of
// rdma-core's rxe queues (providers/rxe/rxe_queue.h): the producer owns the tail index, the
// consumer owns the head index, and each reads the other's with acquire.
//
// Memory-order contract:
// - The producer fills slot(tail) through producer_slot(), then publish() stores tail + 1 with
//   release: everything it wrote to the slot happens-before a consumer that loads that tail
//   (acquire, in consumer_slot()/size()) and reads the slot.
// - The consumer reads slot(head) through consumer_slot(), then consume() stores head + 1 with
//   release: its reads of the slot happen-before the producer's acquire load of head in
//   producer_slot(), so the producer never overwrites a slot being read.
// - "Single" means one thread at a time on each side: callers that may produce (or consume) from
//   several threads serialise each side with a lock of their own, which the other side never
//   takes (Cq: the device lock produces, a poll lock consumes; a QP's post rings: a post lock
//   produces, the device lock consumes).
// Slots are constructed once and reused (a slot's vectors keep their capacity across uses).
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace softrnic {

template <class T>
class SpscRing {
 public:
  explicit SpscRing(std::size_t min_capacity)
      : mask_(std::bit_ceil(min_capacity < 2 ? std::size_t{2} : min_capacity) - 1),
        slots_(std::make_unique<T[]>(mask_ + 1)) {}
  SpscRing(const SpscRing&) = delete;
  SpscRing& operator=(const SpscRing&) = delete;

  std::size_t capacity() const { return mask_ + 1; }

  // Producer: the next free slot, or nullptr when the ring is full.
  T* producer_slot() {
    const std::uint64_t t = tail_.load(std::memory_order_relaxed);  // ours
    if (t - head_cache_ > mask_) {
      head_cache_ = head_.load(std::memory_order_acquire);
      if (t - head_cache_ > mask_) return nullptr;
    }
    return &slots_[t & mask_];
  }
  // Producer: the slot producer_slot() gave is the consumer's now.
  void publish() { tail_.store(tail_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

  // Consumer: the oldest published slot, or nullptr when the ring is empty.
  T* consumer_slot() {
    const std::uint64_t h = head_.load(std::memory_order_relaxed);  // ours
    if (h == tail_cache_) {
      tail_cache_ = tail_.load(std::memory_order_acquire);
      if (h == tail_cache_) return nullptr;
    }
    return &slots_[h & mask_];
  }
  // Consumer: the slot consumer_slot() gave is the producer's again.
  void consume() { head_.store(head_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

  // Either side (or a third thread): how many are published and not consumed, at some moment
  // between the call and its return.
  std::size_t size() const {
    const std::uint64_t h = head_.load(std::memory_order_acquire);
    const std::uint64_t t = tail_.load(std::memory_order_acquire);
    return t > h ? static_cast<std::size_t>(t - h) : 0;
  }
  bool empty() const { return size() == 0; }

 private:
  const std::uint64_t mask_;
  std::unique_ptr<T[]> slots_;
  // Each index on its own cache line with the other side's cached copy of it.
  alignas(64) std::atomic<std::uint64_t> tail_{0};
  std::uint64_t head_cache_ = 0;  // producer's: the consumer's head when last loaded
  alignas(64) std::atomic<std::uint64_t> head_{0};
  std::uint64_t tail_cache_ = 0;  // consumer's: the producer's tail when last loaded
};

}  // namespace softrnic
