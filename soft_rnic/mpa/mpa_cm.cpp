// MPA connection set-up and teardown over TCP (RFC 5044 section 7, RFC 6581): the request and
// reply with private data, reject, IRD/ORD and the peer-to-peer RTR, CRC and markers negotiated
// (on when either side asks for CRC; markers toward whoever asked), siw's timeouts.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "mpa.hpp"

namespace softrnic::mpa {

namespace w = wire;

namespace {
// siw waits this long for the MPA reply (initiator) and for the request (responder).
constexpr std::chrono::seconds kReplyTimeout{10};
constexpr std::chrono::seconds kRequestTimeout{5};
// Decided requests stay known this long (the consumer may still hold their handles).
constexpr std::chrono::seconds kReqLinger{10};
constexpr std::size_t kMaxHandshake = w::kMpaReqRepHdrLen + w::kMpaMaxPrivateData;
constexpr std::size_t kMaxHalfOpen = 64;  // connections waiting for their request, beyond kHalfOpenGrace
constexpr std::chrono::milliseconds kHalfOpenGrace{250};
constexpr std::size_t kMaxPendingReqs = 1024;  // requests waiting for the consumer (RoCEv2's cap too)
}  // namespace

// A conn_qual's TCP port, as OFA dapl's cma provider maps a service id to an rdma_cm port (and
// siw listens on the rdma_cm port itself): up to 0xFFFF the number itself, above it folded into
// 33534..65534. 0 for conn_qual 0.
std::uint16_t port_of(std::uint64_t conn_qual) {
  return rdma_cm_port(conn_qual);
}

Mpa::Mpa(Ctx& ctx, netdev::StreamNetdev& nd, const Settings& s) : iwarp::Transport(ctx), ctx_(ctx), nd_(nd), set_(s) {
  rx_buf_.resize(64 * 1024);
  events_.resize(64);
}

Mpa::~Mpa() {
  for (Request* r : reqs_) {
    if (r->sid) nd_.close(r->sid, true);
    delete r;
  }
}

bool Mpa::known_req(const ConnRequest* r) const {
  return std::find(reqs_.begin(), reqs_.end(), r) != reqs_.end();
}

void Mpa::send_raw(netdev::StreamId sid, std::span<const std::uint8_t> bytes) {
  const std::span<const std::uint8_t> pieces[1] = {bytes};
  // A handshake frame (at most 532 bytes) goes first on a fresh connection: the socket takes it.
  (void)nd_.write(sid, pieces);
}

void Mpa::reset(Qp& qp) {
  Conn& c = conn(qp);
  if (c.sid) end_stream(qp, true);
  c.phase = Phase::idle;
  c.hs.clear();
  c.rx.reset();
  c.txq.clear();
  c.close_when_sent = c.abort_when_sent = false;
  c.send_write_rtr = c.wait_first = c.absorb_write_rtr = false;
  c.req = nullptr;
  iwarp::Rdmap::reset(c);
  timers_.cancel(qp.qpn);
}

void Mpa::destroy(Qp& qp) {
  Conn& c = conn(qp);
  if (c.req) c.req->phase = ReqPhase::rejected;
  if (c.sid) end_stream(qp, qp.cm != CmPhase::closed || !c.txq.empty());
  timers_.cancel(qp.qpn);
}

void Mpa::flush(Qp& qp) {
  Conn& c = conn(qp);
  iwarp::Rdmap::flush(c);
  // An FPDU the socket has taken part of is finished (the stream must stay whole); the rest go.
  while (c.txq.size() > (c.txq.empty() || c.txq.front().written == 0 ? 0u : 1u)) c.txq.pop_back();
}

void Mpa::closed(Qp& qp) {
  Conn& c = conn(qp);
  c.req = nullptr;
  timers_.cancel(qp.qpn);
  if (!c.sid) return;
  // A Terminate or the last FPDUs still go out; then the connection ends.
  if (c.txq.empty()) {
    end_stream(qp, false);
  } else {
    c.close_when_sent = true;
    pump(qp);
  }
}

void Mpa::close_all() {
  for (auto& [n, qp] : ctx_.qps)
    if (conn(*qp).sid) end_stream(*qp, true);
}

// Ends the QP's TCP connection (RST when abortive, else FIN behind what was written).
void Mpa::end_stream(Qp& qp, bool abort) {
  Conn& c = conn(qp);
  if (!c.sid) return;
  by_stream_.erase(c.sid);
  nd_.close(c.sid, abort);
  c.sid = 0;
}

Status Mpa::listen(std::uint64_t conn_qual, std::function<void(ConnRequest*, const ConnRequestInfo&)> on_request) {
  const std::uint16_t port = port_of(conn_qual);
  if (port == 0) return Status::invalid_param;
  if (listeners_.count(port)) return Status::in_use;
  std::string error;
  if (nd_.listen(port, error) == 0) return Status::in_use;
  listeners_[port] = Listener{conn_qual, std::move(on_request)};
  return Status::ok;
}

Status Mpa::stop_listen(std::uint64_t conn_qual) {
  const std::uint16_t port = port_of(conn_qual);
  auto l = listeners_.find(port);
  if (port == 0 || l == listeners_.end() || l->second.conn_qual != conn_qual) return Status::not_found;
  listeners_.erase(l);
  nd_.stop_listen(port);
  return Status::ok;
}

Status Mpa::connect(Qp& qp, NetAddr remote, std::uint64_t conn_qual, std::span<const std::uint8_t> pd,
                    std::chrono::milliseconds timeout) {
  const std::size_t room = w::kMpaMaxPrivateData - (set_.revision == 2 ? w::kMpaEnhancedLen : 0);
  if (pd.size() > std::min<std::size_t>(room, ctx_.limits.max_private_data)) return Status::length_error;
  if (port_of(conn_qual) == 0) return Status::invalid_param;
  if (qp.state != QpState::idle || qp.cm != CmPhase::none) return Status::invalid_state;
  Conn& c = conn(qp);
  const NetAddr to{remote.ip, port_of(conn_qual)};
  std::string error;
  const netdev::StreamId sid = nd_.connect(to, error);
  if (!sid) return Status::invalid_param;
  qp.peer = to;
  c.sid = sid;
  c.initiator = true;
  c.conn_qual = conn_qual;
  c.cm_private.assign(pd.begin(), pd.end());
  c.phase = Phase::tcp_connecting;
  c.hs.clear();
  qp_event(qp, QpEvent::connect);
  c.cm_deadline = Clock::now() + (timeout.count() > 0 ? timeout : ctx_.cfg.connect_timeout);
  by_stream_[sid] = &qp;
  rearm(qp);
  nd_.wake();
  return Status::ok;
}

// Initiator: TCP is up; the MPA request goes out (nothing else until the reply is in).
void Mpa::on_connected(Qp& qp) {
  Conn& c = conn(qp);
  c.mss = nd_.mss(c.sid);
  w::MpaParams p;
  p.revision = set_.revision;
  p.crc = set_.crc;
  p.markers = set_.markers;
  if (p.revision == 2) {
    w::MpaEnhanced e;
    e.ird = static_cast<std::uint16_t>(qp.init.ird);
    e.ord = static_cast<std::uint16_t>(qp.init.ord);
    e.peer_to_peer = set_.peer_to_peer;
    e.rtr_write = set_.peer_to_peer;
    p.enhanced = e;
  }
  p.private_data = c.cm_private;
  std::array<std::uint8_t, kMaxHandshake> b{};
  const std::size_t n = w::encode_mpa_req_rep(b, p);
  send_raw(c.sid, {b.data(), n});
  c.phase = Phase::wait_reply;
  c.cm_deadline = std::min(c.cm_deadline, Clock::now() + kReplyTimeout);
  rearm(qp);
}

void Mpa::on_connect_failed(Qp& qp, int error) {
  end_stream(qp, true);
  const bool refused = error == ECONNREFUSED;
  const bool host = error == EHOSTUNREACH || error == ENETUNREACH;
  close_qp(qp,
           refused ? CmEventType::no_listener
           : host  ? CmEventType::host_unreachable
                   : CmEventType::unreachable,
           std::string("TCP connect to ") + netdev::to_string(qp.peer) + " failed: " + std::strerror(error));
}

// Initiator: the reply, read as it comes.
void Mpa::read_reply(Qp& qp) {
  Conn& c = conn(qp);
  bool ended = false;  // the peer closed behind what it sent (a reject does)
  for (;;) {
    std::array<std::uint8_t, 4096> b;
    const std::ptrdiff_t n = nd_.read(c.sid, b);
    if (n < 0) {
      ended = true;
      break;
    }
    if (n == 0) break;
    c.hs.insert(c.hs.end(), b.begin(), b.begin() + n);
    if (c.hs.size() >= kMaxHandshake + 65536) break;
  }
  w::MpaParams rep;
  std::size_t used = 0;
  const w::MpaError e = w::decode_mpa_req_rep(c.hs, rep, used);
  if (e == w::MpaError::need_more || (ended && e == w::MpaError::none && !rep.reject)) {
    if (!ended) return;
    end_stream(qp, true);
    close_qp(qp, CmEventType::unreachable, "the peer closed the connection during the MPA exchange");
    return;
  }
  if (e != w::MpaError::none || !rep.reply) {
    end_stream(qp, true);
    close_qp(qp, CmEventType::unreachable,
             std::string("bad MPA reply: ") + (e != w::MpaError::none ? std::string(w::to_string(e)) : "a request"));
    return;
  }
  const std::vector<std::uint8_t> pd(rep.private_data.begin(), rep.private_data.end());
  if (rep.reject) {
    end_stream(qp, false);
    flush_qp(qp);
    qp_event(qp, QpEvent::broken);
    emit(qp, CmEventType::rejected, "", pd);
    return;
  }
  c.crc = set_.crc || rep.crc;
  c.tx_markers = rep.markers;
  c.rx_markers = set_.markers;
  qp.ord = rep.enhanced ? std::min<std::uint32_t>(qp.init.ord, rep.enhanced->ird) : qp.init.ord;
  qp.ird = qp.init.ird;
  if (rep.enhanced && rep.enhanced->peer_to_peer) {
    if (!rep.enhanced->rtr_write) {
      end_stream(qp, true);
      close_qp(qp, CmEventType::unreachable, "the MPA reply chose an RTR we did not offer");
      return;
    }
    c.send_write_rtr = true;
  }
  const std::vector<std::uint8_t> after(c.hs.begin() + static_cast<std::ptrdiff_t>(used), c.hs.end());
  c.hs.clear();
  qp_event(qp, QpEvent::established);
  established(qp, after);
  if (c.send_write_rtr) {
    // The RTR: a zero-length RDMA Write (STag 1, as siw sends it), our first FPDU.
    std::uint8_t h[sizeof(w::DdpTaggedHdr)];
    const std::size_t hl = w::encode_tagged(h, w::RdmapOpcode::rdma_write, true, 1, 0);
    send_segment(qp, {{h, hl}}, {}, 0, 0);
    pump(qp);
  }
  emit(qp, CmEventType::established, "", pd);
}

// Both sides: FPDUs may flow; `after`: bytes that came behind the handshake frame.
void Mpa::established(Qp& qp, std::span<const std::uint8_t> after) {
  Conn& c = conn(qp);
  c.phase = Phase::established;
  c.mss = nd_.mss(c.sid);
  nd_.spin_read(c.sid);  // read_stream reads whenever told, and stops at an empty read
  // A peer that vanishes (host down, cable out) is noticed by TCP's keepalive, with the IA's
  // keepalive settings; the kernel ends the connection and the QP breaks (on_closed).
  nd_.keepalive(c.sid, ctx_.cfg.keepalive_idle, ctx_.cfg.keepalive_interval, ctx_.cfg.keepalive_probes);
  w::MpaRxConfig rc;
  rc.crc = c.crc;
  rc.markers = c.rx_markers;
  c.rx.emplace(rc);
  timers_.cancel(qp.qpn);
  if (!after.empty()) take(qp, after);
}

// Responder: a connection came in on a listening port; its request is read as it comes. At most
// kMaxPendingReqs requests wait for the consumer; a connection beyond is reset.
void Mpa::on_accepted(const netdev::StreamEvent& e) {
  if (!listeners_.count(e.local_port)) {
    nd_.close(e.id, true);
    return;
  }
  const auto undecided = std::count_if(reqs_.begin(), reqs_.end(), [](const Request* r) {
    return r->sid && r->complete && r->phase == ReqPhase::pending;
  });
  if (static_cast<std::size_t>(undecided) >= kMaxPendingReqs) {
    ctx_.ctr.rx_dropped_requests++;
    nd_.close(e.id, true);
    return;
  }
  auto* r = new Request;
  r->sid = e.id;
  r->from = e.peer;
  r->conn_qual = listeners_.at(e.local_port).conn_qual;
  r->arrived = Clock::now();
  reqs_.push_back(r);
}

void Mpa::drop_request(Request* r) {
  if (r->sid) nd_.close(r->sid, true);
  r->sid = 0;
  if (r->phase == ReqPhase::pending) {
    r->phase = ReqPhase::rejected;
    r->decided = Clock::now();
  }
}

// Reads the request and not a byte past it: what the initiator sends behind it (an initiator
// that does not wait for the reply) stays in the socket, held, until the consumer accepts, so a
// request costs at most its 532 bytes here however much follows it.
void Mpa::read_request(Request& r) {
  if (r.complete || !r.sid) return;
  w::MpaParams p;
  std::size_t need = 0;
  w::MpaError e;
  while ((e = w::decode_mpa_req_rep(r.bytes, p, need)) == w::MpaError::need_more) {
    std::array<std::uint8_t, kMaxHandshake> b;
    const std::ptrdiff_t n = nd_.read(r.sid, std::span(b).first(need - r.bytes.size()));
    if (n < 0) {
      drop_request(&r);  // the initiator went away
      return;
    }
    if (n == 0) return;
    r.bytes.insert(r.bytes.end(), b.begin(), b.begin() + n);
  }
  if (e != w::MpaError::none || p.reply) {
    drop_request(&r);
    return;
  }
  r.complete = true;
  r.revision = p.revision;
  r.crc = p.crc;
  r.markers = p.markers;
  r.enhanced = p.enhanced;
  r.private_data.assign(p.private_data.begin(), p.private_data.end());
  r.bytes.clear();
  auto l = listeners_.find(port_of(r.conn_qual));
  if (l == listeners_.end() || l->second.conn_qual != r.conn_qual) {
    drop_request(&r);
    return;
  }
  nd_.hold_reads(r.sid, true);
  l->second.on_request(&r, ConnRequestInfo{r.from, r.conn_qual, r.private_data});
}

Status Mpa::accept(ConnRequest* base, Qp& qp, std::span<const std::uint8_t> pd) {
  if (!base || !known_req(base) || base->phase != ReqPhase::pending) return Status::invalid_state;
  auto* r = static_cast<Request*>(base);
  if (!r->complete || !r->sid) return Status::invalid_state;
  const std::size_t room = w::kMpaMaxPrivateData - (r->enhanced ? w::kMpaEnhancedLen : 0);
  if (pd.size() > std::min<std::size_t>(room, ctx_.limits.max_private_data)) return Status::length_error;
  if (qp.state != QpState::idle || qp.cm != CmPhase::none) return Status::invalid_state;
  Conn& c = conn(qp);
  r->phase = ReqPhase::accepted;
  r->decided = Clock::now();
  qp.peer = r->from;
  qp.local = NetAddr{nd_.local_ip(), port_of(r->conn_qual)};
  c.sid = std::exchange(r->sid, 0);
  c.initiator = false;
  c.conn_qual = r->conn_qual;
  c.req = r;
  // Revision 1 carries no IRD/ORD: the consumer's own settings stand.
  qp.ord = r->enhanced ? std::min<std::uint32_t>(qp.init.ord, r->enhanced->ird) : qp.init.ord;
  qp.ird = qp.init.ird;
  c.crc = set_.crc || r->crc;
  c.tx_markers = r->markers;
  c.rx_markers = set_.markers;
  w::MpaParams p;
  p.reply = true;
  p.revision = r->revision;  // echoed, as siw does
  p.crc = c.crc;
  p.markers = set_.markers;
  if (r->enhanced) {
    w::MpaEnhanced e;
    e.ird = static_cast<std::uint16_t>(qp.ird);
    e.ord = static_cast<std::uint16_t>(qp.ord);
    if (r->enhanced->peer_to_peer) {
      // One RTR, the initiator's first FPDU: a zero-length Write if offered (nothing to answer,
      // no receive buffer taken), else a zero-length Read, else a zero-length Send.
      e.peer_to_peer = true;
      if (r->enhanced->rtr_write)
        e.rtr_write = true;
      else if (r->enhanced->rtr_read)
        e.rtr_read = true;
      else
        e.rtr_send = true;
      c.absorb_write_rtr = e.rtr_write;
    }
    p.enhanced = e;
  }
  p.private_data = pd;
  std::array<std::uint8_t, kMaxHandshake> b{};
  const std::size_t n = w::encode_mpa_req_rep(b, p);
  by_stream_[c.sid] = &qp;
  send_raw(c.sid, {b.data(), n});
  // RFC 5044 section 7.1: the responder sends no FPDU before the initiator's first one.
  c.wait_first = true;
  qp_event(qp, QpEvent::accept);       // the reply is out:
  qp_event(qp, QpEvent::established);  // MPA has no answer to it
  nd_.hold_reads(c.sid, false);        // what the initiator sent behind its request is read now
  established(qp, {});
  emit(qp, CmEventType::established, "");
  return Status::ok;
}

Status Mpa::reject(ConnRequest* base, std::span<const std::uint8_t> pd) {
  if (!base || !known_req(base) || base->phase != ReqPhase::pending) return Status::invalid_state;
  auto* r = static_cast<Request*>(base);
  const std::size_t room = w::kMpaMaxPrivateData - (r->enhanced ? w::kMpaEnhancedLen : 0);
  if (pd.size() > std::min<std::size_t>(room, ctx_.limits.max_private_data)) return Status::length_error;
  r->phase = ReqPhase::rejected;
  r->decided = Clock::now();
  if (!r->sid) return Status::ok;  // the initiator already went away
  w::MpaParams p;
  p.reply = true;
  p.reject = true;
  p.revision = r->revision;
  if (r->enhanced) p.enhanced = w::MpaEnhanced{};
  p.private_data = pd;
  std::array<std::uint8_t, kMaxHandshake> b{};
  const std::size_t n = w::encode_mpa_req_rep(b, p);
  send_raw(r->sid, {b.data(), n});
  nd_.close(r->sid, false);
  r->sid = 0;
  return Status::ok;
}

// iWARP has no close message: a graceful close is TCP's, once everything posted has gone out.
void Mpa::graceful_close(Qp& qp) {
  qp_event(qp, QpEvent::close);
  Conn& c = conn(qp);
  c.close_when_sent = true;
  pump(qp);
}

Status Mpa::disconnect(Qp& qp, bool graceful) {
  switch (disconnect_action(qp.state, qp.cm, graceful)) {
    case DisconnectAction::cancel_connect:
      end_stream(qp, true);
      close_qp(qp, CmEventType::disconnected, "connect cancelled");
      return Status::ok;
    case DisconnectAction::nothing: return Status::ok;
    case DisconnectAction::refuse: return Status::invalid_state;
    case DisconnectAction::close_now: break;
    case DisconnectAction::close_gracefully: return begin_graceful_close(qp);
  }
  // An abrupt disconnect flushes at once, and TCP still closes with a FIN, as siw and OFA
  // dapl's cma provider do for both close flags (rdma_disconnect: the QP to CLOSING, the socket
  // released without linger): an RST would make the peer's kernel drop what it has received
  // but not yet read (the last Send of an exchange). An RST stays for protocol errors.
  end_stream(qp, false);
  close_qp(qp, CmEventType::disconnected, "");
  return Status::ok;
}

Status Mpa::begin_graceful_close(Qp& qp) {
  Conn& c = conn(qp);
  qp_event(qp, QpEvent::disconnect);
  c.cm_deadline = Clock::now() + std::chrono::seconds(2);
  rearm(qp);
  // Requests still waiting for RDMA Reads go out first; the close follows them.
  if (qp.sq_wait.empty()) graceful_close(qp);
  nd_.wake();
  return Status::ok;
}

void Mpa::rearm(Qp& qp) {
  const Conn& c = conn(qp);
  if (c.phase == Phase::tcp_connecting || c.phase == Phase::wait_reply || qp.cm == CmPhase::disconnecting)
    timers_.arm(qp.qpn, c.cm_deadline);
}

void Mpa::timers(Clock::time_point now) {
  timers_.expire(now, [&](std::uint32_t qpn) {
    auto it = ctx_.qps.find(qpn);
    if (it == ctx_.qps.end()) return;
    Qp& qp = *it->second;
    Conn& c = conn(qp);
    if (now < c.cm_deadline) {
      rearm(qp);
      return;
    }
    if (c.phase == Phase::tcp_connecting || c.phase == Phase::wait_reply) {
      end_stream(qp, true);
      close_qp(
          qp, CmEventType::unreachable,
          c.phase == Phase::tcp_connecting ? "the TCP connection was not established in time" : "no MPA reply in time");
    } else if (qp.cm == CmPhase::disconnecting) {
      end_stream(qp, true);
      close_qp(qp, CmEventType::disconnected, "the graceful close did not complete in time");
    }
  });
  // Connections whose request has not come in time go; so do the oldest of those that waited
  // longer than kHalfOpenGrace with not a byte of it in their socket, while more than
  // kMaxHalfOpen wait: idle connections cannot hold the descriptors a real initiator needs (its
  // request follows its connect at once, so a burst of real ones, dtestcm's 100, is never taken
  // for idle ones). Decided requests are forgotten after a while.
  const auto half_open = [](const Request* r) { return r->sid && !r->complete; };
  const auto waiting = static_cast<std::size_t>(std::count_if(reqs_.begin(), reqs_.end(), half_open));
  std::size_t excess = waiting > kMaxHalfOpen ? waiting - kMaxHalfOpen : 0;
  std::erase_if(reqs_, [&](Request* r) {
    if (half_open(r) && excess && now - r->arrived >= kHalfOpenGrace) {
      --excess;
      read_request(*r);  // (what is there; it may complete it)
      if (half_open(r) && r->bytes.empty()) {
        ctx_.ctr.rx_dropped_requests++;
        drop_request(r);
      }
    }
    if (half_open(r) && now - r->arrived >= kRequestTimeout) drop_request(r);
    if (r->phase == ReqPhase::pending || now - r->decided < kReqLinger) return false;
    if (r->sid) nd_.close(r->sid, true);
    for (auto& [n, qp] : ctx_.qps)
      if (conn(*qp).req == r) conn(*qp).req = nullptr;
    delete r;
    return true;
  });
}

}  // namespace softrnic::mpa
