// Completions: CQ entries, flushing a QP's queues, closing a QP with one event.
#include "queues.hpp"
#include "softrnic/log.hpp"

namespace softrnic {

void push_wc(Cq* cq, const Wc& wc) {
  // A send-queue completion (or a flushed one) gives memory back that frames batched for the
  // wire may still read: they leave first. (Receive completions give back receive buffers,
  // which nothing batched reads.)
  if (wc.qp && wc.opcode != WcOpcode::recv && wc.opcode != WcOpcode::recv_rdma_imm && wc.qp->transport)
    wc.qp->transport->drain_tx();
  // (The device lock makes this the ring's one producer.)
  std::size_t waiting = cq->ring.size();
  bool queued = false;
  if (cq->spilled.load(std::memory_order_acquire)) {
    std::lock_guard lk(cq->spill_mu);
    if (cq->spilled.load(std::memory_order_relaxed)) {  // behind what waits there
      waiting += cq->spill.size();
      cq->spill.push_back(wc);
      queued = true;
    }
  }
  if (!queued) {
    if (Wc* slot = cq->ring.producer_slot()) {
      *slot = wc;
      cq->ring.publish();
    } else {
      std::lock_guard lk(cq->spill_mu);
      cq->spill.push_back(wc);
      cq->spilled.store(true, std::memory_order_release);
    }
  }
  if (waiting >= cq->depth) cq->overflows++;
  if (cq->notify &&
      (!cq->notify_solicited_only.load(std::memory_order_relaxed) || wc.solicited || wc.status != WcStatus::success))
    cq->notify();
}

void flush_qp(Qp& qp) {
  rq_retire(qp, static_cast<std::uint32_t>(qp.rq.size()));
  sq_retire(qp, static_cast<std::uint32_t>(qp.sq.size()));
  // Buffers taken from an SRQ go to this QP's receive EVD too; untaken entries had none.
  for (auto& r : qp.rq) {
    if (!r.allocated) continue;
    srq_completed(r.srq);
    push_wc(qp.init.recv_cq, Wc{r.wr_id, WcOpcode::recv, WcStatus::flushed, 0, &qp, qp.init.context, r.srq});
  }
  qp.rq.clear();
  qp.rq_allocated = 0;
  for (auto& s : qp.sq) push_wc(qp.init.send_cq, Wc{s.wr_id, s.opcode, WcStatus::flushed, 0, &qp, qp.init.context});
  qp.sq.clear();
  qp.sq_wait.clear();
  qp.reads_out.clear();
  qp.transport->flush(qp);
}

void emit(Qp& qp, CmEventType ev, std::string reason, std::vector<std::uint8_t> pd) {
  // Connection life at info; a connection that broke on an error at warn.
  const log::Level l = ev == CmEventType::broken ? log::Level::warn : log::Level::info;
  if (log::enabled(l))
    log::line(l, qp.who,
              std::string(to_string(ev)) + " (peer " + netdev::to_string(qp.peer) + ")" +
                  (reason.empty() ? "" : ": " + reason));
  if (qp.init.on_event) qp.init.on_event(&qp, CmEvent{ev, std::move(pd), std::move(reason)});
}

void close_qp(Qp& qp, std::optional<CmEventType> ev, std::string reason) {
  flush_qp(qp);
  qp_event(qp, ev == CmEventType::disconnected ? QpEvent::closed : QpEvent::broken);
  qp.transport->closed(qp);
  if (ev) emit(qp, *ev, std::move(reason));
}

}  // namespace softrnic
