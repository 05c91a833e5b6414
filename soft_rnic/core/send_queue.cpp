// The send queue: ORD gating and read fences, completion in posting order; placement of what
// comes back for it or at it from the peer (RDMA Write data, Read Responses).
#include <algorithm>

#include "queues.hpp"
#include "user_mem.hpp"

namespace softrnic {

std::optional<std::span<const std::uint8_t>> gather(Ctx& ctx, const Pd* pd, std::span<const Sge> sgl, std::uint64_t off,
                                                    std::size_t len, std::vector<std::uint8_t>& scratch) {
  if (len == 0) return std::span<const std::uint8_t>{};
  const std::size_t total = len;
  scratch.clear();
  for (const Sge& g : sgl) {
    if (len == 0) break;
    if (off >= g.length) {
      off -= g.length;
      continue;
    }
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(g.length - off, len));
    if (ctx.mrs.check(g.lkey, pd, g.addr + off, n, Access::none) != MrCheck::ok) return std::nullopt;
    const auto* src = reinterpret_cast<const std::uint8_t*>(static_cast<std::uintptr_t>(g.addr + off));
    if (n == total) return std::span<const std::uint8_t>{src, n};
    const std::size_t at = scratch.size();
    scratch.resize(at + n);
    if (!guarded_copy(scratch.data() + at, src, n)) {
      ctx.ctr.memory_faults++;
      return std::nullopt;
    }
    len -= n;
    off = 0;
  }
  if (len != 0) return std::nullopt;  // the list is shorter than asked
  return std::span<const std::uint8_t>{scratch};
}

bool can_issue(const Qp& qp, const WaitingWr& w) {
  if (is_read_like(w.opcode) && qp.reads_out.size() >= qp.ord) return false;
  if (w.fence && !qp.reads_out.empty()) return false;
  return true;
}

void issue_waiting(Qp& qp) {
  bool any = false;
  while (!qp.sq_wait.empty() && qp.state == QpState::rts && can_issue(qp, qp.sq_wait.front())) {
    qp.transport->issue(qp, qp.sq_wait.front());
    qp.sq_wait.pop_front();
    any = true;
  }
  if (any) qp.transport->kick(qp);
  if (qp.sq_wait.empty() && qp.cm == CmPhase::disconnecting && qp.state == QpState::rts)
    qp.transport->send_queue_drained(qp);
}

RequestedRead& begin_read(Qp& qp, const WaitingWr& w) {
  const bool scattered = w.sgl->size() > 1;
  Sge sink = w.sgl->empty() ? Sge{} : (*w.sgl)[0];
  if (scattered) {
    qp.next_read_stag = qp.next_read_stag % (kMaxInternalStag - 1) + 1;
    sink = Sge{qp.next_read_stag, 0, static_cast<std::uint32_t>(w.total)};
  }
  return qp.reads_out.emplace_back(RequestedRead{sink.lkey, sink.addr, static_cast<std::uint32_t>(w.total), 0, 0, false,
                                                 w.wqe, w.sink_access, scattered ? w.sgl : SglRef{}});
}

void complete_sends(Qp& qp, Pos acked) {
  while (!qp.sq.empty()) {
    const SendWqe& s = qp.sq.front();
    if (!s.issued || (s.is_read ? !s.read_done : acked < s.end_pos)) break;
    sq_retire(qp);
    if (s.signaled)
      push_wc(qp.init.send_cq, Wc{s.wr_id, s.opcode, WcStatus::success, s.byte_len, &qp, qp.init.context});
    qp.sq.pop_front();
  }
}

void complete_head(Qp& qp, WcStatus status) {
  if (qp.sq.empty()) return;
  const SendWqe& f = qp.sq.front();
  sq_retire(qp);
  push_wc(qp.init.send_cq, Wc{f.wr_id, f.opcode, status, 0, &qp, qp.init.context});
  qp.sq.pop_front();
}

std::optional<Fault> place_tagged(Ctx& ctx, Qp& qp, std::uint32_t stag, std::uint64_t to,
                                  std::span<const std::uint8_t> payload) {
  const MrCheck c = ctx.mrs.check(stag, qp.init.pd, to, payload.size(), Access::remote_write);
  if (c != MrCheck::ok) return Fault{tagged_error(c), std::string(to_string(c))};
  if (!payload.empty() &&
      !guarded_copy(reinterpret_cast<void*>(static_cast<std::uintptr_t>(to)), payload.data(), payload.size())) {
    ctx.ctr.memory_faults++;
    return Fault{Error::local_catastrophic,
                 "an RDMA Write target's registered memory is no longer mapped with write access"};
  }
  return std::nullopt;
}

std::optional<Fault> place_read_response(Ctx& ctx, Qp& qp, std::uint32_t stag, std::uint64_t to,
                                         std::span<const std::uint8_t> payload, Pos pos) {
  // Responses come in the order of the requests: the segment belongs to the oldest read whose
  // sink holds it and that still lacks bytes (reads may share one sink); the empty response of
  // a zero-length read to the oldest such read not answered yet. Under reordering a segment may
  // be counted for an earlier read of the same sink; a read still completes only when every
  // segment before its last counted one has been delivered, so its own bytes are in place.
  const bool empty = payload.empty();
  RequestedRead* rd = nullptr;
  for (RequestedRead& r : qp.reads_out) {
    const bool wants = empty ? r.len == 0 && !r.pos_seen : r.placed < r.len;
    if (wants && r.sink_stag == stag && to >= r.sink_to && to + payload.size() <= r.sink_to + r.len) {
      rd = &r;
      break;
    }
  }
  if (!rd) return Fault{Error::stag_not_associated, "Read Response for no outstanding RDMA Read"};
  if (!payload.empty() && rd->scatter) {
    if (auto f =
            scatter(ctx, qp.init.pd, *rd->scatter, to - rd->sink_to, payload, Access::local_write, "an RDMA Read sink"))
      return f;
  } else if (!payload.empty()) {
    if (ctx.mrs.check(stag, qp.init.pd, to, payload.size(), rd->sink_access) != MrCheck::ok)
      return Fault{Error::local_catastrophic, "an RDMA Read sink region was freed while the read was outstanding"};
    if (!guarded_copy(reinterpret_cast<void*>(static_cast<std::uintptr_t>(to)), payload.data(), payload.size())) {
      ctx.ctr.memory_faults++;
      return Fault{Error::local_catastrophic,
                   "an RDMA Read sink's registered memory is no longer mapped with write access"};
    }
  }
  rd->placed += payload.size();
  if (!rd->pos_seen || rd->last_pos < pos) rd->last_pos = pos;
  rd->pos_seen = true;
  return std::nullopt;
}

bool complete_reads(Qp& qp, Pos delivered, Pos acked) {
  bool any = false;
  while (!qp.reads_out.empty()) {
    RequestedRead& r = qp.reads_out.front();
    if (!r.pos_seen || r.placed < r.len || !(r.last_pos < delivered)) break;
    r.wqe->read_done = true;
    qp.reads_out.pop_front();
    any = true;
  }
  if (any) {
    complete_sends(qp, acked);
    issue_waiting(qp);  // reads that waited for an ORD slot, requests behind a fence
  }
  return any;
}

}  // namespace softrnic
