// Event dispatchers and consumer notification objects.
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "api.hpp"

namespace softrnic::dat {
namespace {

constexpr DAT_COUNT kMaxQlen = kMaxEvdQlen;
constexpr int kAllEvdFlags = DAT_EVD_SOFTWARE_FLAG | DAT_EVD_CR_FLAG | DAT_EVD_DTO_FLAG | DAT_EVD_CONNECTION_FLAG |
                             DAT_EVD_RMR_BIND_FLAG | DAT_EVD_ASYNC_FLAG;

DAT_DTO_COMPLETION_STATUS map_status(WcStatus s) {
  switch (s) {
    case WcStatus::success: return DAT_DTO_SUCCESS;
    case WcStatus::flushed: return DAT_DTO_ERR_FLUSHED;
    case WcStatus::local_length_error: return DAT_DTO_ERR_LOCAL_LENGTH;
    case WcStatus::local_protection_error: return DAT_DTO_ERR_LOCAL_PROTECTION;
    case WcStatus::remote_access_error: return DAT_DTO_ERR_REMOTE_ACCESS;
    case WcStatus::remote_operation_error: return DAT_DTO_ERR_REMOTE_RESPONDER;
    case WcStatus::transport_error: return DAT_DTO_ERR_TRANSPORT;
    case WcStatus::remote_invalid_request: return DAT_DTO_ERR_REMOTE_RESPONDER;
    case WcStatus::rnr_retry_exceeded: return DAT_DTO_ERR_RECEIVER_NOT_READY;
  }
  return DAT_DTO_ERR_TRANSPORT;
}

DAT_DTOS map_op(WcOpcode op) {
  switch (op) {
    case WcOpcode::send: return DAT_DTO_SEND;
    case WcOpcode::rdma_write: return DAT_DTO_RDMA_WRITE;
    case WcOpcode::rdma_read: return DAT_DTO_RDMA_READ;
    case WcOpcode::recv: return DAT_DTO_RECEIVE;
    case WcOpcode::bind: return DAT_DTO_BIND_MW;
    case WcOpcode::rdma_write_imm: return static_cast<DAT_DTOS>(DAT_IB_DTO_RDMA_WRITE_IMMED);
    case WcOpcode::recv_rdma_imm: return static_cast<DAT_DTOS>(DAT_IB_DTO_RECV_IMMED);
    case WcOpcode::cmp_swap: return static_cast<DAT_DTOS>(DAT_IB_DTO_CMP_SWAP);
    case WcOpcode::fetch_add: return static_cast<DAT_DTOS>(DAT_IB_DTO_FETCH_ADD);
  }
  return DAT_DTO_SEND;
}

// Counts an overflow (more events than qlen) and marks it for one async event; re-armed once the
// queue is back within qlen. Caller holds evd.mu.
void note_overflow(Evd& evd) {
  if (evd.q.size() > static_cast<std::size_t>(evd.qlen)) {
    evd.overflows++;
    if (!evd.overflow_reported) evd.overflow_pending = evd.overflow_reported = true;
  } else {
    evd.overflow_reported = false;
  }
}

// Reports a marked overflow on the IA's async EVD (not for the async EVD itself). Caller holds no
// EVD lock.
void report_overflow(Ia* ia, Evd* evd, bool pending) {
  if (pending && ia->async_evd.load() != evd) post_async(ia, DAT_ASYNC_ERROR_EVD_OVERFLOW, evd, DAT_EVD_OVERFLOW_ERROR);
}

// The DAT event of one completion; the SRQ whose buffer it used, if any. Caller holds evd.mu.
softrnic::Srq* to_event(Evd& evd, const Wc& wc, DAT_EVENT& ev) {
  std::memset(&ev, 0, sizeof ev);
  ev.evd_handle = &evd;
  if (wc.opcode == WcOpcode::bind) {
    ev.event_number = DAT_RMR_BIND_COMPLETION_EVENT;
    auto& b = ev.event_data.rmr_completion_event_data;
    b.status = map_status(wc.status);
    std::lock_guard bl(evd.ia->bind_mu);
    if (auto it = evd.ia->binds.find(wc.wr_id); it != evd.ia->binds.end()) {
      b.rmr_handle = it->second.first;
      b.user_cookie = it->second.second;
      evd.ia->binds.erase(it);
    }
    return nullptr;
  }
  ev.event_number = DAT_DTO_COMPLETION_EVENT;
  auto& d = ev.event_data.dto_completion_event_data;
  d.ep_handle = static_cast<Ep*>(wc.qp_context);
  d.user_cookie.as_64 = wc.wr_id;
  d.status = map_status(wc.status);
  d.transfered_length = wc.byte_len;
  d.operation = map_op(wc.opcode);
  d.rmr_context = wc.invalidated_stag;  // a Send with Invalidate's window
  // The DAT IB extensions (dat_ib_extensions.h), as OFA dapl reports them: immediate data and
  // atomics complete as DAT_IB_DTO_EVENT with the extension's type (and the immediate data).
  const bool ext = wc.opcode == WcOpcode::rdma_write_imm || wc.opcode == WcOpcode::recv_rdma_imm ||
                   wc.opcode == WcOpcode::cmp_swap || wc.opcode == WcOpcode::fetch_add || wc.with_imm;
  if (ext) {
    ev.event_number = static_cast<DAT_EVENT_NUMBER>(DAT_IB_DTO_EVENT);
    auto* x = reinterpret_cast<DAT_IB_EXTENSION_EVENT_DATA*>(ev.event_extension_data);
    x->status = wc.status == WcStatus::success ? DAT_OP_SUCCESS : DAT_IB_OP_ERR;
    switch (wc.opcode) {
      case WcOpcode::rdma_write_imm: x->type = DAT_IB_RDMA_WRITE_IMMED; break;
      case WcOpcode::recv_rdma_imm: x->type = DAT_IB_RDMA_WRITE_IMMED_DATA; break;
      case WcOpcode::cmp_swap: x->type = DAT_IB_CMP_AND_SWAP; break;
      case WcOpcode::fetch_add: x->type = DAT_IB_FETCH_AND_ADD; break;
      default:  // a Send with Immediate's receive
        x->type = DAT_IB_RECV_IMMED_DATA;
        d.operation = static_cast<DAT_DTOS>(DAT_IB_DTO_RECV_MSG_IMMED);
        break;
    }
    if (wc.with_imm) x->val.immed.data = wc.imm;
  }
  return wc.srq;
}

// Moves the CQ's completions into the EVD's queue as DAT events. Caller holds evd.mu.
void drain(Evd& evd) {
  if (!evd.cq) return;
  auto& wc = evd.wc_scratch;
  for (;;) {
    const std::size_t n = evd.ia->dev->poll_cq(evd.cq, wc);
    for (std::size_t i = 0; i < n; ++i) {
      Evd::Queued& e = evd.q.emplace_back();
      e.srq = to_event(evd, wc[i], e.ev);
    }
    if (n < std::size(wc)) break;
  }
  evd.queued.store(evd.q.size(), std::memory_order_release);
  note_overflow(evd);
}

}  // namespace

void Cno::trigger(Evd* e) {
  DAT_OS_WAIT_PROXY_AGENT a;
  {
    std::lock_guard lk(mu);
    triggered = true;
    trigger_evd = e;
    if (fd >= 0) {
      const std::uint64_t one = 1;
      [[maybe_unused]] const ssize_t n = ::write(fd, &one, sizeof one);  // EAGAIN: already readable
    }
    a = agent;
  }
  chan->notify();
  // The wait proxy agent (dat_cno_create, dat_cno_modify_agent) hears of every trigger.
  if (a.proxy_agent_func) a.proxy_agent_func(a.instance_data, e);
}

Evd* Cno::take() {
  if (!triggered) return nullptr;
  triggered = false;
  if (fd >= 0) {
    std::uint64_t v;
    [[maybe_unused]] const ssize_t n = ::read(fd, &v, sizeof v);  // no longer readable
  }
  return std::exchange(trigger_evd, nullptr);
}

void Evd::wake_waiter() {
  chan->interrupt();
}

void Evd::signal() {
  Cno* c = nullptr;
  {
    std::lock_guard lk(mu);
    if (!waiter && enabled) c = cno.load();
  }
  chan->notify();
  if (c) c->trigger(this);
}

void Evd::post(const DAT_EVENT& ev) {
  bool pending;
  {
    std::lock_guard lk(mu);
    q.push_back({ev, nullptr});
    queued.store(q.size(), std::memory_order_release);
    note_overflow(*this);
    pending = std::exchange(overflow_pending, false);
  }
  signal();
  report_overflow(ia, this, pending);
}

Evd* new_evd(Ia* ia, DAT_COUNT qlen, Cno* cno, DAT_EVD_FLAGS flags) {
  Evd* evd = make<Evd>(ia, ia->provider, ia->dev->create_channel());
  evd->flags = flags;
  evd->qlen = qlen;
  evd->cno = cno;
  if (cno) cno->evd_refs++;
  if (flags & DAT_EVD_DTO_FLAG)
    evd->cq = ia->dev->create_cq(static_cast<std::uint32_t>(qlen), [evd] { evd->signal(); });
  return evd;
}

DAT_RETURN evd_create(DAT_IA_HANDLE h, DAT_COUNT qlen, DAT_CNO_HANDLE cno_h, DAT_EVD_FLAGS flags, DAT_EVD_HANDLE* out) {
  std::lock_guard lk(api_mutex());
  Ia* ia = get<Ia>(h, Kind::ia);
  if (!ia) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
  if (qlen < 1 || qlen > kMaxQlen) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  Cno* cno = nullptr;
  if (cno_h != DAT_HANDLE_NULL) {
    cno = get<Cno>(cno_h, Kind::cno);
    if (!cno || cno->ia != ia) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
  }
  if (flags == 0 || (flags & ~kAllEvdFlags)) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
  if (!out) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
  std::size_t evds = 0;
  for (Obj* o : children_of(ia)) evds += o->kind == Kind::evd;
  if (evds >= kMaxEvds) return err(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD);  // ia_query's max_evds
  *out = new_evd(ia, qlen, cno, flags);
  return DAT_SUCCESS;
}

DAT_RETURN evd_query(DAT_EVD_HANDLE h, DAT_EVD_PARAM_MASK mask, DAT_EVD_PARAM* p) {
  std::lock_guard lk(api_mutex());
  Evd* evd = get<Evd>(h, Kind::evd);
  if (!evd) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
  if (mask_outside(mask, DAT_EVD_FIELD_ALL)) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  if (!p) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
  std::lock_guard el(evd->mu);
  p->ia_handle = consumer_ia_handle(evd->ia);
  p->evd_qlen = evd->qlen;
  p->evd_state = static_cast<DAT_EVD_STATE>((evd->enabled ? DAT_EVD_STATE_ENABLED : DAT_EVD_STATE_DISABLED) |
                                            (evd->waitable ? DAT_EVD_STATE_WAITABLE : DAT_EVD_STATE_UNWAITABLE));
  p->cno_handle = evd->cno.load();
  p->evd_flags = evd->flags;
  return DAT_SUCCESS;
}

// Takes the front event (caller holds evd.mu); returns the SRQ to report reaped, if any.
static softrnic::Srq* take_front(Evd& evd, DAT_EVENT* ev) {
  *ev = evd.q.front().ev;
  softrnic::Srq* srq = evd.q.front().srq;
  evd.q.pop_front();
  evd.queued.store(evd.q.size(), std::memory_order_release);
  return srq;
}

// One round of the engine for a consumer that polls this EVD (Device::progress). A polling
// consumer says it will go on polling (the default announcement), and the progress thread leaves
// the engine to it meanwhile. An EVD with a CNO has an event-driven consumer, which dequeues until
// the EVD is empty and then blocks on the CNO (dat_cno_wait or its file descriptor): the engine
// must not wait for it, or each message that comes while it blocks waits up to the whole
// announcement (2 ms: the ping-pong median of such a consumer was 153 us and its p99 2.2 ms). So it
// announces nothing.
static bool poll_engine(const Evd& evd) {
  Device& dev = *evd.ia->dev;
  return evd.cno.load(std::memory_order_relaxed) ? dev.progress(std::chrono::microseconds(0)) : dev.progress();
}

DAT_RETURN evd_dequeue(DAT_EVD_HANDLE h, DAT_EVENT* ev) {
  std::shared_lock lk(api_mutex());  // (the data path: objects.hpp, "Locking")
  Evd* evd = get<Evd>(h, Kind::evd);
  if (!evd) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
  if (!ev) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  for (int attempt = 0; attempt < 2; ++attempt) {
    // Nothing queued, no completion waiting and no waiter: no EVD lock (a consumer that spins
    // here finds nothing most of the time).
    if (!evd->waiter.load(std::memory_order_relaxed) && evd->queued.load(std::memory_order_acquire) == 0 &&
        (!evd->cq || evd->ia->dev->cq_empty(evd->cq))) {
      if (attempt == 0 && poll_engine(*evd)) continue;
      break;
    }
    bool got = false, overflow = false;
    softrnic::Srq* reaped = nullptr;
    {
      std::lock_guard el(evd->mu);
      // A blocked waiter owns the EVD.
      if (evd->waiter) return err(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
      // Nothing queued and one completion: it goes straight into *ev (the usual case of a consumer
      // that polls). With more behind it, all go through the queue, which counts an overflow.
      if (evd->q.empty() && evd->cq && evd->ia->dev->poll_cq(evd->cq, {evd->wc_scratch.data(), 1}) == 1) {
        if (evd->ia->dev->cq_empty(evd->cq)) {
          reaped = to_event(*evd, evd->wc_scratch[0], *ev);
          got = true;
        } else {
          Evd::Queued& e = evd->q.emplace_back();
          e.srq = to_event(*evd, evd->wc_scratch[0], e.ev);
        }
      }
      drain(*evd);
      overflow = std::exchange(evd->overflow_pending, false);
      if (!got && !evd->q.empty()) {
        reaped = take_front(*evd, ev);
        got = true;
      }
    }
    report_overflow(evd->ia, evd, overflow);
    if (got) {
      if (reaped) evd->ia->dev->srq_reaped(reaped, 1);  // outside the EVD lock (lock order)
      return DAT_SUCCESS;
    }
    // A consumer that polls drives the engine itself rather than wait for its thread (and looks
    // again only when that round received something).
    if (attempt == 0 && !poll_engine(*evd)) break;
  }
  // The plain value, without the error class: dtest -p compares against DAT_QUEUE_EMPTY exactly.
  return DAT_QUEUE_EMPTY;
}

DAT_RETURN evd_wait(DAT_EVD_HANDLE h, DAT_TIMEOUT timeout, DAT_COUNT threshold, DAT_EVENT* ev, DAT_COUNT* nmore) {
  Evd* evd;
  {
    std::shared_lock lk(api_mutex());  // (the data path: objects.hpp, "Locking")
    evd = get<Evd>(h, Kind::evd);
    if (!evd) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
    if (!ev || !nmore) return err(DAT_INVALID_PARAMETER, !ev ? DAT_INVALID_ARG4 : DAT_INVALID_ARG5);
    if (threshold < 1 || threshold > evd->qlen) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (threshold > 1 && evd->notify_refs > 0) return err(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_CONFIG_THRESHOLD);
    std::lock_guard el(evd->mu);
    if (!evd->waitable) return err(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_UNWAITABLE);
    if (evd->waiter) return err(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_WAITER);
    evd->waiter = true;
  }
  const bool infinite = timeout == DAT_TIMEOUT_INFINITE;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(infinite ? 0 : timeout);
  std::unique_lock el(evd->mu);
  DAT_RETURN ret;
  softrnic::Srq* reaped = nullptr;
  bool another_drives = false;
  for (;;) {
    drain(*evd);
    if (evd->dead) {  // freed, or its IA closed, under the waiter
      ret = err(DAT_ABORT);
      *nmore = static_cast<DAT_COUNT>(evd->q.size());
      break;
    }
    if (!evd->waitable) {  // dat_evd_set_unwaitable under the waiter
      ret = err(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_UNWAITABLE);
      *nmore = static_cast<DAT_COUNT>(evd->q.size());
      break;
    }
    if (evd->q.size() >= static_cast<std::size_t>(threshold)) {
      reaped = take_front(*evd, ev);
      *nmore = static_cast<DAT_COUNT>(evd->q.size());
      ret = DAT_SUCCESS;
      break;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!infinite && now >= deadline) {
      *nmore = static_cast<DAT_COUNT>(evd->q.size());
      ret = err(DAT_TIMEOUT_EXPIRED);
      break;
    }
    evd->chan->wait_step(el, infinite ? std::nullopt : std::optional(deadline), another_drives);
  }
  // A free_evd may be waiting for us to leave: once the lock is released it may destroy the
  // EVD, so nothing of it is touched after that (the device pointer is taken first).
  Ia* ia = evd->ia;
  const bool overflow = std::exchange(evd->overflow_pending, false);
  evd->waiter = false;
  evd->chan->cv().notify_all();
  el.unlock();
  if (reaped) ia->dev->srq_reaped(reaped, 1);
  report_overflow(ia, evd, overflow);  // compares and passes the pointer only
  return ret;
}

void free_evd(Evd* evd) {
  {
    std::unique_lock el(evd->mu);
    evd->dead = true;
    evd->wake_waiter();
    evd->chan->cv().wait(el, [&] { return !evd->waiter; });
  }
  if (evd->cq) evd->ia->dev->destroy_cq(evd->cq);
  if (Cno* c = evd->cno.load()) c->evd_refs--;
  if (evd->ia->async_evd == evd) evd->ia->async_evd = nullptr;
  destroy(evd);
}

DAT_RETURN evd_free(DAT_EVD_HANDLE h) {
  std::lock_guard lk(api_mutex());
  Evd* evd = get<Evd>(h, Kind::evd);
  if (!evd) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
  if (evd->ep_refs > 0) return err(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_IN_USE);
  for (Obj* o : children_of(evd->ia))
    if (o->kind == Kind::psp && static_cast<Psp*>(o)->evd == evd)
      return err(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_IN_USE);
  free_evd(evd);
  return DAT_SUCCESS;
}

DAT_RETURN evd_set_unwaitable(DAT_EVD_HANDLE h) {
  std::lock_guard lk(api_mutex());
  Evd* evd = get<Evd>(h, Kind::evd);
  if (!evd) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
  {
    std::lock_guard el(evd->mu);
    evd->waitable = false;
  }
  evd->wake_waiter();  // a waiter returns DAT_INVALID_STATE
  return DAT_SUCCESS;
}

DAT_RETURN evd_clear_unwaitable(DAT_EVD_HANDLE h) {
  std::lock_guard lk(api_mutex());
  Evd* evd = get<Evd>(h, Kind::evd);
  if (!evd) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
  std::lock_guard el(evd->mu);
  evd->waitable = true;
  return DAT_SUCCESS;
}

DAT_RETURN evd_resize(DAT_EVD_HANDLE h, DAT_COUNT qlen) {
  std::lock_guard lk(api_mutex());
  Evd* evd = get<Evd>(h, Kind::evd);
  if (!evd) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
  if (qlen < 1 || qlen > kMaxQlen) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  std::lock_guard el(evd->mu);
  drain(*evd);
  if (static_cast<std::size_t>(qlen) < evd->q.size()) return err(DAT_INVALID_STATE);  // would drop events
  evd->qlen = qlen;
  return DAT_SUCCESS;
}

DAT_RETURN evd_modify_cno(DAT_EVD_HANDLE h, DAT_CNO_HANDLE cno_h) {
  std::lock_guard lk(api_mutex());
  Evd* evd = get<Evd>(h, Kind::evd);
  if (!evd) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
  Cno* cno = nullptr;
  if (cno_h != DAT_HANDLE_NULL) {
    cno = get<Cno>(cno_h, Kind::cno);
    if (!cno || cno->ia != evd->ia) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    cno->evd_refs++;
  }
  if (Cno* old = evd->cno.exchange(cno)) old->evd_refs--;
  return DAT_SUCCESS;
}

DAT_RETURN evd_enable(DAT_EVD_HANDLE h) {
  std::lock_guard lk(api_mutex());
  Evd* evd = get<Evd>(h, Kind::evd);
  if (!evd) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
  std::lock_guard el(evd->mu);
  evd->enabled = true;
  return DAT_SUCCESS;
}

DAT_RETURN evd_disable(DAT_EVD_HANDLE h) {
  std::lock_guard lk(api_mutex());
  Evd* evd = get<Evd>(h, Kind::evd);
  if (!evd) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
  std::lock_guard el(evd->mu);
  evd->enabled = false;
  return DAT_SUCCESS;
}

DAT_RETURN evd_post_se(DAT_EVD_HANDLE h, const DAT_EVENT* ev) {
  std::lock_guard lk(api_mutex());
  Evd* evd = get<Evd>(h, Kind::evd);
  if (!evd) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_REQUEST);
  if (!ev || ev->event_number != DAT_SOFTWARE_EVENT) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  if (!(evd->flags & DAT_EVD_SOFTWARE_FLAG)) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
  DAT_EVENT e;
  std::memset(&e, 0, sizeof e);
  e.event_number = DAT_SOFTWARE_EVENT;
  e.evd_handle = evd;
  e.event_data.software_event_data = ev->event_data.software_event_data;
  evd->post(e);
  return DAT_SUCCESS;
}

// ---- CNO ----
DAT_RETURN cno_create(DAT_IA_HANDLE h, DAT_OS_WAIT_PROXY_AGENT agent, DAT_CNO_HANDLE* out) {
  std::lock_guard lk(api_mutex());
  Ia* ia = get<Ia>(h, Kind::ia);
  if (!ia) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
  if (!out) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
  Cno* cno = make<Cno>(ia, ia->provider, ia->dev->create_channel());
  cno->agent = agent;
  *out = cno;
  return DAT_SUCCESS;
}

// A CNO with a file descriptor (an eventfd) that is readable while the CNO is triggered, for
// poll/select/epoll; dat_cno_trigger (or dat_cno_wait) takes the trigger and clears it.
DAT_RETURN cno_fd_create(DAT_IA_HANDLE h, DAT_FD* fd, DAT_CNO_HANDLE* out) {
  std::lock_guard lk(api_mutex());
  Ia* ia = get<Ia>(h, Kind::ia);
  if (!ia) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
  if (!fd) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  if (!out) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
  const int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (efd < 0) return err(DAT_INSUFFICIENT_RESOURCES);
  Cno* cno = make<Cno>(ia, ia->provider, ia->dev->create_channel());
  cno->fd = efd;
  *fd = efd;
  *out = cno;
  return DAT_SUCCESS;
}

// The EVD that last triggered the CNO, taking the trigger (DAT_HANDLE_NULL when not triggered);
// it does not block.
DAT_RETURN cno_trigger(DAT_CNO_HANDLE h, DAT_EVD_HANDLE* evd_out) {
  std::lock_guard lk(api_mutex());
  Cno* cno = get<Cno>(h, Kind::cno);
  if (!cno) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
  if (!evd_out) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  std::lock_guard cl(cno->mu);
  Evd* e = cno->take();
  *evd_out = e ? static_cast<DAT_EVD_HANDLE>(e) : DAT_HANDLE_NULL;
  return DAT_SUCCESS;
}

DAT_RETURN cno_modify_agent(DAT_CNO_HANDLE h, DAT_OS_WAIT_PROXY_AGENT agent) {
  std::lock_guard lk(api_mutex());
  Cno* cno = get<Cno>(h, Kind::cno);
  if (!cno) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
  std::lock_guard cl(cno->mu);
  cno->agent = agent;
  return DAT_SUCCESS;
}

// The CNO's valid mask bits: DAT_CNO_FIELD_ALL is 0x4 in the DAT 2.0 header, beside
// DAT_CNO_FIELD_IA_HANDLE 0x1, _PROXY_TYPE 0x2 and _PROXY 0x3, so it does not cover the others:
// every value the header defines is accepted, and their union is the whole of it.
constexpr std::uint64_t kCnoFieldAll =
    DAT_CNO_FIELD_IA_HANDLE | DAT_CNO_FIELD_PROXY_TYPE | DAT_CNO_FIELD_PROXY | DAT_CNO_FIELD_ALL;

DAT_RETURN cno_query(DAT_CNO_HANDLE h, DAT_CNO_PARAM_MASK mask, DAT_CNO_PARAM* p) {
  std::lock_guard lk(api_mutex());
  Cno* cno = get<Cno>(h, Kind::cno);
  if (!cno) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
  if (mask_outside(mask, kCnoFieldAll)) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
  if (!p) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
  std::memset(p, 0, sizeof *p);
  p->ia_handle = consumer_ia_handle(cno->ia);
  std::lock_guard cl(cno->mu);
  if (cno->fd >= 0) {
    p->proxy_type = DAT_PROXY_TYPE_FD;
    p->proxy.fd = cno->fd;
  } else {
    p->proxy_type = DAT_PROXY_TYPE_AGENT;
    p->proxy.agent = cno->agent;
  }
  return DAT_SUCCESS;
}

DAT_RETURN cno_wait(DAT_CNO_HANDLE h, DAT_TIMEOUT timeout, DAT_EVD_HANDLE* evd_out) {
  Cno* cno;
  {
    std::lock_guard lk(api_mutex());
    cno = get<Cno>(h, Kind::cno);
    if (!cno) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
    if (!evd_out) return err(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    std::lock_guard cl(cno->mu);
    cno->waiters++;
  }
  // As dat_evd_wait: the waiter drives the engine itself (the CNO's completion channel).
  const bool infinite = timeout == DAT_TIMEOUT_INFINITE;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(infinite ? 0 : timeout);
  std::unique_lock cl(cno->mu);
  DAT_RETURN ret;
  bool another_drives = false;
  for (;;) {
    if (cno->dead) {
      ret = err(DAT_ABORT);
      break;
    }
    if (cno->triggered) {
      *evd_out = cno->take();
      ret = DAT_SUCCESS;
      break;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!infinite && now >= deadline) {
      ret = err(DAT_TIMEOUT_EXPIRED);
      break;
    }
    cno->chan->wait_step(cl, infinite ? std::nullopt : std::optional(deadline), another_drives);
  }
  cno->waiters--;
  cno->chan->cv().notify_all();  // under the lock: free_cno may destroy the CNO once it is released
  return ret;
}

void free_cno(Cno* cno) {
  {
    std::unique_lock cl(cno->mu);
    cno->dead = true;
    cno->chan->interrupt();
    cno->chan->cv().wait(cl, [&] { return cno->waiters == 0; });
    if (cno->fd >= 0) ::close(cno->fd);
    cno->fd = -1;
  }
  destroy(cno);
}

DAT_RETURN cno_free(DAT_CNO_HANDLE h) {
  std::lock_guard lk(api_mutex());
  Cno* cno = get<Cno>(h, Kind::cno);
  if (!cno) return err(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
  if (cno->evd_refs > 0) return err(DAT_INVALID_STATE, DAT_INVALID_STATE_CNO_IN_USE);
  free_cno(cno);
  return DAT_SUCCESS;
}

}  // namespace softrnic::dat
