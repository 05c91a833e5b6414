// The receive path: a round of datagrams from the netdev, each checked (framing, QP, peer,
// ack range, exact sequence for control frames), acknowledged, and handed up in order of
// arrival to DDP (rdmap_rx.cpp); delivery in stream order completes what it covers.
#include <algorithm>
#include <cstring>

#include "constants.hpp"
#include "rudp.hpp"

namespace softrnic::rudp {

namespace w = wire;

std::size_t Rudp::poll(std::optional<Clock::time_point> now) {
  const std::size_t cap = nd_.max_datagram();
  std::size_t got = 0;
  // What the round sends (acks, frames the acks let go, resends) leaves in one burst at its end.
  const TxHold hold(*this);
  for (int round = 0; round < 8; ++round) {
    const std::size_t n = nd_.rx_burst(rx_frames_);
    if (n == 0) break;
    ctx_.rx_now = Clock::now();
    if (!now) now = ctx_.rx_now;
    for (std::size_t i = 0; i < n; ++i) handle_datagram(rx_frames_[i].from, rx_frames_[i].bytes());
    for (std::size_t i = 0; i < n; ++i) rx_frames_[i].reuse(cap);
    got += n;
    if (n < kRxBurst) break;
  }
  if (nd_.errors_pending()) network_errors();
  flush_acks();
  if (now) timers(*now);
  return got;
}

std::chrono::microseconds Rudp::next_wait() {
  if (!ack_list_.empty()) return std::chrono::microseconds(0);  // acks held for a round (flush_acks)
  const auto now = Clock::now();
  // The next delayed ack. One that data already carried (ack_due reset) waits for no one: such
  // entries are dropped here, or a blocked consumer would wake for each of them (a ping-pong's
  // every reply carries its ack, and each left a wake-up of up to kAckDelay behind: 13 % of a
  // dat_evd_wait round trip).
  while (!delayed_acks_.empty()) {
    const DelayedAck& d = delayed_acks_.front();
    const Conn& c = conn(*d.qp);
    if (c.ack_needed && c.ack_due == d.due) break;
    delayed_acks_.pop_front();
  }
  if (!delayed_acks_.empty()) {
    const auto due = delayed_acks_.front().due;
    return std::clamp(std::chrono::ceil<std::chrono::microseconds>(due - now), std::chrono::microseconds(1), kAckDelay);
  }
  // The earliest QP deadline; the lingers' resets every few ms; else a long sleep.
  std::chrono::microseconds wait =
      lingers_.empty() ? std::chrono::microseconds(100000) : std::chrono::microseconds(1000);
  if (const auto t = timers_.next())
    wait = std::clamp(std::chrono::ceil<std::chrono::microseconds>(*t - now), std::chrono::microseconds(1), wait);
  return wait;
}

// What the network said of peers we sent to (ICMP destination unreachable): a connection
// request to a port where nothing listens fails at once (as TCP's does on a RST), as does one to
// an unreachable host; an established connection is left to its keepalive and retransmission
// limits (an ICMP message is easy to forge), unless it is already probing a silent peer.
void Rudp::network_errors() {
  std::array<netdev::Unreachable, 8> un;
  const std::size_t n = nd_.unreachable(un);
  for (std::size_t i = 0; i < n; ++i) {
    for (auto it = ctx_.qps.begin(); it != ctx_.qps.end();) {
      Qp& qp = *(it++)->second;
      if (qp.peer != un[i].peer) continue;
      if (qp.cm == CmPhase::connecting) {
        close_qp(qp, un[i].port ? CmEventType::no_listener : CmEventType::host_unreachable,
                 un[i].port ? "ICMP port unreachable: nothing receives at " + netdev::to_string(qp.peer)
                            : "ICMP host or network unreachable: " + netdev::to_string(qp.peer));
      } else if (qp.cm == CmPhase::connected && conn(qp).ka_nonce != 0 && un[i].port) {
        ctx_.ctr.dead_peers++;
        close_qp(qp, CmEventType::broken, "the peer is gone (ICMP port unreachable for a keepalive probe)");
      }
    }
  }
}

// A datagram of the udp wire: CM frames to handle_cm; the rest only from the peer of a connected
// QP of ours (or answered by a linger), then an ack frame or a sequenced one.
void Rudp::handle_datagram(NetAddr from, std::span<const std::uint8_t> d) {
  w::FrameHeader h;
  std::span<const std::uint8_t> body;
  if (w::open_frame(d, h, body) != w::FrameError::none) {
    ctx_.ctr.rx_bad_frames++;
    return;
  }
  if (h.type == w::FrameType::cm) {
    handle_cm(from, h, body);
    return;
  }
  auto it = ctx_.qps.find(h.dst_qpn);
  if (it == ctx_.qps.end() || it->second->peer != from || conn(*it->second).peer_qpn != h.src_qpn ||
      it->second->cm == CmPhase::none || it->second->cm == CmPhase::connecting) {
    if (answer_lingering(from, h)) return;
    ctx_.ctr.rx_unknown_qp++;
    return;
  }
  // Closed abruptly (a reset repeats): the linger answers (a terminated QP, which has none,
  // still takes the acks of its Terminate).
  if (it->second->cm == CmPhase::closed && answer_lingering(from, h)) return;
  if (h.type == w::FrameType::ack) {
    handle_ack_frame(*it->second, h, body);
  } else {
    handle_sequenced(*it->second, h, body);
  }
}

// An ack frame: its SACK blocks, a keepalive probe's answer checked against what the peer had
// acknowledged before, a probe of the peer's answered.
void Rudp::handle_ack_frame(Qp& qp, const w::FrameHeader& h, std::span<const std::uint8_t> body) {
  Conn& c = conn(qp);
  std::array<SackBlock, w::kMaxSackBlocks> blocks;
  const std::size_t nb = w::decode_sack(body, std::span<SackBlock>(blocks));
  if (nb == w::kSackInvalid || !(h.flags & w::kFlagAckValid)) {
    ctx_.ctr.rx_bad_frames++;
    return;
  }
  if (!handle_ack(qp, h.ack, {blocks.data(), nb})) return;  // an impossible ack: not the peer's
  qp.ctr.rx_frames++;
  if ((h.flags & w::kFlagProbeReply) && c.ka_nonce != 0 && h.seq == c.ka_nonce) {
    c.ka_nonce = 0;
    // The answer to our probe acknowledges what the peer had when it answered, which is at least
    // what it had acknowledged before we probed: less means it never received what "it"
    // acknowledged (an acknowledgement was forged), and the stream cannot recover.
    if (seq_lt(h.ack, c.ka_una)) {
      ctx_.ctr.rx_bad_acks++;
      start_linger(qp);
      close_qp(qp, CmEventType::broken,
               "the peer acknowledges less than it had acknowledged (a forged acknowledgement?)");
      return;
    }
  }
  alive(c);
  if (h.flags & w::kFlagProbe) send_ack(qp, w::kFlagProbeReply, h.seq);
}

// A sequenced frame (DDP segment or stream control): checked like a TCP segment (RFC 5961), its
// ack taken, then placed as it arrives, in any order; what must follow the stream's order
// (receive completions, a graceful close) waits until the cumulative point passes it.
void Rudp::handle_sequenced(Qp& qp, const w::FrameHeader& h, std::span<const std::uint8_t> body) {
  Conn& c = conn(qp);
  // It must acknowledge something we sent (RFC 5961 section 5): a blind injector must guess the
  // acknowledgement as well as the sequence number.
  if (!(h.flags & w::kFlagAckValid) || !ack_acceptable(c, h.ack)) {
    ctx_.ctr.rx_bad_acks++;
    challenge(qp);
    return;
  }
  // A graceful close is taken only at the exact sequence number expected (RFC 5961 section 3):
  // one ahead of it is answered with our ACK (and SACK), and its sender, which does not see it
  // acknowledged, sends it again once the frames before it have arrived.
  if (h.type == w::FrameType::stream_ctrl && seq_lt(c.rxw.next(), h.seq)) {
    ctx_.ctr.challenge_acks++;
    challenge(qp);
    return;
  }
  qp.ctr.rx_frames++;
  handle_ack(qp, h.ack, {});
  alive(c);
  if (qp.cm == CmPhase::accepting) established_passive(qp);
  mark_ack(qp);
  const std::uint32_t next = c.rxw.next();
  const bool ahead = h.seq != next;
  // Out of order or a duplicate: the peer needs our SACK / ack now. A frame whose ack its
  // sender waits for asks for it: it goes within a round (flush_acks).
  if (ahead)
    c.ack_now = true;
  else if (h.flags & w::kFlagAckReq)
    c.ack_req = true;
  switch (c.rxw.accept(h.seq)) {
    case RxWindow::Verdict::duplicate:
      qp.ctr.rx_duplicates++;
      ctx_.ctr.rx_duplicates++;
      return;
    case RxWindow::Verdict::beyond:
      qp.ctr.rx_beyond_window++;
      ctx_.ctr.rx_beyond_window++;
      return;
    case RxWindow::Verdict::deliver: break;
  }
  const Pos pos = c.rcv_pos + (h.seq - next);
  c.rcv_pos += c.rxw.next() - next;
  if (ahead) {
    qp.ctr.rx_out_of_order++;
    ctx_.ctr.rx_out_of_order++;
  }
  if (h.type == w::FrameType::ddp) {
    rdmap_.on_segment(qp, body, pos);
  } else if (h.type == w::FrameType::stream_ctrl) {
    handle_stream_ctrl(qp, body, h.seq);
  }
  stream_advanced(qp);
}

// Completes what the cumulative point now covers: receives in MSN order, then a pending close.
void Rudp::stream_advanced(Qp& qp) {
  rdmap_.delivered(qp);
  Conn& c = conn(qp);
  if (c.disc_rx_pending && seq_lt(c.disc_rx_seq, c.rxw.next())) {
    c.disc_rx_pending = false;
    peer_closed(qp);
  }
}

void Rudp::handle_stream_ctrl(Qp& qp, std::span<const std::uint8_t> body, std::uint32_t seq) {
  if (body.size() < sizeof(w::StreamCtrlWire)) {
    ctx_.ctr.rx_bad_frames++;
    return;
  }
  w::StreamCtrlWire sc;
  std::memcpy(&sc, body.data(), sizeof sc);
  if (sc.op.get() != static_cast<std::uint32_t>(w::StreamCtrlOp::disconnect)) {
    ctx_.ctr.rx_bad_frames++;
    return;
  }
  if (qp.cm == CmPhase::closed) return;
  // Acted on once everything the peer sent before it has arrived (stream_advanced).
  Conn& c = conn(qp);
  c.disc_rx_pending = true;
  c.disc_rx_seq = seq;
}

void Rudp::peer_closed(Qp& qp) {
  if (qp.cm == CmPhase::closed) return;
  // Acknowledge now, since the QP stops sending.
  send_ack(qp);
  qp_event(qp, QpEvent::close);
  close_qp(qp, CmEventType::disconnected, "");
}

}  // namespace softrnic::rudp
