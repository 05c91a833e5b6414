// The receive queue: where an inbound Send is placed, how an SRQ buffer is taken, and when a
// receive completes.
#include <algorithm>

#include "queues.hpp"
#include "user_mem.hpp"

namespace softrnic {

Status make_recv(Ctx& ctx, Pd* pd, const RecvWr& wr, RecvWqe& r) {
  r.wr_id = wr.wr_id;
  for (const Sge& g : wr.sgl) {
    if (g.length == 0) continue;
    if (const MrCheck c = ctx.mrs.check(g.lkey, pd, g.addr, g.length, Access::local_write); c != MrCheck::ok)
      return local_status(c);
    r.sgl.push_back(g);
    r.capacity += g.length;
  }
  return r.capacity > ctx.limits.max_msg_size ? Status::length_error : Status::ok;
}

void srq_completed(Srq* srq) {
  if (!srq) return;
  srq->allocated--;
  srq->completed++;
}

void check_low_watermark(Srq& srq) {
  if (srq.lw_armed && srq.q.size() < srq.low_watermark) {
    srq.lw_armed = false;
    if (srq.on_low_watermark) srq.on_low_watermark(&srq);
  }
}

bool check_watermarks(Qp& qp) {
  if (qp.soft_watermark_armed && qp.rq_allocated > qp.soft_watermark) {
    qp.soft_watermark_armed = false;
    if (qp.init.on_soft_watermark) qp.init.on_soft_watermark(&qp);
  }
  if (qp.hard_watermark != kNoWatermark && qp.rq_allocated > qp.hard_watermark && qp.state == QpState::rts) {
    qp.transport->fatal(qp, Error::local_catastrophic, "more receive buffers allocated than the hard high watermark");
    return false;
  }
  return true;
}

std::optional<Fault> scatter(Ctx& ctx, const Pd* pd, std::span<const Sge> sgl, std::uint64_t off,
                             std::span<const std::uint8_t> payload, Access need, const char* what) {
  for (int pass = 0; pass < 2; ++pass) {
    std::uint64_t at = off;
    std::size_t done = 0;
    for (const Sge& g : sgl) {
      if (done == payload.size()) break;
      if (at >= g.length) {
        at -= g.length;
        continue;
      }
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(g.length - at, payload.size() - done));
      if (pass == 0 && ctx.mrs.check(g.lkey, pd, g.addr + at, n, need) != MrCheck::ok)
        return Fault{Error::local_catastrophic, std::string(what) + "'s region was freed while posted"};
      if (pass == 1 &&
          !guarded_copy(reinterpret_cast<void*>(static_cast<std::uintptr_t>(g.addr + at)), payload.data() + done, n)) {
        ctx.ctr.memory_faults++;
        return Fault{Error::local_catastrophic,
                     std::string(what) + "'s registered memory is no longer mapped with write access"};
      }
      done += n;
      at = 0;
    }
  }
  return std::nullopt;
}

namespace {

// Where message `msn` stands on rq: its entry's index, negative for a message already completed
// (MSNs wrap: the distance is signed).
std::int64_t msn_index(const Qp& qp, std::uint32_t msn) {
  return static_cast<std::int32_t>(msn - qp.recv_msn);
}

// Gives rq[idx] a buffer from the SRQ (and, under gap fill, every entry below it).
bool allocate_from_srq(Ctx& ctx, Qp& qp, std::size_t idx) {
  Srq& srq = *qp.init.srq;
  const AllocPolicy policy = qp.init.alloc_policy.value_or(ctx.cfg.alloc_policy);
  const std::size_t first = policy == AllocPolicy::gap_fill ? 0 : idx;
  for (std::size_t i = first; i <= idx; ++i) {
    RecvWqe& slot = qp.rq[i];
    if (slot.allocated) continue;
    if (srq.q.empty()) return false;
    slot = std::move(srq.q.front());
    srq.q.pop_front();
    slot.allocated = true;
    qp.rq_allocated++;
    srq.allocated++;
  }
  check_low_watermark(srq);
  return check_watermarks(qp);
}

}  // namespace

std::optional<Fault> place_untagged(Ctx& ctx, Qp& qp, std::uint32_t msn, std::uint64_t mo,
                                    std::span<const std::uint8_t> payload, bool last, std::uint32_t inv_stag,
                                    bool invalidate, Pos pos) {
  const std::int64_t idx = msn_index(qp, msn);
  if (idx < 0) return Fault{Error::msn_range, "MSN " + std::to_string(msn) + " already completed"};
  const auto slot = static_cast<std::size_t>(idx);
  if (qp.init.srq) {
    // A message's first segment to arrive takes a buffer from the SRQ (arrival order).
    if (slot >= kMaxMsnAhead) return Fault{Error::msn_range, "MSN " + std::to_string(msn) + " too far ahead"};
    if (slot >= qp.rq.size()) {
      RecvWqe empty;
      empty.allocated = false;
      qp.rq.resize(slot + 1, empty);
    }
    const QpState before = qp.state;
    if (!qp.rq[slot].allocated && !allocate_from_srq(ctx, qp, slot)) {
      if (qp.state != before) return std::nullopt;  // broken by it (the hard watermark)
      return Fault{Error::no_buffer, "the SRQ has no buffer for MSN " + std::to_string(msn)};
    }
  } else {
    if (!take_receives_for(qp, msn)) return std::nullopt;  // broken by them (the hard watermark)
    if (slot >= qp.rq.size()) return Fault{Error::no_buffer, "no receive buffer posted for MSN " + std::to_string(msn)};
  }
  RecvWqe& r = qp.rq[slot];
  const std::uint64_t end = mo + payload.size();
  if (end > r.capacity)
    return Fault{Error::message_too_long, "message of at least " + std::to_string(end) + " bytes for a " +
                                              std::to_string(r.capacity) + "-byte buffer"};
  if (r.last_seen && end > r.msg_len) return Fault{Error::bad_offset, "segment beyond the message's last segment"};
  // Scatter into the buffer's SGL, its regions checked again first (a consumer may have freed
  // one after posting).
  if (auto f = scatter(ctx, r.srq ? r.srq->pd : qp.init.pd, {r.sgl.data(), r.sgl.size()}, mo, payload,
                       Access::local_write, "a receive buffer"))
    return f;
  r.placed += payload.size();
  if (last) {
    r.last_seen = true;
    r.msg_len = end;
  }
  if (!r.pos_seen || r.last_pos < pos) r.last_pos = pos;
  r.pos_seen = true;
  if (invalidate) r.inv_stag = inv_stag;
  if (r.last_seen && r.placed >= r.msg_len) r.done = true;
  return std::nullopt;
}

bool take_receives_for(Qp& qp, std::uint32_t msn) {
  const std::int64_t idx = msn_index(qp, msn);
  if (qp.init.srq || idx < 0 || static_cast<std::size_t>(idx) < qp.rq.size()) return true;
  return take_posted_receives(qp);
}

bool recv_buffer_ready(const Qp& qp, std::uint32_t msn) {
  const std::int64_t idx = msn_index(qp, msn);
  if (idx < 0) return false;
  const auto slot = static_cast<std::size_t>(idx);
  const bool posted = slot < qp.rq.size() && qp.rq[slot].allocated;
  return posted || (qp.init.srq && slot < kMaxMsnAhead && !qp.init.srq->q.empty());
}

bool take_posted_receives(Qp& qp) {
  PostRings* r = qp.posted.load(std::memory_order_acquire);
  if (!r) return true;
  auto& ring = r->recv;
  bool ok = true;
  while (RecvWqe* w = ring.consumer_slot()) {
    ok = take_receive(qp, std::move(*w)) && ok;
    ring.consume();
  }
  return ok;
}

bool take_receive(Qp& qp, RecvWqe&& r) {
  if (qp.state == QpState::error || qp.state == QpState::terminate) {
    // (close_qp or the Terminate emptied rq already: this comes after everything there was)
    rq_retire(qp);
    push_wc(qp.init.recv_cq, Wc{r.wr_id, WcOpcode::recv, WcStatus::flushed, 0, &qp, qp.init.context});
    return true;
  }
  qp.rq.push_back(std::move(r));
  qp.rq_allocated++;
  return check_watermarks(qp);
}

void set_recv_solicited(Qp& qp, std::uint32_t msn) {
  const std::int64_t idx = msn_index(qp, msn);
  if (idx < 0 || static_cast<std::size_t>(idx) >= qp.rq.size()) return;
  qp.rq[static_cast<std::size_t>(idx)].solicited = true;
}

void set_recv_imm(Qp& qp, std::uint32_t msn, std::uint32_t imm, std::optional<std::uint64_t> rdma_len) {
  const std::int64_t idx = msn_index(qp, msn);
  if (idx < 0 || static_cast<std::size_t>(idx) >= qp.rq.size()) return;
  RecvWqe& r = qp.rq[static_cast<std::size_t>(idx)];
  r.with_imm = true;
  r.imm = imm;
  if (rdma_len) {
    r.rdma_imm = true;
    r.msg_len = *rdma_len;
  }
}

namespace {
bool invalidate(Ctx& ctx, std::uint32_t stag, const Pd* pd) {
  std::lock_guard lk(ctx.mrs_mu);  // (posts read the table without the device lock)
  return ctx.mrs.invalidate(stag, pd);
}
}  // namespace

void complete_receives(Ctx& ctx, Qp& qp, Pos delivered) {
  while (!qp.rq.empty()) {
    const RecvWqe& f = qp.rq.front();
    if (!f.allocated || !f.done || !(f.last_pos < delivered)) break;
    // Send with Invalidate: the window goes before the receive completes.
    if (f.inv_stag && !invalidate(ctx, f.inv_stag, qp.init.pd)) {
      qp.transport->fatal(qp, Error::cannot_invalidate,
                          "Send with Invalidate names no bound window of this protection zone", f.last_pos);
      return;
    }
    srq_completed(f.srq);
    rq_retire(qp);
    push_wc(qp.init.recv_cq, Wc{f.wr_id, f.rdma_imm ? WcOpcode::recv_rdma_imm : WcOpcode::recv, WcStatus::success,
                                static_cast<std::uint32_t>(f.msg_len), &qp, qp.init.context, f.srq, f.inv_stag,
                                f.with_imm, f.imm, f.solicited, f.src_qp, f.src_ip});
    qp.rq.pop_front();
    qp.rq_allocated--;
    qp.recv_msn++;
  }
}

bool receive_datagram(Ctx& ctx, Qp& qp, const Datagram& d) {
  // Every earlier datagram completed on arrival: this one's buffer is the front's.
  const std::uint32_t msn = qp.recv_msn;
  if (!take_receives_for(qp, msn) || !recv_buffer_ready(qp, msn)) return false;
  const auto place = [&](std::uint64_t mo, std::span<const std::uint8_t> part, bool last) {
    return place_untagged(ctx, qp, msn, mo, part, last, 0, false, 0);
  };
  std::optional<Fault> f = place(0, {}, false);  // (takes the buffer: an SRQ's)
  if (qp.rq.empty() || !qp.rq.front().allocated) return false;
  RecvWqe& r = qp.rq.front();
  if (!f && d.grh.size() + d.payload.size() > r.capacity) f = Fault{Error::message_too_long, ""};
  if (!f) f = place(0, d.grh, false);
  if (!f) f = place(d.grh.size(), d.payload, true);
  if (f) {
    // (UD: the receive completes in error; the QP goes on)
    const WcStatus st =
        f->error == Error::message_too_long ? WcStatus::local_length_error : WcStatus::local_protection_error;
    srq_completed(r.srq);
    rq_retire(qp);
    push_wc(qp.init.recv_cq, Wc{r.wr_id, WcOpcode::recv, st, 0, &qp, qp.init.context, r.srq});
    qp.rq.pop_front();
    qp.rq_allocated--;
    qp.recv_msn++;
    return true;
  }
  r.src_qp = d.src_qp;
  r.src_ip = d.src_ip;
  r.solicited = d.solicited;
  if (d.imm) {
    r.with_imm = true;
    r.imm = *d.imm;
  }
  complete_receives(ctx, qp, 1);
  return true;
}

}  // namespace softrnic
