// The project's reliable datagram framing (docs/wire.md), a lower layer for iWARP: sequenced
// frames with cumulative and selective acks, RACK/RTO retransmission, a window, keepalive
// (stream.cpp); the receive path from datagram to DDP segment (rx.cpp); its connection messages:
// request/reply/confirm, cookies, pending, reject, reset and the linger after an abrupt close
// (cm.cpp). One DDP segment per datagram.
#pragma once

#include <sodium.h>

#include <array>
#include <chrono>
#include <deque>
#include <map>
#include <optional>
#include <vector>

#include "engine.hpp"
#include "rdmap.hpp"
#include "rx_window.hpp"
#include "softrnic/netdev/netdev.hpp"
#include "softrnic/wire/udp_frame.hpp"
#include "timer_queue.hpp"
#include "transport.hpp"
#include "tx_budget.hpp"
#include "tx_hold.hpp"

namespace softrnic::rudp {

// A sequenced frame: its headers (frame, DDP, RDMAP) are kept here; its payload stays in the
// consumer's registered memory until the frame is acknowledged (the buffer belongs to the RNIC
// until the work request completes). Ack and CRC are stamped at each transmission.
struct SeqFrame {
  static constexpr std::size_t kMaxHead = 96;
  std::uint32_t seq = 0;
  std::uint8_t head_len = 0;
  std::array<std::uint8_t, kMaxHead> head{};
  SglRef sgl;  // payload source, null when there is none
  std::uint64_t sgl_off = 0;
  std::uint32_t len = 0;
  Clock::time_point sent{};  // last transmission
  bool retransmitted = false;
  bool sacked = false;   // the peer has it (selective acknowledgement)
  bool awaited = false;  // the last segment of a request whose completion is awaited (kFlagAckReq)
  int retries = 0;
};

struct Request;

// A QP's connection on this wire.
struct Conn final : iwarp::IwarpQp {
  std::uint32_t peer_qpn = 0;

  // Connection management.
  std::uint32_t conn_id = 0;
  std::uint64_t conn_qual = 0;
  std::vector<std::uint8_t> cm_private;  // what our REQ/REP carries, for retransmission
  Clock::time_point cm_deadline{};
  Clock::time_point cm_next_tx{};
  Clock::time_point cm_started{};  // active side: when the request first went out
  bool cm_answered = false;        // active side: the listener answered something (reply, cookie, pending)
  std::uint32_t cm_cookie = 0;     // active side: the listener's cookie, echoed in our requests
  Request* req = nullptr;          // passive side: the request we accepted

  // Send side. Positions (core's view) advance with the sequence numbers: snd_nxt_pos is the
  // position of snd_nxt, snd_una_pos that of snd_una.
  std::uint32_t snd_nxt = 0;
  std::uint32_t snd_una = 0;
  Pos snd_nxt_pos = 0, snd_una_pos = 0;
  Ring<SeqFrame> inflight;  // sent, not acknowledged
  Ring<SeqFrame> backlog;   // waiting for window
  std::size_t inflight_bytes = 0;
  // Of those, what the peer acknowledged selectively (it has them): the window and the budget
  // count only the rest (the "pipe" of RFC 6675), so a hole being repaired does not stop the
  // stream behind it.
  std::size_t sacked_frames = 0, sacked_bytes = 0;
  bool budget_waiting = false;     // its next frame waits for the device's budget (Rudp::budget_)
  std::size_t budget_charged = 0;  // what its frames in flight count in that budget
  bool local_error = false;        // a payload region vanished during transmission
  std::chrono::microseconds rto{0};
  double srtt_us = 0, rttvar_us = 0;  // RFC 6298 estimator; srtt 0 = no sample yet
  Clock::time_point rack_sent{};      // latest send time of a frame known delivered (RACK)
  std::chrono::microseconds rack_rtt{0};
  std::chrono::microseconds min_rtt{0};
  // The RACK reordering window's multiplier (reorder_window): raised by a spurious
  // retransmission (at most once per round trip), back to 1 after kReoPersist recoveries.
  std::uint32_t reo_mult = 1;
  std::chrono::microseconds reo_learned{0};  // how late reordered originals came (with a margin)
  std::uint32_t high_delivered = 0;          // the highest sequence number known delivered
  bool delivered_any = false;
  std::uint32_t reo_persist = 0;
  Clock::time_point reo_raised{};
  Clock::time_point rto_probe{};  // when the RTO last fired (the timer of the rest restarts there)
  std::uint32_t disc_seq = 0;     // sequence after our disconnect frame
  // After we sent a Terminate: acknowledge nothing from the frame that caused it on, so its
  // sender completes that request in error rather than with success.
  std::optional<std::uint32_t> ack_limit;

  // Receive side. rcv_pos: the position of rxw.next().
  RxWindow rxw;
  Pos rcv_pos = 0;
  bool ack_needed = false;
  bool ack_listed = false;       // on this round's ack list (flush_acks)
  std::uint32_t rx_unacked = 0;  // in-order data frames received since our last ack went out
  Clock::time_point ack_due{};   // a delayed ack goes out then, unless data carries it first
  bool ack_now = false;          // a duplicate or a gap: the peer needs an ack at once
  bool ack_req = false;          // a frame asked (kFlagAckReq): the ack goes within a round (flush_acks)
  bool ack_held = false;         // ... held for one round already
  bool disc_rx_pending = false;  // the peer's disconnect arrived ahead of a gap
  std::uint32_t disc_rx_seq = 0;
  Clock::time_point last_challenge{};  // the last challenge ACK (rate limit)

  // Liveness (keepalive): the peer's last frame, and the probes sent since.
  Clock::time_point last_rx{};
  Clock::time_point ka_next{};  // the next probe may go then
  int ka_sent = 0;              // probes unanswered
  bool ka_soon = false;         // probe now: the peer acknowledged less than before
  std::uint32_t ka_nonce = 0;   // the outstanding probe's nonce
  std::uint32_t ka_una = 0;     // snd_una when it went: the answer must acknowledge at least that
};

// What stays of a connection after an abrupt close or destroy: the reset is repeated until the
// peer acknowledges it, and the peer's retransmissions are still acknowledged, so a Send the
// peer made before the close completes there instead of being flushed for a lost ACK.
struct Linger {
  std::uint32_t qpn = 0;
  NetAddr peer{};
  std::uint32_t peer_qpn = 0;
  std::uint32_t conn_id = 0;
  std::uint32_t rcv_next = 0;
  std::uint32_t snd_nxt = 0;  // what the reset's seq says: the peer's expected sequence number
  Clock::time_point next_tx{};
  Clock::time_point expiry{};
};

struct Request final : ConnRequest {
  NetAddr from{};
  std::uint32_t src_qpn = 0;
  std::uint32_t conn_id = 0;
  std::uint32_t init_seq = 0;
  std::uint64_t conn_qual = 0;
  std::uint32_t peer_ird = 0, peer_ord = 0;
};

class Rudp final : public iwarp::Transport, public engine::Pollable {
 public:
  Rudp(Ctx& ctx, netdev::Netdev& nd);
  ~Rudp() override;

  // core::Transport (issue, acked_pos and fatal: iwarp::Transport)
  std::unique_ptr<TransportQp> make_qp_state() override;
  void reset(Qp& qp) override;
  void destroy(Qp& qp) override;
  Status connect(Qp& qp, NetAddr remote, std::uint64_t conn_qual, std::span<const std::uint8_t> pd,
                 std::chrono::milliseconds timeout) override;
  Status listen(std::uint64_t conn_qual, std::function<void(ConnRequest*, const ConnRequestInfo&)> on_request) override;
  Status stop_listen(std::uint64_t conn_qual) override;
  Status accept(ConnRequest* req, Qp& qp, std::span<const std::uint8_t> pd) override;
  Status reject(ConnRequest* req, std::span<const std::uint8_t> pd) override;
  Status disconnect(Qp& qp, bool graceful) override;
  void kick(Qp& qp) override { pump_tx(qp); }
  void drain_tx() override { flush_tx(); }
  void kick_all(std::span<Qp* const> qps) override {
    const TxHold hold(*this);
    for (Qp* q : qps) pump_tx(*q);
  }
  Pos tx_pos(const Qp& qp) const override { return conn(qp).snd_nxt_pos; }
  void send_queue_drained(Qp& qp) override { send_disconnect(qp); }
  void flush(Qp& qp) override;
  void closed(Qp& qp) override;
  void close_all() override;
  bool lingering() const override { return !lingers_.empty(); }

  // iwarp::LowerLayer
  void send_segment(Qp& qp, std::initializer_list<std::span<const std::uint8_t>> hdr, const SglRef& sgl,
                    std::uint64_t off, std::uint32_t len, bool awaited = false) override;
  std::size_t max_payload(const Qp&, std::size_t hdr_len) const override {
    return nd_.max_datagram() - wire::kFrameOverhead - hdr_len;
  }
  Pos delivered(const Qp& qp) const override { return conn(qp).rcv_pos; }
  Pos acked(const Qp& qp) const override { return conn(qp).snd_una_pos; }
  void hold_acks_from(Qp& qp, Pos bad) override;

  // engine::Pollable
  std::size_t poll(std::optional<Clock::time_point> now) override;
  std::chrono::microseconds next_wait() override;

 private:
  static Conn& conn(Qp& qp) { return static_cast<Conn&>(*qp.t); }
  static const Conn& conn(const Qp& qp) { return static_cast<const Conn&>(*qp.t); }

  // stream.cpp
  SeqFrame& enqueue_seq(Qp& qp, wire::FrameType type, std::initializer_list<std::span<const std::uint8_t>> parts);
  std::optional<std::span<const std::uint8_t>> payload_of(const Qp& qp, const SeqFrame& f);
  static std::uint32_t ack_value(const Conn& c);
  void transmit(Qp& qp, SeqFrame& f);
  void flush_tx();
  void send_raw(NetAddr to, std::span<const std::uint8_t> d);
  void pump_tx(Qp& qp);
  void pump_waiters();
  void leave_budget(Qp& qp);
  void local_protection_failure(Qp& qp);
  void rtt_sample(Conn& c, std::chrono::microseconds sample);
  static void acked_now(Conn& c);
  void send_ack(Qp& qp, std::uint8_t flags = 0, std::uint32_t seq = 0);
  // The consumer's graceful disconnect: what is posted goes first, then the disconnect frame.
  Status begin_graceful_close(Qp& qp);
  void send_disconnect(Qp& qp);
  void timers(Clock::time_point now);
  Clock::time_point deadline(const Qp& qp) const;
  void rearm(Qp& qp);
  static std::chrono::microseconds reorder_window(const Conn& c);
  void on_timer(Qp& qp, Clock::time_point now);
  bool cm_timeout(Qp& qp, Clock::time_point now);
  void retransmit_due(Qp& qp, Clock::time_point now);
  bool keepalive(Qp& qp, Clock::time_point now);
  static bool ack_acceptable(const Conn& c, std::uint32_t ack);
  void challenge(Qp& qp);
  void alive(Conn& c);
  void mark_ack(Qp& qp);
  void flush_acks();
  void delayed_acks(Clock::time_point now);
  bool handle_ack(Qp& qp, std::uint32_t ack, std::span<const SackBlock> sack);
  // What the frames an ack newly covers told (mark_delivered, frame_delivered).
  struct AckScan {
    std::chrono::microseconds slowest{-1};  // the slowest round trip of a frame sent once
    bool covers_original = false;           // a frame sent once among them
    bool newly_sacked = false;
    Clock::time_point resent_sent{};  // the latest resent frame whose own delivery this is
    std::chrono::microseconds resent_rtt{0};
  };
  bool ack_valid(const Conn& c, std::uint32_t ack, std::span<const SackBlock> sack) const;
  void mark_delivered(Qp& qp, std::uint32_t ack, std::span<const SackBlock> sack, AckScan& scan);
  void frame_delivered(Qp& qp, SeqFrame& f, std::chrono::microseconds rtt, Clock::time_point now, AckScan& scan);
  void advance_una(Qp& qp, std::uint32_t ack);

  // rx.cpp
  void network_errors();
  void handle_datagram(NetAddr from, std::span<const std::uint8_t> d);
  void handle_ack_frame(Qp& qp, const wire::FrameHeader& h, std::span<const std::uint8_t> body);
  void handle_sequenced(Qp& qp, const wire::FrameHeader& h, std::span<const std::uint8_t> body);
  void stream_advanced(Qp& qp);
  void handle_stream_ctrl(Qp& qp, std::span<const std::uint8_t> body, std::uint32_t seq);
  void peer_closed(Qp& qp);

  // cm.cpp
  void send_cm_raw(NetAddr to, std::uint32_t dst_qpn, std::uint32_t src_qpn, wire::CmOp op, std::uint8_t rsv,
                   std::uint64_t conn_qual, std::uint32_t conn_id, std::uint32_t init_seq,
                   std::span<const std::uint8_t> pd, std::uint32_t ird = 0, std::uint32_t ord = 0,
                   std::uint32_t hdr_seq = 0);
  void send_cm(Qp& qp, wire::CmOp op, std::uint8_t rsv);
  std::uint32_t cookie(NetAddr from, std::uint32_t src_qpn, std::uint32_t conn_id, std::uint64_t conn_qual,
                       std::uint32_t init_seq, std::int64_t epoch) const;
  void send_reject(const Request& r, bool no_listener);
  void start_linger(Qp& qp);
  void send_reset(const Linger& l, std::uint32_t seq);
  bool answer_lingering(NetAddr from, const wire::FrameHeader& h);
  void hint_peer(Qp& qp, bool up);
  void established_passive(Qp& qp);
  void cm_timers(Clock::time_point now);
  bool known_req(const ConnRequest* r) const;
  void handle_cm(NetAddr from, const wire::FrameHeader& h, std::span<const std::uint8_t> body);
  // A CM frame as handle_cm took it apart: who sent it, its frame and CM headers, its private data.
  struct CmFrame {
    NetAddr from;
    const wire::FrameHeader& h;
    wire::CmHdrWire c;
    std::span<const std::uint8_t> pd;
  };
  Qp* ours(const CmFrame& f);
  void on_connect_request(const CmFrame& f);
  bool cookie_echoed(const CmFrame& f);
  void on_connect_reply(const CmFrame& f);
  void on_reject(const CmFrame& f);
  void on_reset(const CmFrame& f);
  void on_cookie(const CmFrame& f);

  Ctx& ctx_;
  netdev::Netdev& nd_;
  std::map<std::uint64_t, std::function<void(ConnRequest*, const ConnRequestInfo&)>> listeners_;
  std::vector<Request*> reqs_;
  std::vector<Qp*> ack_list_;
  // QPs whose lone in-order frame waits for a reply to carry its ack, in the order they are due
  // (each kAckDelay after the round that delayed it). An entry whose `due` is no longer its
  // QP's ack_due is stale (data carried the ack) and leaves when it reaches the front.
  struct DelayedAck {
    Clock::time_point due;
    Qp* qp;
  };
  std::deque<DelayedAck> delayed_acks_;
  std::vector<Linger> lingers_;
  engine::TimerQueue timers_;  // each QP at its next deadline (deadline())
  Clock::time_point last_timer_scan_{};
  Clock::time_point last_req_sweep_{};
  std::vector<std::uint8_t> rx_bufs_, tx_gather_;
  std::vector<netdev::RxFrame> rx_frames_;
  // Frames transmit() and send_raw() prepared, handed to the netdev together by flush_tx() (one
  // burst: the udp netdev sends a run of them in one system call). Each keeps a copy of its
  // headers and trailer (a raw frame, such as an ack, whole in `head`). While tx_hold_ is set (a
  // receive round, the doorbell) the batch fills across QPs and goes out when the round ends.
  static constexpr std::size_t kMaxRawInSlot = wire::kFrameOverhead + 4 + 8 * wire::kMaxSackBlocks;
  struct TxSlot {
    std::array<std::uint8_t, std::max(SeqFrame::kMaxHead, kMaxRawInSlot)> head;
    std::array<std::uint8_t, wire::kFrameTrailerLen> tail;
  };
  static constexpr std::size_t kTxBatch = 64;
  std::array<TxSlot, kTxBatch> tx_slots_{};
  std::array<netdev::TxFrame, kTxBatch> tx_batch_{};
  std::size_t tx_n_ = 0;
  std::uint32_t tx_hold_ = 0;  // > 0: flush_tx() waits for the end of the round (TxHold)
  using TxHold = engine::TxHold<Rudp>;
  friend TxHold;
  void flush_tx_unless_held() {
    if (tx_hold_ == 0) flush_tx();
  }
  std::size_t window_bytes_ = 0;
  // What all QPs together have in flight, in bytes of the peer's receive buffer (each frame its
  // payload plus kFrameCharge: a datagram costs the socket buffer about that much more, so small
  // frames count too): at most half our receive buffer.
  engine::TxBudget budget_;
  static constexpr std::size_t kFrameCharge = 1024;
  static std::size_t frame_charge(std::size_t len) { return len + kFrameCharge; }
  static std::size_t in_flight_charge(const Conn& c) {
    return c.inflight_bytes - c.sacked_bytes + kFrameCharge * (c.inflight.size() - c.sacked_frames);
  }
  std::array<unsigned char, crypto_shorthash_KEYBYTES> cookie_key_{};
};

}  // namespace softrnic::rudp
