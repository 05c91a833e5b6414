// Posting without the device lock (device_impl.hpp): each QP's posters produce into its rings
// under its post lock; whoever holds the device lock takes the posts in, checked, in order.
#include <algorithm>

#include "device_impl.hpp"
#include "queues.hpp"

namespace softrnic {

Status DeviceImpl::post_recv(Qp* qp, const RecvWr& wr) {
  if (qp->init.srq) return Status::invalid_state;  // its receives come from the SRQ
  const QpState st = qp->state.load();
  if (wr.sgl.size() > qp->init.max_sge) return Status::invalid_param;
  if (st == QpState::error && qp->init.errors_complete) return flush_post(*qp, wr.wr_id, std::nullopt);
  if (st != QpState::idle && st != QpState::rtr && st != QpState::rts) return Status::invalid_state;
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

Status DeviceImpl::post_send(Qp* qp, const SendWr& wr) {
  if (wr.sgl.size() > qp->init.max_sge) return Status::invalid_param;
  if (qp->state.load() == QpState::error && qp->init.errors_complete)
    return flush_post(*qp, wr.wr_id, wc_opcode_of(wr));
  if (qp->state.load() != QpState::rts || qp->cm.load() != CmPhase::connected) return Status::invalid_state;
  if (!reserve(qp->sq_used, qp->init.max_send_wr)) return Status::insufficient_resources;
  std::unique_lock lk(mu_, std::try_to_lock);
  std::uint64_t total = 0;
  Access sink_access = Access::local_write;
  {
    std::shared_lock<MrLock> ml;  // (the device lock keeps the MR table as it is)
    if (!lk.owns_lock()) ml = std::shared_lock(ctx_.mrs_mu);
    if (const Status e = check_send(*qp, wr, total, sink_access); e != Status::ok) {
      sq_retire(*qp);
      if (!qp->init.errors_complete || !is_local_memory_error(e)) return e;
      if (ml.owns_lock()) ml.unlock();  // (the device lock first, as everywhere)
      if (!lk.owns_lock()) lk.lock();
      fail_send(*qp, wr, e);
      return Status::ok;
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

bool DeviceImpl::is_local_memory_error(Status s) {
  return s == Status::privileges_violation || s == Status::protection_violation || s == Status::length_error;
}

// A send that failed its local memory check, for a consumer that wants it as a completion
// (QpInit::errors_complete): the QP moves to error, flushing what was posted before it,
// and the request completes with the error after them.
void DeviceImpl::fail_send(Qp& qp, const SendWr& wr, Status e) {
  take_posts(qp);  // (this QP's posts first: device_lock.hpp)
  // (No connection event: as on rxe, the consumer learns it from the completion alone.)
  if (qp.state != QpState::error) close_qp(qp, std::nullopt, "a work request failed its local memory check");
  const WcOpcode op = wc_opcode_of(wr);
  const WcStatus st = e == Status::length_error ? WcStatus::local_length_error : WcStatus::local_protection_error;
  push_wc(qp.init.send_cq, Wc{wr.wr_id, op, st, 0, &qp, qp.init.context});
}

// A post to a QP in error, for a consumer that wants it flushed (QpInit::errors_complete): it
// completes at once, after everything the move to error flushed. `send_op`: its send opcode, or
// nullopt for a receive.
Status DeviceImpl::flush_post(Qp& qp, std::uint64_t wr_id, std::optional<WcOpcode> send_op) {
  std::lock_guard lk(mu_);
  take_posts(qp);                                                // (this QP's posts first: device_lock.hpp)
  if (qp.state != QpState::error) return Status::invalid_state;  // (reset meanwhile)
  Cq* cq = send_op ? qp.init.send_cq : qp.init.recv_cq;
  push_wc(cq, Wc{wr_id, send_op.value_or(WcOpcode::recv), WcStatus::flushed, 0, &qp, qp.init.context});
  return Status::ok;
}

WcOpcode DeviceImpl::wc_opcode_of(const SendWr& wr) {
  switch (wr.opcode) {
    case SendOpcode::rdma_read: return WcOpcode::rdma_read;
    case SendOpcode::rdma_write: return WcOpcode::rdma_write;
    case SendOpcode::rdma_write_imm: return WcOpcode::rdma_write_imm;
    case SendOpcode::cmp_swap: return WcOpcode::cmp_swap;
    case SendOpcode::fetch_add: return WcOpcode::fetch_add;
    default: return WcOpcode::send;
  }
}

bool DeviceImpl::reserve(std::atomic<std::uint32_t>& used, std::uint32_t max) {
  std::uint32_t u = used.load(std::memory_order_relaxed);
  do {
    if (u >= max) return false;
  } while (!used.compare_exchange_weak(u, u + 1, std::memory_order_relaxed));
  return true;
}

void DeviceImpl::queue_posts(Qp& qp) {
  if (qp.queued.exchange(true, std::memory_order_acq_rel)) return;
  Qp* head = queued_.load(std::memory_order_relaxed);
  do {
    qp.next_queued = head;
  } while (!queued_.compare_exchange_weak(head, &qp, std::memory_order_release, std::memory_order_relaxed));
  mu_.posted();
}

void DeviceImpl::take_posts() {
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

void DeviceImpl::take_posts(Qp& qp) {
  PostRings* r = qp.posted.load(std::memory_order_acquire);
  if (!r) return;
  take_posted_receives(qp);
  auto& sends = r->send;
  while (PostedSend* p = sends.consumer_slot()) {
    take_send(qp, p->wr, p->total, p->sink_access);
    sends.consume();
  }
}

Status DeviceImpl::check_send(const Qp& qp, const SendWr& wr, std::uint64_t& total, Access& sink_access) const {
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
  if (qp.init.type == QpType::ud) {
    // A datagram: a Send (with Immediate) of one packet, to a unicast address.
    if (wr.opcode != SendOpcode::send && wr.opcode != SendOpcode::send_solicited && wr.opcode != SendOpcode::send_imm)
      return Status::invalid_param;
    if (!netdev::is_unicast_ipv4(wr.ud.ip) || wr.ud.qpn == 0 || wr.ud.qpn > 0xFFFFFF) return Status::invalid_param;
    if (total > path_mtu()) return Status::length_error;
    return Status::ok;
  }
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

void DeviceImpl::take_send(Qp& qp, const SendWr& wr, std::uint64_t total, Access sink_access) {
  const WcOpcode wc_op = wc_opcode_of(wr);
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
              wr.swap,
              wr.ud};
  if (qp.sq_wait.empty() && can_issue(qp, w)) {
    qp.transport->issue(qp, w);
    doorbell(qp);
  } else {
    qp.sq_wait.push_back(std::move(w));  // issued when the reads ahead of it complete
  }
}

}  // namespace softrnic
