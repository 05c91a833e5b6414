// RoCEv2 completer (rxe_comp.c): what comes back for our requests. ACKs acknowledge through their
// PSN; Read responses are placed in PSN order into the Read's sink and acknowledge everything
// before the Read; NAKs: a PSN sequence error sends again from its PSN (go-back-N), an RNR NAK
// waits its timer first, the others complete the request in error and break the QP. Requests
// complete in posting order (core). The ACK timeout retransmits from the oldest unacknowledged
// PSN, retry_cnt times.
#include <algorithm>

#include "roce.hpp"

namespace softrnic::roce {

namespace w = wire::roce;

namespace {
// The default ACK timeout backs off to 4.096 us * 2^20: retry_cnt 7 then spans 12.8 s, longer than
// the default keepalive bound (5 s of silence and 5 probes a second apart), so a peer stalled for
// seconds is waited for.
constexpr std::chrono::microseconds kMaxBackoffTimeout{4294967};
}  // namespace

// What comes back for our requests (rxe_comp.c): after the PSN checks, a Read response, an atomic
// ACK, or an ACK/NAK by its AETH.
void Roce::on_response(Qp& qp, const w::Packet& p) {
  RoceQp& s = st(qp);
  if (!qp_receives(qp.state)) return;
  const Pos psn = extend_psn(s.una_psn, p.psn);
  if (s.reqs.empty() || psn < s.una_psn) {
    qp.ctr.rx_duplicates++;
    ctx_.ctr.rx_duplicates++;
    return;
  }
  if (psn >= s.next_psn) {
    ctx_.ctr.rx_bad_acks++;  // for nothing we sent
    return;
  }
  const w::OpInfo& op = w::op_info(p.opcode);
  if (op.has(w::Has::read)) {
    on_read_response(qp, p, op, psn);
  } else if (p.opcode == w::Opcode::atomic_ack) {
    on_atomic_ack(qp, p, psn);
  } else if (op.has(w::Has::aeth)) {
    on_aeth(qp, p, psn);
  } else {
    ctx_.ctr.rx_bad_acks++;
  }
}

// A Read response packet into the Read's sink, in PSN order; a gap asks again for the rest.
void Roce::on_read_response(Qp& qp, const w::Packet& p, const w::OpInfo& op, Pos psn) {
  RoceQp& s = st(qp);
  auto it = std::find_if(s.reqs.begin(), s.reqs.end(),
                         [&](const ReqWqe& r) { return psn >= r.first_psn && psn < r.first_psn + r.npkts; });
  if (it == s.reqs.end() || it->kind != ReqKind::read || it->done) {
    ctx_.ctr.rx_bad_acks++;
    return;
  }
  ReqWqe& r = *it;
  const Pos want = r.first_psn + r.resp_pkts;
  if (psn != want) {
    // A response packet lost (or late): ask again for the rest, once per gap.
    if (psn > want && s.last_nak_psn != want) {
      s.last_nak_psn = want;
      go_back(qp, want);
    }
    return;
  }
  const std::uint64_t off = static_cast<std::uint64_t>(r.resp_pkts) * s.mtu;
  const bool last = op.has(w::Has::last);
  if (p.payload.size() > r.total - off || (!last && p.payload.size() != s.mtu) ||
      (last && off + p.payload.size() != r.total)) {
    complete_error(qp, WcStatus::remote_operation_error, "a Read response of the wrong length");
    return;
  }
  s.ack_through = std::max(s.ack_through, r.first_psn);  // everything before the Read
  if (auto f = place_read_response(ctx_, qp, r.sink_stag, r.sink_to + off, p.payload, psn)) {
    complete_error(qp, WcStatus::local_protection_error, f->reason);
    return;
  }
  r.resp_pkts++;
  made_progress(s);
  if (last) {
    r.done = true;
    s.tx_psn = std::max(s.tx_psn, r.first_psn + r.npkts);
  }
  acknowledged(qp, s.ack_through);
}

// An atomic's answer: the value the peer found, into the 8-byte sink in host order (as rxe_comp.c
// writes it).
void Roce::on_atomic_ack(Qp& qp, const w::Packet& p, Pos psn) {
  RoceQp& s = st(qp);
  auto it = std::find_if(s.reqs.begin(), s.reqs.end(), [&](const ReqWqe& r) { return r.first_psn == psn; });
  if (it == s.reqs.end() || it->kind != ReqKind::atomic || it->done) {
    ctx_.ctr.rx_bad_acks++;
    return;
  }
  ReqWqe& r = *it;
  s.ack_through = std::max(s.ack_through, r.first_psn);  // everything before the atomic
  const std::uint64_t orig = *p.atomic_ack;
  if (auto f = place_read_response(ctx_, qp, r.sink_stag, r.sink_to,
                                   {reinterpret_cast<const std::uint8_t*>(&orig), sizeof orig}, psn)) {
    complete_error(qp, WcStatus::local_protection_error, f->reason);
    return;
  }
  r.resp_pkts = 1;
  r.done = true;
  made_progress(s);
  acknowledged(qp, s.ack_through);
}

// An ACK acknowledges through its PSN. An RNR NAK waits its timer and sends again (rnr_retry
// times); a PSN sequence error NAK sends again from its PSN (go-back-N, retry_cnt times without
// progress); the others refuse the request: it completes with the status core/error.cpp maps the
// NAK to and the QP breaks.
void Roce::on_aeth(Qp& qp, const w::Packet& p, Pos psn) {
  RoceQp& s = st(qp);
  const std::uint8_t syndrome = p.aeth->syndrome;
  switch (syndrome & w::kAethTypeMask) {
    case w::kAethAck: acknowledged(qp, psn + 1); return;
    case w::kAethRnrNak: on_rnr_nak(qp, syndrome, psn); return;
    case w::kAethNak: break;
    default: ctx_.ctr.rx_bad_acks++; return;
  }
  acknowledged(qp, psn);
  if (!qp_receives(qp.state)) return;
  if (syndrome == w::kNakPsnSeqError) {
    if (s.rnr_wait && psn == s.tx_psn) return;  // the RNR NAK's message: it goes again after the timer
    // The same NAK again without progress: the retransmission did not get through.
    if (s.last_nak_psn == psn) {
      if (s.retry_left == 0) {
        complete_error(qp, WcStatus::transport_error, "retry count exceeded (PSN sequence error NAKs)");
        return;
      }
      s.retry_left--;
    }
    s.last_nak_psn = psn;
    go_back(qp, psn);
    return;
  }
  const std::optional<WcStatus> refused = nak_status(syndrome);
  if (!refused) {
    ctx_.ctr.rx_bad_acks++;
    return;
  }
  ctx_.ctr.fatal_naks_received++;
  qp.ctr.fatal_naks_received++;
  complete_error(qp, *refused, "the peer sent " + nak_text(syndrome) + " (" + std::string(to_string(*refused)) + ")");
}

void Roce::on_rnr_nak(Qp& qp, std::uint8_t syndrome, Pos psn) {
  RoceQp& s = st(qp);
  acknowledged(qp, psn);
  if (!qp_receives(qp.state)) return;
  if (s.rnr_left == 0) {
    complete_error(qp, WcStatus::rnr_retry_exceeded, "the peer had no receive buffer through every RNR retry");
    return;
  }
  if (s.rnr_retry != 7) s.rnr_left--;
  s.rnr_wait = true;
  s.rnr_until = Clock::now() + std::chrono::microseconds(w::rnr_timer_us(syndrome & 0x1F));
  s.tx_psn = std::max(psn, s.una_psn);
  recount(qp);
  rearm(qp);
}

// Everything below `through` is acknowledged (not a Read's response, which only its packets
// bring): requests done in order leave, the send queue completes, the window opens.
void Roce::acknowledged(Qp& qp, Pos through) {
  RoceQp& s = st(qp);
  s.ack_through = std::max(s.ack_through, through);
  const Pos before = s.una_psn;
  while (!s.reqs.empty()) {
    ReqWqe& r = s.reqs.front();
    if ((r.kind == ReqKind::send || r.kind == ReqKind::write) && r.first_psn + r.npkts <= s.ack_through) r.done = true;
    if (!r.done) break;
    s.reqs.pop_front();
  }
  if (s.reqs.empty()) {
    s.una_psn = s.next_psn;
  } else {
    const ReqWqe& r = s.reqs.front();
    s.una_psn = r.kind == ReqKind::read || r.kind == ReqKind::atomic ? r.first_psn + r.resp_pkts
                                                                     : std::max(r.first_psn, s.ack_through);
  }
  s.tx_psn = std::max(s.tx_psn, s.una_psn);
  recount(qp);
  if (s.una_psn != before) {
    s.cwnd = static_cast<std::uint32_t>(std::min<Pos>(max_window_, s.cwnd + (s.una_psn - before)));
    made_progress(s);
    s.last_nak_psn = ~Pos{0};
  }
  // Reads complete when their whole response is placed ("delivered" through the last packet).
  complete_reads(qp, s.una_psn, s.una_psn);
  complete_sends(qp, s.una_psn);
  if (!qp_receives(qp.state)) return;
  if (s.reqs.empty()) {
    // (The timer stays armed: when it fires, on_timer arms the keepalive deadline instead. Armed
    // anew for every request that completes all, the queue would fill with stale entries.)
    if (qp.cm == CmPhase::disconnecting && qp.sq_wait.empty()) send_queue_drained(qp);
    return;
  }
  pump_waiters();  // before this QP's own requests: it queues behind them
  pump(qp);
  rearm(qp);
}

// The request at the head of the send queue failed: it completes with `status`, the rest are
// flushed, the QP breaks.
void Roce::complete_error(Qp& qp, WcStatus status, std::string reason) {
  complete_sends(qp, st(qp).una_psn);
  complete_head(qp, status);
  break_qp(qp, std::move(reason));
}

Clock::duration Roce::rto(const RoceQp& s) const {
  if (!backoff_) return s.ack_timeout;
  return std::min<Clock::duration>(s.ack_timeout * (1 << std::min(s.timeouts, 16)), kMaxBackoffTimeout);
}

Clock::duration Roce::retry_time() const {
  RoceQp s;
  s.ack_timeout = ack_timeout_;
  Clock::duration t{};
  for (s.timeouts = 0; s.timeouts <= ctx_.cfg.roce.retry_cnt; ++s.timeouts) t += rto(s);
  return t;
}

void Roce::made_progress(RoceQp& s) {
  s.progress_at = Clock::now();
  s.retry_left = s.retry_cnt;
  s.timeouts = 0;
}

void Roce::on_timer(Qp& qp, Clock::time_point now) {
  RoceQp& s = st(qp);
  if (s.cm == CmState::req_sent || s.cm == CmState::rep_sent || s.cm == CmState::dreq_sent || s.cm == CmState::drain) {
    cm_timer(qp, now);
    if (!ctx_.qps.count(qp.qpn)) return;
  }
  if (!s.has_path) {
    rearm(qp);
    return;
  }
  if (!s.read_jobs.empty()) send_responses(qp);
  if (!s.has_path) return;
  if (s.reqs.empty()) {
    if (keepalive_on(qp)) keepalive(qp, now);
    if (ctx_.qps.count(qp.qpn)) rearm(qp);
    return;
  }
  if (s.rnr_wait) {
    if (now < s.rnr_until) {
      rearm(qp);
      return;
    }
    s.rnr_wait = false;
    s.progress_at = now;
    go_back(qp, s.tx_psn);
    return;
  }
  if (unasked(s) && now >= s.sent_at + ask_idle(s)) tail_probe(qp);
  if (!ctx_.qps.count(qp.qpn) || s.reqs.empty()) return;  // (the probe failed the QP's request)
  if (now >= s.progress_at + rto(s)) {
    if (s.tx_psn == s.una_psn && s.budget_waiting) {
      s.progress_at = now;  // nothing is in flight: it waits for the device's budget, not for the peer
    } else if (s.retry_left == 0) {
      complete_error(qp, WcStatus::transport_error, "retry count exceeded: no acknowledgement from the peer");
      return;
    } else {
      s.retry_left--;
      s.timeouts++;
      s.progress_at = now;
      go_back(qp, s.una_psn, true);
    }
  }
  rearm(qp);
}

}  // namespace softrnic::roce
