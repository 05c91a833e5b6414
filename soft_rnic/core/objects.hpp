// The RNIC's objects as every transport shares them: CQs, SRQs, the QP with its send queue and
// its receive queue (buffers matched by message number, SRQ buffers taken on arrival), and the
// interface a transport offers the verbs. Everything here is guarded by the device lock.
//
// Positions: core never sees a transport's sequence numbers. A transport numbers what it puts on
// the wire and what it receives with 64-bit positions that only grow (Pos); it says "delivered
// through P" (every position below P has arrived, in stream order) and "acknowledged through P"
// (the peer has everything below P). A work request remembers the position after its last
// segment; a message, the highest position among its segments.
#pragma once

#include <algorithm>
#include <atomic>
#include <boost/container/small_vector.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "error.hpp"
#include "mr_table.hpp"
#include "qp_state.hpp"
#include "sgl.hpp"
#include "softrnic/ring.hpp"
#include "softrnic/rnic.hpp"
#include "spsc_ring.hpp"

namespace softrnic {

using Clock = std::chrono::steady_clock;
using Pos = std::uint64_t;  // a transport's stream position (see above)

inline constexpr std::uint32_t kNoWatermark = ~std::uint32_t{0};
// How far ahead of the next MSN to complete an SRQ QP takes a message (a buffer each).
inline constexpr std::size_t kMaxMsnAhead = 4096;

// A completion queue. push_wc produces under the device lock; poll_cq consumes under poll_mu
// alone, so a consumer that polls never waits for the engine, nor the engine for it
// (spsc_ring.hpp's contract). What does not fit in the ring (a CQ the consumer let overflow) goes
// to `spill`, in order after the ring's, and nothing is lost.
// A CQ's ring holds at most this many completions; a deeper CQ keeps the rest in its spill.
// (Programs size CQs for the worst case: libfabric's rxm asks for 262144 entries, and the ring
// is allocated whole.)
inline constexpr std::uint32_t kCqRingMax = 65536;

struct Cq {
  explicit Cq(std::uint32_t d) : ring(std::min(d, kCqRingMax)), depth(d) {}
  SpscRing<Wc> ring;
  std::mutex poll_mu;   // consumers: poll_cq, cq_count (never taken by the producer)
  std::mutex spill_mu;  // guards spill; a leaf (taken under the device lock or poll_mu)
  Ring<Wc> spill;       // completions behind a full ring
  // !spill.empty(), readable without spill_mu; changed only under it. While set, push_wc appends
  // to spill, never to the ring, so the consumer takes the ring's completions, then spill's.
  std::atomic<bool> spilled{false};
  std::uint32_t depth = 0;
  std::uint64_t overflows = 0;  // pushes that found depth completions waiting (device lock)
  std::uint32_t users = 0;      // QPs attached
  std::function<void()> notify;
  std::atomic<bool> notify_solicited_only{false};  // notify: only solicited or failed completions
};

// A receive buffer. On a QP's receive queue, entry i belongs to MSN recv_msn + i; on an SRQ
// QP an entry may exist without a buffer yet (a later MSN arrived first, arrival policy).
struct RecvWqe {
  bool allocated = true;
  std::uint64_t wr_id = 0;
  boost::container::small_vector<Sge, 2> sgl;  // inline for the usual one or two (no allocation per post)
  std::uint64_t capacity = 0;
  std::uint64_t placed = 0;
  std::uint64_t msg_len = 0;
  bool last_seen = false;
  bool done = false;
  Pos last_pos = 0;  // highest stream position of its segments
  bool pos_seen = false;
  std::uint32_t inv_stag = 0;  // Send with Invalidate: the window to invalidate at completion
  Srq* srq = nullptr;          // where the buffer came from
  bool with_imm = false;       // RoCE: immediate data came with the message
  bool solicited = false;      // the message's last segment asked for a solicited event
  bool rdma_imm = false;       // ... by an RDMA Write with Immediate (msg_len: the Write's length)
  std::uint32_t imm = 0;
  std::uint32_t src_qp = 0, src_ip = 0;  // UD: the datagram's sender (Wc::src_qp, src_ip)
};

struct Srq {
  Pd* pd = nullptr;
  std::uint32_t max_wr = 0;
  std::uint32_t max_sge = 0;
  std::deque<RecvWqe> q;          // buffers not yet taken by a QP
  std::uint32_t outstanding = 0;  // posted and not yet reaped by the consumer
  std::uint32_t allocated = 0;    // taken by QPs, not yet completed
  std::uint32_t completed = 0;    // completed (or flushed), not yet reaped
  std::uint32_t low_watermark = 0;
  bool lw_armed = false;
  std::uint32_t users = 0;  // QPs attached
  std::function<void(Srq*)> on_low_watermark;
};

struct SendWqe {
  std::uint64_t wr_id = 0;
  WcOpcode opcode = WcOpcode::send;
  bool signaled = true;
  Pos end_pos = 0;  // the transport's position after its last segment
  std::uint32_t byte_len = 0;
  SglRef sgl;  // holds its regions until completion
  bool is_read = false;
  bool read_done = false;  // the whole Read Response has arrived (in stream order)
  bool issued = true;      // false while it waits in Qp::sq_wait (ORD reached, or a fence)
};

// A posted send-queue work request that is not on the wire yet: an RDMA Read beyond the ORD, a
// request with a read fence while RDMA Reads are outstanding, or anything posted behind those.
struct WaitingWr {
  SendOpcode opcode = SendOpcode::send;
  SglRef sgl;
  std::uint32_t rkey = 0;
  std::uint64_t remote_addr = 0;
  std::uint32_t invalidate_stag = 0;
  std::uint64_t total = 0;
  bool fence = false;
  Access sink_access = Access::local_write;  // an RDMA Read's sink: remote_write for a window
  SendWqe* wqe = nullptr;                    // its entry on sq
  std::uint32_t imm = 0;                     // send_imm, rdma_write_imm
  std::uint64_t compare_add = 0, swap = 0;   // cmp_swap, fetch_add
  UdDest ud{};                               // a UD QP's datagram: its destination
};

// An RDMA Read this QP requested: where its response goes. A Read Request names one sink STag;
// a read into a scatter list names an internal STag (below kMaxInternalStag, never a region's)
// over the list, and its response is scattered by offset from sink_to.
struct RequestedRead {
  std::uint32_t sink_stag = 0;
  std::uint64_t sink_to = 0;
  std::uint32_t len = 0;
  std::uint64_t placed = 0;
  Pos last_pos = 0;
  bool pos_seen = false;
  SendWqe* wqe = nullptr;                    // its entry on sq (deque references are stable for push/pop at the ends)
  Access sink_access = Access::local_write;  // remote_write for a memory window
  SglRef scatter;                            // the sink list, for a read into more than one SGE
};

// STags of regions and windows are index << 16 | key with index >= 1: values below this are
// never a region's, so a read into a scatter list names one of them (the QP's next) as its sink.
inline constexpr std::uint32_t kMaxInternalStag = 1u << 16;

// The rdma_cm port (TCP port over iWARP, service ID over IB CM) of a DAT conn_qual, as OFA dapl's
// cma provider maps it: above 16 bits, folded into the upper range. 0 for none.
inline std::uint16_t rdma_cm_port(std::uint64_t conn_qual) {
  constexpr std::uint64_t kMod = 32001, kBase = 65535 - kMod;
  if (conn_qual > 0xFFFF) return static_cast<std::uint16_t>(conn_qual % kMod + kBase);
  return static_cast<std::uint16_t>(conn_qual);
}

enum class CmPhase : std::uint8_t { none, connecting, accepting, connected, disconnecting, closed };

class Transport;

// A transport's own per-QP state (sequence numbers, timers, its connection messages).
struct TransportQp {
  virtual ~TransportQp() = default;
};

// Work requests posted and not yet taken in by the device (device.cpp, "Posting"): each QP's
// posters produce into these rings under its post lock; whoever holds the device lock consumes.
struct PostedSend {
  SendWr wr;  // wr.sgl: the first n of sges
  boost::container::small_vector<Sge, 2> sges;
  std::uint64_t total = 0;
  Access sink_access = Access::local_write;
};
struct PostRings {
  PostRings(std::size_t sends, std::size_t recvs) : send(sends), recv(recvs) {}
  SpscRing<PostedSend> send;
  SpscRing<RecvWqe> recv;
};

struct Qp {
  std::uint32_t qpn = 0;
  std::string who;  // "<device name> QP[<qpn>]": the prefix of its log lines
  QpInit init;
  // Changed only by qp_event (qp_state.hpp), under the device lock; read by posts without it
  // (atomic for that).
  std::atomic<QpState> state{QpState::idle};
  std::atomic<CmPhase> cm{CmPhase::none};
  NetAddr peer{};
  NetAddr local{};           // our end of the connection (the TCP port of an MPA stream; the UDP socket's)
  bool peer_hinted = false;  // the netdev was told of a connection to `peer` (peer_hint up)
  bool doorbell = false;     // posts wait for the device's doorbell (on its list)
  Transport* transport = nullptr;
  std::unique_ptr<TransportQp> t;  // the transport's state of this QP

  std::uint32_t ord = 0, ird = 0;  // negotiated at connect
  // The remote operations the QP itself allows (a verbs consumer's qp_access_flags; everything
  // unless it says otherwise): the responder refuses others before any region is looked at.
  Access remote_access = Access::remote_read | Access::remote_write | Access::remote_atomic;

  // Send queue.
  std::deque<SendWqe> sq;               // posted, not completed, in order
  std::deque<WaitingWr> sq_wait;        // the tail of sq that is not issued yet, in order
  std::deque<RequestedRead> reads_out;  // our RDMA Reads without their whole response yet
  std::uint32_t next_read_stag = 0;     // the last internal sink STag a scattered read named

  // Receive queue.
  std::uint32_t recv_msn = 1;  // MSN of rq.front()
  std::deque<RecvWqe> rq;
  std::uint32_t rq_allocated = 0;  // entries of rq holding a buffer
  std::uint32_t soft_watermark = kNoWatermark, hard_watermark = kNoWatermark;
  bool soft_watermark_armed = false;

  QpCounters ctr{};

  // Posting without the device lock (device.cpp, "Posting").
  std::mutex post_mu;  // this QP's posters (the producers of `posted`)
  // Made at the first post, under post_mu (own_posted), published with release for whoever holds
  // the device lock: the hand-off, and an arriving Send looking for its receive.
  std::unique_ptr<PostRings> own_posted;
  std::atomic<PostRings*> posted{nullptr};
  std::atomic<bool> queued{false};  // on the device's list of QPs with posts to take in
  Qp* next_queued = nullptr;        // that list's link
  // sq's entries plus sends posted and not taken in (posts check max_send_wr against it); an
  // entry leaves it before its completion is pushed, so a consumer that has the completion may
  // post again at once. rq_used: the same for receives (a QP without an SRQ).
  std::atomic<std::uint32_t> sq_used{0};
  std::atomic<std::uint32_t> rq_used{0};
};

enum class ReqPhase : std::uint8_t { pending, accepted, rejected };

// A connection request a listener received; the transport's own kind derives from it.
struct ConnRequest {
  virtual ~ConnRequest() = default;
  ReqPhase phase = ReqPhase::pending;
  std::vector<std::uint8_t> reply_private;
  Clock::time_point decided{};
};

// What the device's parts share (under the device lock).
struct Ctx {
  Ctx(const DeviceConfig& c, const Limits& l) : cfg(c), limits(l), mrs(limits.max_mr) {}
  DeviceConfig cfg;
  Limits limits;
  SglPool sgl_pool;  // before every holder of an SglRef
  MrTable mrs;
  // Posts check their regions without the device lock: under this, shared. Whatever changes mrs
  // holds it exclusive, besides the device lock (under which the engine reads mrs as it is).
  mutable MrLock mrs_mu;
  std::unordered_map<std::uint32_t, Qp*> qps;
  DeviceCounters ctr{};
  Clock::time_point rx_now{};  // when the current receive round received its frames
};

// A wire: what the verbs and the engine need of it. iWARP over UDP is one; MPA/TCP and RoCEv2
// are siblings behind the same interface.
class Transport {
 public:
  virtual ~Transport() = default;

  // QP life.
  virtual std::unique_ptr<TransportQp> make_qp_state() = 0;
  virtual void reset(Qp& qp) = 0;    // back to idle: fresh sequence numbers
  virtual void destroy(Qp& qp) = 0;  // before the QP goes: an abrupt close if connected

  // Connection management.
  virtual Status connect(Qp& qp, NetAddr remote, std::uint64_t conn_qual, std::span<const std::uint8_t> pd,
                         std::chrono::milliseconds timeout) = 0;
  virtual Status listen(std::uint64_t conn_qual,
                        std::function<void(ConnRequest*, const ConnRequestInfo&)> on_request) = 0;
  virtual Status stop_listen(std::uint64_t conn_qual) = 0;
  virtual Status accept(ConnRequest* req, Qp& qp, std::span<const std::uint8_t> pd) = 0;
  virtual Status reject(ConnRequest* req, std::span<const std::uint8_t> pd) = 0;
  virtual Status disconnect(Qp& qp, bool graceful) = 0;

  // Send queue: puts a work request on the wire (behind everything before it).
  virtual void issue(Qp& qp, const WaitingWr& w) = 0;
  virtual void kick(Qp& qp) = 0;  // transmit what the window allows
  // Sends what it has batched, now: a completion is about to give the consumer back memory that
  // batched frames still read (push_wc calls it before a send-queue completion).
  virtual void drain_tx() {}
  // kick() for each of these QPs (the doorbell): a wire that sends in bursts sends them together.
  virtual void kick_all(std::span<Qp* const> qps) {
    for (Qp* q : qps) kick(*q);
  }
  // The position after everything queued so far (a bind's place in the stream).
  virtual Pos tx_pos(const Qp& qp) const = 0;
  // The peer has everything below this position.
  virtual Pos acked_pos(const Qp& qp) const = 0;
  // Every request posted before a graceful disconnect has been issued: the close follows them.
  virtual void send_queue_drained(Qp& qp) = 0;
  // What the transport holds of a QP's requests goes (core flushes the queues).
  virtual void flush(Qp& qp) = 0;
  // The connection ended (netdev hints).
  virtual void closed(Qp& qp) = 0;
  // The connection cannot go on: tell the peer as the wire says (Terminate, NAK), break it.
  // `bad`: the position of the frame that caused it (none: the one being handled, if any).
  virtual void fatal(Qp& qp, Error e, std::string reason, std::optional<Pos> bad = std::nullopt) = 0;

  // The device closes: every open connection is reset (repeated until the peer answers).
  virtual void close_all() = 0;
  virtual bool lingering() const = 0;
};

}  // namespace softrnic
