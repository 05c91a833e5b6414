// The soft RNIC device: the verbs (PD, MR, CQ, QP, SRQ, connection management, posting), each
// checked here and carried out by core (objects and queues), a transport (the wire) and the
// progress engine. Layers: DESIGN.md and docs/architecture.md.
#include <sodium.h>

#include <algorithm>
#include <thread>
#include <unordered_set>

#include "completion_channel.hpp"
#include "engine.hpp"
#include "mpa.hpp"
#include "objects.hpp"
#include "qp_state.hpp"
#include "queues.hpp"
#include "roce.hpp"
#include "rudp.hpp"
#include "softrnic/log.hpp"
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
  void wait_step(std::unique_lock<std::mutex>& lk, std::optional<Clock::time_point> deadline,
                 bool& another_drives) override {
    ch_.wait_step(lk, deadline, another_drives);
  }
  void notify() override { ch_.notify(); }
  void interrupt() override { ch_.interrupt(); }
  std::condition_variable& cv() override { return ch_.cv(); }

 private:
  engine::CompletionChannel ch_;
};

class DeviceImpl final : public Device, public engine::Pollable, engine::DeviceLock::Drain {
 public:
  DeviceImpl(const DeviceConfig& cfg, std::unique_ptr<netdev::Netdev> nd)
      : ctx_(cfg, Limits{}), datagram_netdev_(std::move(nd)) {
    if (sodium_init() < 0) std::abort();  // no randomness source: nothing here can be made safe
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

  DeviceImpl(const DeviceConfig& cfg, std::unique_ptr<netdev::StreamNetdev> nd)
      : ctx_(cfg, Limits{}), stream_netdev_(std::move(nd)) {
    if (sodium_init() < 0) std::abort();
    ctx_.cfg.wire = Wire::tcp;
    const mpa::Settings s{cfg.mpa.revision, cfg.mpa.crc, cfg.mpa.markers, cfg.mpa.peer_to_peer};
    start(std::make_unique<mpa::Mpa>(ctx_, *stream_netdev_, s), *stream_netdev_);
  }

  ~DeviceImpl() override {
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

  NetAddr address() const override {
    return datagram_netdev_ ? datagram_netdev_->local_addr() : NetAddr{stream_netdev_->local_ip(), 0};
  }
  Wire wire() const override { return ctx_.cfg.wire; }
  const Limits& limits() const override { return ctx_.limits; }
  DeviceCounters counters() const override {
    std::lock_guard lk(mu_);
    DeviceCounters c = ctx_.ctr;
    const auto s = datagram_netdev_ ? datagram_netdev_->stats() : stream_netdev_->stats();
    c.tx_frames = s.tx_frames;
    c.rx_frames = s.rx_frames;
    return c;
  }

  // ---- PD / MR ----
  Pd* alloc_pd() override {
    std::lock_guard lk(mu_);
    if (pd_set_.size() >= ctx_.limits.max_pd) return nullptr;
    Pd* pd = new Pd{next_pd_++, 0};
    pd_set_.insert(pd);
    return pd;
  }
  Status dealloc_pd(Pd* pd) override {
    std::lock_guard lk(mu_);
    if (!pd || !pd_set_.count(pd)) return Status::invalid_param;
    if (pd->users) return Status::in_use;
    pd_set_.erase(pd);
    delete pd;
    return Status::ok;
  }
  Status reg_mr(Pd* pd, void* addr, std::uint64_t length, Access access, Mr*& out) override {
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
  Status dereg_mr(Mr* mr) override {
    std::lock_guard lk(mu_);
    std::lock_guard ml(ctx_.mrs_mu);
    return mr ? ctx_.mrs.dereg(mr) : Status::invalid_param;
  }
  Status alloc_mw(Pd* pd, Mr*& out) override {
    std::lock_guard lk(mu_);
    if (!pd || !pd_set_.count(pd)) return Status::invalid_param;
    std::lock_guard ml(ctx_.mrs_mu);
    return ctx_.mrs.alloc_window(pd, out);
  }

  Status bind_mw(Qp* qp, Mr* mw, Mr* mr, std::uint64_t addr, std::uint64_t length, Access access, std::uint64_t wr_id,
                 bool signaled) override {
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

  MrInfo query_mr(const Mr* mr) const override { return MrInfo{mr->stag, mr->addr, mr->length, mr->access}; }

  // ---- CQ ----
  Cq* create_cq(std::uint32_t depth, std::function<void()> notify) override {
    if (depth == 0 || depth > ctx_.limits.max_cqe) return nullptr;
    auto* cq = new Cq(depth);
    cq->notify = std::move(notify);
    std::lock_guard lk(mu_);
    cqs_.insert(cq);
    return cq;
  }
  Status destroy_cq(Cq* cq) override {
    std::lock_guard lk(mu_);
    if (!cq || !cqs_.count(cq)) return Status::invalid_param;
    if (cq->users) return Status::in_use;
    cqs_.erase(cq);
    delete cq;
    return Status::ok;
  }
  std::size_t poll_cq(Cq* cq, std::span<Wc> out) override {
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
    polled_several_.store(n > 1 || !cq_empty(cq), std::memory_order_relaxed);
    idle_posts_.store(0, std::memory_order_relaxed);
    return n;
  }
  bool cq_empty(const Cq* cq) const override {
    return cq->ring.empty() && !cq->spilled.load(std::memory_order_acquire);
  }
  std::size_t cq_count(Cq* cq) override {
    std::lock_guard lk(cq->poll_mu);
    std::lock_guard sl(cq->spill_mu);
    return cq->ring.size() + cq->spill.size();
  }

  // ---- QP ----
  Status create_qp(const QpInit& init, Qp*& out) override {
    std::lock_guard lk(mu_);
    const Limits& lim = ctx_.limits;
    if (!init.pd || !init.send_cq || !init.recv_cq) return Status::invalid_param;
    if (init.max_send_wr > lim.max_qp_wr || init.max_recv_wr > lim.max_qp_wr || init.max_sge > lim.max_sge)
      return Status::invalid_param;
    if (ctx_.qps.size() >= lim.max_qp) return Status::insufficient_resources;
    if (init.ord > lim.max_rd || init.ird > lim.max_rd) return Status::invalid_param;
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

  Status destroy_qp(Qp* qp) override {
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

  QpState qp_state(const Qp* qp) const override {
    std::lock_guard lk(mu_);
    return qp->state;
  }
  QpCounters qp_counters(const Qp* qp) const override {
    std::lock_guard lk(mu_);
    return qp->ctr;
  }
  std::pair<bool, bool> qp_idle(const Qp* qp) const override {
    std::lock_guard lk(mu_);
    take_posts_of(qp);
    return {qp->rq_allocated == 0, qp->sq.empty()};
  }

  Status reset_qp(Qp* qp) override {
    std::lock_guard lk(mu_);
    take_posts(*qp);  // (this QP's posts first: device_lock.hpp)
    if (qp->cm != CmPhase::none && qp->cm != CmPhase::closed) return Status::invalid_state;
    reset(*qp);
    return Status::ok;
  }

  NetAddr qp_peer(const Qp* qp) const override {
    std::lock_guard lk(mu_);
    return qp->peer;
  }
  NetAddr qp_local(const Qp* qp) const override {
    std::lock_guard lk(mu_);
    return qp->local;
  }

  Status modify_qp(Qp* qp, QpState to) override {
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

  // ---- Connection management (the transport's) ----
  Status connect(Qp* qp, NetAddr remote, std::uint64_t conn_qual, std::span<const std::uint8_t> pd,
                 std::chrono::milliseconds timeout) override {
    std::lock_guard lk(mu_);
    return qp->transport->connect(*qp, remote, conn_qual, pd, timeout);
  }
  Status listen(std::uint64_t conn_qual,
                std::function<void(ConnRequest*, const ConnRequestInfo&)> on_request) override {
    std::lock_guard lk(mu_);
    return transport_->listen(conn_qual, std::move(on_request));
  }
  Status stop_listen(std::uint64_t conn_qual) override {
    std::lock_guard lk(mu_);
    return transport_->stop_listen(conn_qual);
  }
  Status accept(ConnRequest* req, Qp* qp, std::span<const std::uint8_t> pd) override {
    std::lock_guard lk(mu_);
    return qp->transport->accept(req, *qp, pd);
  }
  Status reject(ConnRequest* req, std::span<const std::uint8_t> pd) override {
    std::lock_guard lk(mu_);
    return transport_->reject(req, pd);
  }
  Status disconnect(Qp* qp, bool graceful) override {
    std::lock_guard lk(mu_);
    take_posts(*qp);  // (this QP's posts first: device_lock.hpp)
    return qp->transport->disconnect(*qp, graceful);
  }

  Status roce_local(const Qp* qp, RoceEndpoint& out) const override {
    std::lock_guard lk(mu_);
    if (!roce_) return Status::invalid_state;
    out = roce_->local(*qp);
    return Status::ok;
  }
  Status roce_connect(Qp* qp, const RoceEndpoint& remote, std::uint32_t ord, std::uint32_t ird) override {
    std::lock_guard lk(mu_);
    if (!roce_) return Status::invalid_state;
    return roce_->connect_oob(*qp, remote, ord, ird);
  }

  // ---- Data path ----
  // Posting: a post never waits for the device lock. When the lock is free (the usual case of a
  // consumer that drives the engine itself) the post takes it and the request goes onto sq or rq
  // at once (take_send, take_receive), on the wire if it may. When another thread holds it (the
  // progress engine in its round, another consumer, any verb), the post checks what it can
  // without it (the QP's state; its regions under the MR table's shared lock; the queue's room),
  // leaves the request on the QP's post ring and hands it to the lock (device_lock.hpp): the
  // holder takes it in when it lets go, and an arriving Send takes posted receives in itself.
  Status post_recv(Qp* qp, const RecvWr& wr) override {
    if (qp->init.srq) return Status::invalid_state;  // its receives come from the SRQ
    const QpState st = qp->state.load();
    if (st != QpState::idle && st != QpState::rts) return Status::invalid_state;
    if (wr.sgl.size() > qp->init.max_sge) return Status::invalid_param;
    if (!reserve(qp->rq_used, qp->init.max_recv_wr)) return Status::insufficient_resources;
    RecvWqe r;
    std::unique_lock lk(mu_, std::try_to_lock);
    {
      std::shared_lock<MrLock> ml;  // (the device lock keeps the MR table as it is)
      if (!lk.owns_lock()) ml = std::shared_lock(ctx_.mrs_mu);
      if (const Status e = make_recv(ctx_, qp->init.pd, wr, r); e != Status::ok) {
        rq_retire(*qp);
        return e;
      }
    }
    if (lk.owns_lock()) {
      take_receive(*qp, std::move(r));
      return Status::ok;
    }
    {
      std::lock_guard pl(qp->post_mu);
      *post_slot(*qp, &PostRings::recv) = std::move(r);
      qp->own_posted->recv.publish();
    }
    queue_posts(*qp);
    return Status::ok;
  }

  Status post_send(Qp* qp, const SendWr& wr) override {
    if (qp->state.load() != QpState::rts || qp->cm.load() != CmPhase::connected) return Status::invalid_state;
    if (wr.sgl.size() > qp->init.max_sge) return Status::invalid_param;
    if (!reserve(qp->sq_used, qp->init.max_send_wr)) return Status::insufficient_resources;
    std::unique_lock lk(mu_, std::try_to_lock);
    std::uint64_t total = 0;
    Access sink_access = Access::local_write;
    {
      std::shared_lock<MrLock> ml;  // (the device lock keeps the MR table as it is)
      if (!lk.owns_lock()) ml = std::shared_lock(ctx_.mrs_mu);
      if (const Status e = check_send(*qp, wr, total, sink_access); e != Status::ok) {
        sq_retire(*qp);
        return e;
      }
    }
    if (lk.owns_lock()) {
      take_send(*qp, wr, total, sink_access);
      return Status::ok;
    }
    {
      std::lock_guard pl(qp->post_mu);
      PostedSend& slot = *post_slot(*qp, &PostRings::send);
      slot.wr = wr;
      slot.sges.assign(wr.sgl.begin(), wr.sgl.end());
      slot.wr.sgl = {slot.sges.data(), slot.sges.size()};
      slot.total = total;
      slot.sink_access = sink_access;
      qp->own_posted->send.publish();
    }
    queue_posts(*qp);
    return Status::ok;
  }

  // ---- SRQ ----
  Status create_srq(const SrqInit& init, Srq*& out) override {
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

  Status destroy_srq(Srq* srq) override {
    std::lock_guard lk(mu_);
    if (!srq || !srqs_.count(srq)) return Status::invalid_param;
    if (srq->users) return Status::in_use;
    srq->pd->users--;
    srqs_.erase(srq);
    delete srq;
    return Status::ok;
  }

  Status post_srq_recv(Srq* srq, const RecvWr& wr) override {
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

  SrqCounts srq_counts(const Srq* srq) const override {
    std::lock_guard lk(mu_);
    return srq_counts_locked(srq);
  }
  static SrqCounts srq_counts_locked(const Srq* srq) {
    return SrqCounts{static_cast<std::uint32_t>(srq->q.size()),
                     srq->outstanding,
                     srq->allocated,
                     srq->completed,
                     srq->max_wr,
                     srq->low_watermark};
  }

  Status resize_srq(Srq* srq, std::uint32_t max_wr) override {
    std::lock_guard lk(mu_);
    if (max_wr == 0 || max_wr > ctx_.limits.max_qp_wr) return Status::invalid_param;
    if (max_wr < srq->outstanding) return Status::invalid_state;  // cannot drop posted buffers
    srq->max_wr = max_wr;
    return Status::ok;
  }

  Status set_srq_low_watermark(Srq* srq, std::uint32_t lw) override {
    std::lock_guard lk(mu_);
    if (lw > srq->max_wr) return Status::invalid_param;
    srq->low_watermark = lw;
    srq->lw_armed = true;
    check_low_watermark(*srq);
    return Status::ok;
  }

  void srq_reaped(Srq* srq, std::uint32_t n) override {
    std::lock_guard lk(mu_);
    if (!srqs_.count(srq)) return;
    n = std::min(n, srq->completed);
    srq->completed -= n;
    srq->outstanding -= n;
  }

  RecvCounts recv_counts(const Qp* qp) const override {
    std::lock_guard lk(mu_);  // one snapshot: count and span under the same lock
    take_posts_of(qp);
    return RecvCounts{qp->rq_allocated, static_cast<std::uint32_t>(qp->rq.size())};
  }

  DeviceInfo info() const override {
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

  Status set_recv_watermarks(Qp* qp, std::uint32_t soft, std::uint32_t hard) override {
    std::lock_guard lk(mu_);
    take_posts(*qp);  // (this QP's posts first: device_lock.hpp)
    qp->soft_watermark = soft;
    qp->hard_watermark = hard;
    qp->soft_watermark_armed = soft != kNoWatermark;
    check_watermarks(*qp);
    return Status::ok;
  }

  // ---- Progress (the engine's) ----
  std::unique_ptr<CompletionChannel> create_channel() override { return std::make_unique<Channel>(*engine_); }
  bool progress(std::chrono::microseconds drive_for) override { return engine_->progress(drive_for); }
  bool consumer_polling() const override { return engine_->consumer_polling(); }

  // engine::Pollable: the doorbell, then the transport's round.
  std::size_t poll(std::optional<Clock::time_point> now) override {
    ring_doorbell();
    return pollable_->poll(now);
  }
  std::chrono::microseconds next_wait() override {
    return doorbell_.empty() && !mu_.pending() ? pollable_->next_wait() : std::chrono::microseconds(0);
  }

 private:
  // One more entry in use of a queue of `max` (sq_used, rq_used), unless it is full. (Posts to
  // one QP from several threads, and bind_mw, may race here: a compare-and-swap each.)
  static bool reserve(std::atomic<std::uint32_t>& used, std::uint32_t max) {
    std::uint32_t u = used.load(std::memory_order_relaxed);
    do {
      if (u >= max) return false;
    } while (!used.compare_exchange_weak(u, u + 1, std::memory_order_relaxed));
    return true;
  }

  // Under the QP's post lock: the next free slot of one of its post rings. A full ring (the
  // device lock's holder has not taken 64 posts in yet) is taken in here, under the device lock.
  template <class T>
  T* post_slot(Qp& qp, SpscRing<T> PostRings::*ring) {
    if (!qp.own_posted) {
      const auto cap = [](std::uint32_t n) { return std::clamp<std::size_t>(n, 2, kPostRing); };
      qp.own_posted = std::make_unique<PostRings>(cap(qp.init.max_send_wr), cap(qp.init.max_recv_wr));
      qp.posted.store(qp.own_posted.get(), std::memory_order_release);
    }
    for (;;) {
      if (T* slot = ((*qp.own_posted).*ring).producer_slot()) return slot;
      std::lock_guard lk(mu_);  // (nothing that holds the device lock waits for a post lock)
      take_posts(qp);
    }
  }

  // The QP has posts on its rings: onto the device's list (once), and handed to the device lock.
  // (A QP already on the list, or taken off it and not yet cleared of `queued`, needs nothing
  // more: whoever takes the list in, or clears `queued` after this, sees this post.)
  void queue_posts(Qp& qp) {
    if (qp.queued.exchange(true, std::memory_order_acq_rel)) return;
    Qp* head = queued_.load(std::memory_order_relaxed);
    do {
      qp.next_queued = head;
    } while (!queued_.compare_exchange_weak(head, &qp, std::memory_order_release, std::memory_order_relaxed));
    mu_.posted();
  }
  bool has_posts() const override { return queued_.load(std::memory_order_relaxed) != nullptr; }

  // engine::DeviceLock::Drain, under the device lock: every queued QP's posts, in the order the
  // QPs were queued.
  void take_posts() override {
    Qp* q = queued_.exchange(nullptr, std::memory_order_acquire);
    Qp* in_order = nullptr;
    while (q) {
      Qp* next = q->next_queued;
      q->next_queued = in_order;
      in_order = q;
      q = next;
    }
    while (in_order) {
      Qp* qp = in_order;
      in_order = qp->next_queued;  // (read before queued is cleared: a post may link it again)
      // Acquire: the posts before the one that queued it (or found it queued) are visible.
      qp->queued.exchange(false, std::memory_order_acq_rel);
      take_posts(*qp);
    }
  }
  // A verb about one QP takes its posts in first (device_lock.hpp): what the QP holds is state the
  // device lock guards, so a const verb may.
  void take_posts_of(const Qp* qp) const { const_cast<DeviceImpl*>(this)->take_posts(*const_cast<Qp*>(qp)); }
  // One QP's posts: its receives first (a reply to one of its sends may need them).
  void take_posts(Qp& qp) {
    PostRings* r = qp.posted.load(std::memory_order_acquire);
    if (!r) return;
    take_posted_receives(qp);
    auto& sends = r->send;
    while (PostedSend* p = sends.consumer_slot()) {
      take_send(qp, p->wr, p->total, p->sink_access);
      sends.consume();
    }
  }

  // What post_send checks of a request, with the MR table held still (by the device lock or its
  // shared lock): its regions, its length, what its opcode needs. `total`: its length;
  // `sink_access`: what an RDMA Read's sink must grant.
  Status check_send(const Qp& qp, const SendWr& wr, std::uint64_t& total, Access& sink_access) const {
    // (qp.ord is set before cm becomes connected, and not changed while it is.)
    total = 0;
    for (const Sge& g : wr.sgl) {
      if (g.length == 0) continue;
      // (a window, the sink of a read into an RMR, serves remote access only)
      if (const MrCheck c = ctx_.mrs.check(g.lkey, qp.init.pd, g.addr, g.length,
                                           wr.sink_is_window ? Access::remote_write : Access::none);
          c != MrCheck::ok)
        return local_status(c);
      total += g.length;
    }
    if (total > ctx_.limits.max_msg_size) return Status::length_error;
    const bool atomic = wr.opcode == SendOpcode::cmp_swap || wr.opcode == SendOpcode::fetch_add;
    if ((atomic || wr.opcode == SendOpcode::send_imm || wr.opcode == SendOpcode::rdma_write_imm) &&
        ctx_.cfg.wire != Wire::roce)
      return Status::invalid_param;  // iWARP has no immediate data and no atomics
    if (atomic) {
      // One 8-byte sink for the value found; the target 8 bytes aligned (IBTA o9-21).
      if (wr.sgl.size() != 1 || wr.sgl[0].length != 8 || wr.sink_is_window) return Status::length_error;
      if (wr.remote_addr % 8 != 0) return Status::invalid_param;
      if (const MrCheck c = ctx_.mrs.check(wr.sgl[0].lkey, qp.init.pd, wr.sgl[0].addr, 8, Access::local_write);
          c != MrCheck::ok)
        return local_status(c);
      if (qp.ord == 0) return Status::insufficient_resources;
    }
    sink_access = wr.sink_is_window ? Access::remote_write : Access::local_write;
    if (wr.opcode == SendOpcode::rdma_read) {
      if (wr.sink_is_window && wr.sgl.size() > 1) return Status::invalid_param;
      if (qp.ord == 0) return Status::insufficient_resources;  // the peer takes no RDMA Read at all
      // The sink (one SGE, or a scatter list under an internal STag) must take local writes.
      for (const Sge& g : wr.sgl) {
        if (!g.length) continue;
        if (const MrCheck c = ctx_.mrs.check(g.lkey, qp.init.pd, g.addr, g.length, sink_access); c != MrCheck::ok)
          return local_status(c);
      }
    } else if (wr.sink_is_window) {
      return Status::invalid_param;
    }
    return Status::ok;
  }

  // A checked request onto sq (its sq_used entry reserved), on the wire if it may go now.
  void take_send(Qp& qp, const SendWr& wr, std::uint64_t total, Access sink_access) {
    const bool read = wr.opcode == SendOpcode::rdma_read;
    const WcOpcode wc_op = read                                      ? WcOpcode::rdma_read
                           : wr.opcode == SendOpcode::rdma_write     ? WcOpcode::rdma_write
                           : wr.opcode == SendOpcode::rdma_write_imm ? WcOpcode::rdma_write_imm
                           : wr.opcode == SendOpcode::cmp_swap       ? WcOpcode::cmp_swap
                           : wr.opcode == SendOpcode::fetch_add      ? WcOpcode::fetch_add
                                                                     : WcOpcode::send;
    if (qp.state != QpState::rts || qp.cm != CmPhase::connected) {
      // The connection began to close after the post checked: the request is not issued, and is
      // flushed after everything posted before it (at once when nothing is).
      if (qp.sq.empty()) {
        sq_retire(qp);
        push_wc(qp.init.send_cq, Wc{wr.wr_id, wc_op, WcStatus::flushed, 0, &qp, qp.init.context});
      } else {
        SendWqe& w = qp.sq.emplace_back();
        w.wr_id = wr.wr_id;
        w.opcode = wc_op;
        w.issued = false;  // (complete_sends stops at it; flush_qp flushes it in its turn)
      }
      return;
    }
    SendWqe& wqe = qp.sq.emplace_back(SendWqe{wr.wr_id, wc_op, wr.signaled, 0, static_cast<std::uint32_t>(total),
                                              SglRef{}, is_read_like(wr.opcode), false, false});
    WaitingWr w{wr.opcode,
                ctx_.sgl_pool.make(wr.sgl),
                wr.rkey,
                wr.remote_addr,
                wr.invalidate_stag,
                total,
                wr.fence,
                sink_access,
                &wqe,
                wr.imm,
                wr.compare_add,
                wr.swap};
    if (qp.sq_wait.empty() && can_issue(qp, w)) {
      qp.transport->issue(qp, w);
      doorbell(qp);
    } else {
      qp.sq_wait.push_back(std::move(w));  // issued when the reads ahead of it complete
    }
  }

  // A post's frames go out at once, unless a consumer drives the engine: then they wait for its
  // next round (a consumer that polls comes back within microseconds; one that waits rings the
  // doorbell before it blocks, as next_wait() is 0 then), so a run of posts made between two
  // polls (a stream reposting on each completion it dequeues) leaves in one burst, one system
  // call on the udp netdev. kDoorbellPosts posts ring it whatever the consumer does.
  void doorbell(Qp& qp) {
    // (A post to a QP with nothing else outstanding, as in a ping-pong, leaves at once: there
    // is nothing to batch it with, and the check of the engine's state reads the clock.)
    // (The udp wire and RoCEv2 defer posts and send a run of frames in one burst (RoCEv2:
    // sendmmsg on the QP's source port); MPA/TCP writes each post to its stream at once. A
    // RoCEv2 client whose last requests are still unacknowledged when it disconnects relies on
    // the peer's DREQ handling (roce/cm.cpp, on_dreq) to have them acknowledged first.)
    // A consumer that has just taken several completions (a stream over many QPs reposting on
    // each) is batched even when each QP is idle, but for its first post after that poll: that
    // one goes at once and keeps the peer busy while the rest are posted (deferring it too slows
    // a single QP's 64 B stream measurably).
    if (ctx_.cfg.batch_posts && ctx_.cfg.wire != Wire::tcp &&
        (qp.sq.size() > 1 || (polled_several_.load(std::memory_order_relaxed) &&
                              idle_posts_.fetch_add(1, std::memory_order_relaxed) > 0)) &&
        engine_->defers_posts()) {
      if (!qp.doorbell) {
        qp.doorbell = true;
        doorbell_.push_back(&qp);
      }
      if (++doorbell_posts_ < kDoorbellPosts) return;
      ring_doorbell();
      return;
    }
    qp.transport->kick(qp);
  }
  // The QP's waiting posts are the transport's now (it is reset or destroyed): off the list.
  void off_doorbell(Qp& qp) {
    if (!qp.doorbell) return;
    qp.doorbell = false;
    std::erase(doorbell_, &qp);
  }
  void ring_doorbell() {
    if (doorbell_.empty()) return;
    doorbell_posts_ = 0;
    for (Qp* q : doorbell_) q->doorbell = false;
    transport_->kick_all(doorbell_);
    doorbell_.clear();
  }

  template <class T>
  void start(std::unique_ptr<T> t, netdev::Waitable& w) {
    mu_.set_drain(this);
    pollable_ = t.get();
    transport_ = std::move(t);
    waitable_ = &w;
    engine_ = std::make_unique<engine::Engine>(w, mu_, ctx_.cfg.busy_poll);
    engine_->start(*this);
  }

  // Back to idle, ready for a new connection: its transport state fresh, its queues flushed.
  void reset(Qp& qp) {
    off_doorbell(qp);
    qp.transport->reset(qp);
    flush_qp(qp);
    qp_event(qp, QpEvent::reset);
    qp.peer = qp.local = {};
    qp.recv_msn = 1;
  }

  Ctx ctx_;
  mutable engine::DeviceLock mu_;                        // takes posts in (take_posts) when taken and let go
  std::atomic<Qp*> queued_{nullptr};                     // QPs with posts to take in: a stack linked by Qp::next_queued
  std::unique_ptr<netdev::Netdev> datagram_netdev_;      // the datagram netdev (wire udp), or
  std::unique_ptr<netdev::StreamNetdev> stream_netdev_;  // the stream netdev (wire tcp)
  std::unique_ptr<Transport> transport_;
  roce::Roce* roce_ = nullptr;            // transport_, when the wire is RoCEv2
  engine::Pollable* pollable_ = nullptr;  // the transport's round (poll() rings the doorbell, then runs it)
  netdev::Waitable* waitable_ = nullptr;
  std::unique_ptr<engine::Engine> engine_;
  static constexpr std::uint32_t kDoorbellPosts = 32;
  static constexpr std::size_t kPostRing = 64;  // the most posts a QP's ring holds before they are taken in
  std::vector<Qp*> doorbell_;                   // QPs whose posts wait for the doorbell
  // The last poll_cq that took anything took (or left) more than one; posts to idle QPs since.
  std::atomic<bool> polled_several_{false};
  std::atomic<std::uint32_t> idle_posts_{0};
  std::uint32_t doorbell_posts_ = 0;
  std::uint32_t next_pd_ = 1;
  std::unordered_set<Pd*> pd_set_;
  std::unordered_set<Cq*> cqs_;
  std::unordered_set<Srq*> srqs_;
};

}  // namespace

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
