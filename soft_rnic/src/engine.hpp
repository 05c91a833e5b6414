// Internal objects of the soft RNIC engine. Everything here is guarded by the device lock.
#pragma once

#include <array>
#include <boost/container/small_vector.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "mr_table.hpp"
#include "rx_window.hpp"
#include "softrnic/ring.hpp"
#include "softrnic/rnic.hpp"

namespace softrnic {

using Clock = std::chrono::steady_clock;

inline constexpr std::uint32_t kNoWatermark = ~std::uint32_t{0};

struct Cq {
  std::mutex mu;  // guards q (poll_cq runs without the device lock)
  Ring<Wc> q;
  std::atomic<std::size_t> size{0};  // q.size(), readable without mu: an empty poll takes no lock
  std::uint32_t depth = 0;
  std::uint64_t overflows = 0;
  std::uint32_t users = 0;  // QPs attached
  std::function<void()> notify;
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
  std::uint32_t max_seq = 0;  // highest stream sequence number of its segments
  bool seq_seen = false;
  std::uint32_t inv_stag = 0;  // Send with Invalidate: the window to invalidate at completion
  Srq* srq = nullptr;          // where the buffer came from
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

// A posted request's scatter/gather list, shared by its send-queue entry and its frames until
// every one of them is done with it. Blocks come from the device's SglPool and are counted
// without atomics: the device lock guards every holder. Posting takes no allocation once the
// pool is warm (a shared_ptr<vector> cost two allocations, two frees and atomic counts per post).
class SglPool;
struct SglBlock {
  std::vector<Sge> sges;  // keeps its capacity when recycled
  std::uint32_t refs = 0;
  SglBlock* next_free = nullptr;
  SglPool* pool = nullptr;
};

class SglRef {
 public:
  SglRef() = default;
  explicit SglRef(SglBlock* b) : b_(b) {
    if (b_) ++b_->refs;
  }
  SglRef(const SglRef& o) : b_(o.b_) {
    if (b_) ++b_->refs;
  }
  SglRef(SglRef&& o) noexcept : b_(std::exchange(o.b_, nullptr)) {}
  SglRef& operator=(SglRef o) noexcept {
    std::swap(b_, o.b_);
    return *this;
  }
  inline ~SglRef();
  explicit operator bool() const { return b_ != nullptr; }
  const std::vector<Sge>& operator*() const { return b_->sges; }
  const std::vector<Sge>* operator->() const { return &b_->sges; }

 private:
  SglBlock* b_ = nullptr;
};

class SglPool {
 public:
  SglPool() = default;
  SglPool(const SglPool&) = delete;
  SglPool& operator=(const SglPool&) = delete;
  ~SglPool() {
    while (free_) delete std::exchange(free_, free_->next_free);
  }
  SglRef make(std::span<const Sge> sges) {
    SglBlock* b = free_;
    if (b) {
      free_ = b->next_free;
      --nfree_;
    } else {
      b = new SglBlock;
      b->pool = this;
    }
    b->sges.assign(sges.begin(), sges.end());
    return SglRef(b);
  }
  void put(SglBlock* b) {
    if (nfree_ >= kKeep) {
      delete b;
      return;
    }
    b->next_free = free_;
    free_ = b;
    ++nfree_;
  }

 private:
  static constexpr std::size_t kKeep = 4096;  // blocks kept for reuse; beyond, freed
  SglBlock* free_ = nullptr;
  std::size_t nfree_ = 0;
};

inline SglRef::~SglRef() {
  if (b_ && --b_->refs == 0) b_->pool->put(b_);
}

struct SendWqe {
  std::uint64_t wr_id = 0;
  WcOpcode opcode = WcOpcode::send;
  bool signaled = true;
  std::uint32_t end_seq = 0;  // sequence number after its last frame
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
};

// An RDMA Read this QP requested: where its response goes.
struct ReadOut {
  std::uint32_t sink_stag = 0;
  std::uint64_t sink_to = 0;
  std::uint32_t len = 0;
  std::uint64_t placed = 0;
  std::uint32_t max_seq = 0;
  bool seq_seen = false;
  SendWqe* wqe = nullptr;                    // its entry on sq (deque references are stable for push/pop at the ends)
  Access sink_access = Access::local_write;  // remote_write for a memory window
};

// A Read Request the peer made, waiting for stream order before it is answered.
struct ReadIn {
  std::uint32_t seq = 0;
  std::uint32_t msn = 0;
  std::uint32_t sink_stag = 0, src_stag = 0, size = 0;
  std::uint64_t sink_to = 0, src_to = 0;
};

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
  bool sacked = false;  // the peer has it (selective acknowledgement)
  int retries = 0;
};

enum class CmPhase : std::uint8_t { none, connecting, accepting, connected, disconnecting, closed };

struct Qp {
  std::uint32_t qpn = 0;
  QpInit init;
  QpState state = QpState::idle;
  CmPhase cm = CmPhase::none;
  NetAddr peer{};
  bool peer_hinted = false;  // the netdev was told of a connection to `peer` (peer_hint up)
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
  ConnRequest* req = nullptr;      // passive side: the request we accepted

  // Reliable sequenced stream, send side.
  std::uint32_t snd_nxt = 0;
  std::uint32_t snd_una = 0;
  Ring<SeqFrame> inflight;  // sent, not acknowledged
  Ring<SeqFrame> backlog;   // waiting for window
  std::size_t inflight_bytes = 0;
  bool local_error = false;  // a payload region vanished during transmission
  std::chrono::microseconds rto{0};
  double srtt_us = 0, rttvar_us = 0;  // RFC 6298 estimator; srtt 0 = no sample yet
  Clock::time_point rack_sent{};      // latest send time of a frame known delivered (RACK)
  std::chrono::microseconds rack_rtt{0};
  std::chrono::microseconds min_rtt{0};
  std::chrono::microseconds reo_wnd{0};  // widened after a spurious retransmission
  Clock::time_point rto_probe{};         // when the RTO last fired (the timer of the rest restarts there)
  std::uint32_t disc_seq = 0;            // sequence after our disconnect frame
  // After we sent a Terminate: acknowledge nothing from the frame that caused it on, so its
  // sender completes that request in error rather than with success.
  std::optional<std::uint32_t> ack_limit;

  // Receive side.
  RxWindow rxw;
  bool ack_needed = false;
  std::uint32_t rx_unacked = 0;  // in-order data frames received since our last ack went out
  Clock::time_point ack_due{};   // a delayed ack goes out then, unless data carries it first
  bool ack_now = false;          // a duplicate or a gap: the peer needs an ack at once
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

  // RDMAP/DDP.
  std::uint32_t send_msn = 1;               // next MSN on QN 0
  std::uint32_t read_msn = 1;               // next MSN on QN 1 (Read Requests we send)
  std::uint32_t peer_read_msn = 1;          // next Read Request MSN expected from the peer
  std::uint32_t ord = 0, ird = 0;           // negotiated at connect
  std::deque<ReadOut> reads_out;            // our Read Requests without their whole response yet
  std::deque<ReadIn> reads_in;              // the peer's, not yet in stream order
  std::deque<std::uint32_t> responses_end;  // end_seq of our responses not yet acknowledged (IRD)
  std::uint32_t recv_msn = 1;               // MSN of rq.front()
  std::deque<RecvWqe> rq;
  std::uint32_t rq_allocated = 0;  // entries of rq holding a buffer
  std::uint32_t soft_hw = kNoWatermark, hard_hw = kNoWatermark;
  bool soft_hw_armed = false;
  std::deque<SendWqe> sq;         // posted, not completed, in order
  std::deque<WaitingWr> sq_wait;  // the tail of sq that is not issued yet, in order

  QpCounters ctr{};
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

enum class ReqPhase : std::uint8_t { pending, accepted, rejected };

struct ConnRequest {
  NetAddr from{};
  std::uint32_t src_qpn = 0;
  std::uint32_t conn_id = 0;
  std::uint32_t init_seq = 0;
  std::uint64_t conn_qual = 0;
  std::uint32_t peer_ird = 0, peer_ord = 0;
  ReqPhase phase = ReqPhase::pending;
  std::vector<std::uint8_t> reply_private;
  Clock::time_point decided{};
};

}  // namespace softrnic
