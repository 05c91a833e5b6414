// A first-in first-out queue that keeps its storage. std::deque frees a block when its front
// passes one and allocates a block when its back needs one, so a queue that moves along (frames in
// flight, completions, events) cost a malloc and a free every few elements on the per-message
// path. Ring grows by doubling and never shrinks; element references stay valid until the
// element is popped or the ring grows (so no reference may be held across a push).
#pragma once

#include <cstddef>
#include <iterator>
#include <optional>
#include <utility>
#include <vector>

namespace softrnic {

template <class T>
class Ring {
 public:
  template <class R, class V>
  class Iter {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = V*;
    using reference = V&;
    Iter() = default;
    Iter(R* r, std::size_t i) : r_(r), i_(i) {}
    V& operator*() const { return (*r_)[i_]; }
    V* operator->() const { return &(*r_)[i_]; }
    Iter& operator++() {
      ++i_;
      return *this;
    }
    Iter operator++(int) {
      Iter t = *this;
      ++i_;
      return t;
    }
    friend bool operator==(const Iter& a, const Iter& b) { return a.r_ == b.r_ && a.i_ == b.i_; }

   private:
    R* r_ = nullptr;
    std::size_t i_ = 0;
  };
  using iterator = Iter<Ring, T>;
  using const_iterator = Iter<const Ring, const T>;

  Ring() = default;
  Ring(Ring&& o) noexcept : slots_(std::move(o.slots_)), head_(std::exchange(o.head_, 0)), n_(std::exchange(o.n_, 0)) {}
  Ring& operator=(Ring&& o) noexcept {
    slots_ = std::move(o.slots_);
    head_ = std::exchange(o.head_, 0);
    n_ = std::exchange(o.n_, 0);
    return *this;
  }

  bool empty() const { return n_ == 0; }
  std::size_t size() const { return n_; }
  T& operator[](std::size_t i) { return *slots_[slot(i)]; }
  const T& operator[](std::size_t i) const { return *slots_[slot(i)]; }
  T& front() { return (*this)[0]; }
  const T& front() const { return (*this)[0]; }
  T& back() { return (*this)[n_ - 1]; }

  template <class... A>
  T& emplace_back(A&&... a) {
    if (n_ == slots_.size()) grow();
    auto& s = slots_[slot(n_)];
    s.emplace(std::forward<A>(a)...);
    ++n_;
    return *s;
  }
  void push_back(const T& v) { emplace_back(v); }
  void push_back(T&& v) { emplace_back(std::move(v)); }
  void pop_front() {
    slots_[head_].reset();
    head_ = slot(1);
    --n_;
  }
  void clear() {
    while (n_) pop_front();
    head_ = 0;
  }

  iterator begin() { return {this, 0}; }
  iterator end() { return {this, n_}; }
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, n_}; }

 private:
  std::size_t slot(std::size_t i) const { return (head_ + i) & (slots_.size() - 1); }
  void grow() {
    std::vector<std::optional<T>> s(slots_.empty() ? 8 : slots_.size() * 2);  // a power of two
    for (std::size_t i = 0; i < n_; ++i) s[i].emplace(std::move(*slots_[slot(i)]));
    slots_.swap(s);
    head_ = 0;
  }

  std::vector<std::optional<T>> slots_;
  std::size_t head_ = 0, n_ = 0;
};

}  // namespace softrnic
