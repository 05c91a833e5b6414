// The reliable sequenced stream: frames queued and sent within the window, acks (delayed,
// selective, challenge), RACK/RTO retransmission, keepalive.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "constants.hpp"
#include "rudp.hpp"
#include "softrnic/wire/crc32c.hpp"
#include "user_mem.hpp"

namespace softrnic::rudp {

namespace w = wire;

// Appends a sequenced frame to the backlog. `parts` are the bytes after the frame header.
SeqFrame& Rudp::enqueue_seq(Qp& qp, w::FrameType type, std::initializer_list<std::span<const std::uint8_t>> parts) {
  Conn& c = conn(qp);
  SeqFrame& f = c.backlog.emplace_back();
  f.seq = c.snd_nxt++;
  c.snd_nxt_pos++;
  w::write_frame_header(f.head, {type, 0, c.peer_qpn, qp.qpn, f.seq, 0});
  std::size_t n = w::kFrameHeaderLen;
  for (auto p : parts) {
    std::memcpy(f.head.data() + n, p.data(), p.size());
    n += p.size();
  }
  f.head_len = static_cast<std::uint8_t>(n);
  return f;
}

void Rudp::send_segment(Qp& qp, std::initializer_list<std::span<const std::uint8_t>> hdr, const SglRef& sgl,
                        std::uint64_t off, std::uint32_t len, bool awaited) {
  SeqFrame& f = enqueue_seq(qp, w::FrameType::ddp, hdr);
  f.awaited = awaited;
  if (len > 0) {
    f.sgl = sgl;
    f.sgl_off = off;
    f.len = len;
  }
}

std::optional<std::span<const std::uint8_t>> Rudp::payload_of(const Qp& qp, const SeqFrame& f) {
  if (f.len == 0) return std::span<const std::uint8_t>{};
  return gather(ctx_, qp.init.pd, *f.sgl, f.sgl_off, f.len, tx_gather_);
}

// What our frames acknowledge: the cumulative receive point, held below the frame that made us
// send a Terminate.
std::uint32_t Rudp::ack_value(const Conn& c) {
  const std::uint32_t next = c.rxw.next();
  return c.ack_limit && seq_lt(*c.ack_limit, next) ? *c.ack_limit : next;
}

void Rudp::hold_acks_from(Qp& qp, Pos bad) {
  Conn& c = conn(qp);
  if (c.ack_limit) return;
  const std::uint32_t next = c.rxw.next();
  c.ack_limit = bad < c.rcv_pos ? next - static_cast<std::uint32_t>(c.rcv_pos - bad) : next;
}

void Rudp::transmit(Qp& qp, SeqFrame& f) {
  Conn& c = conn(qp);
  w::FrameHdrWire h;
  std::memcpy(&h, f.head.data(), sizeof h);
  // A frame whose ack its sender waits for, with nothing behind it to carry the question on,
  // asks to be acknowledged at once (a receiver delays the ack of a lone frame otherwise).
  h.flags = f.awaited && c.backlog.empty() ? w::kFlagAckValid | w::kFlagAckReq : w::kFlagAckValid;
  h.ack = w::Be32(ack_value(c));
  std::memcpy(f.head.data(), &h, sizeof h);
  const std::span<const std::uint8_t> head{f.head.data(), f.head_len};
  const auto payload = payload_of(qp, f);
  if (!payload) {
    c.local_error = true;  // the caller breaks the connection after its loop
    return;
  }
  const auto body = *payload;
  w::Crc32c crc;
  crc.update(head);
  // The payload is read here first, straight from registered memory: a region the consumer
  // unmapped or protected meanwhile faults here, and breaks the connection instead of the
  // process. (The netdev reads it again just after: a region unmapped in that instant is not
  // covered; the kernel's send returns EFAULT for it, a copying netdev would fault.)
  struct CrcArgs {
    w::Crc32c* crc;
    std::span<const std::uint8_t> body;
  } ca{&crc, body};
  if (!body.empty() &&
      !run_guarded([](void* p) { static_cast<CrcArgs*>(p)->crc->update(static_cast<CrcArgs*>(p)->body); }, &ca)) {
    ctx_.ctr.memory_faults++;
    c.local_error = true;
    return;
  }
  // Into the batch that flush_tx() hands to the netdev in one burst: the headers copied (the
  // frame may move in its ring before the flush), the payload still in registered memory.
  TxSlot& slot = tx_slots_[tx_n_];
  std::memcpy(slot.head.data(), head.data(), head.size());
  slot.tail = w::frame_trailer(crc.value());
  tx_batch_[tx_n_++] = netdev::TxFrame{qp.peer, {slot.head.data(), head.size()}, body, slot.tail};
  // (A payload gathered from several pieces lives in tx_gather_ only until the next gather.)
  if (tx_n_ == kTxBatch || (!body.empty() && body.data() == tx_gather_.data())) flush_tx();
  qp.ctr.tx_frames++;
  if (!c.rxw.has_gap()) acked_now(c);  // the piggybacked ack says it all
}

void Rudp::flush_tx() {
  if (tx_n_ == 0) return;
  nd_.tx_burst({tx_batch_.data(), tx_n_});
  tx_n_ = 0;
}

void Rudp::send_raw(NetAddr to, std::span<const std::uint8_t> d) {
  if (d.size() > kMaxRawInSlot) {  // (a connection frame with large private data)
    flush_tx();
    const netdev::TxFrame tf{to, d, {}, {}};
    nd_.tx_burst({&tf, 1});
    return;
  }
  TxSlot& slot = tx_slots_[tx_n_];
  std::memcpy(slot.head.data(), d.data(), d.size());
  tx_batch_[tx_n_++] = netdev::TxFrame{to, {slot.head.data(), d.size()}, {}, {}};
  if (tx_n_ == kTxBatch) flush_tx();
  flush_tx_unless_held();
}

// Serves the QPs waiting for the device's budget (each one's pump puts it back at the end of the
// queue when its backlog still waits).
void Rudp::pump_waiters() {
  const auto conn_of = [&](std::uint32_t qpn) -> Conn* {
    auto it = ctx_.qps.find(qpn);
    return it == ctx_.qps.end() ? nullptr : &conn(*it->second);
  };
  budget_.serve(
      [&](std::uint32_t qpn) {
        Conn* c = conn_of(qpn);
        return c ? &c->budget_waiting : nullptr;
      },
      [&](std::uint32_t qpn) {
        Conn* c = conn_of(qpn);
        return c->backlog.empty() ? std::size_t{0} : frame_charge(c->backlog.front().len);
      },
      [&](std::uint32_t qpn) { pump_tx(*ctx_.qps.find(qpn)->second); });
}

// The window counts what is in flight and not selectively acknowledged (RFC 6675's pipe): the
// peer has placed the rest, and it no longer fills the peer's socket buffer. What is in flight
// in all never spans more sequence numbers than the peer's receive window accepts.
void Rudp::pump_tx(Qp& qp) {
  Conn& c = conn(qp);
  bool sent = false;
  while (!c.backlog.empty() && c.inflight.size() - c.sacked_frames < ctx_.cfg.window &&
         c.inflight.size() < RxWindow::kSize &&
         (c.inflight.size() == c.sacked_frames ||
          c.inflight_bytes - c.sacked_bytes + c.backlog.front().len <= window_bytes_)) {
    if (!budget_.allows(qp.qpn, frame_charge(c.backlog.front().len))) {
      budget_.wait(qp.qpn, c.budget_waiting);
      break;
    }
    SeqFrame& f = c.inflight.emplace_back(std::move(c.backlog.front()));
    c.backlog.pop_front();
    c.inflight_bytes += f.len;
    budget_.track(c.budget_charged, in_flight_charge(c));
    f.sent = Clock::now();
    transmit(qp, f);
    sent = true;
    if (c.local_error) break;
  }
  flush_tx_unless_held();
  if (c.local_error) {
    local_protection_failure(qp);
    return;
  }
  // Its retransmission timer (arming keeps the earliest deadline: usually a frame sent before).
  if (sent) timers_.arm(qp.qpn, c.inflight.back().sent + c.rto);
}

void Rudp::local_protection_failure(Qp& qp) {
  conn(qp).local_error = false;
  rdmap_.terminate(qp, Error::local_catastrophic, "a posted work request names memory whose region was freed");
}

// RFC 6298: SRTT, RTTVAR and RTO from one sample.
void Rudp::rtt_sample(Conn& c, std::chrono::microseconds sample) {
  if (c.min_rtt.count() == 0 || sample < c.min_rtt) c.min_rtt = std::max(sample, std::chrono::microseconds(1));
  const double r = static_cast<double>(sample.count());
  if (c.srtt_us == 0) {
    c.srtt_us = r;
    c.rttvar_us = r / 2;
  } else {
    c.rttvar_us = 0.75 * c.rttvar_us + 0.25 * std::abs(c.srtt_us - r);
    c.srtt_us = 0.875 * c.srtt_us + 0.125 * r;
  }
  const auto rto = std::chrono::microseconds(static_cast<std::int64_t>(c.srtt_us + 4 * c.rttvar_us));
  c.rto = std::clamp(rto, ctx_.cfg.min_rto, kMaxRto);
}

void Rudp::acked_now(Conn& c) {
  c.ack_needed = false;
  c.ack_now = c.ack_req = c.ack_held = false;
  c.rx_unacked = 0;
  c.ack_due = {};
}

// flags: kFlagProbe (a keepalive probe) or kFlagProbeReply (the answer to one), with seq the nonce.
void Rudp::send_ack(Qp& qp, std::uint8_t flags, std::uint32_t seq) {
  Conn& c = conn(qp);
  std::uint8_t buf[w::kFrameOverhead + 4 + 8 * w::kMaxSackBlocks];
  w::write_frame_header(buf, {w::FrameType::ack, static_cast<std::uint8_t>(w::kFlagAckValid | flags), c.peer_qpn,
                              qp.qpn, seq, ack_value(c)});
  std::array<SackBlock, w::kMaxSackBlocks> blocks;
  const std::size_t nb = c.ack_limit ? 0 : c.rxw.sack_blocks(blocks);
  const std::size_t body =
      nb ? w::encode_sack({buf + w::kFrameHeaderLen, sizeof buf - w::kFrameHeaderLen}, {blocks.data(), nb}) : 0;
  send_raw(qp.peer, {buf, w::seal_frame(buf, w::kFrameHeaderLen + body)});
  acked_now(c);
}

// Graceful close: the disconnect frame goes behind everything already in the stream.
void Rudp::send_disconnect(Qp& qp) {
  qp_event(qp, QpEvent::close);
  const w::StreamCtrlWire sc{w::Be32(static_cast<std::uint32_t>(w::StreamCtrlOp::disconnect))};
  enqueue_seq(qp, w::FrameType::stream_ctrl, {{reinterpret_cast<const std::uint8_t*>(&sc), sizeof sc}});
  Conn& c = conn(qp);
  c.disc_seq = c.snd_nxt;
  pump_tx(qp);
}

void Rudp::timers(Clock::time_point now) {
  if (!delayed_acks_.empty()) delayed_acks(now);
  // (A QP flushed or destroyed freed budget outside an acknowledgement.)
  if (budget_.room()) pump_waiters();
  timers_.expire(now, [&](std::uint32_t qpn) {
    auto it = ctx_.qps.find(qpn);
    if (it == ctx_.qps.end()) return;
    on_timer(*it->second, now);
    rearm(*it->second);
  });
  // The lingers' resets and the sweep of decided requests have millisecond granularity.
  if (now - last_timer_scan_ < kTimerScan) return;
  last_timer_scan_ = now;
  cm_timers(now);
}

// The QP's next deadline: its connection timers, keepalive, and the retransmission of the frames
// in flight (RTO; RACK for those sent before a frame known delivered). max() when none.
Clock::time_point Rudp::deadline(const Qp& qp) const {
  const Conn& c = conn(qp);
  auto t = Clock::time_point::max();
  switch (qp.cm) {
    case CmPhase::connecting:
      t = std::min(c.cm_deadline, c.cm_next_tx);
      if (!c.cm_answered) t = std::min(t, c.cm_started + ctx_.cfg.connect_no_answer);
      break;
    case CmPhase::accepting: t = std::min(c.cm_deadline, c.cm_next_tx); break;
    case CmPhase::disconnecting: t = c.cm_deadline; break;
    case CmPhase::connected:
      if (ctx_.cfg.keepalive_idle.count() > 0)
        t = c.ka_soon ? c.ka_next : std::max(c.last_rx + ctx_.cfg.keepalive_idle, c.ka_next);
      break;
    default: break;
  }
  if (!c.inflight.empty()) {
    const auto reo_wnd = reorder_window(c);
    for (const SeqFrame& f : c.inflight) {
      if (f.sacked) continue;
      t = std::min(t, std::max(f.sent, c.rto_probe) + c.rto);
      if (f.sent < c.rack_sent) t = std::min(t, f.sent + c.rack_rtt + reo_wnd);
    }
  }
  return t;
}

void Rudp::rearm(Qp& qp) {
  const auto t = deadline(qp);
  if (t != Clock::time_point::max()) timers_.arm(qp.qpn, t);
}

// RFC 8985 section 6.2: a quarter of the minimum round trip (not below kMinReorderWindow, the
// timers' and hosts' granularity), times reo_mult (raised by spurious retransmissions, back to 1
// after kReoPersist recoveries without one), never above the smoothed round trip; or, when more,
// how late reordered frames have come (reo_learned, seen before any resend is spurious).
std::chrono::microseconds Rudp::reorder_window(const Conn& c) {
  const auto base = std::max(kMinReorderWindow, c.min_rtt / 4);
  const auto srtt = std::max(kMinReorderWindow, std::chrono::microseconds(static_cast<std::int64_t>(c.srtt_us)));
  return std::min(std::max(std::min(base * c.reo_mult, srtt), c.reo_learned), kMaxReorderWindow);
}

// A QP's timers fired (some may not be due: the queue fires at the earliest deadline it was armed
// for): the connection's set-up and teardown timeouts or its keepalive, then retransmission.
void Rudp::on_timer(Qp& qp, Clock::time_point now) {
  if (qp.cm == CmPhase::connected ? keepalive(qp, now) : cm_timeout(qp, now)) return;
  retransmit_due(qp, now);
}

// Connection set-up and teardown: the request or reply sent again, or given up. True when the QP
// closed.
bool Rudp::cm_timeout(Qp& qp, Clock::time_point now) {
  Conn& c = conn(qp);
  switch (qp.cm) {
    case CmPhase::connecting:
      if (now >= c.cm_deadline) {
        close_qp(qp, CmEventType::unreachable, "no reply to the connection request");
        return true;
      }
      if (!c.cm_answered && now - c.cm_started >= ctx_.cfg.connect_no_answer) {
        close_qp(
            qp, CmEventType::unreachable,
            "nothing answered the connection request in " + std::to_string(ctx_.cfg.connect_no_answer.count()) + " ms");
        return true;
      }
      if (now >= c.cm_next_tx) {
        send_cm(qp, w::CmOp::connect_request, 0);
        c.cm_next_tx = now + kCmRetry;
      }
      return false;
    case CmPhase::accepting:
      if (now >= c.cm_deadline) {
        close_qp(qp, CmEventType::broken, "the initiator never confirmed the connection");
        return true;
      }
      if (now >= c.cm_next_tx) {
        send_cm(qp, w::CmOp::connect_reply, 0);
        c.cm_next_tx = now + kCmRetry;
      }
      return false;
    case CmPhase::disconnecting:
      if (now < c.cm_deadline) return false;
      close_qp(qp, CmEventType::disconnected, "disconnect not acknowledged");
      return true;
    default: return false;
  }
}

// Retransmits only what is neither acknowledged nor selectively acknowledged, and either (RACK) a
// frame sent after it was delivered more than a reordering window ago relative to its own send
// time, or it has been out longer than the RTO. A frame merely overtaken by later ones within the
// reordering window is left alone.
// The RTO alone resends one frame, the oldest, as a probe (RFC 8985's RTO recovery, F-RTO's
// caution): if the peer had everything and only the acks were late (a stalled host), its ack
// covers the whole window and nothing else is resent; if frames were lost, the probe's delivery
// marks those sent before it lost (RACK) and they go at once. The rest's timer restarts at the
// probe.
void Rudp::retransmit_due(Qp& qp, Clock::time_point now) {
  Conn& c = conn(qp);
  bool timed_out = false, exhausted = false, probed = false, resent = false;
  const auto reo_wnd = reorder_window(c);
  for (SeqFrame& f : c.inflight) {
    if (f.sacked) continue;
    const bool rack_lost = f.sent < c.rack_sent && now - f.sent >= c.rack_rtt + reo_wnd;
    const bool rto_expired = now - std::max(f.sent, c.rto_probe) >= c.rto;
    if (!rack_lost && !rto_expired) continue;
    if (rack_lost && !rto_expired) {
      qp.ctr.rack_retransmits++;
    } else {
      if (!rack_lost) {
        if (probed) continue;
        probed = true;
      }
      timed_out = true;
    }
    if (++f.retries > ctx_.cfg.retry_limit) {
      exhausted = true;
      break;
    }
    f.retransmitted = true;
    // (Stamped as it leaves, not with the round's `now`: that was read when the round began, and
    // frames the round's acks let go, stamped since, leave ahead of this one. RACK reads the
    // stamps as the order frames went out in: a resend stamped before frames it followed would be
    // declared lost again when their acks came first.)
    f.sent = Clock::now();
    resent = true;
    transmit(qp, f);
    if (c.local_error) break;
    qp.ctr.retransmits++;
    ctx_.ctr.retransmits++;
  }
  flush_tx_unless_held();
  if (c.local_error) {
    local_protection_failure(qp);
    return;
  }
  if (exhausted) {
    if (qp.state == QpState::terminate) {
      flush_qp(qp);
      qp_event(qp, QpEvent::terminate_out);
    } else {
      close_qp(qp, CmEventType::broken, "retry limit exceeded");
    }
    return;
  }
  if (probed) c.rto_probe = now;
  if (timed_out) c.rto = std::min(c.rto * 2, kMaxRto);  // back off until a fresh sample
  // A recovery without a spurious resend since the window was widened counts down to the
  // window's return to its base (RFC 8985's reo_wnd_persist).
  if (resent && c.reo_persist > 0 && --c.reo_persist == 0) {
    c.reo_mult = 1;
    c.reo_learned = {};
  }
}

// Liveness: a peer silent for keepalive_idle is probed every keepalive_interval (an ACK frame
// it answers at once); keepalive_probes unanswered break the connection. A stale ack (the peer
// acknowledging less than before) brings a probe at once: its answer tells reordering from a
// forged acknowledgement. True when the connection broke.
bool Rudp::keepalive(Qp& qp, Clock::time_point now) {
  Conn& c = conn(qp);
  if (ctx_.cfg.keepalive_idle.count() == 0) return false;
  if (!c.ka_soon && now - c.last_rx < ctx_.cfg.keepalive_idle) return false;
  if (now < c.ka_next) return false;
  if (c.ka_sent >= ctx_.cfg.keepalive_probes) {
    ctx_.ctr.dead_peers++;
    start_linger(qp);
    close_qp(qp, CmEventType::broken,
             "the peer answered none of " + std::to_string(ctx_.cfg.keepalive_probes) + " keepalive probes");
    return true;
  }
  c.ka_soon = false;
  do {
    c.ka_nonce = random32();
  } while (c.ka_nonce == 0);
  c.ka_una = c.snd_una;
  send_ack(qp, w::kFlagProbe, c.ka_nonce);
  c.ka_sent++;
  ctx_.ctr.keepalive_probes++;
  c.ka_next = now + ctx_.cfg.keepalive_interval;
  return false;
}

// Whether `ack` acknowledges something we sent: not beyond snd_nxt, and not further below
// snd_una than reordering can explain.
bool Rudp::ack_acceptable(const Conn& c, std::uint32_t ack) {
  return seq_le(ack, c.snd_nxt) && seq_le(c.snd_una - kMaxAckLag, ack);
}

// A challenge ACK (RFC 5961): our cumulative point and SACK, at most one per kChallengeGap.
void Rudp::challenge(Qp& qp) {
  Conn& c = conn(qp);
  const auto now = ctx_.rx_now;
  if (now - c.last_challenge < kChallengeGap) return;
  c.last_challenge = now;
  send_ack(qp);
}

// The peer showed it is there (a frame that passed the checks).
void Rudp::alive(Conn& c) {
  c.last_rx = ctx_.rx_now;
  c.ka_sent = 0;
}

void Rudp::mark_ack(Qp& qp) {
  Conn& c = conn(qp);
  c.rx_unacked++;
  c.ack_needed = true;
  // Once per round, whether or not an ack already waits (delayed): a second frame, or one that
  // asks, makes a delayed ack go now.
  if (!c.ack_listed) {
    c.ack_listed = true;
    ack_list_.push_back(&qp);
  }
}

// Acks: at once for every second frame, for anything out of order and for duplicates; a lone
// in-order frame's ack waits up to kAckDelay, so that a reply the consumer posts meanwhile
// carries it (a ping-pong then sends no pure acks at all). One whose sender waits for it (the
// frame asked: a signaled request's last) waits one round instead: a reply the consumer posts
// after this round carries it, else it goes at the end of the next (the engine does not sleep
// meanwhile: next_wait). (It went at once, a system call between a signaled Send's arrival and
// the consumer seeing it, each way of a ping-pong.)
void Rudp::flush_acks() {
  if (ack_list_.empty()) return;
  const auto now = ctx_.rx_now;  // (a delayed ack is marked only in a round that received frames)
  std::size_t keep = 0;
  for (Qp* qp : ack_list_) {
    Conn& c = conn(*qp);
    if (!c.ack_needed) {
      c.ack_listed = false;
      continue;
    }
    if (c.ack_now || c.rx_unacked >= 2 || c.rxw.has_gap() || qp->state != QpState::rts || c.ack_held) {
      c.ack_listed = false;
      send_ack(*qp);
    } else if (c.ack_req) {
      c.ack_held = true;
      ack_list_[keep++] = qp;  // (still listed)
    } else {
      c.ack_listed = false;
      if (c.ack_due == Clock::time_point{}) {
        c.ack_due = now + kAckDelay;
        delayed_acks_.push_back({c.ack_due, qp});
      }
    }
  }
  ack_list_.resize(keep);
}

void Rudp::delayed_acks(Clock::time_point now) {
  while (!delayed_acks_.empty()) {
    const DelayedAck d = delayed_acks_.front();
    const Conn& c = conn(*d.qp);
    if (c.ack_needed && c.ack_due == d.due) {  // (else data carried it: stale)
      if (now < d.due) break;
      send_ack(*d.qp);
    }
    delayed_acks_.pop_front();
  }
}

// False when the ack cannot be the peer's (it acknowledges what was never sent, or its SACK
// blocks name frames outside what is in flight): ignored and counted. A stale one (below what
// was acknowledged before) may be reordering, or the sign that an acknowledgement was forged:
// the peer is probed, and its answer tells (handle_datagram).
bool Rudp::handle_ack(Qp& qp, std::uint32_t ack, std::span<const SackBlock> sack) {
  Conn& c = conn(qp);
  if (!ack_valid(c, ack, sack)) {
    ctx_.ctr.rx_bad_acks++;
    return false;
  }
  if (seq_lt(ack, c.snd_una)) {
    // An old ack, within the lag allowed: the peer is alive (keepalive checks soon).
    if (qp.cm == CmPhase::connected && ctx_.cfg.keepalive_idle.count() > 0) {
      c.ka_soon = true;
      timers_.arm(qp.qpn, c.ka_next);
    }
    return true;
  }
  AckScan scan;
  mark_delivered(qp, ack, sack, scan);
  if (!scan.covers_original && scan.resent_sent > c.rack_sent) {
    c.rack_sent = scan.resent_sent;
    c.rack_rtt = scan.resent_rtt;
  }
  if (scan.slowest.count() >= 0) rtt_sample(c, scan.slowest);
  // Selective acks tell of holes: RACK may now count frames before them lost, sooner than the RTO.
  if (!sack.empty()) rearm(qp);
  if (!seq_lt(c.snd_una, ack)) {  // no new cumulative progress
    if (scan.newly_sacked) {      // but the window (and the budget) opened
      budget_.track(c.budget_charged, in_flight_charge(c));
      pump_waiters();
      pump_tx(qp);
    }
    return true;
  }
  advance_una(qp, ack);
  return true;
}

// An ack for nothing we sent, or SACK blocks outside (ack, snd_nxt], or older than the lag allowed.
bool Rudp::ack_valid(const Conn& c, std::uint32_t ack, std::span<const SackBlock> sack) const {
  if (seq_lt(c.snd_nxt, ack)) return false;
  for (const SackBlock& b : sack)
    if (!seq_lt(ack, b.start) || seq_lt(c.snd_nxt, b.end)) return false;
  return !seq_lt(ack, c.snd_una) || seq_le(c.snd_una - kMaxAckLag, ack);
}

// Marks the frames this ack newly covers delivered, each with what its round trip tells (scan).
// The frames in flight hold consecutive sequence numbers from the front's, so those this ack
// covers are found by offset (the cumulative part, then the SACK blocks in ascending order), not
// by a walk of the whole window for every ack.
void Rudp::mark_delivered(Qp& qp, std::uint32_t ack, std::span<const SackBlock> sack, AckScan& scan) {
  Conn& c = conn(qp);
  // The time of this receive round (read when the netdev returned its frames): round trips are
  // sampled for timers of millisecond granularity, and a clock read per frame costs.
  const auto now = ctx_.rx_now;
  const std::size_t n = c.inflight.size();
  const std::uint32_t base = n ? c.inflight.front().seq : ack;
  const auto offset = [&](std::uint32_t s) -> std::size_t {
    return seq_lt(s, base) ? 0 : std::min<std::size_t>(n, s - base);
  };
  std::array<std::pair<std::size_t, std::size_t>, 1 + w::kMaxSackBlocks> ranges;
  std::size_t nr = 0;
  ranges[nr++] = {0, offset(ack)};
  for (const SackBlock& b : sack.first(std::min(sack.size(), w::kMaxSackBlocks)))
    ranges[nr++] = {offset(b.start), offset(b.end)};
  std::sort(ranges.begin() + 1, ranges.begin() + static_cast<std::ptrdiff_t>(nr));
  std::size_t cursor = 0;
  for (std::size_t r = 0; r < nr; ++r) {
    for (std::size_t i = std::max(ranges[r].first, cursor); i < ranges[r].second; ++i) {
      SeqFrame& f = c.inflight[i];
      if (f.sacked) continue;
      // (a frame another thread sent after `now` was read, acknowledged within the round: 0)
      const auto rtt = std::chrono::duration_cast<std::chrono::microseconds>(std::max(now - f.sent, Clock::duration{}));
      frame_delivered(qp, f, rtt, now, scan);
    }
    cursor = std::max(cursor, ranges[r].second);
  }
}

// One frame newly delivered after `rtt`. One RTT sample per acknowledgement: the slowest frame it
// newly covers that was sent once (Karn); the slowest, not the newest, lets a frame held back by
// reordering raise RTTVAR, so reordering alone does not make the RTO fire. RACK from a resent
// frame only when the ack covers no frame sent once: an ack that also covers originals may well
// be for the resent frame's original too (acks held up past the RTO), and taking the resend's
// time would mark everything sent before it lost.
void Rudp::frame_delivered(Qp& qp, SeqFrame& f, std::chrono::microseconds rtt, Clock::time_point now, AckScan& scan) {
  Conn& c = conn(qp);
  if (!f.retransmitted) scan.slowest = std::max(scan.slowest, rtt);
  // Eifel-style check: acknowledged sooner after its retransmission than any round trip takes, so
  // the original arrived and the retransmission was spurious: widen the reordering window (RFC
  // 8985 adapts it likewise), once per round trip (the spurious resends of one recovery count once).
  if (f.retransmitted && c.min_rtt.count() > 0 && rtt * 4 < c.min_rtt * 3) {
    qp.ctr.spurious_retransmits++;
    if (now - c.reo_raised >= std::chrono::microseconds(static_cast<std::int64_t>(c.srtt_us))) {
      c.reo_raised = now;
      c.reo_mult = std::min(c.reo_mult + 1, kMaxReoMult);
    }
    c.reo_persist = kReoPersist;
  }
  // Reordering seen: an original frame delivered after one sent behind it. Had it been later than
  // the window allows, RACK would have resent it for nothing: the window learns how late it came,
  // with a quarter to spare (RFC 8985 step 3's spirit; kept kReoPersist recoveries).
  if (!f.retransmitted && c.delivered_any && seq_lt(f.seq, c.high_delivered) && rtt > c.rack_rtt) {
    const auto late = rtt - c.rack_rtt;
    c.reo_learned = std::max(c.reo_learned, late + late / 4);
    c.reo_persist = kReoPersist;
  }
  if (!c.delivered_any || seq_lt(c.high_delivered, f.seq)) {
    c.high_delivered = f.seq;
    c.delivered_any = true;
  }
  // RACK: the latest send time known delivered, and that frame's round trip.
  if (!f.retransmitted) {
    scan.covers_original = true;
    if (f.sent > c.rack_sent) {
      c.rack_sent = f.sent;
      c.rack_rtt = rtt;
    }
  } else if (f.sent > scan.resent_sent && (rtt * 4 >= c.min_rtt * 3 || f.sent == c.rto_probe)) {
    // The retransmission's delivery, not the original's: the complement of the Eifel check above,
    // or the RTO's probe (its original went a whole RTO of silence ago; a probe answered a little
    // faster than the fastest sample must still mark what was sent before it lost).
    scan.resent_sent = f.sent;
    scan.resent_rtt = rtt;
  }
  f.sacked = true;
  c.sacked_frames++;
  c.sacked_bytes += f.len;
  scan.newly_sacked = true;
}

// Cumulative progress to `ack`: the frames below it leave, the send queue completes, a close or a
// Terminate waiting for it ends, and the window opens.
void Rudp::advance_una(Qp& qp, std::uint32_t ack) {
  Conn& c = conn(qp);
  while (!c.inflight.empty() && seq_lt(c.inflight.front().seq, ack)) {
    // (every frame below the ack was marked sacked by mark_delivered)
    c.inflight_bytes -= c.inflight.front().len;
    c.sacked_bytes -= c.inflight.front().len;
    c.sacked_frames--;
    c.inflight.pop_front();
  }
  budget_.track(c.budget_charged, in_flight_charge(c));
  c.snd_una_pos += ack - c.snd_una;
  c.snd_una = ack;
  rdmap_.acked(qp);  // (its completions send the batch first: push_wc, drain_tx)
  if (qp.cm == CmPhase::disconnecting && qp.state == QpState::closing && seq_le(c.disc_seq, ack)) {
    close_qp(qp, CmEventType::disconnected, "");
    return;
  }
  if (c.inflight.empty() && c.backlog.empty() && qp_event(qp, QpEvent::terminate_out)) return;
  pump_waiters();  // before this QP's own backlog: it queues behind them
  pump_tx(qp);
}

}  // namespace softrnic::rudp
