// RoCEv2 connection management: IB CM MADs (IBTA vol. 1 chapter 12) on QP1 as rdma_cm speaks
// them, so that rdma_cm on Linux (rping, perftest -R, OFA dapl's cma provider) connects to us and
// we to it. Active side: REQ (rdma_cm's CMA header and the consumer's 56 bytes of private data),
// resent until a REP, an MRA (which asks for more time) or a REJ comes, or the caller's timeout;
// RTU. Passive side: a REQ to a listening port goes to the consumer; accept answers REP (resent
// until the RTU or the first packet on the QP), reject answers REJ with the consumer's private
// data; a REQ repeated while the consumer decides gets an MRA. Disconnect: DREQ, resent until
// the DREP; a closed connection answers a repeated DREQ for a while (Linger).
#include <sodium.h>

#include <algorithm>
#include <type_traits>
#include <variant>

#include "roce.hpp"

namespace softrnic::roce {

namespace w = wire::roce;
namespace cm = wire::ibcm;
using namespace std::chrono_literals;

namespace {

constexpr auto kCmRetry = 500ms;  // first retransmission of a REQ, REP or DREQ; doubling to 4 s
constexpr auto kCmRetryMax = 4000ms;
constexpr auto kDreqWait = 4000ms;  // a DREQ without a DREP: the connection closes anyway
// A DREP held back for our unacknowledged requests (drain) waits at most our retry time and this:
// well within a softrnic peer's kDreqWait (with roce.timeout 18 the retry time is 8.6 s).
constexpr auto kDrainMax = kDreqWait / 2;
constexpr auto kLingerTime = 5000ms;  // a closed connection answers repeated DREQs this long
// A QP connected without CM, destroyed: how long after the peer's last packet its retransmissions
// are still waited for (its ACK timeout is 67 ms at first, rdma-core's tools' choice).
constexpr auto kOobQuiet = 250ms;
constexpr auto kReqExpiry = 120s;  // a request the consumer never decides on goes then
constexpr std::size_t kMaxPendingReqs = 1024;
// A REQ for a port nobody listens on waits this long for a listener before its REJ: a server
// that listens moments after its client learned the port from it finds the request waiting
// (perftest -R connects its data QPs as soon as the handshake on its control connection is
// done, and its server listens only after the same steps: Linux's slower address resolution
// hides that race, and Debian's perftest 4.5 crashes when the connection is refused).
constexpr auto kListenGrace = 100ms;
constexpr std::uint8_t kCmResponseTimeout = 20;  // what we advertise (rdma_cm: CMA_CM_RESPONSE_TIMEOUT)
constexpr std::uint8_t kMaxCmRetries = 15;       // rdma_cm's CMA_MAX_CM_RETRIES
constexpr std::uint8_t kMraTimeout = 24;         // an MRA asks for 4.096 us * 2^24 = 69 s
constexpr std::uint8_t kLocalAckTimeout = 19;    // rdma_cm on RoCE: packet life time 18, + 1
constexpr std::uint8_t kTargetAckDelay = 15;

std::uint64_t guid_of(std::uint32_t ip) {
  return 0x0253465200000000ull | ip;  // 02 'S' 'F' 'R', then the IPv4 address
}

std::uint32_t random_comm_id() {
  std::uint32_t v = 0;
  while (v == 0) v = randombytes_random();
  return v;
}

template <std::size_t N>
void put_private(std::array<std::uint8_t, N>& dst, std::span<const std::uint8_t> src, std::size_t at = 0) {
  std::copy_n(src.begin(), std::min(src.size(), N - at), dst.begin() + static_cast<std::ptrdiff_t>(at));
}

// The PSNs of a CM connection, as Linux's rdma_cm sets them (cma.c rdma_init_qp_attr sets the RTR
// QP's rq_psn to its own seq_num, the Starting PSN it sent): each side's REQ or REP carries the
// PSN it expects to receive, and the other side sends from it. (rxe's first Send after our REP
// carries the REP's Starting PSN: rdmavm capture.)
void receive_from(RoceQp& s, std::uint32_t psn) {
  s.exp_psn = psn;
}
void send_from(RoceQp& s, std::uint32_t psn) {
  s.init_psn = psn;
  s.next_psn = s.tx_psn = s.una_psn = s.ack_through = psn;
}

cm::Dreq make_dreq(std::uint32_t local_comm, std::uint32_t remote_comm, std::uint32_t remote_qpn) {
  cm::Dreq d;
  d.local_comm_id = local_comm;
  d.remote_comm_id = remote_comm;
  d.remote_qpn = remote_qpn;
  return d;
}

std::chrono::steady_clock::duration cm_backoff(int tries) {
  return std::min<std::chrono::steady_clock::duration>(kCmRetry * (1 << std::min(tries, 4)), kCmRetryMax);
}

}  // namespace

void Roce::send_mad(NetAddr to, std::span<const std::uint8_t> mad) {
  w::Packet p;
  p.opcode = w::Opcode::ud_send_only;
  p.dest_qpn = w::kGsiQpn;
  p.psn = gsi_psn_++ & w::kPsnMask;
  p.deth = w::Deth{w::kGsiQkey, w::kGsiQpn};
  send_bare(to, gsi_sport_, p, mad);
}

void Roce::send_bare(NetAddr to, std::uint16_t sport, const w::Packet& p, std::span<const std::uint8_t> payload) {
  std::array<std::uint8_t, w::kMaxHeaderLen> hdr;
  const std::size_t hl = w::build_headers(p, payload.size(), hdr);
  const std::size_t pad = w::pad_of(payload.size());
  std::array<std::uint8_t, 8> tail{};
  const std::span<const std::uint8_t> pieces[] = {{hdr.data(), hl}, payload, {tail.data(), pad}};
  const std::uint32_t crc = w::icrc(w::IcrcAddr{self_.ip, to.ip, sport, to.port, 0, 0x4000}, pieces);
  for (std::size_t i = 0; i < 4; ++i) tail[pad + i] = static_cast<std::uint8_t>(crc >> (8 * i));
  const netdev::TxFrame f{to,    {hdr.data(), hl},     payload, {tail.data(), pad + w::kIcrcLen},
                          sport, &w::icrc_ip_id_effect};
  flush_tx();  // (after what is batched: a DREQ follows the last data)
  nd_.tx_burst({&f, 1});
}

// A request packet for a QP that is gone: if a Linger of it had received it, the ACK again.
bool Roce::linger_ack(NetAddr from, const w::Packet& p) {
  for (Linger& l : lingers_) {
    if (l.qpn != p.dest_qpn || l.dst.ip != from.ip || !w::op_info(p.opcode).has(w::Has::request)) continue;
    if (w::psn_diff(p.psn, static_cast<std::uint32_t>(l.exp_psn & w::kPsnMask)) >= 0) return false;
    w::Packet a;
    a.opcode = w::Opcode::ack;
    a.dest_qpn = l.remote_qpn;
    a.psn = static_cast<std::uint32_t>((l.exp_psn - 1) & w::kPsnMask);
    a.aeth = w::Aeth{w::kAethAck | w::kAethNoCredit, l.msn};
    send_bare(l.dst, l.sport, a, {});
    if (l.quiet_until != Clock::time_point{}) l.quiet_until = Clock::now() + kOobQuiet;
    return true;
  }
  return false;
}

template <class M>
void Roce::send_cm(NetAddr to, const M& m, std::uint64_t tid, std::array<std::uint8_t, cm::kMadLen>* keep) {
  std::array<std::uint8_t, cm::kMadLen> mad{};
  if (cm::build(m, tid, mad) != cm::kMadLen) return;
  send_mad(to, mad);
  if (keep) *keep = mad;
}

Qp* Roce::qp_by_comm(std::uint32_t local_comm) const {
  for (const auto& [n, qp] : ctx_.qps)
    if (st(*qp).local_comm == local_comm && st(*qp).cm != CmState::idle) return qp;
  return nullptr;
}

bool Roce::known_req(const ConnRequest* r) const {
  return std::find(reqs_.begin(), reqs_.end(), r) != reqs_.end();
}

void Roce::drop_req(Request* r) {
  const auto it = std::find(reqs_.begin(), reqs_.end(), r);
  if (it == reqs_.end()) return;
  reqs_.erase(it);
  delete r;
}

// ---- active side ----

Status Roce::connect(Qp& qp, NetAddr remote, std::uint64_t conn_qual, std::span<const std::uint8_t> pd,
                     std::chrono::milliseconds timeout) {
  if (qp.state != QpState::idle || qp.cm != CmPhase::none) return Status::invalid_state;
  const std::uint16_t port = rdma_cm_port(conn_qual);
  if (port == 0 || !netdev::is_unicast_ipv4(remote.ip) || pd.size() > cm::kCmaReqPrivateLen)
    return Status::invalid_param;
  RoceQp& s = st(qp);
  const auto now = Clock::now();
  if (timeout.count() <= 0) timeout = ctx_.cfg.connect_timeout;  // none given: the device's
  s.dst = wire_addr(remote.ip);
  s.local_comm = random_comm_id();
  s.tid = static_cast<std::uint64_t>(randombytes_random()) << 32 | s.local_comm;
  s.mtu = link_mtu_;
  // rdma_cm's own port of the active side (the CMA header's source port): an ephemeral one.
  const auto src_port = static_cast<std::uint16_t>(0xC000 | (randombytes_random() & 0x3FFF));
  cm::Req r;
  r.local_comm_id = s.local_comm;
  r.service_id = cm::cma_service_id(cm::kPsTcp, port);
  r.local_ca_guid = guid_of(self_.ip);
  r.local_qpn = qp.qpn;
  r.responder_resources = static_cast<std::uint8_t>(qp.ird);
  r.initiator_depth = static_cast<std::uint8_t>(qp.ord);
  r.remote_cm_response_timeout = kCmResponseTimeout;
  r.transport_service_type = cm::kTransportRc;
  receive_from(s, randombytes_random() & w::kPsnMask);
  r.starting_psn = static_cast<std::uint32_t>(s.exp_psn);
  r.local_cm_response_timeout = kCmResponseTimeout;
  r.retry_count = s.retry_cnt & 7;
  r.pkey = w::kDefaultPkey;
  r.path_mtu = w::mtu_code(link_mtu_);
  r.rnr_retry_count = s.rnr_retry & 7;
  r.max_cm_retries = kMaxCmRetries;
  r.srq = qp.init.srq != nullptr;
  r.primary.local_lid = r.primary.remote_lid = 0xFFFF;
  r.primary.local_gid = cm::gid_ipv4(self_.ip);
  r.primary.remote_gid = cm::gid_ipv4(remote.ip);
  r.primary.flow_label = w::cm_flow_label(src_port, port);
  r.primary.hop_limit = 64;
  r.primary.local_ack_timeout = kLocalAckTimeout;
  cm::build_cma_hdr(cm::cma_hdr_ipv4(self_.ip, src_port, remote.ip), r.private_data);
  put_private(r.private_data, pd, cm::kCmaHdrLen);
  send_cm(s.dst, r, s.tid, &s.mad);
  s.cm = CmState::req_sent;
  s.cm_tries = 0;
  s.cm_next = now + kCmRetry;
  s.cm_deadline = now + timeout;
  qp_event(qp, QpEvent::connect);
  qp.peer = NetAddr{remote.ip, port};
  qp.local = NetAddr{self_.ip, src_port};
  rearm(qp);
  return Status::ok;
}

bool Roce::on_rep(NetAddr from, const cm::MadHdr& h, const cm::Rep& m) {
  Qp* q = qp_by_comm(m.remote_comm_id);
  if (!q || !in_transaction(*q, from, h)) return false;
  Qp& qp = *q;
  RoceQp& s = st(qp);
  if (s.cm == CmState::established && m.local_comm_id == s.remote_comm) {
    // Our RTU was lost: the REP comes again.
    cm::Rtu rtu;
    rtu.local_comm_id = s.local_comm;
    rtu.remote_comm_id = s.remote_comm;
    send_cm(s.dst, rtu, s.tid);
    return true;
  }
  if (s.cm != CmState::req_sent) return false;
  s.remote_comm = m.local_comm_id;
  s.peer_qpn = m.local_qpn;
  send_from(s, m.starting_psn);
  s.retry_left = s.retry_cnt;
  s.rnr_left = s.rnr_retry;
  qp.ord = std::min<std::uint32_t>(qp.ord, m.responder_resources);  // what the peer answers at once
  s.has_path = true;
  s.cm = CmState::established;
  qp_event(qp, QpEvent::established);
  pick_source_port(qp, w::cm_flow_label(qp.local.port, qp.peer.port));  // the flow label our REQ carried
  cm::Rtu rtu;
  rtu.local_comm_id = s.local_comm;
  rtu.remote_comm_id = s.remote_comm;
  send_cm(s.dst, rtu, s.tid);
  timers_.cancel(qp.qpn);
  s.heard_at = Clock::now();
  rearm(qp);
  emit(qp, CmEventType::established, "", std::vector<std::uint8_t>(m.private_data.begin(), m.private_data.end()));
  return true;
}

bool Roce::on_mra(NetAddr from, const cm::MadHdr& h, const cm::Mra& m) {
  Qp* q = qp_by_comm(m.remote_comm_id);
  if (!q || !in_transaction(*q, from, h)) return false;
  RoceQp& s = st(*q);
  if (s.cm != CmState::req_sent || m.msg_mraed != cm::MsgKind::req) return false;
  // The peer's consumer is deciding: no more REQs for the time it asks (within our deadline).
  s.cm_next = Clock::now() + std::chrono::nanoseconds(cm::timeout_ns(m.service_timeout));
  rearm(*q);
  return true;
}

// ---- passive side ----

Status Roce::listen(std::uint64_t conn_qual, std::function<void(ConnRequest*, const ConnRequestInfo&)> on_request) {
  const std::uint16_t port = rdma_cm_port(conn_qual);
  if (port == 0) return Status::invalid_param;
  if (listeners_.count(port)) return Status::in_use;
  listeners_[port] = {conn_qual, std::move(on_request)};
  std::vector<HeldReq> waiting;  // the requests that came a moment early
  std::erase_if(held_reqs_, [&](const HeldReq& r) {
    if (r.port != port) return false;
    waiting.push_back(r);
    return true;
  });
  for (const HeldReq& r : waiting) on_req(r.from, r.hdr, r.req);
  return Status::ok;
}

void Roce::hold_req(NetAddr from, const cm::MadHdr& h, const cm::Req& m, std::uint16_t port) {
  for (const HeldReq& r : held_reqs_)
    if (r.from.ip == from.ip && r.req.local_comm_id == m.local_comm_id) return;  // (sent again)
  if (held_reqs_.size() >= kMaxPendingReqs) {
    reject_req(wire_addr(from.ip), h.tid, m, cm::RejReason::invalid_service_id);
    return;
  }
  held_reqs_.push_back({from, h, m, port, ctx_.rx_now + kListenGrace});
}

Status Roce::stop_listen(std::uint64_t conn_qual) {
  return listeners_.erase(rdma_cm_port(conn_qual)) ? Status::ok : Status::not_found;
}

void Roce::reject_req(NetAddr to, std::uint64_t tid, const cm::Req& r, cm::RejReason why,
                      std::span<const std::uint8_t> pd) {
  cm::Rej j;
  j.local_comm_id = random_comm_id();
  j.remote_comm_id = r.local_comm_id;
  j.msg_rejected = cm::MsgKind::req;
  j.reason = why;
  put_private(j.private_data, pd);
  send_cm(to, j, tid);
}

void Roce::on_req(NetAddr from, const cm::MadHdr& h, const cm::Req& m) {
  const NetAddr to = wire_addr(from.ip);
  for (Request* r : reqs_) {
    if (r->from.ip != from.ip || r->req.local_comm_id != m.local_comm_id) continue;
    // The same REQ again: our REP was lost (send it again), or our consumer is still deciding
    // (an MRA asks the requester for time).
    if (r->qp) {
      send_mad(to, st(*r->qp).mad);
    } else {
      cm::Mra a;
      a.local_comm_id = 0;
      a.remote_comm_id = m.local_comm_id;
      a.msg_mraed = cm::MsgKind::req;
      a.service_timeout = kMraTimeout;
      send_cm(to, a, h.tid);
    }
    return;
  }
  for (const auto& [n, qp] : ctx_.qps)
    if (st(*qp).remote_comm == m.local_comm_id && st(*qp).dst.ip == from.ip && st(*qp).cm != CmState::idle)
      return;  // established already: a REQ that was late
  cm::CmaHdr cma;
  const auto port = cm::cma_port_of(m.service_id, cm::kPsTcp);
  if (!port || cm::parse_cma_hdr(m.private_data, cma) != cm::CmaError::ok || cma.ip_version != 4) {
    reject_req(to, h.tid, m, cm::RejReason::invalid_service_id);
    return;
  }
  const auto l = listeners_.find(*port);
  if (l == listeners_.end()) {
    hold_req(from, h, m, *port);
    return;
  }
  if (m.transport_service_type != cm::kTransportRc) {
    reject_req(to, h.tid, m, cm::RejReason::invalid_transport_type);
    return;
  }
  if (w::mtu_bytes(m.path_mtu) == 0) {
    reject_req(to, h.tid, m, cm::RejReason::invalid_mtu);
    return;
  }
  if (reqs_.size() >= kMaxPendingReqs) {
    ctx_.ctr.rx_dropped_requests++;
    return;
  }
  auto* r = new Request;
  r->from = NetAddr{from.ip, cma.src_port};
  r->conn_qual = l->second.first;
  r->tid = h.tid;
  r->req = m;
  r->arrived = Clock::now();
  reqs_.push_back(r);
  const auto pd = std::span(m.private_data).subspan(cm::kCmaHdrLen);
  l->second.second(r, ConnRequestInfo{r->from, r->conn_qual, std::vector<std::uint8_t>(pd.begin(), pd.end())});
}

Status Roce::accept(ConnRequest* creq, Qp& qp, std::span<const std::uint8_t> pd) {
  if (!known_req(creq)) return Status::invalid_state;  // as on every wire: answered, or never ours
  auto* r = static_cast<Request*>(creq);
  if (r->phase != ReqPhase::pending) return Status::invalid_state;
  if (qp.state != QpState::idle || qp.cm != CmPhase::none) return Status::invalid_state;
  if (pd.size() > cm::kRepPrivateLen) return Status::length_error;
  RoceQp& s = st(qp);
  const auto now = Clock::now();
  s.dst = wire_addr(r->from.ip);
  s.local_comm = random_comm_id();
  s.remote_comm = r->req.local_comm_id;
  s.tid = r->tid;
  s.peer_qpn = r->req.local_qpn;
  send_from(s, r->req.starting_psn);
  receive_from(s, randombytes_random() & w::kPsnMask);
  s.mtu = std::min(link_mtu_, w::mtu_bytes(r->req.path_mtu));
  s.retry_left = s.retry_cnt;
  s.rnr_left = s.rnr_retry;
  qp.ord = std::min<std::uint32_t>(qp.ord, r->req.responder_resources);
  pick_source_port(qp, r->req.primary.flow_label);
  cm::Rep rep;
  rep.local_comm_id = s.local_comm;
  rep.remote_comm_id = s.remote_comm;
  rep.local_qpn = qp.qpn;
  rep.starting_psn = static_cast<std::uint32_t>(s.exp_psn);
  rep.responder_resources = static_cast<std::uint8_t>(qp.ird);
  rep.initiator_depth = static_cast<std::uint8_t>(qp.ord);
  rep.target_ack_delay = kTargetAckDelay;
  rep.rnr_retry_count = s.rnr_retry & 7;
  rep.srq = qp.init.srq != nullptr;
  rep.local_ca_guid = guid_of(self_.ip);
  put_private(rep.private_data, pd);
  send_cm(s.dst, rep, s.tid, &s.mad);
  // Ready to receive (RTR): the RTU, or the requester's first packet, establishes the connection.
  s.has_path = true;
  s.cm = CmState::rep_sent;
  s.cm_tries = 0;
  s.cm_next = now + kCmRetry;
  s.cm_deadline = now + std::chrono::milliseconds(ctx_.cfg.connect_timeout);
  s.req = r;
  r->qp = &qp;
  r->phase = ReqPhase::accepted;
  r->decided = now;
  qp_event(qp, QpEvent::accept);
  qp.peer = r->from;
  qp.local = NetAddr{self_.ip, rdma_cm_port(r->conn_qual)};
  rearm(qp);
  return Status::ok;
}

Status Roce::reject(ConnRequest* creq, std::span<const std::uint8_t> pd) {
  if (!known_req(creq)) return Status::invalid_param;
  auto* r = static_cast<Request*>(creq);
  if (r->phase != ReqPhase::pending) return Status::invalid_state;
  if (pd.size() > cm::kRejPrivateLen) return Status::invalid_param;
  reject_req(wire_addr(r->from.ip), r->tid, r->req, cm::RejReason::consumer_defined, pd);
  drop_req(r);
  return Status::ok;
}

bool Roce::on_rtu(NetAddr from, const cm::MadHdr& h, const cm::Rtu& m) {
  Qp* q = qp_by_comm(m.remote_comm_id);
  if (!q || st(*q).remote_comm != m.local_comm_id || !in_transaction(*q, from, h)) return false;
  if (st(*q).cm == CmState::rep_sent) established(*q);  // (else the first packet did already)
  return true;
}

void Roce::established(Qp& qp) {
  RoceQp& s = st(qp);
  s.cm = CmState::established;
  qp_event(qp, QpEvent::established);
  if (s.req) {
    Request* r = s.req;
    s.req = nullptr;
    drop_req(r);
  }
  timers_.cancel(qp.qpn);
  s.heard_at = Clock::now();
  rearm(qp);
  emit(qp, CmEventType::established, "");
}

// IB CM lets a REJ answer only a REQ or a REP: on the passive side a request we hold (its
// requester gave up, or refused our REP), on the active side our REQ. After the RTU (or the first
// packet) nothing it says closes a connection, and it must come from the peer, in the
// connection's transaction, naming our comm ID (an off-path sender would have to guess the
// address, the 64-bit TID and the comm ID; one REJ carrying only the comm ID closed a live one).
bool Roce::on_rej(NetAddr from, const cm::MadHdr& h, const cm::Rej& m) {
  for (Request* r : reqs_) {
    if (r->from.ip != from.ip || r->req.local_comm_id != m.local_comm_id || r->tid != h.tid) continue;
    if (!r->qp) {
      drop_req(r);
    } else if (st(*r->qp).cm == CmState::rep_sent &&
               (m.remote_comm_id == st(*r->qp).local_comm || m.remote_comm_id == 0)) {
      // (0: the requester withdrew its REQ before our REP reached it.)
      close_qp(*r->qp, CmEventType::rejected,
               "the requester rejected our reply (reason " + std::string(cm::to_string(m.reason)) + ")");
    } else {
      return false;
    }
    return true;
  }
  Qp* q = qp_by_comm(m.remote_comm_id);
  if (!q || st(*q).cm != CmState::req_sent || !in_transaction(*q, from, h)) return false;
  Qp& qp = *q;
  const bool consumer = m.reason == cm::RejReason::consumer_defined;
  const CmEventType ev =
      m.reason == cm::RejReason::invalid_service_id ? CmEventType::no_listener : CmEventType::rejected;
  close_qp(qp, std::nullopt, "");
  emit(
      qp, ev, "REJ: " + std::string(cm::to_string(m.reason)),
      consumer ? std::vector<std::uint8_t>(m.private_data.begin(), m.private_data.end()) : std::vector<std::uint8_t>{});
  return true;
}

// A message of the QP's connection setup: from the peer's address, in the REQ's transaction.
bool Roce::in_transaction(const Qp& qp, NetAddr from, const cm::MadHdr& h) const {
  return from.ip == st(qp).dst.ip && h.tid == st(qp).tid;
}

// ---- disconnect ----

Status Roce::disconnect(Qp& qp, bool graceful) {
  RoceQp& s = st(qp);
  if (qp.cm == CmPhase::connecting) {
    // Withdraw the request (as Linux does when a connecting ID goes: REJ, reason timeout).
    cm::Rej j;
    j.local_comm_id = s.local_comm;
    j.msg_rejected = cm::MsgKind::other;
    j.reason = cm::RejReason::timeout;
    send_cm(s.dst, j, s.tid);
    close_qp(qp, CmEventType::disconnected, "connection request withdrawn");
    return Status::ok;
  }
  if (qp.cm != CmPhase::connected && qp.cm != CmPhase::accepting && qp.cm != CmPhase::disconnecting)
    return Status::invalid_state;
  if (!s.has_path) {  // out-of-band: nothing on the wire
    close_qp(qp, CmEventType::disconnected, "disconnected");
    return Status::ok;
  }
  if (graceful && qp.state == QpState::rts && qp.cm == CmPhase::connected) {
    // What was posted goes first (Reads waiting for an ORD slot are issued as earlier ones
    // complete: the QP stays in RTS meanwhile, as on the other wires); the DREQ follows once
    // everything is acknowledged (send_queue_drained).
    qp_event(qp, QpEvent::disconnect);
    if (qp.sq_wait.empty()) send_queue_drained(qp);
    return Status::ok;
  }
  if (s.cm == CmState::idle) {
    close_qp(qp, CmEventType::disconnected, "disconnected");
    return Status::ok;
  }
  if (s.cm == CmState::drain) {  // the peer's DREQ waits for our DREP (closed sends it): no DREQ of ours
    close_qp(qp, CmEventType::disconnected, "disconnected");
    return Status::ok;
  }
  start_linger(qp, true);
  close_qp(qp, CmEventType::disconnected, "disconnected");
  return Status::ok;
}

void Roce::send_queue_drained(Qp& qp) {
  RoceQp& s = st(qp);
  if (!s.reqs.empty() || s.cm == CmState::dreq_sent) return;  // the completer calls again when they are acknowledged
  if (s.cm == CmState::drain) {  // the peer's DREQ came first: now everything is acknowledged (closed answers it)
    close_qp(qp, CmEventType::disconnected, "the peer disconnected");
    return;
  }
  qp_event(qp, QpEvent::close);  // ours, all acknowledged: the close begins
  if (s.cm == CmState::idle) {   // out-of-band: no DREQ
    close_qp(qp, CmEventType::disconnected, "disconnected");
    return;
  }
  send_dreq(qp);
}

void Roce::send_dreq(Qp& qp) {
  RoceQp& s = st(qp);
  send_owed_ack(qp);
  send_cm(s.dst, make_dreq(s.local_comm, s.remote_comm, s.peer_qpn), s.tid, &s.mad);
  const auto now = Clock::now();
  s.cm = CmState::dreq_sent;
  s.cm_tries = 0;
  s.cm_next = now + kCmRetry;
  s.cm_deadline = now + kDreqWait;
  rearm(qp);
}

// A DREQ closes a connection only from its peer, naming both comm IDs and our QPN (as Linux's
// CM checks it), once the peer knows our comm ID: after our REP, or our REQ's answer.
bool Roce::on_dreq(NetAddr from, const cm::MadHdr& h, const cm::Dreq& m) {
  Qp* q = qp_by_comm(m.remote_comm_id);
  if (q && st(*q).remote_comm == m.local_comm_id && st(*q).dst.ip == from.ip && m.remote_qpn == q->qpn &&
      st(*q).cm != CmState::req_sent) {
    Qp& qp = *q;
    RoceQp& s = st(qp);
    if (s.cm == CmState::drain) return true;  // its DREQ again: the DREP follows our requests' ACKs
    if (!s.reqs.empty() && qp.state == QpState::rts) {
      // Requests of ours still wait for their ACK (lost, or on its way): they complete first, and
      // the DREP waits for them. A peer whose QP still acknowledges until our DREP (softrnic's
      // does: it stays in CLOSING until then) answers our retransmission, and the request
      // completes instead of being flushed: the last ACK of a connection lost on a lossy link
      // does not turn a delivered message into an error. An IB peer's QP is in the error state
      // by now (rdma_disconnect) and never answers: the wait ends at our retry limit.
      s.cm = CmState::drain;
      s.dreq_tid = h.tid;
      qp.cm = CmPhase::disconnecting;
      s.cm_next = s.cm_deadline = Clock::now() + std::min<Clock::duration>(retry_time(), kDrainMax);
      rearm(qp);
      return true;
    }
    s.dreq_tid = h.tid;
    answer_dreq(qp);
    close_qp(qp, CmEventType::disconnected, "the peer disconnected");
    return true;
  }
  for (const Linger& l : lingers_)
    if (l.local_comm == m.remote_comm_id && l.remote_comm == m.local_comm_id && l.dst.ip == from.ip &&
        m.remote_qpn == l.qpn) {
      cm::Drep r;
      r.local_comm_id = m.remote_comm_id;
      r.remote_comm_id = m.local_comm_id;
      send_cm(l.dst, r, h.tid);
      return true;
    }
  return false;
}

void Roce::answer_dreq(Qp& qp) {
  RoceQp& s = st(qp);
  send_owed_ack(qp);
  cm::Drep r;
  r.local_comm_id = s.local_comm;
  r.remote_comm_id = s.remote_comm;
  send_cm(s.dst, r, s.dreq_tid);
  start_linger(qp, false);  // answers the DREQ again if this DREP is lost
  s.cm = CmState::idle;     // answered: the close that follows sends nothing more
}

// A DREP answers our DREQ: from the peer, naming both comm IDs, in the DREQ's transaction.
bool Roce::on_drep(NetAddr from, const cm::MadHdr& h, const cm::Drep& m) {
  Qp* q = qp_by_comm(m.remote_comm_id);
  if (q && st(*q).cm == CmState::dreq_sent && st(*q).remote_comm == m.local_comm_id && in_transaction(*q, from, h)) {
    close_qp(*q, CmEventType::disconnected, "disconnected");
    return true;
  }
  return std::erase_if(lingers_, [&](const Linger& l) {
           return l.dreq && l.local_comm == m.remote_comm_id && l.remote_comm == m.local_comm_id &&
                  l.dst.ip == from.ip && l.tid == h.tid;
         }) > 0;
}

void Roce::start_linger(Qp& qp, bool dreq) {
  RoceQp& s = st(qp);
  send_owed_ack(qp);
  const auto now = Clock::now();
  Linger l{s.dst,
           s.local_comm,
           s.remote_comm,
           s.peer_qpn,
           qp.qpn,
           s.msn,
           s.exp_psn,
           s.sport ? s.sport : self_.port,
           s.tid,
           dreq,
           0,
           now,
           now + kLingerTime};
  if (s.cm == CmState::idle) l.quiet_until = std::max(now, s.heard_at + kOobQuiet);  // (no CM: out of band)
  if (dreq) {
    send_cm(s.dst, make_dreq(s.local_comm, s.remote_comm, s.peer_qpn), s.tid);
    l.next = now + kCmRetry;
  }
  lingers_.push_back(l);
}

// ---- timers ----

void Roce::cm_timer(Qp& qp, Clock::time_point now) {
  RoceQp& s = st(qp);
  if (now >= s.cm_deadline) {
    switch (s.cm) {
      case CmState::req_sent: {
        cm::Rej j;  // withdrawn, as Linux does
        j.local_comm_id = s.local_comm;
        j.msg_rejected = cm::MsgKind::other;
        j.reason = cm::RejReason::timeout;
        send_cm(s.dst, j, s.tid);
        close_qp(qp, CmEventType::unreachable, "no answer to the connection request (IB CM REQ)");
        return;
      }
      case CmState::rep_sent: close_qp(qp, CmEventType::unreachable, "no RTU for our IB CM REP"); return;
      case CmState::dreq_sent: close_qp(qp, CmEventType::disconnected, "disconnected (no DREP)"); return;
      case CmState::drain: close_qp(qp, CmEventType::disconnected, "the peer disconnected"); return;
      default: return;
    }
  }
  if (now >= s.cm_next) {
    send_mad(s.dst, s.mad);
    s.cm_next = now + cm_backoff(++s.cm_tries);
  }
  rearm(qp);
}

void Roce::cm_sweep(Clock::time_point now) {
  if (now - last_sweep_ < 5ms) return;
  last_sweep_ = now;
  for (Linger& l : lingers_) {
    if (!l.dreq || now < l.next) continue;
    send_cm(l.dst, make_dreq(l.local_comm, l.remote_comm, l.remote_qpn), l.tid);
    l.next = now + kCmRetry;
    if (++l.tries >= 4) l.dreq = false;
  }
  std::erase_if(lingers_, [&](const Linger& l) { return now >= l.expiry; });
  std::erase_if(held_reqs_, [&](const HeldReq& r) {
    if (now < r.until) return false;
    reject_req(wire_addr(r.from.ip), r.hdr.tid, r.req, cm::RejReason::invalid_service_id);
    return true;
  });
  for (std::size_t i = 0; i < reqs_.size();) {
    Request* r = reqs_[i];
    if (!r->qp && r->phase == ReqPhase::pending && now - r->arrived > kReqExpiry) {
      drop_req(r);
      continue;
    }
    ++i;
  }
}

// ---- dispatch ----

void Roce::handle_mad(NetAddr from, std::span<const std::uint8_t> mad) {
  cm::MadHdr h;
  cm::Message m;
  if (cm::parse(mad, h, m) != cm::CmError::ok) {
    ctx_.ctr.rx_bad_frames++;
    return;
  }
  const bool taken = std::visit(
      [&](const auto& msg) {
        using T = std::decay_t<decltype(msg)>;
        if constexpr (std::is_same_v<T, cm::Req>) return on_req(from, h, msg), true;
        if constexpr (std::is_same_v<T, cm::Rep>) return on_rep(from, h, msg);
        if constexpr (std::is_same_v<T, cm::Rtu>) return on_rtu(from, h, msg);
        if constexpr (std::is_same_v<T, cm::Rej>) return on_rej(from, h, msg);
        if constexpr (std::is_same_v<T, cm::Mra>) return on_mra(from, h, msg);
        if constexpr (std::is_same_v<T, cm::Dreq>) return on_dreq(from, h, msg);
        if constexpr (std::is_same_v<T, cm::Drep>) return on_drep(from, h, msg);
      },
      m);
  if (!taken) ctx_.ctr.rx_stray_cm++;
}

}  // namespace softrnic::roce
