// RoCEv2: the receive round (ICRC, dispatch by destination QP), transmission of one packet, QP
// life, timers and the out-of-band connection.
#include "roce.hpp"

#include <sodium.h>

#include <algorithm>
#include <cstring>

#include "user_mem.hpp"

namespace softrnic::roce {

namespace w = wire::roce;

namespace {
constexpr std::size_t kRxBurst = 32;
constexpr std::uint8_t kDefaultAckTimeout = 14;  // 67 ms, ibv_rc_pingpong's and rxe's usual first timeout
}  // namespace

// 4.096 us * 2^code (IBTA 9.7.6.1.3), at least 100 us.
Clock::duration Roce::ack_timeout_of(std::uint8_t code) {
  const auto t = std::chrono::nanoseconds(4096LL << std::min<int>(code, 31));
  return std::max<Clock::duration>(std::chrono::ceil<std::chrono::microseconds>(t), std::chrono::microseconds(100));
}

Roce::Roce(Ctx& ctx, netdev::Netdev& nd) : ctx_(ctx), nd_(nd), self_(nd.local_addr()) {
  const std::uint32_t link = w::path_mtu_for(static_cast<std::uint32_t>(nd_.max_datagram()) + 28);
  link_mtu_ = ctx_.cfg.roce.mtu ? std::min(ctx_.cfg.roce.mtu, link) : link;
  // 4.096 us * 2^timeout (IBTA 9.7.6.1.3), at least the configured RTO floor.
  backoff_ = !ctx_.cfg.roce.timeout;
  ack_timeout_ = ack_timeout_of(ctx_.cfg.roce.timeout.value_or(kDefaultAckTimeout));
  max_window_ = std::clamp<std::uint32_t>(ctx_.cfg.window, 4, 128);
  budget_.set_limit(std::max<std::size_t>(max_window_, nd_.rx_buffer_bytes() / 2 / (link_mtu_ + 1024)));
  const std::size_t cap = nd_.max_datagram();
  rx_bufs_.resize(kRxBurst * cap);
  rx_frames_.resize(kRxBurst);
  gsi_sport_ = nd_.source_port(w::source_port_of(w::kGsiQpn));
  for (std::size_t i = 0; i < kRxBurst; ++i) rx_frames_[i] = netdev::RxFrame{{}, rx_bufs_.data() + i * cap, cap, 0};
}

Roce::~Roce() {
  for (Request* r : reqs_) delete r;
}

std::unique_ptr<TransportQp> Roce::make_qp_state() {
  auto s = std::make_unique<RoceQp>();
  s->init_psn = randombytes_random() & w::kPsnMask;
  s->next_psn = s->tx_psn = s->una_psn = s->ack_through = s->init_psn;
  s->cwnd = max_window_;
  s->retry_cnt = ctx_.cfg.roce.retry_cnt;
  s->rnr_retry = ctx_.cfg.roce.rnr_retry;
  s->min_rnr_timer = ctx_.cfg.roce.min_rnr_timer;
  s->ack_timeout = ack_timeout_;
  return s;
}

void Roce::reset(Qp& qp) {
  leave_budget(qp);
  timers_.cancel(qp.qpn);
  qp.t = make_qp_state();
}

void Roce::destroy(Qp& qp) {
  RoceQp& s = st(qp);
  if (s.cm == CmState::drain)
    answer_dreq(qp);  // the peer's DREQ waits for our DREP
  else if (s.has_path && s.cm != CmState::idle)
    start_linger(qp, true);  // a DREQ tells the peer
  else if (s.has_path)
    start_linger(qp, false);  // out of band: its requests sent again are still acknowledged
  forget(qp);
  leave_budget(qp);
}

void Roce::leave_budget(Qp& qp) {
  RoceQp& s = st(qp);
  if (budget_.leave(qp.qpn, s.budget_waiting, s.budget_charged)) nd_.wake();  // served in the next round
}

// The QP leaves the request it accepted, its timers and the ACKs waiting for this round.
void Roce::forget(Qp& qp) {
  RoceQp& s = st(qp);
  if (s.req) {
    s.req->qp = nullptr;
    drop_req(s.req);
    s.req = nullptr;
  }
  timers_.cancel(qp.qpn);
  send_owed_ack(qp);
  std::erase(ack_list_, &qp);
  s.ack_listed = false;
  std::erase(ack_riders_, &qp);
  s.ack_riding = false;
}

void Roce::flush(Qp& qp) {
  RoceQp& s = st(qp);
  s.reqs.clear();
  s.answered_reads.clear();
  s.in_send = s.in_write = false;
  s.ack_pending = false;
  s.read_jobs.clear();
  s.tx_psn = s.una_psn = s.ack_through = s.next_psn;
  leave_budget(qp);
}

void Roce::closed(Qp& qp) {
  RoceQp& s = st(qp);
  // A peer's DREQ still waits for its DREP (the QP is closed in drain another way: moved to the
  // error state, destroyed): it goes now, or the peer would wait out its DREQ timeout.
  if (s.cm == CmState::drain) answer_dreq(qp);
  forget(qp);  // (while still connected: an ACK it owes goes, what was received is delivered)
  s.has_path = false;
  s.cm = CmState::idle;
}

void Roce::close_all() {
  // Every open connection's peer hears a DREQ (resent until its DREP, for a while).
  for (auto& [n, qp] : ctx_.qps) {
    RoceQp& s = st(*qp);
    if (s.has_path && s.cm != CmState::idle) {
      if (s.cm != CmState::drain) start_linger(*qp, true);  // (closed answers a DREQ that waits for its DREP)
      closed(*qp);
    }
  }
}

RoceEndpoint Roce::local(const Qp& qp) const {
  return RoceEndpoint{self_, qp.qpn, st(qp).init_psn, link_mtu_};
}

Status Roce::connect_oob(Qp& qp, const RoceEndpoint& remote, std::uint32_t ord, std::uint32_t ird) {
  RoceRtr r;
  r.remote = remote;
  r.ird = ird;
  r.min_rnr_timer = ctx_.cfg.roce.min_rnr_timer;
  RoceRts t;
  t.sq_psn = st(qp).init_psn;
  t.ord = ord;
  t.timeout = ctx_.cfg.roce.timeout;
  t.retry_cnt = ctx_.cfg.roce.retry_cnt;
  t.rnr_retry = ctx_.cfg.roce.rnr_retry;
  if (ord > ctx_.limits.max_rd) return Status::invalid_param;  // (before RTR: nothing changes)
  if (const Status e = rtr(qp, r); e != Status::ok) return e;
  return rts(qp, t);
}

Status Roce::rtr(Qp& qp, const RoceRtr& a) {
  const RoceEndpoint& remote = a.remote;
  if (qp.state != QpState::idle || qp.cm != CmPhase::none) return Status::invalid_state;
  if (remote.qpn == 0 || remote.qpn > w::kQpnMask || remote.psn > w::kPsnMask ||
      !netdev::is_unicast_ipv4(remote.addr.ip) || a.min_rnr_timer > 31)
    return Status::invalid_param;
  if (remote.mtu && !w::mtu_code(remote.mtu)) return Status::invalid_param;
  if (a.ird > ctx_.limits.max_rd) return Status::invalid_param;
  RoceQp& s = st(qp);
  s.has_path = true;
  s.dst = wire_addr(remote.addr.ip);
  if (remote.addr.port) s.dst.port = remote.addr.port;
  s.peer_qpn = remote.qpn;
  s.mtu = remote.mtu ? std::min(remote.mtu, link_mtu_) : link_mtu_;
  s.exp_psn = remote.psn;
  s.min_rnr_timer = a.min_rnr_timer;
  qp.peer = s.dst;
  qp.local = self_;
  pick_source_port(qp, 0);
  qp.ird = a.ird;
  qp_event(qp, QpEvent::path_set);  // RTR
  s.heard_at = Clock::now();
  return Status::ok;
}

Status Roce::ud_rtr(Qp& qp, std::uint32_t qkey) {
  if (qp.init.type != QpType::ud || qp.state != QpState::idle || qp.cm != CmPhase::none) return Status::invalid_state;
  RoceQp& s = st(qp);
  s.qkey = qkey;
  s.mtu = link_mtu_;
  qp.local = self_;
  qp_event(qp, QpEvent::path_set);  // RTR: datagrams are taken
  return Status::ok;
}

Status Roce::rts(Qp& qp, const RoceRts& a) {
  if (qp.state != QpState::rtr || qp.cm != CmPhase::none) return Status::invalid_state;
  if (a.sq_psn > w::kPsnMask || a.ord > ctx_.limits.max_rd || a.retry_cnt > 7 || a.rnr_retry > 7 ||
      (a.timeout && *a.timeout > 31))
    return Status::invalid_param;
  RoceQp& s = st(qp);
  s.init_psn = a.sq_psn;
  s.next_psn = s.tx_psn = s.una_psn = s.ack_through = a.sq_psn;
  if (qp.init.type == QpType::ud) {
    qp_event(qp, QpEvent::established);  // (no peer: sends may be posted)
    return Status::ok;
  }
  s.retry_cnt = a.retry_cnt;
  s.rnr_retry = a.rnr_retry;
  s.retry_left = s.retry_cnt;
  s.rnr_left = s.rnr_retry;
  if (a.timeout) s.ack_timeout = ack_timeout_of(*a.timeout);
  qp.ord = a.ord;
  qp_event(qp, QpEvent::established);  // RTS
  rearm(qp);
  emit(qp, CmEventType::established, "");
  return Status::ok;
}

// ---- the receive round ----

std::size_t Roce::poll(std::optional<Clock::time_point> now) {
  TxHold hold(*this);
  const std::size_t cap = nd_.max_datagram();
  std::size_t got = 0;
  for (int round = 0; round < 8; ++round) {
    const std::size_t n = nd_.rx_burst(rx_frames_);
    if (n == 0) break;
    ctx_.rx_now = Clock::now();
    if (!now) now = ctx_.rx_now;
    // (The next packet's headers are asked for while this one is handled: the kernel's copy of a
    // coalesced run may leave them out of cache, and each packet's first read otherwise waits.)
    for (std::size_t i = 0; i < n; ++i) {
      if (i + 1 < n) __builtin_prefetch(rx_frames_[i + 1].bytes().data());
      handle_packet(rx_frames_[i].from, rx_frames_[i].bytes());
    }
    for (std::size_t i = 0; i < n; ++i) rx_frames_[i].reuse(cap);
    got += n;
    if (n < kRxBurst) break;
  }
  flush_acks(got != 0);
  if (now) timers(*now);
  return got;
}

std::chrono::microseconds Roce::next_wait() {
  if (!ack_list_.empty()) return std::chrono::microseconds(0);  // ACKs held for a round (flush_acks)
  std::chrono::microseconds wait(lingers_.empty() && held_reqs_.empty() ? 100000 : 10000);
  if (const auto t = timers_.next())
    wait =
        std::clamp(std::chrono::ceil<std::chrono::microseconds>(*t - Clock::now()), std::chrono::microseconds(1), wait);
  return wait;
}

void Roce::handle_packet(NetAddr from, std::span<const std::uint8_t> d) {
  w::Packet p;
  if (w::parse(d, p) != w::ParseError::ok) {
    ctx_.ctr.rx_bad_frames++;
    return;
  }
  // A kernel UDP socket does not show the IP header: the ICRC is solved for the IP ID.
  std::uint16_t id = 0;
  if (!w::icrc_ok_any_id(w::IcrcAddr{from.ip, self_.ip, from.port, self_.port, 0, 0x4000}, d, id)) {
    ctx_.ctr.rx_bad_frames++;
    return;
  }
  if (p.pkey != w::kDefaultPkey && (p.pkey & 0x7FFF) != 0x7FFF) {
    ctx_.ctr.rx_bad_frames++;
    return;
  }
  if (p.dest_qpn == w::kGsiQpn) {
    // QP1: connection management MADs (UD, the GSI's Q_Key).
    if (p.opcode == w::Opcode::ud_send_only && p.deth->qkey == w::kGsiQkey && p.payload.size() >= wire::ibcm::kMadLen)
      handle_mad(from, p.payload.first(wire::ibcm::kMadLen));
    else
      ctx_.ctr.rx_bad_frames++;
    return;
  }
  const auto it = ctx_.qps.find(p.dest_qpn);
  if (it == ctx_.qps.end()) {
    if (!linger_ack(from, p)) ctx_.ctr.rx_unknown_qp++;
    return;
  }
  Qp& qp = *it->second;
  if (qp.init.type == QpType::ud) {
    on_datagram(qp, from, p);
    return;
  }
  RoceQp& s = st(qp);
  // RC: only the connected peer's packets (address and RC opcodes).
  if (!s.has_path || from.ip != s.dst.ip || !w::op_info(p.opcode).has(w::Has::rc)) {
    ctx_.ctr.rx_unknown_qp++;
    return;
  }
  qp.ctr.rx_frames++;
  s.heard_at = ctx_.rx_now;
  s.probes = 0;
  if (s.cm == CmState::rep_sent) established(qp);  // the RTU was lost: the first packet says as much
  if (w::op_info(p.opcode).has(w::Has::request))
    on_request(qp, p);
  else
    on_response(qp, p);
}

bool Roce::send_packet(Qp& qp, const w::Packet& p, const SglRef& sgl, std::uint64_t off, std::uint32_t len,
                       const Pd* pd, bool copy) {
  if (tx_n_ == kTxBatch) flush_tx();
  TxSlot& slot = tx_slots_[tx_n_];
  auto& hdr = slot.hdr;
  const std::size_t hl = w::build_headers(p, len, hdr);
  std::span<const std::uint8_t> body;
  if (len) {
    const auto g = gather(ctx_, pd, *sgl, off, len, slot.gathered);
    if (!g) return false;
    body = *g;
    if (copy && body.data() != slot.gathered.data()) {
      slot.gathered.resize(len);
      if (!guarded_copy(slot.gathered.data(), body.data(), len)) {
        ctx_.ctr.memory_faults++;
        return false;
      }
      body = {slot.gathered.data(), len};
    }
  }
  const std::size_t pad = w::pad_of(len);
  auto& tail = slot.tail;
  tail = {};
  const std::uint16_t sport = st(qp).sport ? st(qp).sport : self_.port;
  const w::IcrcAddr a{self_.ip, s_dst(qp).ip, sport, s_dst(qp).port, 0, 0x4000};
  // The payload is read here first, straight from registered memory: a region unmapped meanwhile
  // faults here and fails the request instead of the process.
  struct Args {
    const w::IcrcAddr* a;
    std::span<const std::uint8_t> pieces[3];
    std::uint32_t crc;
  } args{&a, {{hdr.data(), hl}, body, {tail.data(), pad}}, 0};
  if (!run_guarded(
          [](void* v) {
            auto* x = static_cast<Args*>(v);
            x->crc = w::icrc(*x->a, x->pieces);
          },
          &args)) {
    ctx_.ctr.memory_faults++;
    return false;
  }
  for (std::size_t i = 0; i < 4; ++i) tail[pad + i] = static_cast<std::uint8_t>(args.crc >> (8 * i));
  // (Sealed for IP ID 0: a UDP GSO send numbers its packets, and the netdev corrects the ICRC.)
  tx_batch_[tx_n_++] = netdev::TxFrame{s_dst(qp), {hdr.data(), hl},     body, {tail.data(), pad + w::kIcrcLen},
                                       sport,     &w::icrc_ip_id_effect};
  qp.ctr.tx_frames++;
  RoceQp& s = st(qp);
  if (s.ack_pending && p.opcode != w::Opcode::ack && !s.ack_riding) {
    // An ACK this QP owes leaves behind its packets, in the same system call (flush_acks), at
    // the end of the batch: a peer that waits for it (its Send's completion) and then spins on
    // its own memory for our RDMA Write (perftest's ib_write_lat) has all of the Write by then.
    s.ack_riding = true;
    ack_riders_.push_back(&qp);
  }
  if (tx_hold_ == 0) flush_tx();
  return true;
}

void Roce::ride_acks() {
  riders_.swap(ack_riders_);  // (send_ack may flush a full batch: flush_tx again, with none)
  for (Qp* qp : riders_) {
    RoceQp& s = st(*qp);
    s.ack_riding = false;
    if (!s.ack_pending) continue;  // (a NAK or a flush took it)
    s.ack_pending = false;
    s.ack_waited = 0;
    send_ack(*qp, w::kAethAck | w::kAethNoCredit, s.ack_psn);
  }
  riders_.clear();
}

void Roce::flush_tx() {
  if (!ack_riders_.empty()) ride_acks();
  // A frame the netdev cannot take now (its socket is full) is lost as a drop on the wire would
  // be (the requester's ACK timeout and the peer's sequence checks recover it), but only that
  // frame: the rest of the batch, other QPs' frames and ACKs among them, still goes.
  std::size_t done = 0;
  while (done < tx_n_) {
    done += nd_.tx_burst({tx_batch_.data() + done, tx_n_ - done});
    if (done < tx_n_) ++done;  // (the frame refused)
  }
  tx_n_ = 0;
}

// ACKs asked for go out once per QP, for the latest PSN, at the end of a round after the one
// that received what they acknowledge, or earlier behind a packet the QP sends (send_packet).
// RoCEv2 cannot carry an acknowledgement on a request, so a ping-pong sent an ACK each way per
// message, each its own system call; held, it leaves with the reply the consumer posts in between
// (one system call, and the peer reads both at once). A consumer that waits for the ACK of its
// own Send before it replies (perftest's latency tests: each Send signaled) replies only once
// that ACK is here: the peer sent it behind the request we received, in the same system call,
// but a round may read one datagram (the netdev reads one, then a burst) or run between the
// two. So while requests of ours wait for their ACK the owed one waits too (at most
// roce_ack_hold), and a round that receives frames holds it once more (kAckHoldRounds). The
// next round follows at once (next_wait).
void Roce::flush_acks(bool received) {
  std::optional<Clock::time_point> now;
  const auto awaits_own_ack = [&](const RoceQp& s) {
    if (s.asked_to <= s.una_psn) return false;  // (nothing of ours asked for an ACK)
    if (!now) now = Clock::now();
    return *now - s.ack_owed_at < ctx_.cfg.roce_ack_hold;
  };
  std::size_t keep = 0;
  for (Qp* qp : ack_list_) {
    RoceQp& s = st(*qp);
    if (s.ack_pending && s.ack_waited != 0 && s.ack_waited < kAckHoldRounds && awaits_own_ack(s)) {
      ack_list_[keep++] = qp;
      continue;
    }
    if (s.ack_pending && (s.ack_waited == 0 || (received && s.ack_waited < kAckHoldRounds))) {
      s.ack_waited++;
      ack_list_[keep++] = qp;
      continue;
    }
    s.ack_listed = false;
    if (!s.ack_pending) {  // sent behind a packet, or given up (a NAK, a flush)
      s.ack_waited = 0;
      continue;
    }
    s.ack_pending = false;
    s.ack_waited = 0;
    send_ack(*qp, w::kAethAck | w::kAethNoCredit, s.ack_psn);
  }
  ack_list_.resize(keep);
}

void Roce::send_owed_ack(Qp& qp) {
  RoceQp& s = st(qp);
  if (!s.ack_pending) return;
  s.ack_pending = false;
  s.ack_waited = 0;
  if (s.has_path) send_ack(qp, w::kAethAck | w::kAethNoCredit, s.ack_psn);
}

void Roce::owe_ack(Qp& qp, Pos psn, bool now) {
  RoceQp& s = st(qp);
  if (!s.ack_listed) {
    s.ack_listed = true;
    ack_list_.push_back(&qp);
  }
  if (!s.ack_pending) {  // newly owed: held from here
    s.ack_waited = 0;
    s.ack_owed_at = ctx_.rx_now;
  }
  if (now) s.ack_waited = kAckHoldRounds;
  s.ack_pending = true;
  s.ack_psn = psn;
}

void Roce::timers(Clock::time_point now) {
  cm_sweep(now);
  if (budget_.room()) pump_waiters();  // (a QP flushed or destroyed freed budget)
  timers_.expire(now, [&](std::uint32_t qpn) {
    const auto it = ctx_.qps.find(qpn);
    if (it != ctx_.qps.end()) on_timer(*it->second, now);
  });
}

// Arms the QP's timer at its next deadline: the RNR wait, or the oldest request's ACK timeout.
void Roce::rearm(Qp& qp) {
  RoceQp& s = st(qp);
  if (s.cm == CmState::req_sent || s.cm == CmState::rep_sent || s.cm == CmState::dreq_sent || s.cm == CmState::drain)
    timers_.arm(qp.qpn, std::min(s.cm_next, s.cm_deadline));
  if (!s.has_path) return;
  if (!s.read_jobs.empty()) timers_.arm(qp.qpn, Clock::now());  // Read responses still to send
  if (!s.reqs.empty()) {
    timers_.arm(qp.qpn, s.rnr_wait ? s.rnr_until : s.progress_at + rto(s));
    if (unasked(s) && !s.rnr_wait) timers_.arm(qp.qpn, s.sent_at + ask_idle(s));
  } else if (keepalive_on(qp))
    timers_.arm(qp.qpn, keepalive_due(s));
}

bool Roce::keepalive_on(const Qp& qp) const {
  return ctx_.cfg.keepalive_idle.count() > 0 && st(qp).has_path && qp.state == QpState::rts &&
         qp.cm == CmPhase::connected;
}

Clock::time_point Roce::keepalive_due(const RoceQp& s) const {
  return s.probes == 0 ? s.heard_at + ctx_.cfg.keepalive_idle : s.probed_at + ctx_.cfg.keepalive_interval;
}

// The probe is our last acknowledged request again (PSN una - 1: a zero-length RDMA Write Only
// asking for an ACK). A duplicate is acknowledged again by every RC responder (IBTA C9-105; rxe's
// duplicate_request, ours) before any other check: it needs no rkey, no remote access rights
// (ibv_rc_pingpong's QPs grant none, and rxe NAKs a new Write to them), no receive buffer, and
// takes no PSN from the consumer's requests.
void Roce::keepalive(Qp& qp, Clock::time_point now) {
  RoceQp& s = st(qp);
  if (now < keepalive_due(s)) return;
  if (s.probes >= ctx_.cfg.keepalive_probes) {
    ctx_.ctr.dead_peers++;
    break_qp(qp, "the peer answered none of " + std::to_string(s.probes) + " keepalive probes");
    return;
  }
  w::Packet p;
  p.opcode = w::Opcode::write_only;
  p.dest_qpn = s.peer_qpn;
  p.psn = static_cast<std::uint32_t>((s.una_psn - 1) & w::kPsnMask);
  p.ack_req = true;
  p.reth = w::Reth{};  // zero length: no rkey or address is looked at
  TxHold hold(*this);
  send_packet(qp, p, {}, 0, 0, qp.init.pd);
  s.probes++;
  s.probed_at = now;
  ctx_.ctr.keepalive_probes++;
}

void Roce::pick_source_port(Qp& qp, std::uint32_t flow_label) {
  RoceQp& s = st(qp);
  s.sport = nd_.source_port(w::source_port_of(flow_label, qp.qpn, s.peer_qpn));
}

// The peer hears of it (a DREQ, resent for a while) where a CM connection exists: with nothing
// of its own in flight it would otherwise wait forever.
void Roce::break_qp(Qp& qp, std::string reason) {
  RoceQp& s = st(qp);
  if (s.has_path && (s.cm == CmState::established || s.cm == CmState::rep_sent)) start_linger(qp, true);
  close_qp(qp, CmEventType::broken, std::move(reason));
}

}  // namespace softrnic::roce
