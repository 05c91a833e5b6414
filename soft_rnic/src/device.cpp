// The soft RNIC device: object tables, the progress engine thread, connection management, the
// reliable sequenced stream of iWARP over UDP, and DDP/RDMAP send and receive.
#include <sodium.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "engine.hpp"
#include "softrnic/wire/crc32c.hpp"
#include "softrnic/wire/ddp.hpp"
#include "softrnic/wire/udp_frame.hpp"
#include "user_mem.hpp"

namespace softrnic {

namespace w = wire;

std::string_view to_string(Status s) {
  switch (s) {
    case Status::ok: return "ok";
    case Status::invalid_param: return "invalid parameter";
    case Status::invalid_state: return "invalid state";
    case Status::insufficient_resources: return "insufficient resources";
    case Status::protection_violation: return "protection violation";
    case Status::length_error: return "length error";
    case Status::not_found: return "not found";
    case Status::in_use: return "in use";
  }
  return "?";
}

std::string_view to_string(WcStatus s) {
  switch (s) {
    case WcStatus::success: return "success";
    case WcStatus::flushed: return "flushed";
    case WcStatus::local_length_error: return "local length error";
    case WcStatus::local_protection_error: return "local protection error";
    case WcStatus::remote_access_error: return "remote access error";
    case WcStatus::remote_operation_error: return "remote operation error";
    case WcStatus::transport_error: return "transport error";
  }
  return "?";
}

std::string_view to_string(CmEventType t) {
  switch (t) {
    case CmEventType::established: return "established";
    case CmEventType::rejected: return "rejected";
    case CmEventType::no_listener: return "no listener";
    case CmEventType::unreachable: return "unreachable";
    case CmEventType::host_unreachable: return "host unreachable";
    case CmEventType::disconnected: return "disconnected";
    case CmEventType::broken: return "broken";
  }
  return "?";
}

namespace {

bool seq_lt(std::uint32_t a, std::uint32_t b) {
  return static_cast<std::int32_t>(a - b) < 0;
}
bool seq_le(std::uint32_t a, std::uint32_t b) {
  return static_cast<std::int32_t>(a - b) <= 0;
}

constexpr std::chrono::milliseconds kCmRetry{100};
constexpr std::chrono::milliseconds kDisconnectTimeout{2000};
constexpr std::chrono::milliseconds kLinger{3000};
constexpr std::chrono::microseconds kMinReorderWindow{4000};
constexpr std::chrono::microseconds kMaxReorderWindow{100000};
constexpr std::chrono::milliseconds kResetRetry{20};
constexpr std::chrono::milliseconds kCloseDrain{1000};
constexpr std::chrono::seconds kReqLinger{10};
constexpr std::chrono::milliseconds kReqSweep{100};
constexpr std::chrono::microseconds kMaxRto{500000};
// How long the ack of a lone in-order frame waits for outgoing data to carry it.
constexpr std::chrono::microseconds kAckDelay{100};
// The longest the progress thread sleeps at once while a consumer drives the engine (busy polling
// or blocked in dat_evd_wait), and so the latest it takes over once the consumer stops: under the
// RTO floor, so a peer does not retransmit for it. Shorter, its wake-ups preempt the consumers
// that spin on two cores.
constexpr std::chrono::microseconds kConsumerPollGrace{2000};
// How often the connection and retransmission timers are scanned, at most.
constexpr std::chrono::microseconds kTimerScan{100};
// A consumer that spins calls progress() every microsecond or two: it reads the clock (for the
// timers, and to tell the progress thread to stand back) one call in this many.
constexpr std::uint32_t kClockEvery = 8;
constexpr std::size_t kRxBurst = 32;
constexpr std::ptrdiff_t kMaxPendingRequests = 1024;
// A passive side that accepted waits this long (at most) for the initiator's confirmation: a
// request from an address that never confirms must not hold the listener's QP for long.
constexpr std::chrono::milliseconds kHalfOpenTimeout{5000};
// Sequenced frames must acknowledge something between this far below what was acknowledged and
// what was sent (RFC 5961 section 5): a blind injector must guess the ack as well as the seq.
constexpr std::uint32_t kMaxAckLag = 1u << 20;
// Challenge ACKs for control frames not at the exact sequence: at most one per QP per this long.
constexpr std::chrono::microseconds kChallengeGap{1000};
// Cookies (stateless request validation) change key epoch this often; one epoch back is accepted.
constexpr std::int64_t kCookieEpochSeconds = 64;

// Randomness an off-path attacker cannot predict (initial sequence numbers, QP numbers,
// connection ids, nonces: RFC 6528): the kernel's generator through libsodium.
std::uint32_t random32() {
  return randombytes_random();
}

class DeviceImpl final : public Device {
 public:
  DeviceImpl(const DeviceConfig& cfg, std::unique_ptr<netdev::Netdev> nd)
      : cfg_(cfg), nd_(std::move(nd)), mrs_(limits_.max_mr) {
    if (sodium_init() < 0) std::abort();  // no randomness source: nothing here can be made safe
    randombytes_buf(cookie_key_.data(), cookie_key_.size());
    rx_bufs_.resize(kRxBurst * nd_->max_datagram());
    rx_frames_.resize(kRxBurst);
    for (std::size_t i = 0; i < kRxBurst; ++i)
      rx_frames_[i] = {{}, rx_bufs_.data() + i * nd_->max_datagram(), nd_->max_datagram(), 0};
    // Keep what one QP has in flight well inside the receiver's buffer: a burst that overflows
    // it is lost whole.
    window_bytes_ = std::max<std::size_t>(nd_->max_datagram(), std::min(cfg_.window_bytes, nd_->rx_buffer_bytes() / 4));
    thread_ = std::thread([this] { run(); });
  }

  ~DeviceImpl() override {
    // Connections still open are reset, and the resets repeated until the peers answer (or a
    // bound passes): a peer must not wait forever for a close this process can no longer send.
    {
      std::unique_lock lk(mu_);
      for (auto& [n, qp] : qps_)
        if (qp->cm == CmPhase::connected || qp->cm == CmPhase::disconnecting || qp->cm == CmPhase::accepting)
          start_linger(*qp);
    }
    const auto until = Clock::now() + kCloseDrain;
    while (Clock::now() < until) {
      {
        std::lock_guard lk(mu_);
        if (lingers_.empty()) break;
      }
      nd_->wake();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    stop_ = true;
    nd_->wake();
    thread_.join();
    for (auto& [n, qp] : qps_) delete qp;
    for (auto* r : reqs_) delete r;
    mrs_.clear();
    for (Cq* cq : cqs_) delete cq;
    for (Srq* srq : srqs_) delete srq;
    for (Pd* pd : pd_set_) delete pd;
  }

  NetAddr address() const override { return nd_->local_addr(); }
  const Limits& limits() const override { return limits_; }
  DeviceCounters counters() const override {
    std::lock_guard lk(mu_);
    DeviceCounters c = ctr_;
    const auto s = nd_->stats();
    c.tx_frames = s.tx_frames;
    c.rx_frames = s.rx_frames;
    return c;
  }

  // ---- PD / MR ----
  Pd* alloc_pd() override {
    std::lock_guard lk(mu_);
    if (pd_set_.size() >= limits_.max_pd) return nullptr;
    Pd* pd = new Pd{next_pd_++, 0};
    pd_set_.insert(pd);
    return pd;
  }
  Status dealloc_pd(Pd* pd) override {
    std::lock_guard lk(mu_);
    if (!pd || !pd_set_.count(pd)) return Status::invalid_param;
    if (pd->users) return Status::in_use;
    pd_set_.erase(pd);
    delete pd;
    return Status::ok;
  }
  Status reg_mr(Pd* pd, void* addr, std::uint64_t length, Access access, Mr*& out) override {
    // The range must be there with the access granted (as a kernel RNIC's pinning proves it).
    if (length > 0 && length <= limits_.max_mr_size) {
      const bool write = has(access, Access::local_write) || has(access, Access::remote_write);
      if (const Status st = check_mapping(reinterpret_cast<std::uintptr_t>(addr), length, write); st != Status::ok)
        return st;
    }
    std::lock_guard lk(mu_);
    if (length > limits_.max_mr_size) return Status::length_error;
    return mrs_.reg(pd, reinterpret_cast<std::uintptr_t>(addr), length, access, out);
  }
  Status dereg_mr(Mr* mr) override {
    std::lock_guard lk(mu_);
    return mr ? mrs_.dereg(mr) : Status::invalid_param;
  }
  Status alloc_mw(Pd* pd, Mr*& out) override {
    std::lock_guard lk(mu_);
    if (!pd || !pd_set_.count(pd)) return Status::invalid_param;
    return mrs_.alloc_window(pd, out);
  }

  Status bind_mw(Qp* qp, Mr* mw, Mr* mr, std::uint64_t addr, std::uint64_t length, Access access, std::uint64_t wr_id,
                 bool signaled) override {
    std::lock_guard lk(mu_);
    if (qp->state != QpState::rts || qp->cm != CmPhase::connected) return Status::invalid_state;
    if (mw->pd != qp->init.pd) return Status::protection_violation;
    if (qp->sq.size() >= qp->init.max_send_wr) return Status::insufficient_resources;
    if (const Status s = mrs_.bind_window(mw, mr, addr, length, access); s != Status::ok) return s;
    qp->sq.push_back(SendWqe{wr_id, WcOpcode::bind, signaled, qp->snd_nxt, 0, SglRef{}});
    complete_sends(*qp);
    return Status::ok;
  }

  MrInfo query_mr(const Mr* mr) const override { return MrInfo{mr->stag, mr->addr, mr->length, mr->access}; }

  // ---- CQ ----
  Cq* create_cq(std::uint32_t depth, std::function<void()> notify) override {
    if (depth == 0 || depth > limits_.max_cqe) return nullptr;
    auto* cq = new Cq;
    cq->depth = depth;
    cq->notify = std::move(notify);
    std::lock_guard lk(mu_);
    cqs_.insert(cq);
    return cq;
  }
  Status destroy_cq(Cq* cq) override {
    std::lock_guard lk(mu_);
    if (!cq || !cqs_.count(cq)) return Status::invalid_param;
    if (cq->users) return Status::in_use;
    cqs_.erase(cq);
    delete cq;
    return Status::ok;
  }
  std::size_t poll_cq(Cq* cq, std::span<Wc> out) override {
    // A consumer that spins polls an empty CQ most of the time: no lock for that. A completion
    // pushed concurrently is seen on the next poll (size is stored after the push, under mu).
    if (cq->size.load(std::memory_order_acquire) == 0) return 0;
    std::lock_guard lk(cq->mu);
    std::size_t n = 0;
    while (n < out.size() && !cq->q.empty()) {
      out[n++] = cq->q.front();
      cq->q.pop_front();
    }
    cq->size.store(cq->q.size(), std::memory_order_release);
    return n;
  }
  bool cq_empty(const Cq* cq) const override { return cq->size.load(std::memory_order_acquire) == 0; }
  std::size_t cq_count(Cq* cq) override {
    std::lock_guard lk(cq->mu);
    return cq->q.size();
  }

  // ---- QP ----
  Status create_qp(const QpInit& init, Qp*& out) override {
    std::lock_guard lk(mu_);
    if (!init.pd || !init.send_cq || !init.recv_cq) return Status::invalid_param;
    if (init.max_send_wr > limits_.max_qp_wr || init.max_recv_wr > limits_.max_qp_wr || init.max_sge > limits_.max_sge)
      return Status::invalid_param;
    if (qps_.size() >= limits_.max_qp) return Status::insufficient_resources;
    if (init.ord > limits_.max_rd || init.ird > limits_.max_rd) return Status::invalid_param;
    auto* qp = new Qp;
    qp->init = init;
    qp->ord = init.ord;
    qp->ird = init.ird;
    do {
      qp->qpn = random32() & 0xFFFFFF;  // unpredictable: a blind injector must guess both QPNs
    } while (qp->qpn == 0 || qps_.count(qp->qpn));
    qp->snd_nxt = qp->snd_una = random32();
    qp->rto = cfg_.initial_rto;
    init.pd->users++;
    init.send_cq->users++;
    init.recv_cq->users++;
    if (init.srq) init.srq->users++;
    qps_[qp->qpn] = qp;
    out = qp;
    return Status::ok;
  }

  Status destroy_qp(Qp* qp) override {
    std::lock_guard lk(mu_);
    if (!qp || !qps_.count(qp->qpn)) return Status::invalid_param;
    if (qp->cm == CmPhase::connected || qp->cm == CmPhase::disconnecting || qp->cm == CmPhase::accepting)
      start_linger(*qp);
    if (qp->req) qp->req->phase = ReqPhase::rejected;
    // Its work requests go with it (no completions for a QP that no longer exists).
    for (auto& r : qp->rq) {
      if (r.allocated && r.srq) {
        r.srq->outstanding--;
        r.srq->allocated--;
      }
    }
    if (qp->init.srq) qp->init.srq->users--;
    qp->init.pd->users--;
    qp->init.send_cq->users--;
    qp->init.recv_cq->users--;
    hint_peer(*qp, false);
    qps_.erase(qp->qpn);
    std::erase(ack_list_, qp);
    std::erase(delayed_acks_, qp);
    delete qp;
    return Status::ok;
  }

  QpState qp_state(const Qp* qp) const override {
    std::lock_guard lk(mu_);
    return qp->state;
  }
  QpCounters qp_counters(const Qp* qp) const override {
    std::lock_guard lk(mu_);
    return qp->ctr;
  }
  std::pair<bool, bool> qp_idle(const Qp* qp) const override {
    std::lock_guard lk(mu_);
    return {qp->rq_allocated == 0, qp->sq.empty()};
  }

  Status reset_qp(Qp* qp) override {
    std::lock_guard lk(mu_);
    if (qp->cm != CmPhase::none && qp->cm != CmPhase::closed) return Status::invalid_state;
    reset_qp(*qp);
    return Status::ok;
  }

  NetAddr qp_peer(const Qp* qp) const override {
    std::lock_guard lk(mu_);
    return qp->peer;
  }

  Status modify_qp(Qp* qp, QpState to) override {
    std::lock_guard lk(mu_);
    if (!qp_transition_allowed(qp->state, to)) return Status::invalid_state;
    if (to == QpState::error) {
      close_qp(*qp, std::nullopt, "");
      return Status::ok;
    }
    if (to == QpState::idle) {  // reset: ready for a new connection
      reset_qp(*qp);
      return Status::ok;
    }
    qp->state = to;
    return Status::ok;
  }

  // ---- Connection management ----
  Status connect(Qp* qp, NetAddr remote, std::uint64_t conn_qual, std::span<const std::uint8_t> pd,
                 std::chrono::milliseconds timeout) override {
    std::lock_guard lk(mu_);
    if (pd.size() > limits_.max_private_data) return Status::length_error;
    if (qp->state != QpState::idle || qp->cm != CmPhase::none) return Status::invalid_state;
    qp->peer = remote;
    qp->conn_qual = conn_qual;
    qp->conn_id = random32();
    qp->cm_private.assign(pd.begin(), pd.end());
    qp->cm = CmPhase::connecting;
    qp->cm_cookie = 0;
    qp->cm_answered = false;
    const auto now = Clock::now();
    qp->cm_deadline = now + (timeout.count() > 0 ? timeout : cfg_.connect_timeout);
    qp->cm_started = now;
    send_cm(*qp, w::CmOp::connect_request, 0);
    qp->cm_next_tx = now + kCmRetry;
    nd_->wake();
    return Status::ok;
  }

  Status listen(std::uint64_t conn_qual,
                std::function<void(ConnRequest*, const ConnRequestInfo&)> on_request) override {
    std::lock_guard lk(mu_);
    if (listeners_.count(conn_qual)) return Status::in_use;
    listeners_[conn_qual] = std::move(on_request);
    return Status::ok;
  }
  Status stop_listen(std::uint64_t conn_qual) override {
    std::lock_guard lk(mu_);
    return listeners_.erase(conn_qual) ? Status::ok : Status::not_found;
  }

  Status accept(ConnRequest* req, Qp* qp, std::span<const std::uint8_t> pd) override {
    std::lock_guard lk(mu_);
    if (!req || !known_req(req) || req->phase != ReqPhase::pending) return Status::invalid_state;
    if (pd.size() > limits_.max_private_data) return Status::length_error;
    if (qp->state != QpState::idle || qp->cm != CmPhase::none) return Status::invalid_state;
    req->phase = ReqPhase::accepted;
    req->decided = Clock::now();
    qp->peer = req->from;
    qp->peer_qpn = req->src_qpn;
    qp->conn_id = req->conn_id;
    qp->conn_qual = req->conn_qual;
    qp->rxw.reset(req->init_seq);
    qp->ord = std::min(qp->init.ord, req->peer_ird);
    qp->ird = qp->init.ird;
    qp->cm_private.assign(pd.begin(), pd.end());
    qp->cm = CmPhase::accepting;
    qp->state = QpState::rts;
    qp->req = req;
    const auto now = Clock::now();
    qp->cm_deadline = now + std::min<std::chrono::milliseconds>(cfg_.connect_timeout, kHalfOpenTimeout);
    send_cm(*qp, w::CmOp::connect_reply, 0);
    qp->cm_next_tx = now + kCmRetry;
    nd_->wake();
    return Status::ok;
  }

  Status reject(ConnRequest* req, std::span<const std::uint8_t> pd) override {
    std::lock_guard lk(mu_);
    if (!req || !known_req(req) || req->phase != ReqPhase::pending) return Status::invalid_state;
    if (pd.size() > limits_.max_private_data) return Status::length_error;
    req->phase = ReqPhase::rejected;
    req->decided = Clock::now();
    req->reply_private.assign(pd.begin(), pd.end());
    send_reject(*req, false);
    return Status::ok;
  }

  Status disconnect(Qp* qp, bool graceful) override {
    std::lock_guard lk(mu_);
    switch (qp->cm) {
      case CmPhase::connecting: close_qp(*qp, CmEventType::disconnected, "connect cancelled"); return Status::ok;
      case CmPhase::accepting:
      case CmPhase::connected: break;
      case CmPhase::disconnecting:
        if (graceful) return Status::ok;
        break;
      default: return Status::invalid_state;
    }
    if (!graceful || qp->state != QpState::rts) {
      start_linger(*qp);
      close_qp(*qp, CmEventType::disconnected, "");
      return Status::ok;
    }
    qp->cm = CmPhase::disconnecting;
    qp->cm_deadline = Clock::now() + kDisconnectTimeout;
    // Requests still waiting for RDMA Reads go out first; the disconnect follows them.
    if (qp->sq_wait.empty()) send_disconnect(*qp);
    nd_->wake();
    return Status::ok;
  }

 private:
  // Graceful close: the disconnect frame goes behind everything already in the stream.
  void send_disconnect(Qp& qp) {
    qp.state = QpState::closing;
    const w::StreamCtrlWire c{w::Be32(static_cast<std::uint32_t>(w::StreamCtrlOp::disconnect))};
    enqueue_seq(qp, w::FrameType::stream_ctrl, {{reinterpret_cast<const std::uint8_t*>(&c), sizeof c}});
    qp.disc_seq = qp.snd_nxt;
    pump_tx(qp);
  }

 public:
  // ---- Data path ----
  Status post_recv(Qp* qp, const RecvWr& wr) override {
    std::lock_guard lk(mu_);
    if (qp->init.srq) return Status::invalid_state;  // its receives come from the SRQ
    if (qp->state != QpState::idle && qp->state != QpState::rts) return Status::invalid_state;
    if (wr.sgl.size() > qp->init.max_sge) return Status::invalid_param;
    if (qp->rq.size() >= qp->init.max_recv_wr) return Status::insufficient_resources;
    RecvWqe r;
    if (const Status st = make_recv(qp->init.pd, wr, r); st != Status::ok) return st;
    qp->rq.push_back(std::move(r));
    qp->rq_allocated++;
    check_watermarks(*qp);
    return Status::ok;
  }

  // ---- SRQ ----
  Status create_srq(const SrqInit& init, Srq*& out) override {
    std::lock_guard lk(mu_);
    if (!init.pd || !pd_set_.count(init.pd) || init.max_wr == 0 || init.max_wr > limits_.max_qp_wr ||
        init.max_sge == 0 || init.max_sge > limits_.max_sge)
      return Status::invalid_param;
    auto* srq = new Srq;
    srq->pd = init.pd;
    srq->max_wr = init.max_wr;
    srq->max_sge = init.max_sge;
    srq->on_low_watermark = init.on_low_watermark;
    init.pd->users++;
    srqs_.insert(srq);
    out = srq;
    return Status::ok;
  }

  Status destroy_srq(Srq* srq) override {
    std::lock_guard lk(mu_);
    if (!srq || !srqs_.count(srq)) return Status::invalid_param;
    if (srq->users) return Status::in_use;
    srq->pd->users--;
    srqs_.erase(srq);
    delete srq;
    return Status::ok;
  }

  Status post_srq_recv(Srq* srq, const RecvWr& wr) override {
    std::lock_guard lk(mu_);
    if (wr.sgl.size() > srq->max_sge) return Status::invalid_param;
    if (srq->outstanding >= srq->max_wr) return Status::insufficient_resources;
    RecvWqe r;
    if (const Status st = make_recv(srq->pd, wr, r); st != Status::ok) return st;
    r.srq = srq;
    srq->q.push_back(std::move(r));
    srq->outstanding++;
    return Status::ok;
  }

  SrqCounts srq_counts(const Srq* srq) const override {
    std::lock_guard lk(mu_);
    return SrqCounts{static_cast<std::uint32_t>(srq->q.size()),
                     srq->outstanding,
                     srq->allocated,
                     srq->completed,
                     srq->max_wr,
                     srq->low_watermark};
  }

  Status resize_srq(Srq* srq, std::uint32_t max_wr) override {
    std::lock_guard lk(mu_);
    if (max_wr == 0 || max_wr > limits_.max_qp_wr) return Status::invalid_param;
    if (max_wr < srq->outstanding) return Status::invalid_state;  // cannot drop posted buffers
    srq->max_wr = max_wr;
    return Status::ok;
  }

  Status set_srq_low_watermark(Srq* srq, std::uint32_t lw) override {
    std::lock_guard lk(mu_);
    if (lw > srq->max_wr) return Status::invalid_param;
    srq->low_watermark = lw;
    srq->lw_armed = true;
    check_low_watermark(*srq);
    return Status::ok;
  }

  void srq_reaped(Srq* srq, std::uint32_t n) override {
    std::lock_guard lk(mu_);
    if (!srqs_.count(srq)) return;
    n = std::min(n, srq->completed);
    srq->completed -= n;
    srq->outstanding -= n;
  }

  RecvCounts recv_counts(const Qp* qp) const override {
    std::lock_guard lk(mu_);  // one snapshot: count and span under the same lock
    return RecvCounts{qp->rq_allocated, static_cast<std::uint32_t>(qp->rq.size())};
  }

  Status set_recv_watermarks(Qp* qp, std::uint32_t soft, std::uint32_t hard) override {
    std::lock_guard lk(mu_);
    qp->soft_hw = soft;
    qp->hard_hw = hard;
    qp->soft_hw_armed = soft != kNoWatermark;
    check_watermarks(*qp);
    return Status::ok;
  }

  Status post_send(Qp* qp, const SendWr& wr) override {
    std::lock_guard lk(mu_);
    if (qp->state != QpState::rts || qp->cm != CmPhase::connected) return Status::invalid_state;
    if (wr.sgl.size() > qp->init.max_sge) return Status::invalid_param;
    if (qp->sq.size() >= qp->init.max_send_wr) return Status::insufficient_resources;
    std::uint64_t total = 0;
    for (const Sge& s : wr.sgl) {
      if (s.length == 0) continue;
      // (a window, the sink of a read into an RMR, serves remote access only)
      if (mrs_.check(s.lkey, qp->init.pd, s.addr, s.length, wr.sink_is_window ? Access::remote_write : Access::none) !=
          MrCheck::ok)
        return Status::protection_violation;
      total += s.length;
    }
    if (total > limits_.max_msg_size) return Status::length_error;
    const bool read = wr.opcode == SendOpcode::rdma_read;
    const Access sink_access = wr.sink_is_window ? Access::remote_write : Access::local_write;
    if (read) {
      if (wr.sgl.size() > 1) return Status::invalid_param;
      if (qp->ord == 0) return Status::insufficient_resources;  // the peer takes no RDMA Read at all
      if (!wr.sgl.empty() && wr.sgl[0].length &&
          mrs_.check(wr.sgl[0].lkey, qp->init.pd, wr.sgl[0].addr, wr.sgl[0].length, sink_access) != MrCheck::ok)
        return Status::protection_violation;
    } else if (wr.sink_is_window) {
      return Status::invalid_param;
    }
    const WcOpcode wc_op = read                                  ? WcOpcode::rdma_read
                           : wr.opcode == SendOpcode::rdma_write ? WcOpcode::rdma_write
                                                                 : WcOpcode::send;
    SendWqe& wqe = qp->sq.emplace_back(
        SendWqe{wr.wr_id, wc_op, wr.signaled, 0, static_cast<std::uint32_t>(total), SglRef{}, read, false, false});
    WaitingWr w{
        wr.opcode, sgl_pool_.make(wr.sgl), wr.rkey, wr.remote_addr, wr.invalidate_stag, total, wr.fence, sink_access,
        &wqe};
    if (qp->sq_wait.empty() && can_issue(*qp, w)) {
      issue(*qp, w);
      pump_tx(*qp);
    } else {
      qp->sq_wait.push_back(std::move(w));  // issued when the reads ahead of it complete
    }
    return Status::ok;
  }

 private:
  // Whether a work request may go on the wire now: an RDMA Read needs a free ORD slot, a fenced
  // request needs every earlier RDMA Read completed.
  static bool can_issue(const Qp& qp, const WaitingWr& w) {
    if (w.opcode == SendOpcode::rdma_read && qp.reads_out.size() >= qp.ord) return false;
    if (w.fence && !qp.reads_out.empty()) return false;
    return true;
  }

  // Issues the waiting requests at the head of sq_wait that may go now, in order.
  void issue_waiting(Qp& qp) {
    bool any = false;
    while (!qp.sq_wait.empty() && qp.state == QpState::rts && can_issue(qp, qp.sq_wait.front())) {
      issue(qp, qp.sq_wait.front());
      qp.sq_wait.pop_front();
      any = true;
    }
    if (any) pump_tx(qp);
    if (qp.sq_wait.empty() && qp.cm == CmPhase::disconnecting && qp.state == QpState::rts) send_disconnect(qp);
  }

  // Puts a Send, Send with Invalidate or RDMA Write into the stream as DDP segments, or an RDMA
  // Read as its Read Request (QN 1, its own MSN, naming our sink and the peer's source; it
  // completes when the whole Read Response has arrived in stream order).
  void issue(Qp& qp, const WaitingWr& w) {
    SendWqe& wqe = *w.wqe;
    wqe.issued = true;
    wqe.sgl = w.sgl;
    const std::uint64_t total = w.total;
    if (w.opcode == SendOpcode::rdma_read) {
      const Sge sink = w.sgl->empty() ? Sge{} : (*w.sgl)[0];
      std::uint8_t h[sizeof(w::DdpUntaggedHdr)];
      const std::size_t hl =
          w::encode_untagged(h, w::RdmapOpcode::read_request, true, w::kQnReadRequest, qp.read_msn++, 0);
      const w::ReadRequestHdr rr{w::Be32(sink.lkey), w::Be64(sink.addr), w::Be32(static_cast<std::uint32_t>(total)),
                                 w::Be32(w.rkey), w::Be64(w.remote_addr)};
      enqueue_seq(qp, w::FrameType::ddp,
                  {std::span<const std::uint8_t>(h, hl), {reinterpret_cast<const std::uint8_t*>(&rr), sizeof rr}});
      wqe.end_seq = qp.snd_nxt;
      qp.reads_out.push_back(
          ReadOut{sink.lkey, sink.addr, static_cast<std::uint32_t>(total), 0, 0, false, &wqe, w.sink_access});
      return;
    }
    const bool write = w.opcode == SendOpcode::rdma_write;
    const auto op = write                                     ? w::RdmapOpcode::rdma_write
                    : w.opcode == SendOpcode::send_solicited  ? w::RdmapOpcode::send_se
                    : w.opcode == SendOpcode::send_invalidate ? w::RdmapOpcode::send_invalidate
                                                              : w::RdmapOpcode::send;
    const std::size_t hdr = write ? sizeof(w::DdpTaggedHdr) : sizeof(w::DdpUntaggedHdr);
    const std::size_t mss = nd_->max_datagram() - w::kFrameOverhead - hdr;
    const std::uint32_t msn = write ? 0 : qp.send_msn++;
    std::uint64_t off = 0;
    do {
      const auto len = static_cast<std::uint32_t>(std::min<std::uint64_t>(mss, total - off));
      const bool last = off + len == total;
      std::uint8_t h[sizeof(w::DdpUntaggedHdr)];
      const std::size_t hl =
          write ? w::encode_tagged(h, op, last, w.rkey, w.remote_addr + off)
                : w::encode_untagged(h, op, last, w::kQnSend, msn, static_cast<std::uint32_t>(off), w.invalidate_stag);
      SeqFrame& f = enqueue_seq(qp, w::FrameType::ddp, {std::span<const std::uint8_t>(h, hl)});
      if (len > 0) {
        f.sgl = w.sgl;
        f.sgl_off = off;
        f.len = len;
      }
      off += len;
    } while (off < total);
    wqe.end_seq = qp.snd_nxt;
  }

  // Completes send-queue entries in posting order: a Send or Write when the peer acknowledged its
  // last frame, an RDMA Read when its whole response has arrived.
  void complete_sends(Qp& qp) {
    while (!qp.sq.empty()) {
      const SendWqe& s = qp.sq.front();
      if (!s.issued || (s.is_read ? !s.read_done : !seq_le(s.end_seq, qp.snd_una))) break;
      if (s.signaled)
        push_wc(qp.init.send_cq, Wc{s.wr_id, s.opcode, WcStatus::success, s.byte_len, &qp, qp.init.context});
      qp.sq.pop_front();
    }
  }

 public:
 private:
  // ---- helpers: receive buffers ----
  Status make_recv(Pd* pd, const RecvWr& wr, RecvWqe& r) {
    r.wr_id = wr.wr_id;
    for (const Sge& g : wr.sgl) {
      if (g.length == 0) continue;
      if (mrs_.check(g.lkey, pd, g.addr, g.length, Access::local_write) != MrCheck::ok)
        return Status::protection_violation;
      r.sgl.push_back(g);
      r.capacity += g.length;
    }
    return r.capacity > limits_.max_msg_size ? Status::length_error : Status::ok;
  }

  static void srq_completed(Srq* srq) {
    if (!srq) return;
    srq->allocated--;
    srq->completed++;
  }

  void check_low_watermark(Srq& srq) {
    if (srq.lw_armed && srq.q.size() < srq.low_watermark) {
      srq.lw_armed = false;
      if (srq.on_low_watermark) srq.on_low_watermark(&srq);
    }
  }

  // Soft: one notification per arming. Hard: the connection breaks. False when broken.
  bool check_watermarks(Qp& qp) {
    if (qp.soft_hw_armed && qp.rq_allocated > qp.soft_hw) {
      qp.soft_hw_armed = false;
      if (qp.init.on_soft_watermark) qp.init.on_soft_watermark(&qp);
    }
    if (qp.hard_hw != kNoWatermark && qp.rq_allocated > qp.hard_hw && qp.state == QpState::rts) {
      terminate(qp, w::TermLayer::rdmap, static_cast<std::uint8_t>(w::RdmapEtype::local_catastrophic),
                static_cast<std::uint8_t>(w::RdmapError::catastrophic_local),
                "more receive buffers allocated than the hard high watermark");
      return false;
    }
    return true;
  }

  // Gives rq[idx] a buffer from the SRQ (and, under gap fill, every entry below it).
  bool allocate_from_srq(Qp& qp, std::size_t idx) {
    Srq& srq = *qp.init.srq;
    const AllocPolicy policy = qp.init.alloc_policy.value_or(cfg_.alloc_policy);
    const std::size_t first = policy == AllocPolicy::gap_fill ? 0 : idx;
    for (std::size_t i = first; i <= idx; ++i) {
      RecvWqe& slot = qp.rq[i];
      if (slot.allocated) continue;
      if (srq.q.empty()) return false;
      slot = std::move(srq.q.front());
      srq.q.pop_front();
      slot.allocated = true;
      qp.rq_allocated++;
      srq.allocated++;
    }
    check_low_watermark(srq);
    return check_watermarks(qp);
  }

  // Completes receives in MSN order: the front buffer when its message is whole and every
  // earlier frame of the stream (RDMA Writes before the Send included) has arrived.
  void complete_receives(Qp& qp) {
    while (!qp.rq.empty()) {
      const RecvWqe& f = qp.rq.front();
      if (!f.allocated || !f.done || !seq_lt(f.max_seq, qp.rxw.next())) break;
      // Send with Invalidate: the window goes before the receive completes.
      if (f.inv_stag && !mrs_.invalidate(f.inv_stag, qp.init.pd)) {
        terminate(qp, w::TermLayer::rdmap, static_cast<std::uint8_t>(w::RdmapEtype::remote_operation),
                  static_cast<std::uint8_t>(w::RdmapError::stag_cannot_invalidate),
                  "Send with Invalidate names no bound window of this protection zone", f.max_seq);
        return;
      }
      srq_completed(f.srq);
      push_wc(qp.init.recv_cq, Wc{f.wr_id, WcOpcode::recv, WcStatus::success, static_cast<std::uint32_t>(f.msg_len),
                                  &qp, qp.init.context, f.srq, f.inv_stag});
      qp.rq.pop_front();
      qp.rq_allocated--;
      qp.recv_msn++;
    }
  }

  // ---- helpers: frames ----
  // Appends a sequenced frame to the backlog. `parts` are the bytes after the frame header.
  SeqFrame& enqueue_seq(Qp& qp, w::FrameType type, std::initializer_list<std::span<const std::uint8_t>> parts) {
    SeqFrame& f = qp.backlog.emplace_back();
    f.seq = qp.snd_nxt++;
    w::write_frame_header(f.head, {type, 0, qp.peer_qpn, qp.qpn, f.seq, 0});
    std::size_t n = w::kFrameHeaderLen;
    for (auto p : parts) {
      std::memcpy(f.head.data() + n, p.data(), p.size());
      n += p.size();
    }
    f.head_len = static_cast<std::uint8_t>(n);
    return f;
  }

  // The payload of `f` as one span: straight from registered memory when one SGE holds it,
  // else gathered into tx_gather_.
  // Every region is checked again at each read: a consumer may free an LMR a posted work request
  // still names, and then nothing may be read from it. nullopt when a region is gone.
  std::optional<std::span<const std::uint8_t>> payload_of(const Qp& qp, const SeqFrame& f) {
    if (f.len == 0) return std::span<const std::uint8_t>{};
    std::uint64_t off = f.sgl_off;
    std::size_t left = f.len;
    tx_gather_.clear();
    for (const Sge& g : *f.sgl) {
      if (left == 0) break;
      if (off >= g.length) {
        off -= g.length;
        continue;
      }
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(g.length - off, left));
      if (mrs_.check(g.lkey, qp.init.pd, g.addr + off, n, Access::none) != MrCheck::ok) return std::nullopt;
      const auto* src = reinterpret_cast<const std::uint8_t*>(static_cast<std::uintptr_t>(g.addr + off));
      if (n == f.len) return std::span<const std::uint8_t>{src, n};
      const std::size_t at = tx_gather_.size();
      tx_gather_.resize(at + n);
      if (!guarded_copy(tx_gather_.data() + at, src, n)) {
        ctr_.memory_faults++;
        return std::nullopt;
      }
      left -= n;
      off = 0;
    }
    return std::span<const std::uint8_t>{tx_gather_};
  }

  // What our frames acknowledge: the cumulative receive point, held below the frame that made us
  // send a Terminate.
  static std::uint32_t ack_value(const Qp& qp) {
    const std::uint32_t next = qp.rxw.next();
    return qp.ack_limit && seq_lt(*qp.ack_limit, next) ? *qp.ack_limit : next;
  }

  void transmit(Qp& qp, SeqFrame& f) {
    w::FrameHdrWire h;
    std::memcpy(&h, f.head.data(), sizeof h);
    h.flags = w::kFlagAckValid;
    h.ack = w::Be32(ack_value(qp));
    std::memcpy(f.head.data(), &h, sizeof h);
    const std::span<const std::uint8_t> head{f.head.data(), f.head_len};
    const auto payload = payload_of(qp, f);
    if (!payload) {
      qp.local_error = true;  // the caller breaks the connection after its loop
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
      ctr_.memory_faults++;
      qp.local_error = true;
      return;
    }
    const auto tail = w::frame_trailer(crc.value());
    const netdev::TxFrame tf{qp.peer, head, body, tail};
    nd_->tx_burst({&tf, 1});
    qp.ctr.tx_frames++;
    if (!qp.rxw.has_gap()) acked(qp);  // the piggybacked ack says it all
  }

  void send_raw(NetAddr to, std::span<const std::uint8_t> d) {
    const netdev::TxFrame tf{to, d, {}, {}};
    nd_->tx_burst({&tf, 1});
  }

  void pump_tx(Qp& qp) {
    while (!qp.backlog.empty() && qp.inflight.size() < cfg_.window &&
           (qp.inflight.empty() || qp.inflight_bytes + qp.backlog.front().len <= window_bytes_)) {
      SeqFrame& f = qp.inflight.emplace_back(std::move(qp.backlog.front()));
      qp.backlog.pop_front();
      qp.inflight_bytes += f.len;
      f.sent = Clock::now();
      transmit(qp, f);
      if (qp.local_error) break;
    }
    if (qp.local_error) local_protection_failure(qp);
  }

  void local_protection_failure(Qp& qp) {
    qp.local_error = false;
    terminate(qp, w::TermLayer::rdmap, static_cast<std::uint8_t>(w::RdmapEtype::local_catastrophic),
              static_cast<std::uint8_t>(w::RdmapError::catastrophic_local),
              "a posted work request names memory whose region was freed");
  }

  // RFC 6298: SRTT, RTTVAR and RTO from one sample.
  void rtt_sample(Qp& qp, std::chrono::microseconds sample) {
    if (qp.min_rtt.count() == 0 || sample < qp.min_rtt) qp.min_rtt = std::max(sample, std::chrono::microseconds(1));
    const double r = static_cast<double>(sample.count());
    if (qp.srtt_us == 0) {
      qp.srtt_us = r;
      qp.rttvar_us = r / 2;
    } else {
      qp.rttvar_us = 0.75 * qp.rttvar_us + 0.25 * std::abs(qp.srtt_us - r);
      qp.srtt_us = 0.875 * qp.srtt_us + 0.125 * r;
    }
    const auto rto = std::chrono::microseconds(static_cast<std::int64_t>(qp.srtt_us + 4 * qp.rttvar_us));
    qp.rto = std::clamp(rto, cfg_.min_rto, kMaxRto);
  }

  void acked(Qp& qp) {
    qp.ack_needed = false;
    qp.ack_now = false;
    qp.rx_unacked = 0;
    qp.ack_due = {};
  }

  // flags: kFlagProbe (a keepalive probe) or kFlagProbeReply (the answer to one), with seq the nonce.
  void send_ack(Qp& qp, std::uint8_t flags = 0, std::uint32_t seq = 0) {
    std::uint8_t buf[w::kFrameOverhead + 4 + 8 * w::kMaxSackBlocks];
    w::write_frame_header(buf, {w::FrameType::ack, static_cast<std::uint8_t>(w::kFlagAckValid | flags), qp.peer_qpn,
                                qp.qpn, seq, ack_value(qp)});
    std::array<SackBlock, w::kMaxSackBlocks> blocks;
    const std::size_t nb = qp.ack_limit ? 0 : qp.rxw.sack_blocks(blocks);
    const std::size_t body =
        nb ? w::encode_sack({buf + w::kFrameHeaderLen, sizeof buf - w::kFrameHeaderLen}, {blocks.data(), nb}) : 0;
    send_raw(qp.peer, {buf, w::seal_frame(buf, w::kFrameHeaderLen + body)});
    acked(qp);
  }

  // hdr_seq: the header's seq field (a request's cookie echo, a cookie).
  void send_cm_raw(NetAddr to, std::uint32_t dst_qpn, std::uint32_t src_qpn, w::CmOp op, std::uint8_t rsv,
                   std::uint64_t conn_qual, std::uint32_t conn_id, std::uint32_t init_seq,
                   std::span<const std::uint8_t> pd, std::uint32_t ird = 0, std::uint32_t ord = 0,
                   std::uint32_t hdr_seq = 0) {
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

  void send_cm(Qp& qp, w::CmOp op, std::uint8_t rsv) {
    const bool carries_pd = op == w::CmOp::connect_request || op == w::CmOp::connect_reply;
    send_cm_raw(qp.peer, qp.peer_qpn, qp.qpn, op, rsv, qp.conn_qual, qp.conn_id, qp.snd_nxt,
                carries_pd ? std::span<const std::uint8_t>(qp.cm_private) : std::span<const std::uint8_t>{},
                qp.init.ird, qp.init.ord, op == w::CmOp::connect_request ? qp.cm_cookie : 0);
  }

  // The cookie a listener gives a request (from, its QP, attempt, service, initial sequence) in
  // key epoch `epoch`: a keyed hash (SipHash-2-4), so only who receives it at `from` can echo it,
  // and the listener keeps no state for a request until it comes back (as TCP's SYN cookies).
  std::uint32_t cookie(NetAddr from, std::uint32_t src_qpn, std::uint32_t conn_id, std::uint64_t conn_qual,
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
  static std::int64_t cookie_epoch(Clock::time_point now) {
    return std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count() / kCookieEpochSeconds;
  }

  void send_reject(const ConnRequest& r, bool no_listener) {
    send_cm_raw(r.from, r.src_qpn, 0, w::CmOp::reject, no_listener ? 1 : 0, r.conn_qual, r.conn_id, 0, r.reply_private);
  }

  // Abrupt close: remember the connection (Linger) and tell the peer with a repeated reset.
  void start_linger(Qp& qp) {
    if (qp.peer_qpn == 0) return;
    std::erase_if(lingers_, [&](const Linger& l) { return l.qpn == qp.qpn; });
    const auto now = Clock::now();
    Linger& l = lingers_.emplace_back(
        Linger{qp.qpn, qp.peer, qp.peer_qpn, qp.conn_id, ack_value(qp), qp.snd_nxt, now, now + kLinger});
    send_reset(l, l.snd_nxt);
    l.next_tx = now + kResetRetry;
  }

  // `seq`: the sequence number the peer must be expecting for the reset to count (RFC 5961):
  // where our stream ended, or what the peer's challenge ACK said it expects.
  void send_reset(const Linger& l, std::uint32_t seq) {
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
  bool answer_lingering(NetAddr from, const w::FrameHeader& h) {
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

  // ---- completions ----
  void push_wc(Cq* cq, const Wc& wc) {
    {
      std::lock_guard lk(cq->mu);
      if (cq->q.size() >= cq->depth) cq->overflows++;
      cq->q.push_back(wc);
      cq->size.store(cq->q.size(), std::memory_order_release);
    }
    if (cq->notify) cq->notify();
  }

  void flush_qp(Qp& qp) {
    // Buffers taken from an SRQ go to this QP's receive EVD too; untaken entries had none.
    for (auto& r : qp.rq) {
      if (!r.allocated) continue;
      srq_completed(r.srq);
      push_wc(qp.init.recv_cq, Wc{r.wr_id, WcOpcode::recv, WcStatus::flushed, 0, &qp, qp.init.context, r.srq});
    }
    qp.rq.clear();
    qp.rq_allocated = 0;
    for (auto& s : qp.sq) {
      push_wc(qp.init.send_cq, Wc{s.wr_id, s.opcode, WcStatus::flushed, 0, &qp, qp.init.context});
    }
    qp.sq.clear();
    qp.sq_wait.clear();
    qp.reads_out.clear();
    qp.reads_in.clear();
    qp.responses_end.clear();
    qp.backlog.clear();
    qp.inflight.clear();
    qp.inflight_bytes = 0;
  }

  // Tells the netdev a connection to the QP's peer began or ended (once each way).
  void hint_peer(Qp& qp, bool up) {
    if (qp.peer_hinted == up) return;
    qp.peer_hinted = up;
    nd_->peer_hint(qp.peer, up);
  }

  // Ends the connection: flush, state, and (if given) one event to the consumer.
  void close_qp(Qp& qp, std::optional<CmEventType> ev, std::string reason) {
    const bool graceful = ev == CmEventType::disconnected && qp.state == QpState::closing;
    flush_qp(qp);
    qp.state = graceful ? QpState::idle : QpState::error;
    qp.cm = CmPhase::closed;
    hint_peer(qp, false);
    if (qp.req) {
      qp.req = nullptr;
    }
    if (ev && qp.init.on_event) qp.init.on_event(&qp, CmEvent{*ev, {}, std::move(reason)});
  }

  void reset_qp(Qp& qp) {
    hint_peer(qp, false);
    flush_qp(qp);
    qp.state = QpState::idle;
    qp.cm = CmPhase::none;
    qp.peer = {};
    qp.peer_qpn = 0;
    qp.snd_nxt = qp.snd_una = random32();
    qp.ack_limit.reset();
    qp.ka_nonce = 0;
    qp.ka_sent = 0;
    qp.ka_soon = false;
    qp.ka_next = {};
    qp.cm_cookie = 0;
    qp.send_msn = qp.recv_msn = qp.read_msn = qp.peer_read_msn = 1;
    qp.disc_rx_pending = false;
    qp.rto = cfg_.initial_rto;
    qp.srtt_us = qp.rttvar_us = 0;
    qp.rto_probe = {};
  }

  // `bad`: the sequence number of the frame that caused it (default: the frame being handled),
  // from which on nothing is acknowledged any more, so the request it belongs to completes in
  // error at its sender, never in success.
  void terminate(Qp& qp, w::TermLayer layer, std::uint8_t etype, std::uint8_t code, std::string reason,
                 std::optional<std::uint32_t> bad = std::nullopt) {
    ctr_.terminates_sent++;
    if (!bad) bad = rx_seq_;
    if (bad && !qp.ack_limit) qp.ack_limit = seq_lt(*bad, qp.rxw.next()) ? *bad : qp.rxw.next();
    const w::TerminateHdr th = w::encode_terminate({layer, etype, code, false, false});
    std::uint8_t h[sizeof(w::DdpUntaggedHdr)];
    const std::size_t hl = w::encode_untagged(h, w::RdmapOpcode::terminate, true, w::kQnTerminate, 1, 0);
    // Flush first (no more placement), then send the Terminate as the last frame of the stream.
    flush_qp(qp);
    enqueue_seq(qp, w::FrameType::ddp, {{h, hl}, {reinterpret_cast<const std::uint8_t*>(&th), sizeof th}});
    pump_tx(qp);
    qp.state = QpState::terminate;
    qp.cm = CmPhase::closed;
    hint_peer(qp, false);
    if (qp.init.on_event) qp.init.on_event(&qp, CmEvent{CmEventType::broken, {}, "sent Terminate: " + reason});
  }

  // ---- progress engine ----
  // The progress thread. While a consumer drives the engine itself (it spins on
  // dat_evd_dequeue, or polls a moment in dat_evd_wait before blocking), the thread stands back
  // and only sleeps until the time the consumer announced, so the two do not wake for the same
  // datagrams and fight over the lock and the cores.
  void run() {
    while (!stop_) {
      if (!cfg_.busy_poll) {
        const auto until =
            Clock::time_point(std::chrono::nanoseconds(consumer_until_ns_.load(std::memory_order_relaxed)));
        const auto now = Clock::now();
        if (now < until) {
          std::this_thread::sleep_for(std::min<Clock::duration>(until - now, kConsumerPollGrace));
          continue;
        }
        // The netdev holds one wake token, taken by whichever thread returns from wait_rx first.
        // A consumer may have become the driver while this thread was already blocked here: what
        // woke this thread may have been a wake() meant for that consumer (its event came from
        // another thread, its CNO or EVD is being freed), so it is passed on, or the consumer
        // would sleep until a frame or its timeout. (A wake() before the consumer blocked is seen
        // by wait_progress through wakes_seen.)
        nd_->wait_rx(next_wait());
        if (driver_.load()) nd_->wake();
      }
      std::lock_guard lk(mu_);
      progress_locked(Clock::now());
    }
  }

  // `now` is the caller's clock reading, or none: a consumer that spins reads the clock only
  // every kClockEvery calls, since each read costs on the path that detects an arriving frame
  // (two reads per empty poll were 5 % of a spinning ping-pong's time). A receive round reads it
  // once when something arrived; timers run when the time is known.
  std::size_t progress_locked(std::optional<Clock::time_point> now) {
    const std::size_t cap = nd_->max_datagram();
    std::size_t got = 0;
    for (int round = 0; round < 8; ++round) {
      const std::size_t n = nd_->rx_burst(rx_frames_);
      if (n == 0) break;
      rx_now_ = Clock::now();
      if (!now) now = rx_now_;
      for (std::size_t i = 0; i < n; ++i) handle_datagram(rx_frames_[i].from, {rx_frames_[i].buf, rx_frames_[i].len});
      for (std::size_t i = 0; i < n; ++i) rx_frames_[i].cap = cap;
      got += n;
      if (n < kRxBurst) break;
    }
    if (nd_->errors_pending()) network_errors();
    flush_acks();
    if (now) timers(*now);
    return got;
  }

 public:
  bool wait_progress(std::chrono::microseconds max, std::uint64_t wakes_seen) override {
    bool expected = false;
    if (!driver_.compare_exchange_strong(expected, true)) return false;  // seq_cst, as wakes_
    auto now = Clock::now();
    raise_consumer_until(now + max);  // the progress thread stands back meanwhile
    // A wake() after the caller looked: its token may be gone to the progress thread (which passes
    // on only what wakes it after this thread became the driver). Run the round without blocking.
    if (wakes_.load() == wakes_seen) nd_->wait_rx(std::min(max, next_wait()));
    {
      std::lock_guard lk(mu_);
      now = Clock::now();
      progress_locked(now);
    }
    // Back to the progress thread unless the consumer comes back soon (as after a busy poll).
    consumer_until_ns_.store(ns_of(now + kConsumerPollGrace), std::memory_order_relaxed);
    driver_.store(false, std::memory_order_release);
    return true;
  }

  void wake() override {
    wakes_.fetch_add(1);
    nd_->wake();
  }
  std::uint64_t wakes() const override { return wakes_.load(); }

  bool progress(std::chrono::microseconds drive_for) override {
    std::optional<Clock::time_point> now;
    if (progress_calls_.fetch_add(1, std::memory_order_relaxed) % kClockEvery == 0) {
      now = Clock::now();
      raise_consumer_until(*now + drive_for);
    }
    std::unique_lock lk(mu_, std::try_to_lock);
    return !lk.owns_lock() || progress_locked(now) > 0;
  }

  bool consumer_polling() const override {
    return ns_of(Clock::now()) < consumer_until_ns_.load(std::memory_order_relaxed);
  }

 private:
  static std::int64_t ns_of(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  }
  void raise_consumer_until(Clock::time_point t) {
    const std::int64_t until = ns_of(t);
    if (consumer_until_ns_.load(std::memory_order_relaxed) < until)
      consumer_until_ns_.store(until, std::memory_order_relaxed);
  }

  std::chrono::microseconds next_wait() {
    std::lock_guard lk(mu_);
    // The next delayed ack (one that data already carried waits for no one: ack_due is reset).
    auto due = Clock::time_point::max();
    for (const Qp* qp : delayed_acks_)
      if (qp->ack_needed) due = std::min(due, qp->ack_due);
    if (due != Clock::time_point::max())
      return std::clamp(std::chrono::ceil<std::chrono::microseconds>(due - Clock::now()), std::chrono::microseconds(1),
                        kAckDelay);
    if (!lingers_.empty()) return std::chrono::microseconds(1000);
    for (auto& [n, qp] : qps_)
      if (!qp->inflight.empty() || qp->cm == CmPhase::connecting || qp->cm == CmPhase::accepting ||
          qp->cm == CmPhase::disconnecting)
        return std::chrono::microseconds(1000);
    return std::chrono::microseconds(100000);
  }

  void timers(Clock::time_point now) {
    if (!delayed_acks_.empty()) delayed_acks(now);
    // The connection and retransmission timers have millisecond granularity (RTO floor 5 ms,
    // reordering window >= 4 ms): a scan of every QP (and its frames in flight) at each call of a
    // consumer that spins would only cost latency.
    if (now - last_timer_scan_ < kTimerScan) return;
    last_timer_scan_ = now;
    for (auto it = qps_.begin(); it != qps_.end();) {
      Qp& qp = *(it++)->second;
      switch (qp.cm) {
        case CmPhase::connecting:
          if (now >= qp.cm_deadline) {
            close_qp(qp, CmEventType::unreachable, "no reply to the connection request");
            continue;
          }
          if (!qp.cm_answered && now - qp.cm_started >= cfg_.connect_no_answer) {
            close_qp(
                qp, CmEventType::unreachable,
                "nothing answered the connection request in " + std::to_string(cfg_.connect_no_answer.count()) + " ms");
            continue;
          }
          if (now >= qp.cm_next_tx) {
            send_cm(qp, w::CmOp::connect_request, 0);
            qp.cm_next_tx = now + kCmRetry;
          }
          break;
        case CmPhase::accepting:
          if (now >= qp.cm_deadline) {
            close_qp(qp, CmEventType::broken, "the initiator never confirmed the connection");
            continue;
          }
          if (now >= qp.cm_next_tx) {
            send_cm(qp, w::CmOp::connect_reply, 0);
            qp.cm_next_tx = now + kCmRetry;
          }
          break;
        case CmPhase::disconnecting:
          if (now >= qp.cm_deadline) {
            close_qp(qp, CmEventType::disconnected, "disconnect not acknowledged");
            continue;
          }
          break;
        case CmPhase::connected:
          if (keepalive(qp, now)) continue;
          break;
        default: break;
      }
      // Retransmit only what is neither acknowledged nor selectively acknowledged, and either
      // (RACK) a frame sent after it was delivered more than a reordering window ago relative to
      // its own send time, or it has been out longer than the RTO. A frame merely overtaken by
      // later ones within the reordering window is left alone.
      // The RTO alone resends one frame, the oldest, as a probe (RFC 8985's RTO recovery, F-RTO's
      // caution): if the peer had everything and only the acks were late (a stalled host), its
      // ack covers the whole window and nothing else is resent; if frames were lost, the probe's
      // delivery marks those sent before it lost (RACK) and they go at once. The rest's timer
      // restarts at the probe.
      bool timed_out = false, exhausted = false, probed = false;
      const auto reo_wnd = std::max(
          {kMinReorderWindow, qp.reo_wnd, std::chrono::microseconds(static_cast<std::int64_t>(qp.srtt_us / 4))});
      for (SeqFrame& f : qp.inflight) {
        if (f.sacked) continue;
        const bool rack_lost = f.sent < qp.rack_sent && now - f.sent >= qp.rack_rtt + reo_wnd;
        const bool rto_expired = now - std::max(f.sent, qp.rto_probe) >= qp.rto;
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
        if (++f.retries > cfg_.retry_limit) {
          exhausted = true;
          break;
        }
        f.retransmitted = true;
        f.sent = now;
        transmit(qp, f);
        if (qp.local_error) break;
        qp.ctr.retransmits++;
        ctr_.retransmits++;
      }
      if (qp.local_error) {
        local_protection_failure(qp);
        continue;
      }
      if (exhausted) {
        if (qp.state == QpState::terminate) {
          flush_qp(qp);
          qp.state = QpState::error;
        } else {
          close_qp(qp, CmEventType::broken, "retry limit exceeded");
        }
        continue;
      }
      if (probed) qp.rto_probe = now;
      if (timed_out) qp.rto = std::min(qp.rto * 2, kMaxRto);  // back off until a fresh sample
    }
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
      std::vector<ConnRequest*> gone;
      std::erase_if(reqs_, [&](ConnRequest* r) {
        if (r->phase == ReqPhase::pending || now - r->decided < kReqLinger) return false;
        gone.push_back(r);
        return true;
      });
      if (!gone.empty()) {
        std::sort(gone.begin(), gone.end());
        for (auto& [n, qp] : qps_)
          if (qp->req && std::binary_search(gone.begin(), gone.end(), qp->req)) qp->req = nullptr;
        for (ConnRequest* r : gone) delete r;
      }
    }
  }

  // Liveness: a peer silent for keepalive_idle is probed every keepalive_interval (an ACK frame
  // it answers at once); keepalive_probes unanswered break the connection. A stale ack (the peer
  // acknowledging less than before) brings a probe at once: its answer tells reordering from a
  // forged acknowledgement. True when the connection broke.
  bool keepalive(Qp& qp, Clock::time_point now) {
    if (cfg_.keepalive_idle.count() == 0) return false;
    if (!qp.ka_soon && now - qp.last_rx < cfg_.keepalive_idle) return false;
    if (now < qp.ka_next) return false;
    if (qp.ka_sent >= cfg_.keepalive_probes) {
      ctr_.dead_peers++;
      start_linger(qp);
      close_qp(qp, CmEventType::broken,
               "the peer answered none of " + std::to_string(cfg_.keepalive_probes) + " keepalive probes");
      return true;
    }
    qp.ka_soon = false;
    do {
      qp.ka_nonce = random32();
    } while (qp.ka_nonce == 0);
    qp.ka_una = qp.snd_una;
    send_ack(qp, w::kFlagProbe, qp.ka_nonce);
    qp.ka_sent++;
    ctr_.keepalive_probes++;
    qp.ka_next = now + cfg_.keepalive_interval;
    return false;
  }

  // What the network said of peers we sent to (ICMP destination unreachable): a connection
  // request to a port where nothing listens fails at once (as TCP's does on a RST), as does one to
  // an unreachable host; an established connection is left to its keepalive and retransmission
  // limits (an ICMP message is easy to forge), unless it is already probing a silent peer.
  void network_errors() {
    std::array<netdev::Unreachable, 8> un;
    const std::size_t n = nd_->unreachable(un);
    for (std::size_t i = 0; i < n; ++i) {
      for (auto it = qps_.begin(); it != qps_.end();) {
        Qp& qp = *(it++)->second;
        if (qp.peer != un[i].peer) continue;
        if (qp.cm == CmPhase::connecting) {
          close_qp(qp, un[i].port ? CmEventType::no_listener : CmEventType::host_unreachable,
                   un[i].port ? "ICMP port unreachable: nothing receives at " + netdev::to_string(qp.peer)
                              : "ICMP host or network unreachable: " + netdev::to_string(qp.peer));
        } else if (qp.cm == CmPhase::connected && qp.ka_nonce != 0 && un[i].port) {
          ctr_.dead_peers++;
          close_qp(qp, CmEventType::broken, "the peer is gone (ICMP port unreachable for a keepalive probe)");
        }
      }
    }
  }

  bool known_req(ConnRequest* r) const { return std::find(reqs_.begin(), reqs_.end(), r) != reqs_.end(); }

  void handle_datagram(NetAddr from, std::span<const std::uint8_t> d) {
    w::FrameHeader h;
    std::span<const std::uint8_t> body;
    if (w::open_frame(d, h, body) != w::FrameError::none) {
      ctr_.rx_bad_frames++;
      return;
    }
    if (h.type == w::FrameType::cm) {
      handle_cm(from, h, body);
      return;
    }
    auto it = qps_.find(h.dst_qpn);
    if (it == qps_.end() || it->second->peer != from || it->second->peer_qpn != h.src_qpn ||
        it->second->cm == CmPhase::none || it->second->cm == CmPhase::connecting) {
      if (answer_lingering(from, h)) return;
      ctr_.rx_unknown_qp++;
      return;
    }
    // Closed abruptly (a reset repeats): the linger answers (a terminated QP, which has none,
    // still takes the acks of its Terminate).
    if (it->second->cm == CmPhase::closed && answer_lingering(from, h)) return;
    Qp& qp = *it->second;
    if (h.type == w::FrameType::ack) {
      std::array<SackBlock, w::kMaxSackBlocks> blocks;
      const std::size_t nb = w::decode_sack(body, std::span<SackBlock>(blocks));
      if (nb == w::kSackInvalid || !(h.flags & w::kFlagAckValid)) {
        ctr_.rx_bad_frames++;
        return;
      }
      if (!handle_ack(qp, h.ack, {blocks.data(), nb})) return;  // an impossible ack: not the peer's
      qp.ctr.rx_frames++;
      if ((h.flags & w::kFlagProbeReply) && qp.ka_nonce != 0 && h.seq == qp.ka_nonce) {
        qp.ka_nonce = 0;
        // The answer to our probe acknowledges what the peer had when it answered, which is at
        // least what it had acknowledged before we probed: less means it never received what
        // "it" acknowledged (an acknowledgement was forged), and the stream cannot recover.
        if (seq_lt(h.ack, qp.ka_una)) {
          ctr_.rx_bad_acks++;
          start_linger(qp);
          close_qp(qp, CmEventType::broken,
                   "the peer acknowledges less than it had acknowledged (a forged acknowledgement?)");
          return;
        }
      }
      alive(qp);
      if (h.flags & w::kFlagProbe) send_ack(qp, w::kFlagProbeReply, h.seq);
      return;
    }
    // A sequenced frame must acknowledge something we sent (RFC 5961 section 5): a blind
    // injector must guess the acknowledgement as well as the sequence number.
    if (!(h.flags & w::kFlagAckValid) || !ack_acceptable(qp, h.ack)) {
      ctr_.rx_bad_acks++;
      challenge(qp);
      return;
    }
    // A graceful close is taken only at the exact sequence number expected (RFC 5961 section 3):
    // one ahead of it is answered with our ACK (and SACK), and its sender, which does not see it
    // acknowledged, sends it again once the frames before it have arrived.
    if (h.type == w::FrameType::stream_ctrl && seq_lt(qp.rxw.next(), h.seq)) {
      ctr_.challenge_acks++;
      challenge(qp);
      return;
    }
    qp.ctr.rx_frames++;
    handle_ack(qp, h.ack, {});
    alive(qp);
    if (qp.cm == CmPhase::accepting) established_passive(qp);
    mark_ack(qp);
    const bool ahead = h.seq != qp.rxw.next();
    if (ahead) qp.ack_now = true;  // out of order or a duplicate: the peer needs our SACK / ack now
    switch (qp.rxw.accept(h.seq)) {
      case RxWindow::Verdict::duplicate:
        qp.ctr.rx_duplicates++;
        ctr_.rx_duplicates++;
        return;
      case RxWindow::Verdict::beyond:
        qp.ctr.rx_beyond_window++;
        ctr_.rx_beyond_window++;
        return;
      case RxWindow::Verdict::deliver: break;
    }
    if (ahead) {
      qp.ctr.rx_out_of_order++;
      ctr_.rx_out_of_order++;
    }
    // Placement happens as segments arrive, in any order; what must follow the stream's order
    // (receive completions, a graceful close) waits until the cumulative point passes it.
    if (h.type == w::FrameType::ddp) {
      const RxSeqScope seq_scope(*this, h.seq);
      handle_ddp(qp, body, h.seq);
    } else if (h.type == w::FrameType::stream_ctrl) {
      handle_stream_ctrl(qp, body, h.seq);
    }
    stream_advanced(qp);
  }

  // Whether `ack` acknowledges something we sent: not beyond snd_nxt, and not further below
  // snd_una than reordering can explain.
  static bool ack_acceptable(const Qp& qp, std::uint32_t ack) {
    return seq_le(ack, qp.snd_nxt) && seq_le(qp.snd_una - kMaxAckLag, ack);
  }

  // A challenge ACK (RFC 5961): our cumulative point and SACK, at most one per kChallengeGap.
  void challenge(Qp& qp) {
    const auto now = rx_now_;
    if (now - qp.last_challenge < kChallengeGap) return;
    qp.last_challenge = now;
    send_ack(qp);
  }

  // The peer showed it is there (a frame that passed the checks).
  void alive(Qp& qp) {
    qp.last_rx = rx_now_;
    qp.ka_sent = 0;
  }

  // Completes what the cumulative point now covers: receives in MSN order, then a pending close.
  void stream_advanced(Qp& qp) {
    complete_receives(qp);
    answer_read_requests(qp);
    complete_reads(qp);
    if (qp.disc_rx_pending && seq_lt(qp.disc_rx_seq, qp.rxw.next())) {
      qp.disc_rx_pending = false;
      peer_closed(qp);
    }
  }

  void mark_ack(Qp& qp) {
    qp.rx_unacked++;
    if (!qp.ack_needed) {
      qp.ack_needed = true;
      ack_list_.push_back(&qp);
    }
  }

  // Acks: at once for every second frame, for anything out of order and for duplicates; a lone
  // in-order frame's ack waits up to kAckDelay, so that a reply the consumer posts meanwhile
  // carries it (a ping-pong then sends no pure acks at all).
  void flush_acks() {
    if (ack_list_.empty()) return;
    const auto now = rx_now_;  // frames were received in this round (they alone mark acks)
    for (Qp* qp : ack_list_) {
      if (!qp->ack_needed) continue;
      if (qp->ack_now || qp->rx_unacked >= 2 || qp->rxw.has_gap() || qp->state != QpState::rts) {
        send_ack(*qp);
      } else if (qp->ack_due == Clock::time_point{}) {
        qp->ack_due = now + kAckDelay;
        delayed_acks_.push_back(qp);
      }
    }
    ack_list_.clear();
  }

  void delayed_acks(Clock::time_point now) {
    std::erase_if(delayed_acks_, [&](Qp* qp) {
      if (!qp->ack_needed) return true;  // data carried it
      if (now < qp->ack_due) return false;
      send_ack(*qp);
      return true;
    });
  }

  // False when the ack cannot be the peer's (it acknowledges what was never sent, or its SACK
  // blocks name frames outside what is in flight): ignored and counted. A stale one (below what
  // was acknowledged before) may be reordering, or the sign that an acknowledgement was forged:
  // the peer is probed, and its answer tells (handle_datagram).
  bool handle_ack(Qp& qp, std::uint32_t ack, std::span<const SackBlock> sack) {
    if (seq_lt(qp.snd_nxt, ack)) {
      ctr_.rx_bad_acks++;
      return false;
    }
    for (const SackBlock& b : sack) {
      if (!seq_lt(ack, b.start) || seq_lt(qp.snd_nxt, b.end)) {
        ctr_.rx_bad_acks++;
        return false;
      }
    }
    if (seq_lt(ack, qp.snd_una)) {
      if (!seq_le(qp.snd_una - kMaxAckLag, ack)) {
        ctr_.rx_bad_acks++;
        return false;
      }
      if (qp.cm == CmPhase::connected && cfg_.keepalive_idle.count() > 0) qp.ka_soon = true;
      return true;
    }
    // The time of this receive round (read when the netdev returned its frames): round trips are
    // sampled for timers of millisecond granularity, and a clock read per frame costs.
    const auto now = rx_now_;
    // One RTT sample per acknowledgement: the slowest frame it newly covers that was sent once
    // (Karn). Taking the slowest, not the newest, lets a frame held back by reordering raise
    // RTTVAR, so reordering alone does not make the RTO fire.
    std::chrono::microseconds slowest{-1};
    // RACK from a resent frame only when this ack covers no frame sent once: an ack that also
    // covers originals may well be for the resent frame's original too (acks held up past the
    // RTO), and taking the resend's time would mark everything sent before it lost.
    bool covers_original = false;
    Clock::time_point resent_sent{};
    std::chrono::microseconds resent_rtt{0};
    for (SeqFrame& f : qp.inflight) {
      bool covered = seq_lt(f.seq, ack);
      for (const SackBlock& b : sack)
        if (!seq_lt(f.seq, b.start) && seq_lt(f.seq, b.end)) covered = true;
      if (covered && !f.sacked) {
        // (a frame another thread sent after `now` was read, acknowledged within the round: 0)
        const auto rtt =
            std::chrono::duration_cast<std::chrono::microseconds>(std::max(now - f.sent, Clock::duration{}));
        if (!f.retransmitted) slowest = std::max(slowest, rtt);
        // Eifel-style check: acknowledged sooner after its retransmission than any round trip
        // takes, so the original arrived and the retransmission was spurious: widen the
        // reordering window (RFC 8985 adapts it likewise).
        if (f.retransmitted && qp.min_rtt.count() > 0 && rtt * 4 < qp.min_rtt * 3) {
          qp.ctr.spurious_retransmits++;
          qp.reo_wnd = std::min(std::max(qp.reo_wnd * 2, kMinReorderWindow * 2), kMaxReorderWindow);
        }
        // RACK: the latest send time known delivered, and that frame's round trip.
        if (!f.retransmitted) {
          covers_original = true;
          if (f.sent > qp.rack_sent) {
            qp.rack_sent = f.sent;
            qp.rack_rtt = rtt;
          }
        } else if (f.sent > resent_sent && rtt >= qp.min_rtt) {
          resent_sent = f.sent;
          resent_rtt = rtt;
        }
        f.sacked = true;
      }
    }
    if (!covers_original && resent_sent > qp.rack_sent) {
      qp.rack_sent = resent_sent;
      qp.rack_rtt = resent_rtt;
    }
    if (slowest.count() >= 0) rtt_sample(qp, slowest);
    if (!seq_lt(qp.snd_una, ack)) return true;  // no new cumulative progress
    while (!qp.inflight.empty() && seq_lt(qp.inflight.front().seq, ack)) {
      qp.inflight_bytes -= qp.inflight.front().len;
      qp.inflight.pop_front();
    }
    qp.snd_una = ack;
    complete_sends(qp);
    while (!qp.responses_end.empty() && seq_le(qp.responses_end.front(), ack)) qp.responses_end.pop_front();
    if (qp.cm == CmPhase::disconnecting && qp.state == QpState::closing && seq_le(qp.disc_seq, ack)) {
      close_qp(qp, CmEventType::disconnected, "");
      return true;
    }
    if (qp.state == QpState::terminate && qp.inflight.empty() && qp.backlog.empty()) {
      qp.state = QpState::error;
      return true;
    }
    pump_tx(qp);
    return true;
  }

  void established_passive(Qp& qp) {
    qp.cm = CmPhase::connected;
    qp.last_rx = Clock::now();
    hint_peer(qp, true);
    if (qp.init.on_event) qp.init.on_event(&qp, CmEvent{CmEventType::established, {}, ""});
  }

  void handle_stream_ctrl(Qp& qp, std::span<const std::uint8_t> body, std::uint32_t seq) {
    if (body.size() < sizeof(w::StreamCtrlWire)) {
      ctr_.rx_bad_frames++;
      return;
    }
    w::StreamCtrlWire c;
    std::memcpy(&c, body.data(), sizeof c);
    if (c.op.get() != static_cast<std::uint32_t>(w::StreamCtrlOp::disconnect)) {
      ctr_.rx_bad_frames++;
      return;
    }
    if (qp.cm == CmPhase::closed) return;
    // Acted on once everything the peer sent before it has arrived (stream_advanced).
    qp.disc_rx_pending = true;
    qp.disc_rx_seq = seq;
  }

  void peer_closed(Qp& qp) {
    if (qp.cm == CmPhase::closed) return;
    // Acknowledge now, since the QP stops sending.
    send_ack(qp);
    if (qp.state == QpState::rts) qp.state = QpState::closing;
    close_qp(qp, CmEventType::disconnected, "");
  }

  void handle_ddp(Qp& qp, std::span<const std::uint8_t> body, std::uint32_t seq) {
    // Terminated: nothing more is placed. Closing (our graceful disconnect is in the stream): what
    // the peer sent before it sees our disconnect still lands, Read Responses included.
    if (qp.state != QpState::rts && qp.state != QpState::closing) return;
    w::DdpSegment s;
    const w::DecodeError e = w::decode_ddp(body, s);
    if (e != w::DecodeError::none) {
      switch (e) {
        case w::DecodeError::bad_ddp_version:
          terminate(qp, w::TermLayer::ddp, static_cast<std::uint8_t>(w::DdpEtype::untagged_buffer),
                    static_cast<std::uint8_t>(w::DdpUntaggedError::invalid_version), std::string(to_string(e)));
          return;
        case w::DecodeError::bad_qn:
          terminate(qp, w::TermLayer::ddp, static_cast<std::uint8_t>(w::DdpEtype::untagged_buffer),
                    static_cast<std::uint8_t>(w::DdpUntaggedError::invalid_qn), std::string(to_string(e)));
          return;
        case w::DecodeError::bad_rdmap_version:
          terminate(qp, w::TermLayer::rdmap, static_cast<std::uint8_t>(w::RdmapEtype::remote_operation),
                    static_cast<std::uint8_t>(w::RdmapError::invalid_version), std::string(to_string(e)));
          return;
        default:
          terminate(qp, w::TermLayer::rdmap, static_cast<std::uint8_t>(w::RdmapEtype::remote_operation),
                    static_cast<std::uint8_t>(w::RdmapError::unexpected_opcode), std::string(to_string(e)));
          return;
      }
    }
    switch (s.opcode) {
      case w::RdmapOpcode::send:
      case w::RdmapOpcode::send_se:
      case w::RdmapOpcode::send_invalidate:
      case w::RdmapOpcode::send_se_invalidate: place_untagged(qp, s, seq); return;
      case w::RdmapOpcode::rdma_write: place_tagged(qp, s); return;
      case w::RdmapOpcode::read_request:
        if (qp.state == QpState::rts) queue_read_request(qp, s, seq);  // none answered behind our disconnect
        return;
      case w::RdmapOpcode::read_response: place_read_response(qp, s, seq); return;
      case w::RdmapOpcode::terminate: {
        ctr_.terminates_received++;
        std::string reason = "peer sent Terminate";
        if (s.ulp_header.size() >= sizeof(w::TerminateHdr)) {
          w::TerminateHdr th;
          std::memcpy(&th, s.ulp_header.data(), sizeof th);
          const auto t = w::decode_terminate(th);
          reason += " (layer " + std::to_string(static_cast<int>(t.layer)) + ", etype " + std::to_string(t.etype) +
                    ", code " + std::to_string(t.code) + ")";
        }
        // The request the peer refused (the first not acknowledged: the Terminate acknowledges
        // nothing from the offending frame on) completes in error; the rest are flushed.
        if (!qp.sq.empty()) {
          const SendWqe& f = qp.sq.front();
          std::uint8_t layer_etype = 0;
          if (s.ulp_header.size() >= sizeof(w::TerminateHdr)) {
            w::TerminateHdr th;
            std::memcpy(&th, s.ulp_header.data(), sizeof th);
            const auto t = w::decode_terminate(th);
            layer_etype =
                t.layer == w::TermLayer::ddp && t.etype == static_cast<std::uint8_t>(w::DdpEtype::tagged_buffer) ? 1
                : t.layer == w::TermLayer::rdmap &&
                        t.etype == static_cast<std::uint8_t>(w::RdmapEtype::remote_protection)
                    ? 1
                    : 0;
          }
          push_wc(qp.init.send_cq,
                  Wc{f.wr_id, f.opcode, layer_etype ? WcStatus::remote_access_error : WcStatus::remote_operation_error,
                     0, &qp, qp.init.context});
          qp.sq.pop_front();
        }
        close_qp(qp, CmEventType::broken, reason);
        return;
      }
      default:
        terminate(qp, w::TermLayer::rdmap, static_cast<std::uint8_t>(w::RdmapEtype::remote_operation),
                  static_cast<std::uint8_t>(w::RdmapError::unexpected_opcode),
                  std::string(w::opcode_info(s.opcode).name) + " is not supported yet");
        return;
    }
  }

  void place_untagged(Qp& qp, const w::DdpSegment& s, std::uint32_t seq) {
    const auto idx = static_cast<std::int64_t>(static_cast<std::int32_t>(s.msn - qp.recv_msn));
    const auto untagged = static_cast<std::uint8_t>(w::DdpEtype::untagged_buffer);
    if (idx < 0) {
      terminate(qp, w::TermLayer::ddp, untagged, static_cast<std::uint8_t>(w::DdpUntaggedError::invalid_msn_range),
                "MSN " + std::to_string(s.msn) + " already completed");
      return;
    }
    const auto slot = static_cast<std::size_t>(idx);
    if (qp.init.srq) {
      // A message's first segment to arrive takes a buffer from the SRQ (arrival order).
      if (slot >= RxWindow::kSize) {
        terminate(qp, w::TermLayer::ddp, untagged, static_cast<std::uint8_t>(w::DdpUntaggedError::invalid_msn_range),
                  "MSN " + std::to_string(s.msn) + " too far ahead");
        return;
      }
      if (slot >= qp.rq.size()) {
        RecvWqe empty;
        empty.allocated = false;
        qp.rq.resize(slot + 1, empty);
      }
      if (!qp.rq[slot].allocated && !allocate_from_srq(qp, slot)) {
        if (qp.state == QpState::rts)
          terminate(qp, w::TermLayer::ddp, untagged,
                    static_cast<std::uint8_t>(w::DdpUntaggedError::invalid_msn_no_buffer),
                    "the SRQ has no buffer for MSN " + std::to_string(s.msn));
        return;
      }
    } else if (slot >= qp.rq.size()) {
      terminate(qp, w::TermLayer::ddp, untagged, static_cast<std::uint8_t>(w::DdpUntaggedError::invalid_msn_no_buffer),
                "no receive buffer posted for MSN " + std::to_string(s.msn));
      return;
    }
    RecvWqe& r = qp.rq[slot];
    const std::uint64_t end = std::uint64_t{s.mo} + s.payload.size();
    if (end > r.capacity) {
      terminate(
          qp, w::TermLayer::ddp, untagged, static_cast<std::uint8_t>(w::DdpUntaggedError::message_too_long),
          "message of at least " + std::to_string(end) + " bytes for a " + std::to_string(r.capacity) + "-byte buffer");
      return;
    }
    if (r.last_seen && end > r.msg_len) {
      terminate(qp, w::TermLayer::ddp, untagged, static_cast<std::uint8_t>(w::DdpUntaggedError::invalid_mo),
                "segment beyond the message's last segment");
      return;
    }
    // Scatter into the buffer's SGL, its regions checked again first (a consumer may have freed
    // one after posting): nothing is placed unless all of it may be.
    const Pd* pd = r.srq ? r.srq->pd : qp.init.pd;
    for (int pass = 0; pass < 2; ++pass) {
      std::uint64_t mo = s.mo;
      std::size_t done = 0;
      for (const Sge& g : r.sgl) {
        if (done == s.payload.size()) break;
        if (mo >= g.length) {
          mo -= g.length;
          continue;
        }
        const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(g.length - mo, s.payload.size() - done));
        if (pass == 0 && mrs_.check(g.lkey, pd, g.addr + mo, n, Access::local_write) != MrCheck::ok) {
          terminate(qp, w::TermLayer::rdmap, static_cast<std::uint8_t>(w::RdmapEtype::local_catastrophic),
                    static_cast<std::uint8_t>(w::RdmapError::catastrophic_local),
                    "a receive buffer's region was freed while posted");
          return;
        }
        if (pass == 1 && !guarded_copy(reinterpret_cast<void*>(static_cast<std::uintptr_t>(g.addr + mo)),
                                       s.payload.data() + done, n)) {
          memory_fault(qp, "a receive buffer");
          return;
        }
        done += n;
        mo = 0;
      }
    }
    r.placed += s.payload.size();
    if (s.last) {
      r.last_seen = true;
      r.msg_len = end;
    }
    if (!r.seq_seen || seq_lt(r.max_seq, seq)) r.max_seq = seq;
    r.seq_seen = true;
    if (w::opcode_info(s.opcode).carries_inv_stag) r.inv_stag = s.inv_stag;
    if (r.last_seen && r.placed >= r.msg_len) r.done = true;
  }

  // The peer's Read Request: checked now, answered once it is in stream order (responses then
  // go out in MSN order, after everything the peer sent before the request).
  void queue_read_request(Qp& qp, const w::DdpSegment& s, std::uint32_t seq) {
    w::ReadRequestHdr rr;
    std::memcpy(&rr, s.ulp_header.data(), sizeof rr);
    qp.reads_in.push_back(
        ReadIn{seq, s.msn, rr.sink_stag.get(), rr.src_stag.get(), rr.size.get(), rr.sink_to.get(), rr.src_to.get()});
    std::sort(qp.reads_in.begin(), qp.reads_in.end(),
              [](const ReadIn& a, const ReadIn& b) { return seq_lt(a.seq, b.seq); });
  }

  void answer_read_requests(Qp& qp) {
    while (qp.state == QpState::rts && !qp.reads_in.empty() && seq_lt(qp.reads_in.front().seq, qp.rxw.next())) {
      const ReadIn r = qp.reads_in.front();
      qp.reads_in.pop_front();
      const RxSeqScope seq_scope(*this, r.seq);
      const auto untagged = static_cast<std::uint8_t>(w::DdpEtype::untagged_buffer);
      if (r.msn != qp.peer_read_msn) {
        terminate(qp, w::TermLayer::ddp, untagged, static_cast<std::uint8_t>(w::DdpUntaggedError::invalid_msn_range),
                  "Read Request MSN " + std::to_string(r.msn) + ", expected " + std::to_string(qp.peer_read_msn));
        return;
      }
      if (qp.responses_end.size() >= qp.ird) {
        terminate(qp, w::TermLayer::ddp, untagged,
                  static_cast<std::uint8_t>(w::DdpUntaggedError::invalid_msn_no_buffer),
                  "more RDMA Reads outstanding than the IRD of " + std::to_string(qp.ird));
        return;
      }
      if (r.size > limits_.max_msg_size) {
        terminate(qp, w::TermLayer::rdmap, static_cast<std::uint8_t>(w::RdmapEtype::remote_operation),
                  static_cast<std::uint8_t>(w::RdmapError::unspecified), "RDMA Read larger than the maximum message");
        return;
      }
      const MrCheck c = mrs_.check(r.src_stag, qp.init.pd, r.src_to, r.size, Access::remote_read);
      if (c != MrCheck::ok) {
        tagged_violation(qp, c, /*read=*/true);
        return;
      }
      qp.peer_read_msn++;
      // The Read Response: tagged segments to the requester's sink, payload straight from the
      // source region (checked again at each transmission).
      const Sge src{r.src_stag, r.src_to, r.size};
      const SglRef sgl = sgl_pool_.make({&src, 1});
      const std::size_t mss = nd_->max_datagram() - w::kFrameOverhead - sizeof(w::DdpTaggedHdr);
      std::uint64_t off = 0;
      do {
        const auto len = static_cast<std::uint32_t>(std::min<std::uint64_t>(mss, r.size - off));
        const bool last = off + len == r.size;
        std::uint8_t h[sizeof(w::DdpTaggedHdr)];
        const std::size_t hl = w::encode_tagged(h, w::RdmapOpcode::read_response, last, r.sink_stag, r.sink_to + off);
        SeqFrame& f = enqueue_seq(qp, w::FrameType::ddp, {std::span<const std::uint8_t>(h, hl)});
        if (len > 0) {
          f.sgl = sgl;
          f.sgl_off = off;
          f.len = len;
        }
        off += len;
      } while (off < r.size);
      qp.responses_end.push_back(qp.snd_nxt);
      pump_tx(qp);
    }
  }

  // A segment of the response to one of our RDMA Reads: placed into that read's sink only.
  void place_read_response(Qp& qp, const w::DdpSegment& s, std::uint32_t seq) {
    // Responses come in the order of the requests: the segment belongs to the oldest read whose
    // sink holds it and that still lacks bytes (reads may share one sink); the empty response of
    // a zero-length read to the oldest such read not answered yet. Under reordering a segment may
    // be counted for an earlier read of the same sink; a read still completes only when every
    // frame before its last counted one has arrived, so its own bytes are in place.
    const bool empty = s.payload.empty();
    ReadOut* rd = nullptr;
    for (ReadOut& r : qp.reads_out) {
      const bool wants = empty ? r.len == 0 && !r.seq_seen : r.placed < r.len;
      if (wants && r.sink_stag == s.stag && s.to >= r.sink_to && s.to + s.payload.size() <= r.sink_to + r.len) {
        rd = &r;
        break;
      }
    }
    if (!rd) {
      terminate(qp, w::TermLayer::ddp, static_cast<std::uint8_t>(w::DdpEtype::tagged_buffer),
                static_cast<std::uint8_t>(w::DdpTaggedError::stag_not_associated),
                "Read Response for no outstanding RDMA Read");
      return;
    }
    if (!s.payload.empty()) {
      if (mrs_.check(s.stag, qp.init.pd, s.to, s.payload.size(), rd->sink_access) != MrCheck::ok) {
        terminate(qp, w::TermLayer::rdmap, static_cast<std::uint8_t>(w::RdmapEtype::local_catastrophic),
                  static_cast<std::uint8_t>(w::RdmapError::catastrophic_local),
                  "an RDMA Read sink region was freed while the read was outstanding");
        return;
      }
      if (!guarded_copy(reinterpret_cast<void*>(static_cast<std::uintptr_t>(s.to)), s.payload.data(),
                        s.payload.size())) {
        memory_fault(qp, "an RDMA Read sink");
        return;
      }
    }
    rd->placed += s.payload.size();
    if (!rd->seq_seen || seq_lt(rd->max_seq, seq)) rd->max_seq = seq;
    rd->seq_seen = true;
  }

  // Reads complete in order, each once its response is whole and in stream order.
  void complete_reads(Qp& qp) {
    bool any = false;
    while (!qp.reads_out.empty()) {
      ReadOut& r = qp.reads_out.front();
      if (!r.seq_seen || r.placed < r.len || !seq_lt(r.max_seq, qp.rxw.next())) break;
      r.wqe->read_done = true;
      qp.reads_out.pop_front();
      any = true;
    }
    if (any) {
      complete_sends(qp);
      issue_waiting(qp);  // reads that waited for an ORD slot, requests behind a fence
    }
  }

  void tagged_violation(Qp& qp, MrCheck c, bool read) {
    const auto tagged = static_cast<std::uint8_t>(w::DdpEtype::tagged_buffer);
    switch (c) {
      case MrCheck::ok: return;
      case MrCheck::invalid_stag:
      case MrCheck::key_mismatch:
        terminate(qp, w::TermLayer::ddp, tagged, static_cast<std::uint8_t>(w::DdpTaggedError::invalid_stag),
                  std::string(to_string(c)));
        return;
      case MrCheck::pd_mismatch:
        terminate(qp, w::TermLayer::ddp, tagged, static_cast<std::uint8_t>(w::DdpTaggedError::stag_not_associated),
                  std::string(to_string(c)));
        return;
      case MrCheck::out_of_bounds:
        terminate(qp, w::TermLayer::ddp, tagged, static_cast<std::uint8_t>(w::DdpTaggedError::base_bounds),
                  std::string(to_string(c)));
        return;
      case MrCheck::access_denied:
        terminate(qp, w::TermLayer::rdmap, static_cast<std::uint8_t>(w::RdmapEtype::remote_protection),
                  static_cast<std::uint8_t>(w::RdmapError::access_violation),
                  std::string(to_string(c)) + (read ? " (RDMA Read needs remote read)" : ""));
        return;
    }
  }

  void place_tagged(Qp& qp, const w::DdpSegment& s) {
    const MrCheck c = mrs_.check(s.stag, qp.init.pd, s.to, s.payload.size(), Access::remote_write);
    if (c != MrCheck::ok) {
      tagged_violation(qp, c, /*read=*/false);
      return;
    }
    if (!s.payload.empty() &&
        !guarded_copy(reinterpret_cast<void*>(static_cast<std::uintptr_t>(s.to)), s.payload.data(), s.payload.size()))
      memory_fault(qp, "an RDMA Write target");
  }

  // Registered memory the consumer unmapped or protected after registering it: the connection
  // breaks (a local catastrophic error, Terminate to the peer), the process does not.
  void memory_fault(Qp& qp, const char* what) {
    ctr_.memory_faults++;
    terminate(qp, w::TermLayer::rdmap, static_cast<std::uint8_t>(w::RdmapEtype::local_catastrophic),
              static_cast<std::uint8_t>(w::RdmapError::catastrophic_local),
              std::string(what) + "'s registered memory is no longer mapped with write access");
  }

  void handle_cm(NetAddr from, const w::FrameHeader& h, std::span<const std::uint8_t> body) {
    if (body.size() < sizeof(w::CmHdrWire)) {
      ctr_.rx_bad_frames++;
      return;
    }
    w::CmHdrWire c;
    std::memcpy(&c, body.data(), sizeof c);
    const std::size_t pd_len = c.private_data_len.get();
    if (pd_len > body.size() - sizeof c || pd_len > limits_.max_private_data) {
      ctr_.rx_bad_frames++;
      return;
    }
    const auto pd = body.subspan(sizeof c, pd_len);
    const std::uint32_t conn_id = c.conn_id.get();
    switch (static_cast<w::CmOp>(c.op)) {
      case w::CmOp::connect_request: {
        for (ConnRequest* r : reqs_) {
          if (r->from == from && r->conn_id == conn_id && r->src_qpn == h.src_qpn) {
            if (r->phase == ReqPhase::rejected) send_reject(*r, false);
            // pending: the consumer decides, and the initiator hears that its request arrived
            // (it does not give up for want of an answer); accepted: the QP repeats its reply.
            if (r->phase == ReqPhase::pending)
              send_cm_raw(from, h.src_qpn, 0, w::CmOp::pending, 0, r->conn_qual, conn_id, 0, {});
            return;
          }
        }
        auto l = listeners_.find(c.conn_qual.get());
        if (l == listeners_.end()) {
          ConnRequest tmp;
          tmp.from = from;
          tmp.src_qpn = h.src_qpn;
          tmp.conn_id = conn_id;
          tmp.conn_qual = c.conn_qual.get();
          send_reject(tmp, true);
          return;
        }
        // No state for a request until its initiator has shown it receives at its address: the
        // first request is answered with a cookie, which only a request sent from there echoes
        // (a spoofed source never sees it, so it can neither reach the consumer nor hold a QP).
        {
          const auto now = Clock::now();
          const std::int64_t epoch = cookie_epoch(now);
          const std::uint64_t qual = c.conn_qual.get();
          const std::uint32_t isn = c.init_seq.get();
          const bool valid = h.seq != 0 && (h.seq == cookie(from, h.src_qpn, conn_id, qual, isn, epoch) ||
                                            h.seq == cookie(from, h.src_qpn, conn_id, qual, isn, epoch - 1));
          if (!valid) {
            if (h.seq != 0) ctr_.rx_bad_cookies++;
            ctr_.cookies_sent++;
            send_cm_raw(from, h.src_qpn, 0, w::CmOp::cookie, 0, qual, conn_id, 0, {}, 0, 0,
                        cookie(from, h.src_qpn, conn_id, qual, isn, epoch));
            return;
          }
        }
        if (std::count_if(reqs_.begin(), reqs_.end(),
                          [](const ConnRequest* q) { return q->phase == ReqPhase::pending; }) >= kMaxPendingRequests) {
          ctr_.rx_dropped_requests++;  // a flood of requests cannot grow memory without bound
          return;
        }
        auto* r = new ConnRequest;
        r->from = from;
        r->src_qpn = h.src_qpn;
        r->conn_id = conn_id;
        r->init_seq = c.init_seq.get();
        r->peer_ird = c.ird.get();
        r->peer_ord = c.ord.get();
        r->conn_qual = c.conn_qual.get();
        reqs_.push_back(r);
        l->second(r, ConnRequestInfo{from, r->conn_qual, std::vector<std::uint8_t>(pd.begin(), pd.end())});
        return;
      }
      case w::CmOp::connect_reply: {
        auto it = qps_.find(h.dst_qpn);
        if (it == qps_.end() || it->second->conn_id != conn_id || it->second->peer != from) {
          ctr_.rx_unknown_qp++;
          return;
        }
        Qp& qp = *it->second;
        if (qp.cm == CmPhase::connecting) {
          qp.peer_qpn = h.src_qpn;
          qp.last_rx = Clock::now();
          qp.rxw.reset(c.init_seq.get());
          qp.ord = std::min(qp.init.ord, static_cast<std::uint32_t>(c.ird.get()));  // no more than the peer takes
          qp.ird = qp.init.ird;
          qp.state = QpState::rts;
          qp.cm = CmPhase::connected;
          hint_peer(qp, true);
          send_cm(qp, w::CmOp::ready_to_use, 0);
          if (qp.init.on_event)
            qp.init.on_event(&qp,
                             CmEvent{CmEventType::established, std::vector<std::uint8_t>(pd.begin(), pd.end()), ""});
        } else if (qp.cm == CmPhase::connected && qp.peer_qpn == h.src_qpn) {
          send_cm(qp, w::CmOp::ready_to_use, 0);  // our confirmation was lost
        }
        return;
      }
      case w::CmOp::reject: {
        auto it = qps_.find(h.dst_qpn);
        if (it == qps_.end() || it->second->conn_id != conn_id || it->second->cm != CmPhase::connecting ||
            it->second->peer != from)
          return;
        Qp& qp = *it->second;
        flush_qp(qp);
        qp.state = QpState::error;
        qp.cm = CmPhase::closed;
        if (qp.init.on_event)
          qp.init.on_event(&qp, CmEvent{c.reserved ? CmEventType::no_listener : CmEventType::rejected,
                                        std::vector<std::uint8_t>(pd.begin(), pd.end()), ""});
        return;
      }
      case w::CmOp::reset: {
        // The peer closed abruptly. Its ack first: Sends it received complete, not flush.
        auto it = qps_.find(h.dst_qpn);
        if (it != qps_.end() && it->second->peer == from && it->second->peer_qpn == h.src_qpn &&
            it->second->conn_id == conn_id && it->second->cm != CmPhase::none &&
            it->second->cm != CmPhase::connecting) {
          Qp& qp = *it->second;
          if (qp.cm == CmPhase::closed) {
            // already closed (an earlier reset, or our own close): acknowledge it below
          } else if (h.seq != qp.rxw.next() || !(h.flags & w::kFlagAckValid) || !ack_acceptable(qp, h.ack)) {
            // Taken only at the exact sequence number we expect (RFC 5961 section 3): anything
            // else is answered with our ACK, which the real peer, if it did reset, answers with a
            // reset at that number (answer_lingering); a blind attacker never sees it.
            ctr_.challenge_acks++;
            challenge(qp);
            return;
          } else {
            // A reset from the initiator means it had our reply and was connected: its
            // READY_TO_USE may only be behind (another socket of the udp netdev, a lost datagram),
            // so the consumer hears ESTABLISHED before DISCONNECTED, as for a first data frame.
            // (dtestcm -c 100 counted such a DISCONNECTED as its ESTABLISHED and then waited
            // forever for the last disconnects: the flake of issue 13.)
            if (qp.cm == CmPhase::accepting) established_passive(qp);
            handle_ack(qp, h.ack, {});
            if (qp.cm != CmPhase::closed) close_qp(qp, CmEventType::disconnected, "the peer reset the connection");
          }
        } else if (std::none_of(lingers_.begin(), lingers_.end(), [&](const Linger& l) {
                     return l.qpn == h.dst_qpn && l.peer == from && l.peer_qpn == h.src_qpn && l.conn_id == conn_id;
                   })) {
          return;  // not a connection of ours (nor one we closed too): no answer, an attacker learns nothing
        }
        std::uint8_t b[w::kFrameOverhead + sizeof(w::CmHdrWire)];
        w::write_frame_header(b, {w::FrameType::cm, 0, h.src_qpn, h.dst_qpn, 0, 0});
        const w::CmHdrWire r{static_cast<std::uint8_t>(w::CmOp::reset_ack),
                             0,
                             w::Be16(0),
                             w::Be16(0),
                             w::Be16(0),
                             w::Be64(0),
                             w::Be32(conn_id),
                             w::Be32(0)};
        std::memcpy(b + w::kFrameHeaderLen, &r, sizeof r);
        send_raw(from, {b, w::seal_frame(b, w::kFrameHeaderLen + sizeof r)});
        return;
      }
      case w::CmOp::reset_ack:
        std::erase_if(lingers_, [&](const Linger& l) { return l.qpn == h.dst_qpn && l.peer == from; });
        return;
      case w::CmOp::pending:
      case w::CmOp::cookie: {
        auto it = qps_.find(h.dst_qpn);
        if (it == qps_.end() || it->second->conn_id != conn_id || it->second->cm != CmPhase::connecting ||
            it->second->peer != from)
          return;
        Qp& qp = *it->second;
        qp.cm_answered = true;  // the listener is there
        if (static_cast<w::CmOp>(c.op) == w::CmOp::cookie && h.seq != 0 && h.seq != qp.cm_cookie) {
          qp.cm_cookie = h.seq;
          send_cm(qp, w::CmOp::connect_request, 0);  // at once, echoing it
          qp.cm_next_tx = Clock::now() + kCmRetry;
        }
        return;
      }
      case w::CmOp::ready_to_use: {
        auto it = qps_.find(h.dst_qpn);
        if (it == qps_.end() || it->second->conn_id != conn_id || it->second->peer != from) return;
        if (it->second->cm == CmPhase::accepting) established_passive(*it->second);
        return;
      }
    }
    ctr_.rx_bad_frames++;
  }

  DeviceConfig cfg_;
  std::unique_ptr<netdev::Netdev> nd_;
  Limits limits_;
  mutable std::mutex mu_;
  SglPool sgl_pool_;  // before every holder of an SglRef (QPs are deleted in the destructor's body)
  std::atomic<bool> stop_{false};
  std::thread thread_;
  MrTable mrs_;
  std::uint32_t next_pd_ = 1;
  std::unordered_set<Pd*> pd_set_;
  std::unordered_set<Cq*> cqs_;
  std::unordered_set<Srq*> srqs_;
  std::unordered_map<std::uint32_t, Qp*> qps_;
  std::map<std::uint64_t, std::function<void(ConnRequest*, const ConnRequestInfo&)>> listeners_;
  std::vector<ConnRequest*> reqs_;
  std::vector<Qp*> ack_list_;
  std::vector<Qp*> delayed_acks_;                   // QPs whose lone in-order frame waits for a reply to carry its ack
  std::atomic<std::uint64_t> wakes_{0};             // wake() calls: a driver sees one whose netdev token it missed
  std::atomic<bool> driver_{false};                 // a consumer drives the engine in wait_progress
  std::atomic<std::int64_t> consumer_until_ns_{0};  // a consumer drives the engine until then (steady clock, ns)
  Clock::time_point last_timer_scan_{};
  Clock::time_point last_req_sweep_{};
  std::vector<Linger> lingers_;
  std::vector<std::uint8_t> rx_bufs_, tx_gather_;
  std::vector<netdev::RxFrame> rx_frames_;
  Clock::time_point rx_now_{};                    // when the current receive round received its frames
  std::atomic<std::uint32_t> progress_calls_{0};  // progress(): the clock is read every kClockEvery calls
  std::size_t window_bytes_ = 0;
  std::array<unsigned char, crypto_shorthash_KEYBYTES> cookie_key_{};
  DeviceCounters ctr_{};
  std::optional<std::uint32_t> rx_seq_;  // the sequence number of the received frame being handled

  // Names the frame being handled for terminate() while it lives.
  struct RxSeqScope {
    RxSeqScope(DeviceImpl& d, std::uint32_t seq) : d_(d), saved_(d.rx_seq_) { d.rx_seq_ = seq; }
    ~RxSeqScope() { d_.rx_seq_ = saved_; }
    RxSeqScope(const RxSeqScope&) = delete;
    RxSeqScope& operator=(const RxSeqScope&) = delete;
    DeviceImpl& d_;
    std::optional<std::uint32_t> saved_;
  };
};

}  // namespace

std::unique_ptr<Device> Device::open(const DeviceConfig& cfg, std::string& error) {
  auto nd = netdev::make_netdev(cfg.netdev, error);
  if (!nd) return nullptr;
  return std::make_unique<DeviceImpl>(cfg, std::move(nd));
}

std::unique_ptr<Device> Device::open(const DeviceConfig& cfg, std::unique_ptr<netdev::Netdev> nd) {
  return std::make_unique<DeviceImpl>(cfg, std::move(nd));
}

}  // namespace softrnic
