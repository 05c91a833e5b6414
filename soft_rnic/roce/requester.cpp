// RoCEv2 requester (rxe_req.c): work requests become packets. Each request takes its PSNs when it
// is issued (a Read as many as its response has packets); pump() transmits from tx_psn within the
// window; go-back-N moves tx_psn back and transmits again from registered memory.
#include <algorithm>

#include "roce.hpp"

namespace softrnic::roce {

namespace w = wire::roce;

namespace {
// rxe's requester asks for an ACK on a message's last packet and every RXE_MAX_PKT_PER_ACK.
constexpr std::uint32_t kPktsPerAck = 64;
// But a message nobody waits for (unsignaled) in a quick series does not ask: in a ping-pong or a
// stream of unsignaled Sends each ACK was a datagram of its own each way (RoCEv2 cannot carry
// one on a request). One asks when it comes after a pause of Roce::kAskIdle, when kAskWrs
// requests wait for their ACK (their send queue slots are freed by it), and the last of a series
// that stops asks that much later (a tail probe: its last packet again, asking; tail_probe).
constexpr std::size_t kAskWrs = 32;

std::uint32_t packets_of(std::uint64_t len, std::uint32_t mtu) {
  return len == 0 ? 1 : static_cast<std::uint32_t>((len + mtu - 1) / mtu);
}
}  // namespace

void Roce::issue(Qp& qp, const WaitingWr& wr) {
  if (qp.init.type == QpType::ud) return issue_datagram(qp, wr);
  RoceQp& s = st(qp);
  SendWqe& wqe = *wr.wqe;
  wqe.issued = true;
  wqe.sgl = wr.sgl;
  ReqWqe r;
  r.sgl = wr.sgl;
  r.total = wr.total;
  r.rkey = wr.rkey;
  r.va = wr.remote_addr;
  r.first_psn = s.next_psn;
  r.npkts = packets_of(wr.total, s.mtu);
  r.signaled = wqe.signaled;
  switch (wr.opcode) {
    case SendOpcode::rdma_read: {
      r.kind = ReqKind::read;
      const RequestedRead& rd = begin_read(qp, wr);
      r.sink_stag = rd.sink_stag;
      r.sink_to = rd.sink_to;
      break;
    }
    case SendOpcode::cmp_swap:
    case SendOpcode::fetch_add: {
      r.kind = ReqKind::atomic;
      r.cmp_swap = wr.opcode == SendOpcode::cmp_swap;
      r.compare_add = wr.compare_add;
      r.swap = wr.swap;
      r.npkts = 1;
      const RequestedRead& rd = begin_read(qp, wr);  // the value found comes back like a Read's data
      r.sink_stag = rd.sink_stag;
      r.sink_to = rd.sink_to;
      break;
    }
    case SendOpcode::rdma_write_imm:
      r.with_imm = true;
      r.imm = wr.imm;
      r.kind = ReqKind::write;
      break;
    case SendOpcode::send_imm:
      r.with_imm = true;
      r.imm = wr.imm;
      break;
    case SendOpcode::rdma_write: r.kind = ReqKind::write; break;
    case SendOpcode::send_invalidate:
      r.invalidate = true;
      r.inv_rkey = wr.invalidate_stag;
      break;
    case SendOpcode::send_solicited: r.solicited = true; break;
    case SendOpcode::send: break;
  }
  s.next_psn += r.npkts;
  wqe.end_pos = s.next_psn;
  if (s.reqs.empty()) s.progress_at = Clock::now();
  s.reqs.push_back(std::move(r));
}

// Transmits what the window allows from tx_psn on.
void Roce::pump(Qp& qp) {
  RoceQp& s = st(qp);
  if (!s.has_path || s.rnr_wait) return;
  bool sent = false;
  auto it = at_psn(s, s.tx_psn);
  while (it != s.reqs.end() && s.tx_psn < s.next_psn && s.tx_psn - s.una_psn < s.cwnd) {
    ReqWqe& r = *it;
    if (r.done) {  // acknowledged already (a go-back-N over a completed Read)
      s.tx_psn = r.first_psn + r.npkts;
      ++it;
      continue;
    }
    const Pos amount = budget_amount(r, s.tx_psn);
    if (!budget_.allows(qp.qpn, static_cast<std::size_t>(amount))) {
      budget_.wait(qp.qpn, s.budget_waiting);
      break;
    }
    // The last packet the window or the device's budget lets go asks for an ACK: the responder
    // acknowledges only what asks, and nothing more may go until an ACK comes (else the ACK
    // timeout would: after a timeout the window is 4 packets, below kPktsPerAck).
    if (s.tx_psn + amount - s.una_psn >= s.cwnd || !budget_.fits(qp.qpn, static_cast<std::size_t>(amount) + 1))
      s.since_ackreq = kPktsPerAck;
    // The ACK timeout runs from the last acknowledgement, or from now when nothing was in flight
    // (the QP may have waited for the budget long after its last ACK).
    if (s.tx_psn == s.una_psn) s.progress_at = Clock::now();
    if (!transmit(qp, r, s.tx_psn)) {
      recount(qp);
      complete_error(qp, WcStatus::local_protection_error, kRegionFreed);
      return;
    }
    recount(qp);
    sent = true;
    if (s.tx_psn >= r.first_psn + r.npkts) ++it;
  }
  recount(qp);  // (a skipped Read moved tx_psn too)
  if (sent) rearm(qp);
}

// Brings the device's budget up to date with what the QP has in flight (tx_psn - una_psn).
void Roce::recount(Qp& qp) {
  RoceQp& s = st(qp);
  budget_.track(s.budget_charged, static_cast<std::size_t>(s.tx_psn - s.una_psn));
}

// The first request not wholly below `psn` (requests are in PSN order): the one holding it when
// psn is not below the oldest; or reqs.end().
std::deque<ReqWqe>::iterator Roce::at_psn(RoceQp& s, Pos psn) {
  return std::find_if(s.reqs.begin(), s.reqs.end(), [&](const ReqWqe& r) { return r.first_psn + r.npkts > psn; });
}

// What transmitting at `psn` of `r` adds to the PSNs in flight: one packet, or a Read's whole
// remaining response.
Pos Roce::budget_amount(const ReqWqe& r, Pos psn) {
  return r.kind == ReqKind::read ? r.first_psn + r.npkts - psn : 1;
}

// Serves the QPs waiting for the device's budget, first come first.
void Roce::pump_waiters() {
  const auto qp_of = [&](std::uint32_t qpn) -> Qp* {
    auto it = ctx_.qps.find(qpn);
    return it == ctx_.qps.end() ? nullptr : it->second;
  };
  budget_.serve(
      [&](std::uint32_t qpn) {
        Qp* q = qp_of(qpn);
        return q ? &st(*q).budget_waiting : nullptr;
      },
      [&](std::uint32_t qpn) {
        RoceQp& s = st(*qp_of(qpn));
        const auto it = at_psn(s, s.tx_psn);
        return it == s.reqs.end() ? std::size_t{0} : static_cast<std::size_t>(budget_amount(*it, s.tx_psn));
      },
      [&](std::uint32_t qpn) { pump(*qp_of(qpn)); });
}

// Sends the packet at `psn` of `r` and moves tx_psn past it (past the whole response of a Read).
bool Roce::transmit(Qp& qp, ReqWqe& r, Pos psn) {
  RoceQp& s = st(qp);
  w::Packet p;
  p.dest_qpn = s.peer_qpn;
  p.psn = static_cast<std::uint32_t>(psn & w::kPsnMask);
  if (r.kind == ReqKind::atomic) {
    p.opcode = r.cmp_swap ? w::Opcode::cmp_swap : w::Opcode::fetch_add;
    p.atomic_eth = w::AtomicEth{r.va, r.rkey, r.cmp_swap ? r.swap : r.compare_add, r.cmp_swap ? r.compare_add : 0};
    p.ack_req = true;
    s.tx_psn = psn + 1;
    s.since_ackreq = 0;
    s.asked_to = s.tx_psn;
    return send_packet(qp, p, {}, 0, 0, qp.init.pd);
  }
  if (r.kind == ReqKind::read) {
    // From the first packet of the response still missing: a Read retried after part of its
    // response came asks for the rest (rxe does the same).
    const std::uint64_t done = std::min<std::uint64_t>(static_cast<std::uint64_t>(r.resp_pkts) * s.mtu, r.total);
    p.opcode = w::Opcode::read_request;
    p.psn = static_cast<std::uint32_t>((r.first_psn + r.resp_pkts) & w::kPsnMask);
    p.reth = w::Reth{r.va + done, r.rkey, static_cast<std::uint32_t>(r.total - done)};
    p.ack_req = true;
    s.tx_psn = r.first_psn + r.npkts;
    s.since_ackreq = 0;
    s.asked_to = s.tx_psn;
    return send_packet(qp, p, {}, 0, 0, qp.init.pd);
  }
  const auto k = static_cast<std::uint32_t>(psn - r.first_psn);
  const std::uint64_t off = static_cast<std::uint64_t>(k) * s.mtu;
  const auto len = static_cast<std::uint32_t>(std::min<std::uint64_t>(s.mtu, r.total - off));
  const bool first = k == 0, last = k + 1 == r.npkts;
  if (r.kind == ReqKind::write) {
    p.opcode = first && last ? (r.with_imm ? w::Opcode::write_only_imm : w::Opcode::write_only)
               : first       ? w::Opcode::write_first
               : last        ? (r.with_imm ? w::Opcode::write_last_imm : w::Opcode::write_last)
                             : w::Opcode::write_middle;
    if (r.with_imm) p.imm = r.imm;
    if (first) p.reth = w::Reth{r.va, r.rkey, static_cast<std::uint32_t>(r.total)};
  } else {
    p.opcode = first && last ? (r.invalidate ? w::Opcode::send_only_inv
                                : r.with_imm ? w::Opcode::send_only_imm
                                             : w::Opcode::send_only)
               : first       ? w::Opcode::send_first
               : last        ? (r.invalidate ? w::Opcode::send_last_inv
                                : r.with_imm ? w::Opcode::send_last_imm
                                             : w::Opcode::send_last)
                             : w::Opcode::send_middle;
    if (r.with_imm) p.imm = r.imm;
    if (r.invalidate) p.inv_rkey = r.inv_rkey;
    p.solicited = last && r.solicited;
  }
  p.ack_req = ++s.since_ackreq >= kPktsPerAck;
  if (last) p.ack_req = asks(qp, r) || p.ack_req;  // (asks notes the time)
  if (p.ack_req) s.since_ackreq = 0;
  s.tx_psn = psn + 1;
  if (p.ack_req) s.asked_to = s.tx_psn;
  return send_packet(qp, p, r.sgl, off, len, qp.init.pd);
}

// Whether the last packet of `r` asks for an ACK (kAskIdle): a signaled request, one after a
// pause, or one behind which kAskWrs (at most half the send queue) wait for theirs; a QP that is
// closing always asks.
bool Roce::asks(Qp& qp, const ReqWqe& r) {
  RoceQp& s = st(qp);
  const auto now = Clock::now();
  const bool quick = now - s.sent_at < ask_idle(s);
  s.sent_at = now;
  const std::size_t wrs = std::clamp<std::size_t>(qp.init.max_send_wr / 2, 1, kAskWrs);
  return r.signaled || !quick || s.reqs.size() >= wrs || s.cm == CmState::dreq_sent || s.cm == CmState::drain;
}

// The last request packet went ask_idle ago without asking for an ACK, and nothing followed it:
// it goes again, asking (the peer acknowledges a duplicate; if the first was lost, this is it).
void Roce::tail_probe(Qp& qp) {
  RoceQp& s = st(qp);
  const Pos psn = s.tx_psn - 1;
  const auto it = at_psn(s, psn);
  if (it == s.reqs.end() || it->first_psn > psn || it->kind == ReqKind::read || it->kind == ReqKind::atomic) {
    s.asked_to = s.tx_psn;  // (those always ask)
    return;
  }
  s.since_ackreq = kPktsPerAck;  // (this packet asks whichever it is)
  s.progress_at = Clock::now();  // (the ACK timeout runs from the ask: the ACK was not due before)
  if (!transmit(qp, *it, psn)) complete_error(qp, WcStatus::local_protection_error, kRegionFreed);
}

// Go-back-N: transmits again from `psn` (not below the oldest unacknowledged PSN). `timeout`:
// nothing came back at all, so only a few packets go until acknowledgements come again.
void Roce::go_back(Qp& qp, Pos psn, bool timeout) {
  RoceQp& s = st(qp);
  s.cwnd = timeout ? 4 : std::max<std::uint32_t>(s.cwnd / 2, 4);
  s.tx_psn = std::max(psn, s.una_psn);
  recount(qp);
  qp.ctr.retransmits++;
  ctx_.ctr.retransmits++;
  pump(qp);
}

}  // namespace softrnic::roce
