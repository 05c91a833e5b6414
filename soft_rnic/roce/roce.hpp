// RoCEv2: InfiniBand RC over UDP (IBTA vol. 1 chapter 9, annex A17), split as Linux rxe splits it:
// - requester.cpp (rxe_req.c): work requests become packets: PSNs, path MTU segmentation, AckReq,
//   the window, go-back-N retransmission from a PSN;
// - responder.cpp (rxe_resp.c): request packets in PSN order: placement through core (Sends by
//   message number, SRQ buffers taken on a message's first packet; Writes after the rkey checks),
//   Read responses, NAKs (PSN sequence error once per gap, invalid request, remote access, RNR),
//   duplicates re-acknowledged or replayed, ACKs coalesced per receive round;
// - completer.cpp (rxe_comp.c): ACKs, NAKs and Read responses complete the send queue in order;
//   the retransmission and RNR timers, retry_cnt and rnr_retry;
// - cm.cpp: IB connection management over QP1 as rdma_cm speaks it (REQ with the CMA header, MRA,
//   REP, RTU, REJ, DREQ, DREP; retries and timeouts), so that rdma_cm on Linux connects to us and
//   we to it;
// - roce.cpp: the receive round (ICRC, dispatch by QPN), transmission, QP life, the out-of-band
//   connection.
// Positions (core's Pos) are 64-bit extended PSNs: a work request ends at the PSN after its last
// packet; "acknowledged through P" is the oldest unacknowledged PSN; "delivered through P" the
// next expected one.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "engine.hpp"
#include "queues.hpp"
#include "softrnic/netdev/netdev.hpp"
#include "softrnic/wire/ib_cm.hpp"
#include "softrnic/wire/roce.hpp"
#include "timer_queue.hpp"
#include "tx_budget.hpp"
#include "tx_hold.hpp"

namespace softrnic::roce {

enum class ReqKind : std::uint8_t { send, write, read, atomic };

// A work request on the wire (rxe's send WQE state).
struct ReqWqe {
  ReqKind kind = ReqKind::send;
  bool signaled = true;  // its completion is wanted (it asks for an ACK: transmit)
  bool solicited = false;
  bool invalidate = false;
  std::uint32_t inv_rkey = 0;
  bool with_imm = false;  // Send or Write with Immediate
  std::uint32_t imm = 0;
  bool cmp_swap = false;  // an atomic: CmpSwap, else FetchAdd
  std::uint64_t compare_add = 0, swap = 0;
  SglRef sgl;
  std::uint64_t total = 0;  // payload bytes (a Read: bytes to read)
  std::uint32_t rkey = 0;
  std::uint64_t va = 0;
  Pos first_psn = 0;
  std::uint32_t npkts = 1;  // PSNs it takes (a Read: its response packets)
  bool done = false;        // acknowledged (a Read: its whole response placed)
  // A Read or an atomic: where its response goes, and how much of it has come.
  std::uint32_t sink_stag = 0;
  std::uint64_t sink_to = 0;
  std::uint32_t resp_pkts = 0;
};

// A Read the responder answered, kept for duplicates (up to the IRD of them).
struct AnsweredRead {
  Pos first_psn = 0;
  std::uint32_t npkts = 0;
  bool atomic = false;     // an atomic: its duplicate gets the same answer again
  std::uint64_t orig = 0;  // the value the atomic found
};

// A Read response still going out (a long one goes a burst per round).
struct ReadResponseJob {
  Pos psn = 0;  // the next response packet's
  std::uint32_t rkey = 0;
  std::uint64_t off = 0;  // into src
  std::uint32_t left = 0;
  bool first = true;  // its first packet is still to go
  SglRef src;         // the source region, read at each packet
};

// Where a QP is in IB CM (ours: the active side sends REQ and RTU, the passive side REP).
// drain: the peer's DREQ came while requests of ours wait for their ACK; the QP closes once they
// have it (the peer's Linger acknowledges retransmissions) or the ACK timeout's retries are spent.
enum class CmState : std::uint8_t { idle, req_sent, rep_sent, established, dreq_sent, drain };

struct RoceQp final : TransportQp {
  // The path is set (dst, peer_qpn, mtu, PSNs: what a verbs RTR sets): packets flow to and from
  // the peer. The QP's state is core's (qp_state.hpp); this is the wire's configuration.
  bool has_path = false;
  NetAddr dst{};            // where its packets go: the peer's address, the RoCEv2 port
  std::uint16_t sport = 0;  // the UDP source port its packets leave from (0: the netdev's own)
  std::uint32_t peer_qpn = 0;
  std::uint32_t mtu = 1024;
  std::uint32_t init_psn = 0;  // our first PSN (24 bits)
  // What a verbs RTS/RTR sets per QP (the device's RoceConfig until then).
  std::uint8_t retry_cnt = 7;
  std::uint8_t rnr_retry = 7;
  std::uint8_t min_rnr_timer = 12;
  Clock::duration ack_timeout{};  // the first ACK timeout (Roce::rto backs off from it when the device does)

  // Requester and completer.
  Pos next_psn = 0;         // the PSN the next work request starts at
  Pos tx_psn = 0;           // the next PSN to transmit (go-back-N moves it back)
  Pos una_psn = 0;          // the oldest PSN not acknowledged
  Pos ack_through = 0;      // every PSN below it was acknowledged (an ACK may overtake a Read's response)
  std::deque<ReqWqe> reqs;  // issued, not done, in order
  std::uint32_t since_ackreq = 0;
  Pos asked_to = 0;             // every PSN below it was sent with or before one that asked for an ACK
  Clock::time_point sent_at{};  // the last request packet sent (a series in quick succession: transmit)
  // PSNs in flight at most: halved by a NAK, back to a few by a timeout, grown again by what is
  // acknowledged (go-back-N sends everything from the lost PSN again: a full window into a peer
  // that drops for lack of room only loses it again).
  std::uint32_t cwnd = 0;
  std::uint32_t budget_charged = 0;  // its PSNs in flight as Roce::budget_ counts them
  bool budget_waiting = false;       // its next packet waits for the device's budget
  int retry_left = 7;
  int rnr_left = 7;
  int timeouts = 0;                 // ACK timeouts in a row without progress (Roce::rto backs off by them)
  Clock::time_point heard_at{};     // the peer's last packet: keepalive probes start after keepalive_idle of silence
  int probes = 0;                   // keepalive probes sent since
  Clock::time_point probed_at{};    // the last one
  Pos last_nak_psn = ~Pos{0};       // a NAK at the same PSN again without progress costs a retry
  Clock::time_point progress_at{};  // the last acknowledgement or response (the timeout runs from it)
  Clock::time_point rnr_until{};    // after an RNR NAK: nothing goes before then
  bool rnr_wait = false;

  // Responder.
  Pos exp_psn = 0;                          // the next PSN expected
  std::uint32_t msn = 0;                    // messages completed (AETH MSN)
  bool nak_sent = false;                    // a PSN sequence error NAK went for the current gap
  std::uint32_t next_recv_msn = 1;          // the message number core gives the next Send
  bool in_send = false;                     // between a Send's first packet and its last
  std::uint32_t send_msn = 0;               // ... its message number
  std::uint64_t send_off = 0;               // ... the offset of its next packet
  bool in_write = false;                    // between an RDMA Write's first packet and its last
  std::uint32_t write_rkey = 0;             // ... the rkey of its RETH
  std::uint64_t write_va = 0;               // ... where its next packet goes
  std::uint64_t write_left = 0;             // ... the bytes still to come
  std::uint64_t write_total = 0;            // ... its whole length (the RETH's DMA length)
  std::deque<AnsweredRead> answered_reads;  // Reads (and atomics) answered, for duplicates
  std::deque<ReadResponseJob> read_jobs;    // Read responses still to send
  bool ack_pending = false;
  // The rounds the pending ACK has waited for a packet of ours to go with (flush_acks), besides
  // those it waited for the ACK of our own requests; and since when it is owed.
  std::uint8_t ack_waited = 0;
  Clock::time_point ack_owed_at{};
  bool ack_listed = false;  // on ack_list_
  bool ack_riding = false;  // on ack_riders_: the owed ACK leaves behind this batch's packets
  Pos ack_psn = 0;

  // IB CM.
  CmState cm = CmState::idle;
  std::uint32_t local_comm = 0, remote_comm = 0;
  std::uint64_t tid = 0;
  std::uint64_t dreq_tid = 0;  // drain: the peer's DREQ, answered once our requests are acknowledged
  std::array<std::uint8_t, wire::ibcm::kMadLen> mad{};  // the last REQ, REP, RTU or DREQ, sent again on timeout
  int cm_tries = 0;
  Clock::time_point cm_next{};      // the next retransmission of `mad`
  Clock::time_point cm_deadline{};  // the connection attempt fails then
  struct Request* req = nullptr;    // passive: the request we accepted

  // UD: the Q_Key its datagrams must carry.
  std::uint32_t qkey = 0;
};

// A connection request (a CM REQ) a listener received.
struct Request final : ConnRequest {
  NetAddr from{};  // its IP and rdma_cm port (from the CMA header)
  std::uint64_t conn_qual = 0;
  std::uint64_t tid = 0;
  wire::ibcm::Req req;
  Clock::time_point arrived{};
  Qp* qp = nullptr;  // accepted onto
};

// A connection that ended while its DREQ waits for a DREP (resent), or that answers the peer's
// repeated DREQ with a DREP.
struct Linger {
  NetAddr dst{};
  std::uint32_t local_comm = 0, remote_comm = 0, remote_qpn = 0;
  // The closed QP's responder: a request it had already received, sent again because our ACK
  // was lost, is acknowledged again, so the peer's request completes instead of being flushed.
  std::uint32_t qpn = 0, msn = 0;
  Pos exp_psn = 0;
  std::uint16_t sport = 0;
  std::uint64_t tid = 0;
  bool dreq = false;  // we still resend our DREQ
  int tries = 0;
  Clock::time_point next{}, expiry{};
  // A QP connected without CM (a verbs consumer's RTR/RTS) has no close handshake: the device
  // stays open until this passes (Device's close waits for lingering()), so that a request
  // whose ACK was lost, sent again by the peer, is acknowledged rather than left to fail the
  // peer's QP when this process exits (ibv_rc_pingpong's last message).
  Clock::time_point quiet_until{};
};

// "NAK 0x61": an AETH syndrome as the log lines name it, sent or received.
std::string nak_text(std::uint8_t syndrome);

class Roce final : public Transport, public engine::Pollable {
 public:
  Roce(Ctx& ctx, netdev::Netdev& nd);
  ~Roce() override;

  // core::Transport
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
  void issue(Qp& qp, const WaitingWr& w) override;
  void kick(Qp& qp) override {
    TxHold hold(*this);
    pump(qp);
  }
  void kick_all(std::span<Qp* const> qps) override {
    TxHold hold(*this);
    for (Qp* q : qps) pump(*q);
  }
  void drain_tx() override { flush_tx(); }
  Pos tx_pos(const Qp& qp) const override { return st(qp).next_psn; }
  Pos acked_pos(const Qp& qp) const override { return st(qp).una_psn; }
  void send_queue_drained(Qp& qp) override;
  void flush(Qp& qp) override;
  void closed(Qp& qp) override;
  void fatal(Qp& qp, Error e, std::string reason, std::optional<Pos> bad) override;
  void close_all() override;
  bool lingering() const override {
    const auto now = Clock::now();
    return std::any_of(lingers_.begin(), lingers_.end(),
                       [&](const Linger& l) { return l.dreq || now < l.quiet_until; });
  }

  // The out-of-band connection (Device::roce_local / roce_connect).
  RoceEndpoint local(const Qp& qp) const;
  Status connect_oob(Qp& qp, const RoceEndpoint& remote, std::uint32_t ord, std::uint32_t ird);
  // The same in the two steps of a verbs consumer (Device::roce_rtr / roce_rts).
  Status rtr(Qp& qp, const RoceRtr& a);
  Status rts(Qp& qp, const RoceRts& a);
  // A UD QP's RTR (Device::roce_ud_rtr); its RTS is rts's (the first PSN).
  Status ud_rtr(Qp& qp, std::uint32_t qkey);

  static std::optional<Fault> check_qp_access(const Qp& qp, const wire::roce::OpInfo& op);
  static Clock::duration ack_timeout_of(std::uint8_t code);
  std::uint32_t link_mtu() const { return link_mtu_; }
  // The peer's address on the wire (the device's own port: every RoCEv2 node receives on 4791).
  NetAddr wire_addr(std::uint32_t ip) const { return NetAddr{ip, self_.port}; }
  // The QP's UDP source port, as rxe picks it from the path's flow label (0: from both QPNs),
  // when the netdev can send from it.
  void pick_source_port(Qp& qp, std::uint32_t flow_label);

  // engine::Pollable
  std::size_t poll(std::optional<Clock::time_point> now) override;
  std::chrono::microseconds next_wait() override;

 private:
  static RoceQp& st(Qp& qp) { return static_cast<RoceQp&>(*qp.t); }
  static const RoceQp& st(const Qp& qp) { return static_cast<const RoceQp&>(*qp.t); }
  static NetAddr s_dst(const Qp& qp) { return st(qp).dst; }
  // The 64-bit PSN nearest `ref` whose low 24 bits are psn24 (the wire's PSN, extended).
  Pos extend_psn(Pos ref, std::uint32_t psn24) const {
    return ref + static_cast<Pos>(static_cast<std::int64_t>(wire::roce::psn_diff(psn24, ref & wire::roce::kPsnMask)));
  }

  // Packets wait in the transmit batch while a receive round, a pump or the doorbell holds it
  // (TxHold), and leave together when the last hold ends, the batch is full, a send-queue
  // completion is about to give memory back (drain_tx), or a packet of no QP must follow them
  // (send_bare): one system call for a run to one peer from one source port (sendmmsg).
  using TxHold = engine::TxHold<Roce>;
  friend TxHold;
  void flush_tx();
  void ride_acks();  // the ACKs owed by QPs that sent in this batch, behind their packets

  // roce.cpp
  void handle_packet(NetAddr from, std::span<const std::uint8_t> d);
  // Sends one packet (into the transmit batch): `p`'s headers, then `len` payload bytes of `sgl`
  // from `off`, its ICRC computed from registered memory now. False when that memory is gone.
  // `copy`: the payload is copied into the batch now rather than read again when the batch
  // leaves (a Read Response: nothing keeps the responder's memory still until then, and bytes
  // that change after the ICRC make a packet the peer drops).
  bool send_packet(Qp& qp, const wire::roce::Packet& p, const SglRef& sgl, std::uint64_t off, std::uint32_t len,
                   const Pd* pd, bool copy = false);
  // `received`: this round received frames (the rest of a burst the peer sent may be among them).
  void flush_acks(bool received);
  // An ACK through `psn` is owed (sent by flush_acks, or behind the QP's next packet); `now`: at
  // the end of this round, not held for the next.
  void owe_ack(Qp& qp, Pos psn, bool now);
  // The ACK the QP owes, now: before a DREQ or DREP (a peer whose QP leaves RTS on it, as rxe's
  // does, would flush the request it still waits on), and before the QP forgets it.
  void send_owed_ack(Qp& qp);
  void timers(Clock::time_point now);
  void rearm(Qp& qp);
  // Liveness (keepalive_idle, _interval, _probes, as on every wire): a connected QP with nothing
  // in flight that heard nothing from its peer for keepalive_idle sends a probe; keepalive_probes
  // unanswered, keepalive_interval apart, break it.
  bool keepalive_on(const Qp& qp) const;
  Clock::time_point keepalive_due(const RoceQp& s) const;
  void keepalive(Qp& qp, Clock::time_point now);
  void break_qp(Qp& qp, std::string reason);
  void forget(Qp& qp);

  // requester.cpp
  void pump(Qp& qp);
  void recount(Qp& qp);
  static std::deque<ReqWqe>::iterator at_psn(RoceQp& s, Pos psn);
  // A request's memory faulted as it was read to be sent (send_packet).
  static constexpr const char* kRegionFreed = "a posted work request names memory whose region was freed";
  static Pos budget_amount(const ReqWqe& r, Pos psn);
  void pump_waiters();
  void leave_budget(Qp& qp);
  bool transmit(Qp& qp, ReqWqe& r, Pos psn);
  bool asks(Qp& qp, const ReqWqe& r);
  void tail_probe(Qp& qp);
  // Packets sent that did not ask for an ACK and none after them that did (tail_probe).
  static bool unasked(const RoceQp& s) { return s.tx_psn > s.asked_to && s.tx_psn > s.una_psn; }
  // A request packet that follows the last within this is one of a quick series (requester.cpp);
  // ask_idle: the same, within half the QP's ACK timeout (the tail probe comes before it).
  static constexpr std::chrono::microseconds kAskIdle{1000};
  Clock::duration ask_idle(const RoceQp& s) const { return std::min<Clock::duration>(kAskIdle, rto(s) / 2); }
  void go_back(Qp& qp, Pos psn, bool timeout = false);

  // responder.cpp
  void on_request(Qp& qp, const wire::roce::Packet& p);
  // UD (datagram.cpp): a work request goes at once as one packet; a datagram takes a receive.
  void issue_datagram(Qp& qp, const WaitingWr& w);
  void on_datagram(Qp& qp, NetAddr from, const wire::roce::Packet& p);
  bool check_psn(Qp& qp, const wire::roce::Packet& p, Pos psn);
  bool check_resource(Qp& qp, const wire::roce::OpInfo& op, Pos psn);
  std::optional<Fault> execute_send(Qp& qp, const wire::roce::Packet& p, const wire::roce::OpInfo& op, Pos psn);
  std::optional<Fault> execute_write(Qp& qp, const wire::roce::Packet& p, const wire::roce::OpInfo& op, Pos psn);
  void duplicate(Qp& qp, const wire::roce::Packet& p, Pos psn);
  bool answer_read(Qp& qp, Pos psn, std::uint32_t rkey, std::uint64_t va, std::uint32_t len);
  void send_responses(Qp& qp);
  void send_ack(Qp& qp, std::uint8_t syndrome, Pos psn);
  void rnr_nak(Qp& qp, Pos psn);
  void send_atomic_ack(Qp& qp, Pos psn, std::uint64_t orig);
  bool answer_atomic(Qp& qp, const wire::roce::Packet& p, Pos psn);
  void nak(Qp& qp, Pos psn, Error e, std::string reason);

  // cm.cpp
  void handle_mad(NetAddr from, std::span<const std::uint8_t> mad);
  void send_mad(NetAddr to, std::span<const std::uint8_t> mad);
  // A packet of no QP (a MAD, a Linger's ACK): headers, payload, ICRC, from `sport`.
  void send_bare(NetAddr to, std::uint16_t sport, const wire::roce::Packet& p, std::span<const std::uint8_t> payload);
  bool linger_ack(NetAddr from, const wire::roce::Packet& p);
  template <class M>
  void send_cm(NetAddr to, const M& m, std::uint64_t tid,
               std::array<std::uint8_t, wire::ibcm::kMadLen>* keep = nullptr);
  void on_req(NetAddr from, const wire::ibcm::MadHdr& h, const wire::ibcm::Req& m);
  // Each handler takes a message only in the states IB CM allows it and only from the peer it
  // names (address, both comm IDs where the sender knows ours, the transaction); anything else is
  // counted (rx_stray_cm) and dropped.
  bool on_rep(NetAddr from, const wire::ibcm::MadHdr& h, const wire::ibcm::Rep& m);
  bool on_rtu(NetAddr from, const wire::ibcm::MadHdr& h, const wire::ibcm::Rtu& m);
  bool on_rej(NetAddr from, const wire::ibcm::MadHdr& h, const wire::ibcm::Rej& m);
  bool on_mra(NetAddr from, const wire::ibcm::MadHdr& h, const wire::ibcm::Mra& m);
  bool on_dreq(NetAddr from, const wire::ibcm::MadHdr& h, const wire::ibcm::Dreq& m);
  bool on_drep(NetAddr from, const wire::ibcm::MadHdr& h, const wire::ibcm::Drep& m);
  bool in_transaction(const Qp& qp, NetAddr from, const wire::ibcm::MadHdr& h) const;
  Qp* qp_by_comm(std::uint32_t local_comm) const;
  void established(Qp& qp);
  void send_dreq(Qp& qp);
  void answer_dreq(Qp& qp);
  void reject_req(NetAddr to, std::uint64_t tid, const wire::ibcm::Req& r, wire::ibcm::RejReason why,
                  std::span<const std::uint8_t> pd = {});
  void cm_timer(Qp& qp, Clock::time_point now);
  void cm_sweep(Clock::time_point now);
  void hold_req(NetAddr from, const wire::ibcm::MadHdr& h, const wire::ibcm::Req& m, std::uint16_t port);
  void start_linger(Qp& qp, bool dreq);
  bool known_req(const ConnRequest* r) const;
  void drop_req(Request* r);

  // completer.cpp
  // The ACK timeout of the QP's oldest request now: fixed where the consumer set roce.timeout,
  // else backed off by the timeouts in a row.
  Clock::duration rto(const RoceQp& s) const;
  // The time from the last progress to the QP's failure when nothing comes back.
  Clock::duration retry_time() const;
  void made_progress(RoceQp& s);
  void on_response(Qp& qp, const wire::roce::Packet& p);
  void on_read_response(Qp& qp, const wire::roce::Packet& p, const wire::roce::OpInfo& op, Pos psn);
  void on_atomic_ack(Qp& qp, const wire::roce::Packet& p, Pos psn);
  void on_aeth(Qp& qp, const wire::roce::Packet& p, Pos psn);
  void on_rnr_nak(Qp& qp, std::uint8_t syndrome, Pos psn);
  void acknowledged(Qp& qp, Pos through);
  void complete_error(Qp& qp, WcStatus status, std::string reason);
  void on_timer(Qp& qp, Clock::time_point now);

  Ctx& ctx_;
  netdev::Netdev& nd_;
  NetAddr self_;
  std::uint32_t link_mtu_ = 1024;
  Clock::duration ack_timeout_{std::chrono::microseconds(67108)};  // the first (roce.timeout)
  bool backoff_ = true;             // roce.timeout unset: each timeout in a row doubles it
  std::uint32_t max_window_ = 128;  // PSNs in flight per QP (rxe: RXE_MAX_UNACKED_PSNS)
  engine::TimerQueue timers_;
  // PSNs all QPs together have in flight (a Read's counted whole: its response comes into our
  // receive buffer): half the receive buffer, at a path-MTU packet plus the kernel's ~1 KiB
  // per-datagram overhead each.
  engine::TxBudget budget_;
  std::map<std::uint16_t, std::pair<std::uint64_t, std::function<void(ConnRequest*, const ConnRequestInfo&)>>>
      listeners_;               // by rdma_cm port: conn_qual, callback
  std::vector<Request*> reqs_;  // received, not yet accepted or rejected (or accepted, waiting for the RTU)
  // REQs for a port nobody listens on yet, held a moment before their REJ (cm.cpp: hold_req).
  struct HeldReq {
    NetAddr from;
    wire::ibcm::MadHdr hdr;
    wire::ibcm::Req req;
    std::uint16_t port = 0;
    Clock::time_point until;
  };
  std::vector<HeldReq> held_reqs_;
  std::vector<Linger> lingers_;
  std::uint32_t gsi_psn_ = 0;    // QP1's send PSN
  std::uint16_t gsi_sport_ = 0;  // QP1's UDP source port
  Clock::time_point last_sweep_{};
  std::vector<Qp*> ack_list_;
  std::vector<Qp*> ack_riders_, riders_;  // QPs whose owed ACK goes at the end of the batch (flush_tx)
  std::vector<std::uint8_t> rx_bufs_;
  std::vector<netdev::RxFrame> rx_frames_;
  // The transmit batch (TxHold): each packet's headers, ICRC and (from more than one SGE) its
  // gathered payload stay in its slot until the batch leaves.
  struct TxSlot {
    std::array<std::uint8_t, wire::roce::kMaxHeaderLen> hdr{};
    std::array<std::uint8_t, 8> tail{};
    std::vector<std::uint8_t> gathered;
  };
  static constexpr std::size_t kTxBatch = 32;
  // The rounds an owed ACK waits at most for a packet of ours to go with (flush_acks); while our
  // own requests wait for the peer's ACK it waits up to DeviceConfig::roce_ack_hold.
  static constexpr std::uint8_t kAckHoldRounds = 2;
  std::array<TxSlot, kTxBatch> tx_slots_;
  std::array<netdev::TxFrame, kTxBatch> tx_batch_;
  std::size_t tx_n_ = 0;
  int tx_hold_ = 0;
};

}  // namespace softrnic::roce
