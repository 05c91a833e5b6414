#include <array>
#include <atomic>
#include <deque>
#include <unordered_map>

#include "objects.hpp"

extern "C" DAT_RETURN dats_get_ia_handle(DAT_IA_HANDLE handle, DAT_IA_HANDLE* ia_handle_p);

namespace softrnic::dat {
namespace {

constexpr std::size_t kQuarantine = 4096;

struct Registry {
  std::mutex mu;
  std::unordered_map<const void*, Obj*> live;
  std::deque<void*> quarantine;
  // Bumped (under mu) before each retire: a handle found live while it had a value is live as
  // long as it keeps it (only retire takes a handle out of `live`).
  std::atomic<std::uint64_t> retires{0};
};

// The last handles this thread found live, with the retire count of then: a consumer that polls
// or posts on the same few handles checks them without the registry lock and hash lookup.
struct LiveCache {
  struct Entry {
    const void* h = nullptr;
    Kind kind{};
    std::uint64_t retires = 0;
  };
  std::array<Entry, 4> e{};
  unsigned next = 0;
};
thread_local LiveCache live_cache;

Registry& reg() {
  static Registry* r = new Registry;  // never destroyed: callbacks may run during exit
  return *r;
}

}  // namespace

DAT_RETURN not_implemented() {
  return err(DAT_NOT_IMPLEMENTED);
}

DAT_RETURN to_dat(Status s, StatusDetail d) {
  switch (s) {
    case Status::ok: return DAT_SUCCESS;
    case Status::invalid_param:
    case Status::not_found: return err(DAT_INVALID_PARAMETER, d.arg);
    case Status::invalid_state:
    case Status::in_use: return err(DAT_INVALID_STATE, d.state);
    case Status::insufficient_resources: return err(DAT_INSUFFICIENT_RESOURCES, d.resource);
    case Status::protection_violation: return err(DAT_PROTECTION_VIOLATION, d.protection);
    case Status::length_error: return err(DAT_LENGTH_ERROR);
    case Status::privileges_violation: return err(DAT_PRIVILEGES_VIOLATION);
  }
  return err(DAT_INTERNAL_ERROR);
}

std::shared_mutex& api_mutex() {
  static std::shared_mutex* m = new std::shared_mutex;
  return *m;
}

void register_obj(Obj* o) {
  std::lock_guard lk(reg().mu);
  reg().live[o] = o;
}

Obj* find_live(const void* h) {
  if (!h) return nullptr;
  std::lock_guard lk(reg().mu);
  auto it = reg().live.find(h);
  return it == reg().live.end() ? nullptr : it->second;
}

bool is_live(const void* h, Kind k) {
  if (!h) return false;
  Registry& r = reg();
  LiveCache& c = live_cache;
  const std::uint64_t now = r.retires.load(std::memory_order_acquire);
  for (const auto& e : c.e)
    if (e.h == h && e.kind == k && e.retires == now) return true;
  std::lock_guard lk(r.mu);
  auto it = r.live.find(h);
  if (it == r.live.end() || it->second->kind != k) return false;
  c.e[c.next++ % c.e.size()] = {h, k, r.retires.load(std::memory_order_relaxed)};
  return true;
}

std::vector<Obj*> children_of(const Ia* ia) {
  std::lock_guard lk(reg().mu);
  std::vector<Obj*> out;
  for (auto& [h, o] : reg().live)
    if (o->ia == ia && o != ia) out.push_back(o);
  return out;
}

void retire(Obj* o, void (*destroy_fn)(Obj*)) {
  DAT_PROVIDER* prov = o->provider;
  {
    std::lock_guard lk(reg().mu);
    reg().retires.fetch_add(1, std::memory_order_release);  // before the erase: see Registry
    reg().live.erase(o);
  }
  destroy_fn(o);
  // Keep the memory with the provider pointer in its first word for a while.
  *reinterpret_cast<DAT_PROVIDER**>(o) = prov;
  void* old = nullptr;
  {
    std::lock_guard lk(reg().mu);
    reg().quarantine.push_back(o);
    if (reg().quarantine.size() > kQuarantine) {
      old = reg().quarantine.front();
      reg().quarantine.pop_front();
    }
  }
  ::operator delete(old);
}

DAT_IA_HANDLE consumer_ia_handle(Ia* ia) {
  DAT_IA_HANDLE h = nullptr;
  if (dats_get_ia_handle(ia, &h) != DAT_SUCCESS) return ia;
  return h;
}

}  // namespace softrnic::dat
