// A posted request's scatter/gather list, shared by its send-queue entry and the transport's
// frames until every one of them is done with it. Blocks come from the device's SglPool and are
// counted without atomics: the device lock guards every holder. Posting takes no allocation once
// the pool is warm (a shared_ptr<vector> cost two allocations, two frees and atomic counts per post).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "softrnic/rnic.hpp"

namespace softrnic {

class SglPool;
struct SglBlock {
  std::vector<Sge> sges;  // keeps its capacity when recycled
  std::uint32_t refs = 0;
  SglBlock* next_free = nullptr;
  SglPool* pool = nullptr;
};

class SglRef {
 public:
  SglRef() = default;
  explicit SglRef(SglBlock* b) : b_(b) {
    if (b_) ++b_->refs;
  }
  SglRef(const SglRef& o) : b_(o.b_) {
    if (b_) ++b_->refs;
  }
  SglRef(SglRef&& o) noexcept : b_(std::exchange(o.b_, nullptr)) {}
  SglRef& operator=(SglRef o) noexcept {
    std::swap(b_, o.b_);
    return *this;
  }
  inline ~SglRef();
  explicit operator bool() const { return b_ != nullptr; }
  const std::vector<Sge>& operator*() const { return b_->sges; }
  const std::vector<Sge>* operator->() const { return &b_->sges; }

 private:
  SglBlock* b_ = nullptr;
};

class SglPool {
 public:
  SglPool() = default;
  SglPool(const SglPool&) = delete;
  SglPool& operator=(const SglPool&) = delete;
  ~SglPool() {
    while (free_) delete std::exchange(free_, free_->next_free);
  }
  SglRef make(std::span<const Sge> sges) {
    SglBlock* b = free_;
    if (b) {
      free_ = b->next_free;
      --nfree_;
    } else {
      b = new SglBlock;
      b->pool = this;
    }
    b->sges.assign(sges.begin(), sges.end());
    return SglRef(b);
  }
  void put(SglBlock* b) {
    if (nfree_ >= kKeep) {
      delete b;
      return;
    }
    b->next_free = free_;
    free_ = b;
    ++nfree_;
  }

 private:
  static constexpr std::size_t kKeep = 4096;  // blocks kept for reuse; beyond, freed
  SglBlock* free_ = nullptr;
  std::size_t nfree_ = 0;
};

inline SglRef::~SglRef() {
  if (b_ && --b_->refs == 0) b_->pool->put(b_);
}

}  // namespace softrnic
