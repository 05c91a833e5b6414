// Connection management of the framing (docs/wire.md, "Connection messages"): request, reply
// and confirmation with cookies (a spoofed source creates no state), pending, reject, graceful
// and abrupt close, and the linger that repeats a reset until the peer answers.
#include <algorithm>
#include <cstring>

#include "constants.hpp"
#include "rudp.hpp"

namespace softrnic::rudp {

namespace w = wire;

Rudp::Rudp(Ctx& ctx, netdev::Netdev& nd) : iwarp::Transport(ctx), ctx_(ctx), nd_(nd) {
  if (sodium_init() < 0) std::abort();  // no randomness source: nothing here can be made safe
  randombytes_buf(cookie_key_.data(), cookie_key_.size());
  rx_bufs_.resize(kRxBurst * nd_.max_datagram());
  rx_frames_.resize(kRxBurst);
  for (std::size_t i = 0; i < kRxBurst; ++i)
    rx_frames_[i] = {{}, rx_bufs_.data() + i * nd_.max_datagram(), nd_.max_datagram(), 0};
  // Keep what one QP has in flight well inside the receiver's buffer: a burst that overflows
  // it is lost whole.
  window_bytes_ = std::max<std::size_t>(nd_.max_datagram(), std::min(ctx_.cfg.window_bytes, nd_.rx_buffer_bytes() / 4));
  // All QPs together: half the receive buffer (ours stands for the peers', set up alike).
  budget_.set_limit(std::max<std::size_t>(window_bytes_ + kFrameCharge, nd_.rx_buffer_bytes() / 2));
}

Rudp::~Rudp() {
  for (auto* r : reqs_) delete r;
}

std::unique_ptr<TransportQp> Rudp::make_qp_state() {
  auto c = std::make_unique<Conn>();
  c->snd_nxt = c->snd_una = random32();
  c->rto = ctx_.cfg.initial_rto;
  return c;
}

void Rudp::reset(Qp& qp) {
  hint_peer(qp, false);
  Conn& c = conn(qp);
  c.peer_qpn = 0;
  c.snd_nxt = c.snd_una = random32();
  c.snd_una_pos = c.snd_nxt_pos;
  c.ack_limit.reset();
  c.ka_nonce = 0;
  c.ka_sent = 0;
  c.ka_soon = false;
  c.ka_next = {};
  c.cm_cookie = 0;
  c.disc_rx_pending = false;
  c.rto = ctx_.cfg.initial_rto;
  c.srtt_us = c.rttvar_us = 0;
  c.rto_probe = {};
  // RACK's state belongs to the old sequence space (high_delivered compared with the new one
  // would read every original as reordered).
  c.rack_sent = {};
  c.rack_rtt = {};
  c.min_rtt = {};
  c.reo_mult = 1;
  c.reo_persist = 0;
  c.reo_raised = {};
  c.reo_learned = {};
  c.high_delivered = 0;
  c.delivered_any = false;
  iwarp::Rdmap::reset(c);
  timers_.cancel(qp.qpn);
}

void Rudp::destroy(Qp& qp) {
  if (qp.cm == CmPhase::connected || qp.cm == CmPhase::disconnecting || qp.cm == CmPhase::accepting) start_linger(qp);
  Conn& c = conn(qp);
  if (c.req) c.req->phase = ReqPhase::rejected;
  hint_peer(qp, false);
  std::erase(ack_list_, &qp);
  std::erase_if(delayed_acks_, [&](const DelayedAck& d) { return d.qp == &qp; });
  timers_.cancel(qp.qpn);
  leave_budget(qp);
}

void Rudp::flush(Qp& qp) {
  Conn& c = conn(qp);
  iwarp::Rdmap::flush(c);
  c.backlog.clear();
  c.inflight.clear();
  c.inflight_bytes = 0;
  c.sacked_frames = c.sacked_bytes = 0;
  leave_budget(qp);
}

void Rudp::leave_budget(Qp& qp) {
  Conn& c = conn(qp);
  if (budget_.leave(qp.qpn, c.budget_waiting, c.budget_charged)) nd_.wake();  // served in the next round
}

void Rudp::closed(Qp& qp) {
  hint_peer(qp, false);
  conn(qp).req = nullptr;
}

void Rudp::close_all() {
  for (auto& [n, qp] : ctx_.qps)
    if (qp->cm == CmPhase::connected || qp->cm == CmPhase::disconnecting || qp->cm == CmPhase::accepting)
      start_linger(*qp);
}

// Tells the netdev a connection to the QP's peer began or ended (once each way).
void Rudp::hint_peer(Qp& qp, bool up) {
  if (qp.peer_hinted == up) return;
  qp.peer_hinted = up;
  nd_.peer_hint(qp.peer, up);
}

Status Rudp::connect(Qp& qp, NetAddr remote, std::uint64_t conn_qual, std::span<const std::uint8_t> pd,
                     std::chrono::milliseconds timeout) {
  if (pd.size() > ctx_.limits.max_private_data) return Status::length_error;
  if (qp.state != QpState::idle || qp.cm != CmPhase::none) return Status::invalid_state;
  Conn& c = conn(qp);
  qp.peer = remote;
  qp.local = nd_.local_addr();
  c.conn_qual = conn_qual;
  c.conn_id = random32();
  c.cm_private.assign(pd.begin(), pd.end());
  qp_event(qp, QpEvent::connect);
  c.cm_cookie = 0;
  c.cm_answered = false;
  const auto now = Clock::now();
  c.cm_deadline = now + (timeout.count() > 0 ? timeout : ctx_.cfg.connect_timeout);
  c.cm_started = now;
  send_cm(qp, w::CmOp::connect_request, 0);
  c.cm_next_tx = now + kCmRetry;
  rearm(qp);
  nd_.wake();
  return Status::ok;
}

Status Rudp::listen(std::uint64_t conn_qual, std::function<void(ConnRequest*, const ConnRequestInfo&)> on_request) {
  if (listeners_.count(conn_qual)) return Status::in_use;
  listeners_[conn_qual] = std::move(on_request);
  return Status::ok;
}

Status Rudp::stop_listen(std::uint64_t conn_qual) {
  return listeners_.erase(conn_qual) ? Status::ok : Status::not_found;
}

bool Rudp::known_req(const ConnRequest* r) const {
  return std::find(reqs_.begin(), reqs_.end(), r) != reqs_.end();
}

Status Rudp::accept(ConnRequest* base, Qp& qp, std::span<const std::uint8_t> pd) {
  if (!base || !known_req(base) || base->phase != ReqPhase::pending) return Status::invalid_state;
  if (pd.size() > ctx_.limits.max_private_data) return Status::length_error;
  if (qp.state != QpState::idle || qp.cm != CmPhase::none) return Status::invalid_state;
  auto* req = static_cast<Request*>(base);
  Conn& c = conn(qp);
  req->phase = ReqPhase::accepted;
  req->decided = Clock::now();
  qp.peer = req->from;
  qp.local = nd_.local_addr();
  c.peer_qpn = req->src_qpn;
  c.conn_id = req->conn_id;
  c.conn_qual = req->conn_qual;
  c.rxw.reset(req->init_seq);
  qp.ord = std::min(qp.init.ord, req->peer_ird);
  qp.ird = qp.init.ird;
  c.cm_private.assign(pd.begin(), pd.end());
  qp_event(qp, QpEvent::accept);
  c.req = req;
  const auto now = Clock::now();
  c.cm_deadline = now + std::min<std::chrono::milliseconds>(ctx_.cfg.connect_timeout, kHalfOpenTimeout);
  send_cm(qp, w::CmOp::connect_reply, 0);
  c.cm_next_tx = now + kCmRetry;
  rearm(qp);
  nd_.wake();
  return Status::ok;
}

Status Rudp::reject(ConnRequest* base, std::span<const std::uint8_t> pd) {
  if (!base || !known_req(base) || base->phase != ReqPhase::pending) return Status::invalid_state;
  if (pd.size() > ctx_.limits.max_private_data) return Status::length_error;
  auto* req = static_cast<Request*>(base);
  req->phase = ReqPhase::rejected;
  req->decided = Clock::now();
  req->reply_private.assign(pd.begin(), pd.end());
  send_reject(*req, false);
  return Status::ok;
}

Status Rudp::disconnect(Qp& qp, bool graceful) {
  switch (disconnect_action(qp.state, qp.cm, graceful)) {
    case DisconnectAction::cancel_connect:
      close_qp(qp, CmEventType::disconnected, "connect cancelled");
      return Status::ok;
    case DisconnectAction::nothing: return Status::ok;
    case DisconnectAction::refuse: return Status::invalid_state;
    case DisconnectAction::close_now: break;
    case DisconnectAction::close_gracefully: return begin_graceful_close(qp);
  }
  start_linger(qp);
  close_qp(qp, CmEventType::disconnected, "");
  return Status::ok;
}

Status Rudp::begin_graceful_close(Qp& qp) {
  qp_event(qp, QpEvent::disconnect);
  conn(qp).cm_deadline = Clock::now() + kDisconnectTimeout;
  rearm(qp);
  // Requests still waiting for RDMA Reads go out first; the disconnect follows them.
  if (qp.sq_wait.empty()) send_disconnect(qp);
  nd_.wake();
  return Status::ok;
}

// hdr_seq: the header's seq field (a request's cookie echo, a cookie).
void Rudp::send_cm_raw(NetAddr to, std::uint32_t dst_qpn, std::uint32_t src_qpn, w::CmOp op, std::uint8_t rsv,
                       std::uint64_t conn_qual, std::uint32_t conn_id, std::uint32_t init_seq,
                       std::span<const std::uint8_t> pd, std::uint32_t ird, std::uint32_t ord, std::uint32_t hdr_seq) {
  std::vector<std::uint8_t> b(w::kFrameHeaderLen + sizeof(w::CmHdrWire) + pd.size() + w::kFrameTrailerLen);
  w::write_frame_header(b, {w::FrameType::cm, 0, dst_qpn, src_qpn, hdr_seq, 0});
  const w::CmHdrWire c{static_cast<std::uint8_t>(op),
                       rsv,
                       w::Be16(static_cast<std::uint16_t>(pd.size())),
                       w::Be16(static_cast<std::uint16_t>(ird)),
                       w::Be16(static_cast<std::uint16_t>(ord)),
                       w::Be64(conn_qual),
                       w::Be32(conn_id),
                       w::Be32(init_seq)};
  std::memcpy(b.data() + w::kFrameHeaderLen, &c, sizeof c);
  if (!pd.empty()) std::memcpy(b.data() + w::kFrameHeaderLen + sizeof c, pd.data(), pd.size());
  const std::size_t n = w::seal_frame(b, b.size() - w::kFrameTrailerLen);
  send_raw(to, {b.data(), n});
}

void Rudp::send_cm(Qp& qp, w::CmOp op, std::uint8_t rsv) {
  Conn& c = conn(qp);
  const bool carries_pd = op == w::CmOp::connect_request || op == w::CmOp::connect_reply;
  send_cm_raw(qp.peer, c.peer_qpn, qp.qpn, op, rsv, c.conn_qual, c.conn_id, c.snd_nxt,
              carries_pd ? std::span<const std::uint8_t>(c.cm_private) : std::span<const std::uint8_t>{}, qp.init.ird,
              qp.init.ord, op == w::CmOp::connect_request ? c.cm_cookie : 0);
}

// The cookie a listener gives a request (from, its QP, attempt, service, initial sequence) in
// key epoch `epoch`: a keyed hash (SipHash-2-4), so only who receives it at `from` can echo it,
// and the listener keeps no state for a request until it comes back (as TCP's SYN cookies).
std::uint32_t Rudp::cookie(NetAddr from, std::uint32_t src_qpn, std::uint32_t conn_id, std::uint64_t conn_qual,
                           std::uint32_t init_seq, std::int64_t epoch) const {
  std::array<unsigned char, 34> in{};
  std::size_t at = 0;
  auto put = [&](std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) in[at++] = static_cast<unsigned char>(v >> (8 * i));
  };
  put(from.ip, 4);
  put(from.port, 2);
  put(src_qpn, 4);
  put(conn_id, 4);
  put(conn_qual, 8);
  put(init_seq, 4);
  put(static_cast<std::uint64_t>(epoch), 8);
  std::array<unsigned char, crypto_shorthash_BYTES> h{};
  crypto_shorthash(h.data(), in.data(), at, cookie_key_.data());
  const std::uint32_t c = static_cast<std::uint32_t>(h[0]) | static_cast<std::uint32_t>(h[1]) << 8 |
                          static_cast<std::uint32_t>(h[2]) << 16 | static_cast<std::uint32_t>(h[3]) << 24;
  return c ? c : 1;  // 0 means "no cookie"
}

namespace {
std::int64_t cookie_epoch(Clock::time_point now) {
  return std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count() / kCookieEpochSeconds;
}
}  // namespace

void Rudp::send_reject(const Request& r, bool no_listener) {
  send_cm_raw(r.from, r.src_qpn, 0, w::CmOp::reject, no_listener ? 1 : 0, r.conn_qual, r.conn_id, 0, r.reply_private);
}

// Abrupt close: remember the connection (Linger) and tell the peer with a repeated reset.
void Rudp::start_linger(Qp& qp) {
  Conn& c = conn(qp);
  if (c.peer_qpn == 0) return;
  std::erase_if(lingers_, [&](const Linger& l) { return l.qpn == qp.qpn; });
  const auto now = Clock::now();
  Linger& l = lingers_.emplace_back(
      Linger{qp.qpn, qp.peer, c.peer_qpn, c.conn_id, ack_value(c), c.snd_nxt, now, now + kLinger});
  send_reset(l, l.snd_nxt);
  l.next_tx = now + kResetRetry;
}

// `seq`: the sequence number the peer must be expecting for the reset to count (RFC 5961):
// where our stream ended, or what the peer's challenge ACK said it expects.
void Rudp::send_reset(const Linger& l, std::uint32_t seq) {
  std::uint8_t b[w::kFrameOverhead + sizeof(w::CmHdrWire)];
  w::write_frame_header(b, {w::FrameType::cm, w::kFlagAckValid, l.peer_qpn, l.qpn, seq, l.rcv_next});
  const w::CmHdrWire c{static_cast<std::uint8_t>(w::CmOp::reset),
                       0,
                       w::Be16(0),
                       w::Be16(0),
                       w::Be16(0),
                       w::Be64(0),
                       w::Be32(l.conn_id),
                       w::Be32(0)};
  std::memcpy(b + w::kFrameHeaderLen, &c, sizeof c);
  send_raw(l.peer, {b, w::seal_frame(b, w::kFrameHeaderLen + sizeof c)});
}

// A frame for a QP that is gone: acknowledge what it had received, and repeat the reset. An
// ACK is the peer's challenge to a reset it did not take (not at its expected sequence): the
// reset goes again at the sequence the ACK names, if that is within what we sent.
bool Rudp::answer_lingering(NetAddr from, const w::FrameHeader& h) {
  for (const Linger& l : lingers_) {
    if (l.qpn != h.dst_qpn || l.peer != from || l.peer_qpn != h.src_qpn) continue;
    if (h.type == w::FrameType::ack) {
      if ((h.flags & w::kFlagAckValid) && seq_le(h.ack, l.snd_nxt) && seq_le(l.snd_nxt - kMaxAckLag, h.ack))
        send_reset(l, h.ack);
      return true;
    }
    std::uint8_t b[w::kFrameOverhead];
    w::write_frame_header(b, {w::FrameType::ack, w::kFlagAckValid, l.peer_qpn, l.qpn, 0, l.rcv_next});
    send_raw(l.peer, {b, w::seal_frame(b, w::kFrameHeaderLen)});
    send_reset(l, l.snd_nxt);
    return true;
  }
  return false;
}

void Rudp::established_passive(Qp& qp) {
  qp_event(qp, QpEvent::established);
  conn(qp).last_rx = Clock::now();
  hint_peer(qp, true);
  rearm(qp);  // keepalive
  emit(qp, CmEventType::established, "");
}

// The lingers' resets, and the sweep of decided requests.
void Rudp::cm_timers(Clock::time_point now) {
  for (Linger& l : lingers_) {
    if (now >= l.next_tx) {
      send_reset(l, l.snd_nxt);
      l.next_tx = now + kResetRetry;
    }
  }
  std::erase_if(lingers_, [&](const Linger& l) { return now >= l.expiry; });
  // Decided requests are kept kReqLinger for the initiator's retransmissions; they go in a
  // sweep every kReqSweep, not at every timer scan (a peer that makes many requests the
  // consumer decides on must not make each scan walk them all: found by the stateful fuzzer).
  if (now - last_req_sweep_ >= kReqSweep) {
    last_req_sweep_ = now;
    std::vector<Request*> gone;
    std::erase_if(reqs_, [&](Request* r) {
      if (r->phase == ReqPhase::pending || now - r->decided < kReqLinger) return false;
      gone.push_back(r);
      return true;
    });
    if (!gone.empty()) {
      std::sort(gone.begin(), gone.end());
      for (auto& [n, qp] : ctx_.qps)
        if (conn(*qp).req && std::binary_search(gone.begin(), gone.end(), conn(*qp).req)) conn(*qp).req = nullptr;
      for (Request* r : gone) delete r;
    }
  }
}

// A CM frame, by its operation. Each handler takes it only from whom it may come: a reply, reject,
// cookie or confirmation for one of our QPs (ours()), a reset at the exact sequence number.
void Rudp::handle_cm(NetAddr from, const w::FrameHeader& h, std::span<const std::uint8_t> body) {
  if (body.size() < sizeof(w::CmHdrWire)) {
    ctx_.ctr.rx_bad_frames++;
    return;
  }
  CmFrame f{from, h, {}, {}};
  std::memcpy(&f.c, body.data(), sizeof f.c);
  const std::size_t pd_len = f.c.private_data_len.get();
  if (pd_len > body.size() - sizeof f.c || pd_len > ctx_.limits.max_private_data) {
    ctx_.ctr.rx_bad_frames++;
    return;
  }
  f.pd = body.subspan(sizeof f.c, pd_len);
  switch (static_cast<w::CmOp>(f.c.op)) {
    case w::CmOp::connect_request: on_connect_request(f); return;
    case w::CmOp::connect_reply: on_connect_reply(f); return;
    case w::CmOp::reject: on_reject(f); return;
    case w::CmOp::reset: on_reset(f); return;
    case w::CmOp::reset_ack:
      std::erase_if(lingers_, [&](const Linger& l) { return l.qpn == h.dst_qpn && l.peer == from; });
      return;
    case w::CmOp::pending:
    case w::CmOp::cookie: on_cookie(f); return;
    case w::CmOp::ready_to_use: {
      Qp* q = ours(f);
      if (q && q->cm == CmPhase::accepting) established_passive(*q);
      return;
    }
  }
  ctx_.ctr.rx_bad_frames++;
}

// The QP a reply, reject, cookie or confirmation is for: ours, of this attempt, at that peer.
Qp* Rudp::ours(const CmFrame& f) {
  auto it = ctx_.qps.find(f.h.dst_qpn);
  if (it == ctx_.qps.end() || conn(*it->second).conn_id != f.c.conn_id.get() || it->second->peer != f.from)
    return nullptr;
  return it->second;
}

// A connect request. One we have already: answered again by its state. New: only once its
// initiator echoed our cookie (it receives at its address), and within the pending cap, does it
// reach the listener.
void Rudp::on_connect_request(const CmFrame& f) {
  const std::uint32_t conn_id = f.c.conn_id.get();
  for (Request* r : reqs_) {
    if (r->from == f.from && r->conn_id == conn_id && r->src_qpn == f.h.src_qpn) {
      if (r->phase == ReqPhase::rejected) send_reject(*r, false);
      // pending: the consumer decides, and the initiator hears that its request arrived
      // (it does not give up for want of an answer); accepted: the QP repeats its reply.
      if (r->phase == ReqPhase::pending)
        send_cm_raw(f.from, f.h.src_qpn, 0, w::CmOp::pending, 0, r->conn_qual, conn_id, 0, {});
      return;
    }
  }
  auto l = listeners_.find(f.c.conn_qual.get());
  if (l == listeners_.end()) {
    Request tmp;
    tmp.from = f.from;
    tmp.src_qpn = f.h.src_qpn;
    tmp.conn_id = conn_id;
    tmp.conn_qual = f.c.conn_qual.get();
    send_reject(tmp, true);
    return;
  }
  if (!cookie_echoed(f)) return;
  if (std::count_if(reqs_.begin(), reqs_.end(), [](const Request* q) { return q->phase == ReqPhase::pending; }) >=
      kMaxPendingRequests) {
    ctx_.ctr.rx_dropped_requests++;  // a flood of requests cannot grow memory without bound
    return;
  }
  auto* r = new Request;
  r->from = f.from;
  r->src_qpn = f.h.src_qpn;
  r->conn_id = conn_id;
  r->init_seq = f.c.init_seq.get();
  r->peer_ird = f.c.ird.get();
  r->peer_ord = f.c.ord.get();
  r->conn_qual = f.c.conn_qual.get();
  reqs_.push_back(r);
  l->second(r, ConnRequestInfo{f.from, r->conn_qual, std::vector<std::uint8_t>(f.pd.begin(), f.pd.end())});
}

// No state for a request until its initiator has shown it receives at its address: the first
// request is answered with a cookie, which only a request sent from there echoes (a spoofed source
// never sees it, so it can neither reach the consumer nor hold a QP). True when this one echoes it.
bool Rudp::cookie_echoed(const CmFrame& f) {
  const std::int64_t epoch = cookie_epoch(Clock::now());
  const std::uint32_t conn_id = f.c.conn_id.get();
  const std::uint64_t qual = f.c.conn_qual.get();
  const std::uint32_t isn = f.c.init_seq.get();
  const std::uint32_t seq = f.h.seq;
  if (seq != 0 && (seq == cookie(f.from, f.h.src_qpn, conn_id, qual, isn, epoch) ||
                   seq == cookie(f.from, f.h.src_qpn, conn_id, qual, isn, epoch - 1)))
    return true;
  if (seq != 0) ctx_.ctr.rx_bad_cookies++;
  ctx_.ctr.cookies_sent++;
  send_cm_raw(f.from, f.h.src_qpn, 0, w::CmOp::cookie, 0, qual, conn_id, 0, {}, 0, 0,
              cookie(f.from, f.h.src_qpn, conn_id, qual, isn, epoch));
  return false;
}

// The listener's reply to our request: connected (our confirmation goes back); again after that,
// our confirmation was lost.
void Rudp::on_connect_reply(const CmFrame& f) {
  Qp* q = ours(f);
  if (!q) {
    ctx_.ctr.rx_unknown_qp++;
    return;
  }
  Qp& qp = *q;
  Conn& cn = conn(qp);
  if (qp.cm == CmPhase::connecting) {
    cn.peer_qpn = f.h.src_qpn;
    cn.last_rx = Clock::now();
    cn.rxw.reset(f.c.init_seq.get());
    qp.ord = std::min(qp.init.ord, static_cast<std::uint32_t>(f.c.ird.get()));  // no more than the peer takes
    qp.ird = qp.init.ird;
    qp_event(qp, QpEvent::established);
    hint_peer(qp, true);
    rearm(qp);  // keepalive
    send_cm(qp, w::CmOp::ready_to_use, 0);
    emit(qp, CmEventType::established, "", std::vector<std::uint8_t>(f.pd.begin(), f.pd.end()));
  } else if (qp.cm == CmPhase::connected && cn.peer_qpn == f.h.src_qpn) {
    send_cm(qp, w::CmOp::ready_to_use, 0);
  }
}

void Rudp::on_reject(const CmFrame& f) {
  Qp* q = ours(f);
  if (!q || q->cm != CmPhase::connecting) return;
  Qp& qp = *q;
  flush_qp(qp);
  qp_event(qp, QpEvent::broken);
  emit(qp, f.c.reserved ? CmEventType::no_listener : CmEventType::rejected, "",
       std::vector<std::uint8_t>(f.pd.begin(), f.pd.end()));
}

// The peer closed abruptly. Taken only at the exact sequence number we expect, its ack first
// (Sends it received complete, not flush); answered with a reset ack when the connection is ours
// or one we closed, and not at all otherwise (an attacker learns nothing).
void Rudp::on_reset(const CmFrame& f) {
  const std::uint32_t conn_id = f.c.conn_id.get();
  auto it = ctx_.qps.find(f.h.dst_qpn);
  if (it != ctx_.qps.end() && it->second->peer == f.from && conn(*it->second).peer_qpn == f.h.src_qpn &&
      conn(*it->second).conn_id == conn_id && it->second->cm != CmPhase::none &&
      it->second->cm != CmPhase::connecting) {
    Qp& qp = *it->second;
    Conn& cn = conn(qp);
    if (qp.cm == CmPhase::closed) {
      // already closed (an earlier reset, or our own close): acknowledge it below
    } else if (f.h.seq != cn.rxw.next() || !(f.h.flags & w::kFlagAckValid) || !ack_acceptable(cn, f.h.ack)) {
      // Anything but the exact sequence number (RFC 5961 section 3) is answered with our ACK,
      // which the real peer, if it did reset, answers with a reset at that number
      // (answer_lingering); a blind attacker never sees it.
      ctx_.ctr.challenge_acks++;
      challenge(qp);
      return;
    } else {
      // A reset from the initiator means it had our reply and was connected: its READY_TO_USE
      // may only be behind (another socket of the udp netdev, a lost datagram), so the consumer
      // hears ESTABLISHED before DISCONNECTED, as for a first data frame (dtestcm -c 100 counts
      // a DISCONNECTED as its ESTABLISHED otherwise and waits forever for the last disconnects).
      if (qp.cm == CmPhase::accepting) established_passive(qp);
      handle_ack(qp, f.h.ack, {});
      if (qp.cm != CmPhase::closed) close_qp(qp, CmEventType::disconnected, "the peer reset the connection");
    }
  } else if (std::none_of(lingers_.begin(), lingers_.end(), [&](const Linger& l) {
               return l.qpn == f.h.dst_qpn && l.peer == f.from && l.peer_qpn == f.h.src_qpn && l.conn_id == conn_id;
             })) {
    return;
  }
  std::uint8_t b[w::kFrameOverhead + sizeof(w::CmHdrWire)];
  w::write_frame_header(b, {w::FrameType::cm, 0, f.h.src_qpn, f.h.dst_qpn, 0, 0});
  const w::CmHdrWire r{static_cast<std::uint8_t>(w::CmOp::reset_ack),
                       0,
                       w::Be16(0),
                       w::Be16(0),
                       w::Be16(0),
                       w::Be64(0),
                       w::Be32(conn_id),
                       w::Be32(0)};
  std::memcpy(b + w::kFrameHeaderLen, &r, sizeof r);
  send_raw(f.from, {b, w::seal_frame(b, w::kFrameHeaderLen + sizeof r)});
}

// The listener is there (pending), or asks for its cookie to be echoed (cookie): the request goes
// again at once with it.
void Rudp::on_cookie(const CmFrame& f) {
  Qp* q = ours(f);
  if (!q || q->cm != CmPhase::connecting) return;
  Conn& cn = conn(*q);
  cn.cm_answered = true;
  if (static_cast<w::CmOp>(f.c.op) == w::CmOp::cookie && f.h.seq != 0 && f.h.seq != cn.cm_cookie) {
    cn.cm_cookie = f.h.seq;
    send_cm(*q, w::CmOp::connect_request, 0);
    cn.cm_next_tx = Clock::now() + kCmRetry;
  }
}

}  // namespace softrnic::rudp
