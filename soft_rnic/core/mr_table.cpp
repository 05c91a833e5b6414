#include "mr_table.hpp"

#include <sodium.h>

namespace softrnic {
namespace {

// A fresh key for a slot: random (an STag must not be guessable from the ones a consumer has
// seen, ReDMArk), never the slot's previous key (a stale STag must not become valid again), never 0.
std::uint16_t fresh_key(std::uint16_t old) {
  std::uint16_t k;
  do {
    k = static_cast<std::uint16_t>(randombytes_random());
  } while (k == 0 || k == old);
  return k;
}

}  // namespace

std::string_view to_string(MrCheck c) {
  switch (c) {
    case MrCheck::ok: return "ok";
    case MrCheck::invalid_stag: return "invalid STag";
    case MrCheck::key_mismatch: return "STag key mismatch";
    case MrCheck::pd_mismatch: return "STag not in this protection zone";
    case MrCheck::out_of_bounds: return "access outside the region's bounds";
    case MrCheck::access_denied: return "access rights not granted";
  }
  return "?";
}

Status MrTable::add(Mr proto, Mr*& out) {
  if (live_ >= max_) return Status::insufficient_resources;
  std::uint32_t idx;
  if (!free_.empty()) {
    idx = free_.back();
    free_.pop_back();
  } else {
    if (slots_.size() > kMaxIndex) return Status::insufficient_resources;
    idx = static_cast<std::uint32_t>(slots_.size());
    slots_.push_back({});
  }
  Slot& s = slots_[idx];
  s.key = fresh_key(s.key);
  proto.stag = idx << kKeyBits | s.key;
  s.mr = new Mr(proto);
  proto.pd->users++;
  live_++;
  out = s.mr;
  return Status::ok;
}

Status MrTable::reg(Pd* pd, std::uint64_t addr, std::uint64_t length, Access access, Mr*& out) {
  if (!pd || length == 0 || addr + length < addr) return Status::invalid_param;
  return add(Mr{0, pd, addr, length, access}, out);
}

void MrTable::clear() {
  for (Slot& s : slots_) {
    delete s.mr;
    s.mr = nullptr;
  }
  live_ = 0;
}

Status MrTable::alloc_window(Pd* pd, Mr*& out) {
  if (!pd) return Status::invalid_param;
  Mr w;
  w.pd = pd;
  w.window = true;
  return add(w, out);
}

Status MrTable::bind_window(Mr* mw, Mr* mr, std::uint64_t addr, std::uint64_t len, Access access) {
  if (!mw->window) return Status::invalid_param;
  if (len > 0) {
    if (!mr || mr->window || mr->pd != mw->pd) return Status::protection_violation;
    if (addr < mr->addr || addr + len < addr || addr + len > mr->addr + mr->length) return Status::length_error;
    // A window that lets the peer write needs a region the owner may write.
    if (has(access, Access::remote_write) && !has(mr->access, Access::local_write)) return Status::protection_violation;
  }
  if (mw->parent) mw->parent->bound_windows--;
  const std::uint32_t idx = mw->stag >> kKeyBits;
  Slot& s = slots_[idx];
  s.key = fresh_key(s.key);
  mw->stag = idx << kKeyBits | s.key;
  mw->parent = len > 0 ? mr : nullptr;
  mw->addr = len > 0 ? addr : 0;
  mw->length = len;
  mw->access = len > 0 ? access : Access::none;
  if (mw->parent) mw->parent->bound_windows++;
  return Status::ok;
}

bool MrTable::invalidate(std::uint32_t stag, const Pd* pd) {
  Mr* mw = nullptr;
  const std::uint32_t idx = stag >> kKeyBits;
  if (idx == 0 || idx >= slots_.size() || !(mw = slots_[idx].mr) || !mw->window || mw->stag != stag || mw->pd != pd ||
      !mw->parent)
    return false;
  mw->parent->bound_windows--;
  mw->parent = nullptr;
  mw->length = 0;
  mw->access = Access::none;
  return true;
}

Status MrTable::dereg(Mr* mr) {
  const std::uint32_t idx = mr->stag >> kKeyBits;
  if (idx == 0 || idx >= slots_.size() || slots_[idx].mr != mr) return Status::invalid_param;
  if (mr->bound_windows > 0) return Status::in_use;  // windows still grant access to it
  if (mr->window && mr->parent) mr->parent->bound_windows--;
  slots_[idx].mr = nullptr;
  free_.push_back(idx);
  mr->pd->users--;
  live_--;
  delete mr;
  return Status::ok;
}

MrCheck MrTable::check(std::uint32_t stag, const Pd* pd, std::uint64_t addr, std::uint64_t len, Access need,
                       Mr** found) const {
  const std::uint32_t idx = stag >> kKeyBits;
  if (idx == 0 || idx >= slots_.size()) return MrCheck::invalid_stag;
  const Slot& s = slots_[idx];
  if (!s.mr) return MrCheck::invalid_stag;
  if (s.key != (stag & kKeyMask)) return MrCheck::key_mismatch;
  const Mr& mr = *s.mr;
  // A window serves remote access only, and only while bound.
  if (mr.window && (!mr.parent || !(has(need, Access::remote_read) || has(need, Access::remote_write) ||
                                    has(need, Access::remote_atomic))))
    return MrCheck::invalid_stag;
  if (mr.pd != pd) return MrCheck::pd_mismatch;
  if (addr < mr.addr || addr + len < addr || addr + len > mr.addr + mr.length) return MrCheck::out_of_bounds;
  if (!has(mr.access, need)) return MrCheck::access_denied;
  if (found) *found = s.mr;
  return MrCheck::ok;
}

}  // namespace softrnic
