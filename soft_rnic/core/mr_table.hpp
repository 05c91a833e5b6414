// Protection zones and memory regions: STags with a random key, access rights, bounds, PZ match.
// An STag is index << 16 | key: the index names the table slot (1..65535), the 16-bit key is
// drawn at random at each registration and each window bind (never the slot's previous key), so
// an STag cannot be predicted from others (docs/security.md).
// Not thread-safe: the device lock guards it.
#pragma once

#include <pthread.h>

#include <cstdint>
#include <vector>

#include "softrnic/rnic.hpp"

namespace softrnic {

struct Pd {
  std::uint32_t id = 0;
  std::uint32_t users = 0;  // MRs and QPs on this PD
};

// A memory region, or a memory window (window = true): a window grants remote access to part of
// a region once bound, under its own STag; each bind gives it a new key.
struct Mr {
  std::uint32_t stag = 0;
  Pd* pd = nullptr;
  std::uint64_t addr = 0;
  std::uint64_t length = 0;
  Access access = Access::none;
  bool window = false;
  Mr* parent = nullptr;             // window: the region it is bound to (nullptr: unbound)
  std::uint32_t bound_windows = 0;  // region: windows bound to it (it cannot be freed meanwhile)
};

enum class MrCheck : std::uint8_t {
  ok,
  invalid_stag,   // no such index, or freed
  key_mismatch,   // index valid, key byte stale
  pd_mismatch,    // not in the QP's protection zone
  out_of_bounds,  // [addr, addr+len) not inside the region (or wraps)
  access_denied,  // the region does not grant the access asked for
};
std::string_view to_string(MrCheck c);

// The MR table's reader-writer lock (Ctx::mrs_mu): posts that check their regions without the
// device lock read under it; registration, deregistration, binds and invalidation write. It
// prefers writers: a writer waits holding the device lock, and posts that keep reading must not
// hold it (and the engine) up (glibc's default rwlock lets new readers in ahead of a waiting
// writer). Lockable and SharedLockable.
class MrLock {
 public:
  MrLock() {
    pthread_rwlockattr_t a;
    pthread_rwlockattr_init(&a);
    pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&l_, &a);
    pthread_rwlockattr_destroy(&a);
  }
  ~MrLock() { pthread_rwlock_destroy(&l_); }
  MrLock(const MrLock&) = delete;
  MrLock& operator=(const MrLock&) = delete;
  void lock() { pthread_rwlock_wrlock(&l_); }
  void unlock() { pthread_rwlock_unlock(&l_); }
  void lock_shared() { pthread_rwlock_rdlock(&l_); }
  void unlock_shared() { pthread_rwlock_unlock(&l_); }

 private:
  pthread_rwlock_t l_;
};

class MrTable {
 public:
  explicit MrTable(std::uint32_t max_mr) : max_(max_mr) {}
  ~MrTable() { clear(); }
  MrTable(const MrTable&) = delete;
  MrTable& operator=(const MrTable&) = delete;
  // Frees every region.
  void clear();
  Status reg(Pd* pd, std::uint64_t addr, std::uint64_t length, Access access, Mr*& out);
  Status dereg(Mr* mr);  // in_use for a region with bound windows
  Status alloc_window(Pd* pd, Mr*& out);
  // Binds `mw` to [addr, addr+len) of `mr` with `access` (remote rights), or unbinds it (len 0);
  // either way the window gets a new STag (key byte).
  Status bind_window(Mr* mw, Mr* mr, std::uint64_t addr, std::uint64_t len, Access access);
  // Send with Invalidate: unbinds the window `stag` names in `pd`; false if it names none.
  bool invalidate(std::uint32_t stag, const Pd* pd);
  // Looks up `stag` and checks it for an access of `len` bytes at `addr` from `pd`.
  MrCheck check(std::uint32_t stag, const Pd* pd, std::uint64_t addr, std::uint64_t len, Access need,
                Mr** found = nullptr) const;
  std::size_t live() const { return live_; }

  static constexpr unsigned kKeyBits = 16;
  static constexpr std::uint32_t kKeyMask = (1u << kKeyBits) - 1;
  static constexpr std::uint32_t kMaxIndex = (1u << (32 - kKeyBits)) - 1;

 private:
  // Puts a copy of `proto` in a free slot under a fresh STag.
  Status add(Mr proto, Mr*& out);

  struct Slot {
    Mr* mr = nullptr;
    std::uint16_t key = 0;
  };
  std::uint32_t max_;
  std::vector<Slot> slots_{Slot{}};  // index 0 unused: STag 0 is never valid
  std::vector<std::uint32_t> free_;
  std::size_t live_ = 0;
};

}  // namespace softrnic
