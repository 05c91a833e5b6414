// The soft RNIC device: the verbs (PD, MR, CQ, QP, SRQ, connection management, posting), each
// checked here and carried out by core (objects and queues), a transport (the wire) and the
// progress engine. Layers: DESIGN.md and docs/architecture.md.
#include <sodium.h>

#include <algorithm>
#include <thread>
#include <unordered_set>

#include "completion_channel.hpp"
#include "device_impl.hpp"
#include "engine.hpp"
#include "mpa.hpp"
#include "objects.hpp"
#include "qp_state.hpp"
#include "queues.hpp"
#include "roce.hpp"
#include "rudp.hpp"
#include "softrnic/log.hpp"
#include "softrnic/wire/crc_paths.hpp"
#include "user_mem.hpp"

namespace softrnic {

std::string_view to_string(Status s) {
  switch (s) {
    case Status::ok: return "ok";
    case Status::invalid_param: return "invalid parameter";
    case Status::invalid_state: return "invalid state";
    case Status::insufficient_resources: return "insufficient resources";
    case Status::protection_violation: return "protection violation";
    case Status::length_error: return "length error";
    case Status::not_found: return "not found";
    case Status::in_use: return "in use";
    case Status::privileges_violation: return "privileges violation";
  }
  return "?";
}

std::string_view to_string(WcStatus s) {
  switch (s) {
    case WcStatus::success: return "success";
    case WcStatus::flushed: return "flushed";
    case WcStatus::local_length_error: return "local length error";
    case WcStatus::local_protection_error: return "local protection error";
    case WcStatus::remote_access_error: return "remote access error";
    case WcStatus::remote_operation_error: return "remote operation error";
    case WcStatus::transport_error: return "transport error";
    case WcStatus::remote_invalid_request: return "remote invalid request";
    case WcStatus::rnr_retry_exceeded: return "RNR retry exceeded";
  }
  return "?";
}

std::string_view to_string(CmEventType t) {
  switch (t) {
    case CmEventType::established: return "established";
    case CmEventType::rejected: return "rejected";
    case CmEventType::no_listener: return "no listener";
    case CmEventType::unreachable: return "unreachable";
    case CmEventType::host_unreachable: return "host unreachable";
    case CmEventType::disconnected: return "disconnected";
    case CmEventType::broken: return "broken";
  }
  return "?";
}

namespace {

// How long a closing device repeats the resets of its open connections, at most.
constexpr std::chrono::milliseconds kCloseDrain{1000};

std::uint32_t random_qpn() {
  return randombytes_random() & 0xFFFFFF;
}

// The public face of the engine's completion channel.
class Channel final : public CompletionChannel {
 public:
  explicit Channel(engine::Engine& e) : ch_(e) {}
  bool wait_step(std::unique_lock<std::mutex>& lk, std::optional<Clock::time_point> deadline,
                 bool& another_drives) override {
    return ch_.wait_step(lk, deadline, another_drives);
  }
  void notify() override { ch_.notify(); }
  bool driven_here() const override { return ch_.driven_here(); }
  void interrupt() override { ch_.interrupt(); }
  std::condition_variable& cv() override { return ch_.cv(); }

 private:
  engine::CompletionChannel ch_;
};

}  // namespace

std::unique_ptr<CompletionChannel> DeviceImpl::create_channel() {
  return std::make_unique<Channel>(*engine_);
}

namespace {
// The CRC codes for this CPU, measured by the first device a process opens (wire/crc_paths.hpp).
void choose_crc_paths(const std::string& who) {
  std::string error;
  const wire::CrcPaths p = wire::calibrate_crc_paths(error);
  if (!error.empty()) SOFTRNIC_LOG_AT(error, who, error);
  SOFTRNIC_LOG_AT(debug, who, wire::describe(p));
}
}  // namespace

DeviceImpl::DeviceImpl(const DeviceConfig& cfg, std::unique_ptr<netdev::Netdev> nd)
    : ctx_(cfg, Limits{}), datagram_netdev_(std::move(nd)) {
  if (sodium_init() < 0) std::abort();  // no randomness source: nothing here can be made safe
  choose_crc_paths(cfg.name);
  if (cfg.wire == Wire::roce) {
    // A CM REQ carries 92 bytes of private data, 36 of them rdma_cm's header.
    ctx_.limits.max_private_data = 56;
    auto r = std::make_unique<roce::Roce>(ctx_, *datagram_netdev_);
    roce_ = r.get();
    start(std::move(r), *datagram_netdev_);
    return;
  }
  ctx_.cfg.wire = Wire::udp;
  start(std::make_unique<rudp::Rudp>(ctx_, *datagram_netdev_), *datagram_netdev_);
}

DeviceImpl::DeviceImpl(const DeviceConfig& cfg, std::unique_ptr<netdev::StreamNetdev> nd)
    : ctx_(cfg, Limits{}), stream_netdev_(std::move(nd)) {
  if (sodium_init() < 0) std::abort();
  choose_crc_paths(cfg.name);
  ctx_.cfg.wire = Wire::tcp;
  const mpa::Settings s{cfg.mpa.revision, cfg.mpa.crc, cfg.mpa.markers, cfg.mpa.peer_to_peer};
  start(std::make_unique<mpa::Mpa>(ctx_, *stream_netdev_, s), *stream_netdev_);
}

DeviceImpl::~DeviceImpl() {
  // Connections still open are reset, and the resets repeated until the peers answer (or a
  // bound passes): a peer must not wait forever for a close this process can no longer send.
  {
    std::unique_lock lk(mu_);
    transport_->close_all();
  }
  const auto until = Clock::now() + kCloseDrain;
  while (Clock::now() < until) {
    {
      std::lock_guard lk(mu_);
      if (!transport_->lingering()) break;
    }
    waitable_->wake();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  engine_->stop();
  for (auto& [n, qp] : ctx_.qps) delete qp;
  ctx_.qps.clear();
  transport_.reset();
  std::lock_guard ml(ctx_.mrs_mu);
  ctx_.mrs.clear();
  for (Cq* cq : cqs_) delete cq;
  for (Srq* srq : srqs_) delete srq;
  for (Pd* pd : pd_set_) delete pd;
}

DeviceCounters DeviceImpl::counters() const {
  std::lock_guard lk(mu_);
  DeviceCounters c = ctx_.ctr;
  const auto s = datagram_netdev_ ? datagram_netdev_->stats() : stream_netdev_->stats();
  c.tx_frames = s.tx_frames;
  c.rx_frames = s.rx_frames;
  return c;
}

Pd* DeviceImpl::alloc_pd() {
  std::lock_guard lk(mu_);
  if (pd_set_.size() >= ctx_.limits.max_pd) return nullptr;
  Pd* pd = new Pd{next_pd_++, 0};
  pd_set_.insert(pd);
  return pd;
}

Status DeviceImpl::dealloc_pd(Pd* pd) {
  std::lock_guard lk(mu_);
  if (!pd || !pd_set_.count(pd)) return Status::invalid_param;
  if (pd->users) return Status::in_use;
  pd_set_.erase(pd);
  delete pd;
  return Status::ok;
}

Status DeviceImpl::reg_mr(Pd* pd, void* addr, std::uint64_t length, Access access, Mr*& out) {
  // The range must be there with the access granted (as a kernel RNIC's pinning proves it).
  if (length > 0 && length <= ctx_.limits.max_mr_size) {
    const bool write = has(access, Access::local_write) || has(access, Access::remote_write);
    if (const Status st = check_mapping(reinterpret_cast<std::uintptr_t>(addr), length, write); st != Status::ok)
      return st;
  }
  std::lock_guard lk(mu_);
  if (length > ctx_.limits.max_mr_size) return Status::length_error;
  std::lock_guard ml(ctx_.mrs_mu);
  return ctx_.mrs.reg(pd, reinterpret_cast<std::uintptr_t>(addr), length, access, out);
}

Status DeviceImpl::dereg_mr(Mr* mr) {
  std::lock_guard lk(mu_);
  std::lock_guard ml(ctx_.mrs_mu);
  return mr ? ctx_.mrs.dereg(mr) : Status::invalid_param;
}

Status DeviceImpl::alloc_mw(Pd* pd, Mr*& out) {
  std::lock_guard lk(mu_);
  if (!pd || !pd_set_.count(pd)) return Status::invalid_param;
  std::lock_guard ml(ctx_.mrs_mu);
  return ctx_.mrs.alloc_window(pd, out);
}

Status DeviceImpl::bind_mw(Qp* qp, Mr* mw, Mr* mr, std::uint64_t addr, std::uint64_t length, Access access,
                           std::uint64_t wr_id, bool signaled) {
  std::lock_guard lk(mu_);
  take_posts(*qp);  // (this QP's posts first: device_lock.hpp)
  if (qp->state != QpState::rts || qp->cm != CmPhase::connected) return Status::invalid_state;
  if (mw->pd != qp->init.pd) return Status::protection_violation;
  if (!reserve(qp->sq_used, qp->init.max_send_wr)) return Status::insufficient_resources;
  Status s;
  {
    std::lock_guard ml(ctx_.mrs_mu);
    s = ctx_.mrs.bind_window(mw, mr, addr, length, access);
  }
  if (s != Status::ok) {
    sq_retire(*qp);
    return s;
  }
  qp->sq.push_back(SendWqe{wr_id, WcOpcode::bind, signaled, qp->transport->tx_pos(*qp), 0, SglRef{}});
  complete_sends(*qp, qp->transport->acked_pos(*qp));
  return Status::ok;
}

Cq* DeviceImpl::create_cq(std::uint32_t depth, std::function<void()> notify) {
  if (depth == 0 || depth > ctx_.limits.max_cqe) return nullptr;
  auto* cq = new Cq(depth);
  cq->notify = std::move(notify);
  std::lock_guard lk(mu_);
  cqs_.insert(cq);
  return cq;
}

Status DeviceImpl::destroy_cq(Cq* cq) {
  std::lock_guard lk(mu_);
  if (!cq || !cqs_.count(cq)) return Status::invalid_param;
  if (cq->users) return Status::in_use;
  cqs_.erase(cq);
  delete cq;
  return Status::ok;
}

std::size_t DeviceImpl::poll_cq(Cq* cq, std::span<Wc> out) {
  // Without the device lock: the engine pushes while a consumer polls (Cq, spsc_ring.hpp). A
  // consumer that spins polls an empty CQ most of the time: no lock at all for that.
  if (cq_empty(cq)) return 0;
  std::lock_guard lk(cq->poll_mu);
  std::size_t n = 0;
  while (n < out.size()) {
    if (const Wc* w = cq->ring.consumer_slot()) {
      out[n++] = *w;
      cq->ring.consume();
      continue;
    }
    if (!cq->spilled.load(std::memory_order_acquire)) break;
    std::lock_guard sl(cq->spill_mu);
    // (The ring may have had more pushed before the spill began: those come first.)
    if (cq->ring.consumer_slot()) continue;
    while (n < out.size() && !cq->spill.empty()) {
      out[n++] = cq->spill.front();
      cq->spill.pop_front();
    }
    if (cq->spill.empty()) cq->spilled.store(false, std::memory_order_release);
  }
  // (A consumer that took several completions at once is likely to post several: doorbell())
  const bool several = n > 1 || !cq_empty(cq);
  polled_several_.store(several, std::memory_order_relaxed);
  // On MPA/TCP its requests complete inside their posts, so a consumer that takes one completion
  // and reposts one may never find its CQ empty, never drive the engine, and so never be seen
  // polling (Engine::defers_posts): one that left completions behind is back for them soon.
  // (RoCEv2 and the udp wire complete on ACKs: their streams run their CQs dry and drive.)
  if (several && ctx_.cfg.wire == Wire::tcp) engine_->consumer_returns();
  idle_posts_.store(0, std::memory_order_relaxed);
  return n;
}

std::size_t DeviceImpl::cq_count(Cq* cq) {
  std::lock_guard lk(cq->poll_mu);
  std::lock_guard sl(cq->spill_mu);
  return cq->ring.size() + cq->spill.size();
}

Status DeviceImpl::create_qp(const QpInit& init, Qp*& out) {
  std::lock_guard lk(mu_);
  const Limits& lim = ctx_.limits;
  if (!init.pd || !init.send_cq || !init.recv_cq) return Status::invalid_param;
  if (init.max_send_wr > lim.max_qp_wr || init.max_recv_wr > lim.max_qp_wr || init.max_sge > lim.max_sge)
    return Status::invalid_param;
  if (ctx_.qps.size() >= lim.max_qp) return Status::insufficient_resources;
  if (init.ord > lim.max_rd || init.ird > lim.max_rd) return Status::invalid_param;
  if (init.type == QpType::ud && (!roce_ || init.srq)) return Status::invalid_param;  // (UD: RoCEv2 only; no SRQ)
  auto* qp = new Qp;
  qp->init = init;
  qp->ord = init.ord;
  qp->ird = init.ird;
  do {
    qp->qpn = random_qpn();  // unpredictable: a blind injector must guess both QPNs
  } while (qp->qpn == 0 || ctx_.qps.count(qp->qpn));
  qp->who = log::qp_who(ctx_.cfg.name, qp->qpn);
  qp->transport = transport_.get();
  qp->t = transport_->make_qp_state();
  init.pd->users++;
  init.send_cq->users++;
  init.recv_cq->users++;
  if (init.srq) init.srq->users++;
  ctx_.qps[qp->qpn] = qp;
  out = qp;
  return Status::ok;
}

Status DeviceImpl::destroy_qp(Qp* qp) {
  std::lock_guard lk(mu_);
  if (!qp || !ctx_.qps.count(qp->qpn)) return Status::invalid_param;
  take_posts(*qp);  // (this QP's posts first: device_lock.hpp)
  qp->transport->destroy(*qp);
  // Its work requests go with it (no completions for a QP that no longer exists).
  for (auto& r : qp->rq) {
    if (r.allocated && r.srq) {
      r.srq->outstanding--;
      r.srq->allocated--;
    }
  }
  if (qp->init.srq) qp->init.srq->users--;
  qp->init.pd->users--;
  qp->init.send_cq->users--;
  qp->init.recv_cq->users--;
  off_doorbell(*qp);
  ctx_.qps.erase(qp->qpn);
  delete qp;
  return Status::ok;
}

QpState DeviceImpl::qp_state(const Qp* qp) const {
  // Without the device lock (Qp::state is atomic for the posts): a verbs consumer asks at every
  // post_recv, and waiting there for the engine's round was in its ping-pong's critical path.
  return qp->state.load();
}

QpCounters DeviceImpl::qp_counters(const Qp* qp) const {
  std::lock_guard lk(mu_);
  return qp->ctr;
}

std::pair<bool, bool> DeviceImpl::qp_idle(const Qp* qp) const {
  std::lock_guard lk(mu_);
  take_posts_of(qp);
  return {qp->rq_allocated == 0, qp->sq.empty()};
}

Status DeviceImpl::reset_qp(Qp* qp) {
  std::lock_guard lk(mu_);
  take_posts(*qp);  // (this QP's posts first: device_lock.hpp)
  if (qp->cm != CmPhase::none && qp->cm != CmPhase::closed) return Status::invalid_state;
  reset(*qp);
  return Status::ok;
}

NetAddr DeviceImpl::qp_peer(const Qp* qp) const {
  std::lock_guard lk(mu_);
  return qp->peer;
}

NetAddr DeviceImpl::qp_local(const Qp* qp) const {
  std::lock_guard lk(mu_);
  return qp->local;
}

Status DeviceImpl::modify_qp(Qp* qp, QpState to) {
  std::lock_guard lk(mu_);
  take_posts(*qp);  // (this QP's posts first: device_lock.hpp)
  if (to != QpState::error && to != QpState::idle) return Status::invalid_param;
  const QpEvent e = to == QpState::error ? QpEvent::broken : QpEvent::reset;
  if (!qp_next(qp->state, qp->cm, e) || qp->state == to) return Status::invalid_state;
  if (to == QpState::error)
    close_qp(*qp, std::nullopt, "");
  else
    reset(*qp);
  return Status::ok;
}

Status DeviceImpl::connect(Qp* qp, NetAddr remote, std::uint64_t conn_qual, std::span<const std::uint8_t> pd,
                           std::chrono::milliseconds timeout) {
  std::lock_guard lk(mu_);
  return qp->transport->connect(*qp, remote, conn_qual, pd, timeout);
}

Status DeviceImpl::listen(std::uint64_t conn_qual,
                          std::function<void(ConnRequest*, const ConnRequestInfo&)> on_request) {
  std::lock_guard lk(mu_);
  return transport_->listen(conn_qual, std::move(on_request));
}

Status DeviceImpl::stop_listen(std::uint64_t conn_qual) {
  std::lock_guard lk(mu_);
  return transport_->stop_listen(conn_qual);
}

Status DeviceImpl::accept(ConnRequest* req, Qp* qp, std::span<const std::uint8_t> pd) {
  std::lock_guard lk(mu_);
  return qp->transport->accept(req, *qp, pd);
}

Status DeviceImpl::reject(ConnRequest* req, std::span<const std::uint8_t> pd) {
  std::lock_guard lk(mu_);
  return transport_->reject(req, pd);
}

Status DeviceImpl::disconnect(Qp* qp, bool graceful) {
  std::lock_guard lk(mu_);
  take_posts(*qp);  // (this QP's posts first: device_lock.hpp)
  return qp->transport->disconnect(*qp, graceful);
}

Status DeviceImpl::roce_local(const Qp* qp, RoceEndpoint& out) const {
  std::lock_guard lk(mu_);
  if (!roce_) return Status::invalid_state;
  out = roce_->local(*qp);
  return Status::ok;
}

Status DeviceImpl::roce_connect(Qp* qp, const RoceEndpoint& remote, std::uint32_t ord, std::uint32_t ird) {
  std::lock_guard lk(mu_);
  if (!roce_) return Status::invalid_state;
  return roce_->connect_oob(*qp, remote, ord, ird);
}

std::uint32_t DeviceImpl::path_mtu() const {
  if (roce_) return roce_->link_mtu();
  if (datagram_netdev_)
    return wire::roce::path_mtu_for(static_cast<std::uint32_t>(datagram_netdev_->max_datagram()) + 28);
  // MPA/TCP: as siw, the MTU of the interface with the device's address, and as the DAT IA says
  // (dat/src/ia.cpp), 65536 for an address no interface holds (127.0.0.x beside loopback's
  // 127.0.0.1): OFA dapl sizes dtestsrq's messages by it.
  const std::uint32_t mtu = netdev::interface_mtu(address().ip);
  return wire::roce::path_mtu_for(mtu ? mtu : 65536);
}

Status DeviceImpl::roce_rtr(Qp* qp, const RoceRtr& a) {
  std::lock_guard lk(mu_);
  if (!roce_) return Status::invalid_state;
  return roce_->rtr(*qp, a);
}

Status DeviceImpl::roce_ud_rtr(Qp* qp, std::uint32_t qkey) {
  std::lock_guard lk(mu_);
  if (!roce_) return Status::invalid_state;
  return roce_->ud_rtr(*qp, qkey);
}

Status DeviceImpl::roce_rts(Qp* qp, const RoceRts& a) {
  std::lock_guard lk(mu_);
  take_posts(*qp);  // (this QP's posts first: device_lock.hpp)
  if (!roce_) return Status::invalid_state;
  return roce_->rts(*qp, a);
}

void DeviceImpl::set_cq_notify_solicited(Cq* cq, bool solicited_only) {
  cq->notify_solicited_only.store(solicited_only, std::memory_order_relaxed);
}

std::uint32_t DeviceImpl::qp_num(const Qp* qp) const {
  return qp->qpn;  // (set at creation, never changed)
}

Status DeviceImpl::set_qp_access(Qp* qp, Access remote) {
  constexpr auto kRemote =
      static_cast<std::uint32_t>(Access::remote_read | Access::remote_write | Access::remote_atomic);
  if (static_cast<std::uint32_t>(remote) & ~kRemote) return Status::invalid_param;
  std::lock_guard lk(mu_);
  qp->remote_access = remote;
  return Status::ok;
}

Status DeviceImpl::set_qp_rd_atomic(Qp* qp, std::uint32_t ord, std::uint32_t ird) {
  if (ord > ctx_.limits.max_rd || ird > ctx_.limits.max_rd) return Status::invalid_param;
  std::lock_guard lk(mu_);
  if (qp->state != QpState::idle || qp->cm != CmPhase::none) return Status::invalid_state;
  qp->init.ord = qp->ord = ord;
  qp->init.ird = qp->ird = ird;
  return Status::ok;
}

Status DeviceImpl::create_srq(const SrqInit& init, Srq*& out) {
  std::lock_guard lk(mu_);
  if (!init.pd || !pd_set_.count(init.pd) || init.max_wr == 0 || init.max_wr > ctx_.limits.max_qp_wr ||
      init.max_sge == 0 || init.max_sge > ctx_.limits.max_sge)
    return Status::invalid_param;
  auto* srq = new Srq;
  srq->pd = init.pd;
  srq->max_wr = init.max_wr;
  srq->max_sge = init.max_sge;
  srq->on_low_watermark = init.on_low_watermark;
  init.pd->users++;
  srqs_.insert(srq);
  out = srq;
  return Status::ok;
}

Status DeviceImpl::destroy_srq(Srq* srq) {
  std::lock_guard lk(mu_);
  if (!srq || !srqs_.count(srq)) return Status::invalid_param;
  if (srq->users) return Status::in_use;
  srq->pd->users--;
  srqs_.erase(srq);
  delete srq;
  return Status::ok;
}

Status DeviceImpl::post_srq_recv(Srq* srq, const RecvWr& wr) {
  std::lock_guard lk(mu_);
  if (wr.sgl.size() > srq->max_sge) return Status::invalid_param;
  if (srq->outstanding >= srq->max_wr) return Status::insufficient_resources;
  RecvWqe r;
  if (const Status st = make_recv(ctx_, srq->pd, wr, r); st != Status::ok) return st;
  r.srq = srq;
  srq->q.push_back(std::move(r));
  srq->outstanding++;
  return Status::ok;
}

SrqCounts DeviceImpl::srq_counts(const Srq* srq) const {
  std::lock_guard lk(mu_);
  return srq_counts_locked(srq);
}

SrqCounts DeviceImpl::srq_counts_locked(const Srq* srq) {
  return SrqCounts{static_cast<std::uint32_t>(srq->q.size()),
                   srq->outstanding,
                   srq->allocated,
                   srq->completed,
                   srq->max_wr,
                   srq->low_watermark};
}

Status DeviceImpl::resize_srq(Srq* srq, std::uint32_t max_wr) {
  std::lock_guard lk(mu_);
  if (max_wr == 0 || max_wr > ctx_.limits.max_qp_wr) return Status::invalid_param;
  if (max_wr < srq->outstanding) return Status::invalid_state;  // cannot drop posted buffers
  srq->max_wr = max_wr;
  return Status::ok;
}

Status DeviceImpl::set_srq_low_watermark(Srq* srq, std::uint32_t lw) {
  std::lock_guard lk(mu_);
  if (lw > srq->max_wr) return Status::invalid_param;
  srq->low_watermark = lw;
  srq->lw_armed = true;
  check_low_watermark(*srq);
  return Status::ok;
}

void DeviceImpl::srq_reaped(Srq* srq, std::uint32_t n) {
  std::lock_guard lk(mu_);
  if (!srqs_.count(srq)) return;
  n = std::min(n, srq->completed);
  srq->completed -= n;
  srq->outstanding -= n;
}

RecvCounts DeviceImpl::recv_counts(const Qp* qp) const {
  std::lock_guard lk(mu_);  // one snapshot: count and span under the same lock
  take_posts_of(qp);
  return RecvCounts{qp->rq_allocated, static_cast<std::uint32_t>(qp->rq.size())};
}

DeviceInfo DeviceImpl::info() const {
  DeviceInfo d;
  d.name = ctx_.cfg.name;
  d.wire = ctx_.cfg.wire;
  d.netdev = ctx_.cfg.wire == Wire::tcp ? "tcp" : ctx_.cfg.netdev.kind;
  d.address = address();
  d.ctr = counters();
  std::lock_guard lk(mu_);
  d.qps.reserve(ctx_.qps.size());
  for (const auto& [n, qp] : ctx_.qps) {
    QpInfo q;
    q.qpn = qp->qpn;
    q.state = qp->state;
    q.local = qp->local;
    q.peer = qp->peer;
    q.msn_expected = qp->recv_msn;
    q.recv_queued = static_cast<std::uint32_t>(qp->rq.size());
    for (const RecvWqe& r : qp->rq)
      if (r.done || r.placed || r.pos_seen) q.placed_not_completed++;
    q.recv = RecvCounts{qp->rq_allocated, static_cast<std::uint32_t>(qp->rq.size())};
    q.uses_srq = qp->init.srq != nullptr;
    if (q.uses_srq) q.srq = srq_counts_locked(qp->init.srq);
    q.send_queued = static_cast<std::uint32_t>(qp->sq.size());
    q.ctr = qp->ctr;
    d.qps.push_back(q);
  }
  std::sort(d.qps.begin(), d.qps.end(), [](const QpInfo& a, const QpInfo& b) { return a.qpn < b.qpn; });
  return d;
}

Status DeviceImpl::set_recv_watermarks(Qp* qp, std::uint32_t soft, std::uint32_t hard) {
  std::lock_guard lk(mu_);
  take_posts(*qp);  // (this QP's posts first: device_lock.hpp)
  qp->soft_watermark = soft;
  qp->hard_watermark = hard;
  qp->soft_watermark_armed = soft != kNoWatermark;
  check_watermarks(*qp);
  return Status::ok;
}

void DeviceImpl::reset(Qp& qp) {
  off_doorbell(qp);
  qp.transport->reset(qp);
  flush_qp(qp);
  qp_event(qp, QpEvent::reset);
  qp.peer = qp.local = {};
  qp.recv_msn = 1;
}

std::unique_ptr<Device> Device::open(const DeviceConfig& cfg, std::string& error) {
  if (cfg.wire == Wire::tcp) {
    if (cfg.netdev.kind != "udp") {
      error = "wire=tcp runs over the kernel's TCP: netdev=" + cfg.netdev.kind + " cannot carry it";
      return nullptr;
    }
    if (cfg.netdev.impair.active()) {
      error = "an impairment plan has no meaning on wire=tcp (TCP repairs loss and reordering itself)";
      return nullptr;
    }
    auto snd = netdev::make_tcp_netdev(cfg.netdev, error);
    if (!snd) return nullptr;
    return std::make_unique<DeviceImpl>(cfg, std::move(snd));
  }
  netdev::NetdevConfig ndc = cfg.netdev;
  std::unique_ptr<netdev::Netdev> nd;
  if (cfg.wire == Wire::roce) {
    // Every RoCEv2 node receives on one port (4791): a free port elsewhere reaches no peer. On
    // 127.0.0.0/8 the next free address serves instead (two processes on one host with one
    // dat.conf line: the first gets 127.0.0.1, the next 127.0.0.2, ...), unless the port is fixed.
    ndc.dont_fragment = true;  // the ICRC covers the IP ID (0 for such datagrams)
    std::uint32_t ip = 0;
    const bool probe = !cfg.netdev.port_fixed && netdev::parse_ipv4(ndc.ip, ip) && (ip >> 24) == 127;
    ndc.port_fixed = true;
    for (int i = 0; i < (probe ? 64 : 1) && !nd; ++i) {
      if (probe) ndc.ip = netdev::ipv4_to_string(ip + static_cast<std::uint32_t>(i));
      std::string e;
      nd = netdev::make_netdev(ndc, e);
      if (!nd && i == 0) error = e;
    }
    if (!nd && probe) error += " (and on the next 63 loopback addresses)";
  } else {
    nd = netdev::make_netdev(ndc, error);
  }
  if (!nd) return nullptr;
  return std::make_unique<DeviceImpl>(cfg, std::move(nd));
}

std::unique_ptr<Device> Device::open(const DeviceConfig& cfg, std::unique_ptr<netdev::Netdev> nd) {
  return std::make_unique<DeviceImpl>(cfg, std::move(nd));
}

std::unique_ptr<Device> Device::open(const DeviceConfig& cfg, std::unique_ptr<netdev::StreamNetdev> nd) {
  return std::make_unique<DeviceImpl>(cfg, std::move(nd));
}

}  // namespace softrnic
