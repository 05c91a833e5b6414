// The DAT provider's objects. Every object starts with the DAT_PROVIDER pointer (libdat2
// dispatches through it), then its kind; handles are checked against a registry of live objects
// before use, so NULL, stale, freed and wrong-type handles get an error instead of a crash.
//
// Locking: api_mutex() serialises the provider's calls (released while a call blocks): held
// exclusive by every call that creates, changes or frees objects, and shared by the data path
// (dat_ep_post_*, dat_evd_dequeue, the entry of dat_evd_wait), which only reads the objects it
// names under it, and changes only what has a lock of its own (an EVD's mutex, the device, which
// is thread-safe): threads that post and poll at once do not wait for each other here. Callbacks
// from the soft RNIC's progress thread touch only an EVD's or CNO's own mutex and atomics.
#pragma once

#include <dat2/udat.h>
// after udat.h: it declares DAT_PROVIDER for user-space providers
#include <dat2/dat_registry.h>
#include <netinet/in.h>

// The DAT IB extensions (immediate data, atomics): after udat.h and netinet/in.h (its types).
#include <dat2/dat_ib_extensions.h>

#include <array>
#include <atomic>
#include <boost/container/small_vector.hpp>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "softrnic/info.hpp"
#include "softrnic/ring.hpp"
#include "softrnic/rnic.hpp"

namespace softrnic::dat {

// A work request's local buffers as the provider collects them: on the stack for the usual few.
using SgeList = boost::container::small_vector<Sge, 8>;

enum class Kind : std::uint8_t { ia, pz, lmr, evd, cno, ep, psp, cr, srq, rsp, rmr };

struct Ia;

struct Obj {
  DAT_PROVIDER* provider = nullptr;  // must stay first
  Kind kind;
  Ia* ia = nullptr;
  DAT_CONTEXT context{};
  explicit Obj(Kind k) : kind(k) {}
};

constexpr DAT_RETURN err(DAT_RETURN type, DAT_RETURN subtype = 0) {
  return DAT_CLASS_ERROR | type | subtype;
}
DAT_RETURN not_implemented();

// A query's parameter mask as its bits. A consumer in C may pass any value in an enum-typed mask;
// in C++ a load of an enum holding a value outside its range is undefined, so the bits are read
// through memcpy, never as the enum.
template <typename M>
std::uint64_t mask_bits(const M& m) {
  if constexpr (std::is_enum_v<M>) {
    std::underlying_type_t<M> raw;
    static_assert(sizeof raw == sizeof m);
    std::memcpy(&raw, &m, sizeof raw);
    return static_cast<std::uint64_t>(raw);
  } else {
    return static_cast<std::uint64_t>(m);
  }
}
// dat_*_query(3DAT): a mask with bits outside the object's *_FIELD_ALL is DAT_INVALID_PARAMETER,
// its subtype naming the mask's argument.
template <typename M>
bool mask_outside(const M& m, std::uint64_t all) {
  return (mask_bits(m) & ~all) != 0;
}
std::shared_mutex& api_mutex();

// What a failed soft_rnic call was about, for the DAT subtype: the resource that ran out
// (DAT_RESOURCE_*), the argument an invalid parameter names (DAT_INVALID_ARG*), the subtype of an
// invalid state and of a protection violation. Zero: no subtype.
struct StatusDetail {
  DAT_RETURN resource = 0;
  DAT_RETURN arg = 0;
  DAT_RETURN state = 0;
  DAT_RETURN protection = 0;
};
// The one map from soft_rnic's API status to DAT's return codes.
DAT_RETURN to_dat(Status s, StatusDetail d = {});

// ---- registry ----
// Registers a new object (its memory from make<T>) as live.
void register_obj(Obj* o);
// The live object `h`, of any kind, or nullptr.
Obj* find_live(const void* h);
// True when `h` is a live object of kind `k`.
bool is_live(const void* h, Kind k);
// Live objects of one IA, for abrupt close.
std::vector<Obj*> children_of(const Ia* ia);

template <typename T, typename... A>
T* make(Ia* ia, DAT_PROVIDER* prov, A&&... args) {
  void* mem = ::operator new(sizeof(T));
  T* t = new (mem) T(std::forward<A>(args)...);
  t->provider = prov;
  t->ia = ia;
  register_obj(t);
  return t;
}
// Unregisters and destroys `o`; its memory is kept (quarantined) a while with the provider
// pointer intact, so a stale handle still dispatches to us and is refused.
void retire(Obj* o, void (*destroy)(Obj*));
template <typename T>
void destroy(T* t) {
  retire(t, [](Obj* o) { static_cast<T*>(o)->~T(); });
}

template <typename T>
T* get(const void* h, Kind k) {
  return is_live(h, k) ? static_cast<T*>(const_cast<Obj*>(static_cast<const Obj*>(h))) : nullptr;
}

// ---- objects ----
struct Cno;
struct Evd;

struct Ia : Obj {
  Ia() : Obj(Kind::ia) {}
  std::string name;
  std::unique_ptr<Device> dev;
  std::unique_ptr<info::Publisher> publisher;  // softrnic_info's window (before dev goes)
  sockaddr_in addr{};
  std::uint16_t base_port = 0;  // where a remote address with port 0 is sent
  // dat_ia_query's provider-specific attributes (their strings live here): DAT_IB_TRANSPORT_MTU
  // is this IA's link's, as siw and rxe report theirs (the largest IB MTU the interface's MTU
  // holds: 1024 on a 1500-byte Ethernet link), so consumers that size buffers by it (dtestsrq)
  // agree with a Linux peer on the same link.
  std::string transport_mtu;
  std::string address;  // SOFTRNIC_ADDRESS: the IA's ip:port, as its log lines name it
  std::vector<DAT_NAMED_ATTR> provider_attrs;
  // Signaled RMR binds in flight: the bind completion's wr_id -> the RMR and the cookie.
  std::mutex bind_mu;
  std::unordered_map<std::uint64_t, std::pair<void*, DAT_RMR_COOKIE>> binds;
  std::uint64_t next_bind = 1;
  std::atomic<Evd*> async_evd{nullptr};  // read by callbacks from the progress thread
  bool own_async_evd = false;
};

struct Pz : Obj {
  Pz() : Obj(Kind::pz) {}
  Pd* pd = nullptr;
  std::atomic<int> users{0};  // LMRs and EPs
};

struct Lmr : Obj {
  Lmr() : Obj(Kind::lmr) {}
  Pz* pz = nullptr;
  Mr* mr = nullptr;
  DAT_LMR_PARAM param{};
  char shared_id[DAT_LMR_COOKIE_SIZE] = {};  // DAT_MEM_TYPE_SHARED_VIRTUAL: the region's id
};

struct Cno : Obj {
  explicit Cno(std::unique_ptr<CompletionChannel> c) : Obj(Kind::cno), chan(std::move(c)) {}
  std::mutex mu;
  std::unique_ptr<CompletionChannel> chan;  // where dat_cno_wait waits (the device's engine)
  bool triggered = false;
  Evd* trigger_evd = nullptr;
  int waiters = 0;
  bool dead = false;
  DAT_OS_WAIT_PROXY_AGENT agent{};  // called on every trigger (guarded by mu)
  int fd = -1;                      // dat_cno_fd_create: an eventfd readable while the CNO is triggered
  std::atomic<int> evd_refs{0};
  void trigger(Evd* e);
  // Takes the trigger (caller holds mu): the EVD that triggered, or nullptr.
  Evd* take();
};

struct Evd : Obj {
  explicit Evd(std::unique_ptr<CompletionChannel> c) : Obj(Kind::evd), chan(std::move(c)) {}
  DAT_EVD_FLAGS flags{};
  DAT_COUNT qlen = 0;
  Cq* cq = nullptr;  // DTO EVDs
  std::atomic<Cno*> cno{nullptr};
  std::mutex mu;
  std::unique_ptr<CompletionChannel> chan;  // where dat_evd_wait waits (the device's engine)
  // Non-DTO events, and DTO events drained from the CQ; `srq` names the SRQ whose buffer a
  // receive completion used, so taking the event off counts as reaping it.
  struct Queued {
    DAT_EVENT ev;
    softrnic::Srq* srq = nullptr;
  };
  Ring<Queued> q;
  // Where drain() takes completions off the CQ (under mu): made once, not per poll (64 Wc
  // constructed per dat_evd_dequeue were ~3.5 KB of stores on every spin of a polling consumer).
  std::array<Wc, 32> wc_scratch;
  std::atomic<std::size_t> queued{0};  // q.size(), stored under mu after each change: read without it
  std::atomic<bool> waiter{false};     // written under mu
  bool dead = false;
  bool enabled = true;
  bool waitable = true;
  std::atomic<int> ep_refs{0};
  std::atomic<std::uint64_t> overflows{0};
  bool overflow_reported = false, overflow_pending = false;  // under mu: one async event per overflow
  // EPs whose completion configuration (unsignalled / solicited wait) makes threshold 1 mandatory.
  std::atomic<int> notify_refs{0};

  // Queues a non-DTO event (any thread) and wakes a waiter or triggers the CNO.
  void post(const DAT_EVENT& ev);
  // Wakes a waiter or triggers the CNO (after the CQ gained an entry).
  void signal();
  // Wakes the waiter, wherever it waits (on the channel, or in the netdev while it drives the engine).
  void wake_waiter();
};

struct SrqObj : Obj {
  SrqObj() : Obj(Kind::srq) {}
  Pz* pz = nullptr;
  Srq* srq = nullptr;
  DAT_COUNT max_recv_iov = 0;
  std::atomic<int> ep_refs{0};
};

struct Ep : Obj {
  Ep() : Obj(Kind::ep) {}
  Pz* pz = nullptr;
  SrqObj* srq = nullptr;
  Evd* recv_evd = nullptr;
  Evd* req_evd = nullptr;
  Evd* conn_evd = nullptr;
  DAT_EP_ATTR attr{};
  Qp* qp = nullptr;
  std::atomic<DAT_EP_STATE> state{DAT_EP_STATE_UNCONNECTED};
  sockaddr_in remote{};
  DAT_CONN_QUAL remote_qual = 0;
  // dat_ep_query's port qualifiers, as OFA dapl's cma provider reports them: the active side's
  // remote_port_qual is the conn_qual it connected to, its local_port_qual its own port (the
  // QP's: a TCP connection's ephemeral port); the passive side's local_port_qual is the conn_qual
  // it listened on, its remote_port_qual the peer's port.
  DAT_CONN_QUAL local_qual = 0;
  bool passive = false;
  std::vector<std::uint8_t> conn_private;        // private data of the last connection event
  bool notify_recv = false, notify_req = false;  // unsignalled / solicited-wait configurations
  int rsp_refs = 0;                              // RSPs reserving it
  bool provider_created = false;                 // made for a request on a DAT_PSP_PROVIDER_FLAG PSP
};

struct Psp : Obj {
  Psp() : Obj(Kind::psp) {}
  DAT_CONN_QUAL qual = 0;
  Evd* evd = nullptr;
  DAT_PSP_FLAGS flags{};
};

struct Rsp : Obj {
  Rsp() : Obj(Kind::rsp) {}
  DAT_CONN_QUAL qual = 0;
  Evd* evd = nullptr;
  Ep* ep = nullptr;
};

// A memory window (RMR): bound to part of an LMR through an EP, it grants the peer remote access
// under its own rmr_context; a Send with Invalidate from the peer unbinds it.
struct Rmr : Obj {
  Rmr() : Obj(Kind::rmr) {}
  Pz* pz = nullptr;
  Mr* mw = nullptr;
  DAT_RMR_PARAM param{};
};

struct Cr : Obj {
  Cr() : Obj(Kind::cr) {}
  ConnRequest* req = nullptr;
  Ep* local_ep = nullptr;    // the RSP's EP, or the EP the provider made for a request on its PSP
  bool provider_ep = false;  // local_ep was made by the provider for this request
  DAT_CONN_QUAL qual = 0;
  sockaddr_in remote{};
  std::vector<std::uint8_t> private_data;  // writable: consumers may edit it in place
};

inline constexpr std::uint32_t kNoWatermarkValue = ~std::uint32_t{0};
inline constexpr DAT_COUNT kMaxEvds = 4096;  // per IA (dat_ia_query max_evds)
inline constexpr DAT_COUNT kMaxEvdQlen = 65536;

// The IA handle as the consumer knows it (libdat2's small index).
DAT_IA_HANDLE consumer_ia_handle(Ia* ia);

}  // namespace softrnic::dat
